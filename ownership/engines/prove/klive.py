"""k-liveness (Claessen and Sörensson, 2012): a temporal property proved as a safety property, by Spacer.

A fair lasso breaking ``leads_to(P, Q)`` for an element is an infinite path
that, from a state where ``P`` holds and ``Q`` does not, never sees ``Q``,
and on which every weakly fair action instance is, again and again, taken or
disabled.  The product below watches for that:

* ``armed`` is set (at a state the solver picks) where ``P`` holds and ``Q``
  does not; from then on every state must falsify ``Q``;
* one flag per weakly fair instance says it was taken or seen disabled since
  the last round; when all are set on an armed path, a round ends (``J``),
  the flags clear and a counter goes up;
* a path may stay in a state only where nothing can run (a stutter there is
  fair).

A fair lasso makes ``J`` happen infinitely often; if no state of the product
lets the counter pass ``K``, there is none, and the property holds.  Spacer
is asked for an inductive invariant that keeps the counter at most ``K``,
for ``K = 0, 1, 2, ...`` up to a small bound, and its answer is re-checked by
an independent solver (initial states in it, closed under every step, no
state past ``K``) before anything is called proved.  Strong fairness (a
Streett condition) is not handled: such a property is left undecided.
``always_eventually(P)`` is ``leads_to(True, P)``; ``eventually_always(P)``
arms at once and ends a round only after a state falsifying ``P``.
"""

from __future__ import annotations

from collections.abc import Sequence

import z3

from ownership.core.limits import raise_if_canceled
from ownership.engines.liveness.bounded import enabled_templates, taken_paths
from ownership.engines.liveness.decide import fair_actions
from ownership.engines.prove.spacer import certificate_fails
from ownership.engines.z3run import BmcOptions
from ownership.lang.instance import Instance
from ownership.lang.temporal import Form, Property
from ownership.symbolic.encoding import SymbolicSpec
from ownership.symbolic.unroll import Unroller

MAX_K = 4
"""Largest bound on the rounds tried (each a Spacer query)."""

COUNTER_BITS = 8


