"""Spacer (IC3/PDR): Z3's Horn-clause engine asked for an inductive invariant, and its answer re-checked.

The error states are those violating an invariant, those from which a step
emits an event marked as violating one, and those from which a step
overflows the integer width.  An invariant Spacer returns is only believed
after a separate solver checks that it contains the initial states, is
closed under every step and excludes every error state.
"""

from __future__ import annotations

from collections.abc import Sequence

import z3

from ownership.core.limits import raise_if_canceled
from ownership.core.result import StopReason
from ownership.engines.prove.outcome import Kind, Outcome, stoppable
from ownership.engines.z3run import BmcOptions
from ownership.lang.instance import Instance
from ownership.symbolic.encoding import SymbolicSpec
from ownership.symbolic.solver import qf_bv, where
from ownership.symbolic.unroll import Unroller, free_constants

PROVED_NOTE = ("PROVED by Spacer (IC3/PDR): Z3 found an inductive invariant that implies every invariant, "
               "so they hold for executions of any length; a separate solver re-checked that it contains the "
               "initial states, is closed under every step and excludes every violation")


def spacer(sym: SymbolicSpec, inst: Instance, options: BmcOptions, invariants: Sequence[str],
           overflow_points: z3.BoolRef | None = None) -> Outcome:
    """PROVED (an invariant found and re-checked), REFUTED (an error state is reachable; no trace),
    UNKNOWN (``suspect`` when the invariant failed the re-check) or STOPPED.

    With ``invariants`` empty the only error states are the overflowing ones.
    ``overflow_points`` are those :func:`~ownership.symbolic.lemmas.live_overflows`
    left.  The proven lemmas themselves are not given to Spacer as facts,
    which made it several times slower here.
    """
    return stoppable(lambda: _spacer(sym, inst, options, list(invariants), overflow_points))


def _spacer(sym: SymbolicSpec, inst: Instance, options: BmcOptions, invariants: list[str],
            overflow_points: z3.BoolRef | None) -> Outcome:
    un = Unroller(sym, prefix="h", overflow_points=overflow_points)
    x, y = un.state(0), un.state(1)
    params = list(sym.param_terms.values())
    inv = z3.Function("Reach", *[c.sort() for c in x], *[p.sort() for p in params], z3.BoolSort())
    trans = un.transition(0)
    locals_ = [un.selector(0)] + [new for _old, new in un.aux_at(0)]
    s = z3.SolverFor("HORN")
    s.set("engine", "spacer")
    # With these rule-inlining passes on, Z3 (4.15) returned invariants for these clauses that
    # were not inductive (its own validate option agreed); every answer is re-checked below.
    s.set("xform.inline_linear", False)
    s.set("xform.inline_eager", False)
    budget = options.spacer_timeout if options.solver_timeout is None else min(options.spacer_timeout, options.solver_timeout)
    s.set("timeout", max(1, int(budget * 1000)))
    constraints = where(sym, options)
    s.add(z3.ForAll(x + params, z3.Implies(z3.And(*un.init(inst), *constraints), inv(*x, *params))))
    s.add(z3.ForAll(x + y + params + locals_, z3.Implies(z3.And(inv(*x, *params), *trans), inv(*y, *params))))
    # A state from which a step emits an event marked as violating an invariant is an error state too.
    bad = z3.Or(*[z3.Not(un.invariant(n, 0)) for n in invariants], un.overflow(0), un.event_from(invariants, 0))
    known = {t.get_id() for t in [*x, *params]}
    choice = [c for c in free_constants([bad]) if c.get_id() not in known]
    s.add(z3.ForAll(x + params + choice, z3.Implies(z3.And(inv(*x, *params), bad), False)))
    answer = s.check()
    if answer == z3.sat:
        # Check Spacer's invariant with an independent solver before calling anything proved.
        failed = certificate_fails(s.model(), inv, un.init(inst), x, y, params, constraints, trans, bad, options)
        if failed:
            return Outcome(Kind.UNKNOWN, f"Spacer's inductive invariant failed the independent check ({failed})",
                           suspect=True)
        return Outcome(Kind.PROVED, PROVED_NOTE, reason=StopReason.INVARIANT_FOUND)
    if answer == z3.unsat:
        return Outcome(Kind.REFUTED, "Spacer found a reachable error state")
    raise_if_canceled(s)
    return Outcome(Kind.UNKNOWN, str(s.reason_unknown()))


def certificate_fails(model: z3.ModelRef, inv: z3.FuncDeclRef, initial: list[z3.BoolRef], x: list[z3.ExprRef],
                       y: list[z3.ExprRef], params: list[z3.ExprRef], where: list[z3.BoolRef],
                       trans: list[z3.BoolRef], bad: z3.BoolRef, options: BmcOptions) -> str:
    """Which of "initial states are in it", "a step stays in it", "it excludes errors" fails, or ''.

    ``initial`` is the initial condition over ``x`` (the spec's, or a product's such as k-liveness')."""
    interp = model[inv]
    if not isinstance(interp, z3.FuncInterp):
        return "no interpretation of the invariant in the model"

    def holds_at(args: list[z3.ExprRef]) -> z3.BoolRef:
        body = z3.substitute_vars(interp.else_value(), *args)
        for i in reversed(range(interp.num_entries())):
            entry = interp.entry(i)
            point = z3.And(*[a == entry.arg_value(j) for j, a in enumerate(args)])
            body = z3.If(point, entry.value(), body)
        return body

    now, nxt = holds_at([*x, *params]), holds_at([*y, *params])
    checks = [
        ("an initial state is outside it", [*initial, *where, z3.Not(now)]),
        ("a step leaves it", [*where, now, *trans, z3.Not(nxt)]),
        ("it contains an error state", [*where, now, bad]),
    ]
    for what, formulas in checks:
        s = qf_bv(options.solver_timeout)
        s.add(*formulas)
        if s.check() != z3.unsat:
            return what
    return ""