def k_liveness(sym: SymbolicSpec, inst: Instance, prop: Property, element: int | None,
               options: BmcOptions) -> tuple[bool, str]:
    """Whether Spacer proved ``prop`` (for ``element``) by k-liveness, and what happened, in words."""
    fair = fair_actions(inst)
    if fair.strong:
        return False, "strong fairness is not handled by k-liveness"
    un = Unroller(sym, prefix="kl", stutter=True)
    x, y = un.state(0), un.state(1)
    args = () if element is None else (element,)
    what = f"property {prop.name}"
    then = sym.predicate_formula(prop.then, args, what, prop.file, prop.line)
    when = (sym.predicate_formula(prop.when, args, what, prop.file, prop.line)
            if prop.when is not None else z3.BoolVal(True))
    enabled = enabled_templates(inst, sym)
    taken = taken_paths(inst, sym, un)
    weak = sorted(fair.weak)
    sel = un.selector(0)

    def en(a: int) -> z3.BoolRef:
        return un.at(enabled[a], 0) if a in enabled else z3.BoolVal(False)

    def tk(a: int) -> z3.BoolRef:
        return z3.Or(*[sel == p for p in taken.get(a, ())]) if taken.get(a) else z3.BoolVal(False)

    armed, armed2 = z3.Bool("kl_armed"), z3.Bool("kl_armed'")
    seen = [z3.Bool(f"kl_seen{a}") for a in weak]
    seen2 = [z3.Bool(f"kl_seen{a}'") for a in weak]
    bad_seen, bad_seen2 = z3.Bool("kl_bad"), z3.Bool("kl_bad'")
    count, count2 = z3.BitVec("kl_c", COUNTER_BITS), z3.BitVec("kl_c'", COUNTER_BITS)
    arm = z3.Bool("kl_arm")
    now = un.at(then, 0)
    dead = z3.Not(z3.Or(*[en(a) for a in enabled])) if enabled else z3.BoolVal(True)
    step = [*un.transition(0), z3.Implies(sel == -1, dead)]
    if prop.form is Form.EVENTUALLY_ALWAYS:
        on = z3.BoolVal(True)
        marks = z3.Or(bad_seen, z3.Not(now))
        step += [armed2 == armed]
    else:
        on = z3.Or(armed, arm)
        marks = z3.BoolVal(True)
        step += [z3.Implies(arm, z3.And(un.at(when, 0), z3.Not(now))), z3.Implies(on, z3.Not(now)), armed2 == on]
    oks = [z3.Or(s, tk(a), z3.Not(en(a))) for s, a in zip(seen, weak, strict=True)]
    round_ends = z3.And(on, marks, *oks)
    step += [s2 == z3.And(z3.Not(round_ends), ok) for s2, ok in zip(seen2, oks, strict=True)]
    step += [bad_seen2 == z3.And(z3.Not(round_ends), z3.Or(bad_seen, z3.Not(now)))]
    top = z3.BitVecVal(2 ** COUNTER_BITS - 1, COUNTER_BITS)
    step += [count2 == z3.If(z3.And(round_ends, count != top), count + 1, count)]
    state = [*x, armed, *seen, bad_seen, count]
    nxt = [*y, armed2, *seen2, bad_seen2, count2]
    start = [*un.init(inst), z3.Not(armed) if prop.form is not Form.EVENTUALLY_ALWAYS else armed,
             *[z3.Not(s) for s in seen], z3.Not(bad_seen), count == 0]
    local = [sel, arm, *[new for _old, new in un.aux_at(0)]]
    tried: list[str] = []
    for k in range(MAX_K + 1):
        proved, said = _spacer_bound(inst, un, state, nxt, start, step, local, count, k, options)
        tried.append(said)
        if proved:
            return True, f"proved by k-liveness at k={k} (Spacer's invariant re-checked by an independent solver)"
        if said.startswith("stopped"):
            break
    return False, f"k-liveness did not close up to k={MAX_K} ({tried[-1]})"


def _spacer_bound(inst: Instance, un: Unroller, state: Sequence[z3.ExprRef], nxt: Sequence[z3.ExprRef],
                  start: Sequence[z3.BoolRef], step: Sequence[z3.BoolRef], local: Sequence[z3.ExprRef],
                  count: z3.BitVecRef, k: int, options: BmcOptions) -> tuple[bool, str]:
    """Spacer's answer to "the counter never passes ``k``", re-checked; (proved, words)."""
    reach = z3.Function(f"KLive{k}", *[v.sort() for v in state], z3.BoolSort())
    s = z3.SolverFor("HORN")
    s.set("engine", "spacer")
    s.set("xform.inline_linear", False)
    s.set("xform.inline_eager", False)
    budget = options.spacer_timeout if options.solver_timeout is None else min(options.spacer_timeout,
                                                                                options.solver_timeout)
    s.set("timeout", max(1, int(budget * 1000)))
    bad = z3.UGT(count, k)
    s.add(z3.ForAll(list(state), z3.Implies(z3.And(*start), reach(*state))))
    s.add(z3.ForAll([*state, *nxt, *local], z3.Implies(z3.And(reach(*state), *step), reach(*nxt))))
    s.add(z3.ForAll(list(state), z3.Implies(z3.And(reach(*state), bad), False)))
    answer = s.check()
    if answer == z3.sat:
        failed = certificate_fails(s.model(), reach, list(start), list(state), list(nxt), [], [], list(step), bad,
                                   options)
        if failed:
            return False, f"Spacer's invariant at k={k} failed the independent check ({failed})"
        return True, f"k={k}"
    if answer == z3.unsat:
        return False, f"the counter can pass {k}"
    raise_if_canceled(s)
    reason = str(s.reason_unknown())
    return False, ("stopped: " if "timeout" in reason or "canceled" in reason else "") + f"Spacer: {reason}"
