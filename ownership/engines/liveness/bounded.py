"""A bounded lasso search with Z3: bmc's answer for temporal properties.

At each depth ``k`` (one incremental solver, as bmc's own), the question is
whether some execution of ``k`` steps is a lasso breaking the property:

* it loops: state ``k`` equals state ``l`` for some ``l < k`` (the steps
  ``l .. k-1`` repeat for ever), or no action is enabled in state ``k`` (the
  path stays there: ``l = k``);
* it breaks the property: for ``leads_to(P, Q)``, ``P`` holds at some ``i``
  and ``Q`` at no state from ``min(i, l)`` on (the loop's states come again);
  for ``eventually_always(P)``, ``P`` is false somewhere in the loop;
* its loop is fair: every weakly fair action instance enabled in all of the
  loop's states is taken in it; every strongly fair one enabled in any is.

Enabledness is exact: an action instance is enabled when one of its paths'
conditions holds for some choice (the choices are quantified when the
condition reads them).  The search runs on an encoding without bmc's
reductions (symmetry, first-use and commutation orders), which keep one
execution per class but not every cycle.  What it finds is replayed and
re-judged concretely (:mod:`.lasso`) like the explorer's lassos.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import z3

from ownership.core.limits import raise_if_canceled
from ownership.core.result import CheckResult, StopReason, Verdict
from ownership.engines.liveness.decide import Lasso, fair_actions
from ownership.engines.liveness.lasso import lasso_trace
from ownership.engines.z3run import BmcOptions, widening
from ownership.lang.instance import Instance
from ownership.lang.temporal import Form, Property
from ownership.symbolic.encoding import SymbolicSpec
from ownership.symbolic.extract import model_steps
from ownership.symbolic.terms import WidthError
from ownership.symbolic.unroll import Unroller, free_constants


@dataclasses.dataclass
class _Found:
    lasso: Lasso | None
    depth: int
    exhausted: bool = False


def bounded_lasso(inst: Instance, props: Sequence[Property], options: BmcOptions, start: float) -> CheckResult:
    """A lasso of at most ``options.max_depth`` steps breaking one of ``props``, as a result; or none."""
    opts = dataclasses.replace(options, symmetry=False)
    found: list[_Found] = []

    def run_at(sym: SymbolicSpec, names: list[str], widened: list[str]) -> CheckResult:
        for prop in props:
            for element in ([None] if prop.each is None else range(inst.sizes[prop.each.name])):
                hit = _search(inst, sym, prop, element, opts)
                found.append(hit)
                if hit.lasso is not None:
                    trace = lasso_trace(inst, hit.lasso, "bmc")
                    return _result(inst, props, opts, start, Verdict.VIOLATED, StopReason.VIOLATION, hit.depth,
                                   widened, prop.name, trace)
        exhausted = all(f.exhausted for f in found)
        verdict, reason = (Verdict.PROVED, StopReason.EXHAUSTED) if exhausted else \
            (Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT)
        return _result(inst, props, opts, start, verdict, reason, options.max_depth, widened)

    return widening("bmc", inst, opts, start, run_at)


def _result(inst: Instance, props: Sequence[Property], options: BmcOptions, start: float, verdict: Verdict,
            reason: StopReason, depth: int, widened: list[str], violated: str | None = None,
            trace: Any = None) -> CheckResult:
    from ownership.core.result import Stats
    from ownership.engines.z3run import result_options, shown_params

    names = ", ".join(p.name for p in props)
    if verdict is Verdict.VIOLATED:
        note = f"temporal property {violated} is broken by a fair lasso of {depth} steps (bounded search)"
    elif verdict is Verdict.PROVED:
        note = (f"temporal properties {names} hold: no execution is longer than the bound, and no lasso "
                "within it breaks them")
    else:
        note = (f"no fair lasso of up to {depth} steps breaks {names} (bounded: longer lassos NOT checked, and a "
                "bounded search never proves a temporal property of a system that runs for ever)")
    return CheckResult(spec=inst.spec.name, engine="bmc", verdict=verdict, stop_reason=reason,
                       stats=Stats(0, 0, depth, time.perf_counter() - start), params=shown_params(inst, options),
                       invariants=(), violated=violated, trace=trace, options=result_options(options),
                       notes=(note, *widened), properties=tuple(p.name for p in props))


def _search(inst: Instance, sym: SymbolicSpec, prop: Property, element: int | None,
            options: BmcOptions) -> _Found:
    un = Unroller(sym)
    args = () if element is None else (element,)
    then = sym.predicate_formula(prop.then, args, f"property {prop.name}", prop.file, prop.line)
    when = (sym.predicate_formula(prop.when, args, f"property {prop.name}", prop.file, prop.line)
            if prop.when is not None else z3.BoolVal(True))
    enabled = enabled_templates(inst, sym)
    taken = taken_paths(inst, sym, un)
    fair = fair_actions(inst)
    fair_list = sorted(fair.weak | fair.strong)
    solver = z3.SolverFor("QF_BV")
    if options.solver_timeout is not None:
        solver.set("timeout", max(1, int(options.solver_timeout * 1000)))
    solver.add(*un.init(inst))
    # Every state within the bound satisfies the invariants (bmc checked them first): it prunes the search.
    invariants = [n for n in sym.invariants if options.invariants is None or n in options.invariants]
    solver.add(*[un.invariant(n, 0) for n in invariants])
    en_at: dict[tuple[int, int], z3.BoolRef] = {}
    overflows: dict[int, z3.BoolRef] = {}

    def overflow_at(k: int) -> z3.BoolRef:
        if k not in overflows:
            overflows[k] = un.overflow(k)
        return overflows[k]

    def en(a: int, j: int) -> z3.BoolRef:
        if (a, j) not in en_at:
            en_at[(a, j)] = un.at(enabled[a], j) if a in enabled else z3.BoolVal(False)
        return en_at[(a, j)]

    def tk(a: int, j: int) -> z3.BoolRef:
        sel = un.selector(j)
        return z3.Or(*[sel == p for p in taken.get(a, ())]) if taken.get(a) else z3.BoolVal(False)

    bits = max(2, (options.max_depth + 1).bit_length() + 1)
    for k in range(options.max_depth + 1):
        q = z3.Bool(f"lasso!{k}")
        # The loop's first position (k: nothing can run in state k, the path stays) and the position the
        # property breaks at, as bit-vectors: the question is linear in k, not a disjunction per pair.
        loop = z3.BitVec(f"loop!{k}", bits)
        brk = z3.BitVec(f"break!{k}", bits)
        nq = [z3.Not(un.at(then, j)) for j in range(k + 1)]
        inloop = [z3.ULE(loop, j) for j in range(k + 1)]
        dead = z3.Not(z3.Or(*[en(a, k) for a in enabled])) if enabled else z3.BoolVal(True)
        closes = z3.Or(z3.And(loop == k, dead),
                       *[z3.And(loop == lp, *[a == b for a, b in zip(un.state(k), un.state(lp), strict=True)])
                         for lp in range(k)])
        fairness = []
        for a in fair_list:
            # A stutter at a dead end is fair: nothing is enabled there.
            took = z3.Or(*[z3.And(inloop[j], tk(a, j)) for j in range(k)]) if k else z3.BoolVal(False)
            if a in fair.weak:
                always = z3.And(*[z3.Implies(inloop[j], en(a, j)) for j in range(k)]) if k else z3.BoolVal(True)
                fairness.append(z3.Or(loop == k, z3.Implies(always, took)))
            else:
                ever = z3.Or(*[z3.And(inloop[j], en(a, j)) for j in range(k)]) if k else z3.BoolVal(False)
                fairness.append(z3.Or(loop == k, z3.Implies(ever, took)))
        if prop.form is Form.EVENTUALLY_ALWAYS:
            looped = [z3.Or(inloop[j], j == k) for j in range(k + 1)]  # a dead end's loop is its last state
            broken = z3.Or(*[z3.And(z3.ULE(loop, j), nq[j], z3.Or(j < k, loop == k)) for j in range(k + 1)])
            del looped
        else:
            broken = z3.And(z3.ULE(brk, k), z3.Or(*[z3.And(brk == i, un.at(when, i)) for i in range(k + 1)]),
                            *[z3.Implies(z3.Or(z3.ULE(brk, j), z3.ULE(loop, j)), nq[j]) for j in range(k + 1)])
        solver.add(z3.Implies(q, z3.Or(z3.And(z3.ULE(loop, k), closes, *fairness, broken), overflow_at(k))))
        answer = solver.check(q)
        if answer == z3.sat:
            model = solver.model()
            if z3.is_true(model.eval(overflow_at(k), model_completion=True)):
                raise WidthError("a step of a lasso search overflows")
            steps = [s for s in model_steps(un, model, k, inst, "bmc") if s is not None]
            at = model.eval(loop, model_completion=True).as_long()
            since = at if prop.form is Form.EVENTUALLY_ALWAYS else model.eval(brk, model_completion=True).as_long()
            lasso = Lasso(prop, element, tuple((a, tuple(p)) for a, p in steps), at, since)
            return _Found(lasso, k)
        if answer == z3.unknown:
            raise_if_canceled(solver)
            return _Found(None, k)
        if k == options.max_depth:
            break
        solver.add(*un.transition(k))
        solver.add(*[un.invariant(n, k + 1) for n in invariants])
        if solver.check() == z3.unsat:  # no execution of k + 1 steps: every lasso was asked about
            return _Found(None, k, exhausted=True)
    return _Found(None, options.max_depth)


def enabled_templates(inst: Instance, sym: SymbolicSpec) -> dict[int, z3.BoolRef]:
    """Per action instance (by number), when it is enabled, over the placeholder cells (choices quantified)."""
    out: dict[int, list[z3.BoolRef]] = {}
    for ap in sym.actions:
        index = inst.find_instance(ap.action, list(ap.arg_values)).index
        for p in ap.paths:
            cond = z3.And(*p.pc, *p.constraints) if (p.pc or p.constraints) else z3.BoolVal(True)
            aux_ids = {a.get_id() for a in p.aux}
            bound = [c for c in free_constants([cond]) if c.get_id() in aux_ids]
            out.setdefault(index, []).append(_eliminated(z3.Exists(bound, cond)) if bound else cond)
    return {a: z3.Or(*conds) for a, conds in out.items()}


def _eliminated(formula: z3.BoolRef) -> z3.BoolRef:
    """``formula`` (an existential over a path's choices) without its quantifier (Z3's quantifier elimination)."""
    goals = z3.Then("simplify", "qe", "simplify")(formula)
    out = z3.And(*[g.as_expr() for g in goals])
    if _quantified(out):
        raise WidthError("the choices of an action's guard could not be eliminated for the lasso search")
    return out


def _quantified(expr: z3.ExprRef) -> bool:
    todo, seen = [expr], set()
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_quantifier(e):
            return True
        todo.extend(e.children())
    return False


def taken_paths(inst: Instance, sym: SymbolicSpec, un: Unroller) -> dict[int, list[int]]:
    """Per action instance, the selector values of its paths."""
    out: dict[int, list[int]] = {}
    for j, pr in enumerate(un.paths):
        ap = sym.actions[pr.action]
        out.setdefault(inst.find_instance(ap.action, list(ap.arg_values)).index, []).append(j)
    return out


def bounded_deadlock(inst: Instance, options: BmcOptions) -> tuple[list[tuple[int, tuple[Any, ...]]] | None, int, bool]:
    """The steps to a deadlock of at most ``options.max_depth`` steps (``None``: none), the depth asked, and
    whether every execution ended within it (then "none" is exact).

    A deadlock is a state where no action instance is enabled (exactly: the
    choices quantified and eliminated) and the ``@spec.terminal`` predicate
    is false.  One incremental solver, depth by depth: the first found is a
    shortest one.
    """
    opts = dataclasses.replace(options, symmetry=False)
    out: list[tuple[list[tuple[int, tuple[Any, ...]]] | None, int, bool]] = []

    def run_at(sym: SymbolicSpec, names: list[str], widened: list[str]) -> CheckResult:
        out.append(_deadlock_search(inst, sym, opts))
        return _result(inst, (), opts, time.perf_counter(), Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT, 0, widened)

    widening("bmc", inst, opts, time.perf_counter(), run_at)
    return out[-1] if out else (None, 0, False)


def _deadlock_search(inst: Instance, sym: SymbolicSpec,
                     options: BmcOptions) -> tuple[list[tuple[int, tuple[Any, ...]]] | None, int, bool]:
    un = Unroller(sym)
    enabled = enabled_templates(inst, sym)
    done = inst.spec.done
    terminal = (sym.predicate_formula(done, (), "the @spec.terminal predicate", *_where(done))
                if done is not None else z3.BoolVal(False))
    solver = z3.SolverFor("QF_BV")
    if options.solver_timeout is not None:
        solver.set("timeout", max(1, int(options.solver_timeout * 1000)))
    solver.add(*un.init(inst))
    for k in range(options.max_depth + 1):
        q = z3.Bool(f"deadlock!{k}")
        stuck = z3.And(*[z3.Not(un.at(t, k)) for t in enabled.values()], z3.Not(un.at(terminal, k)))
        overflow = un.overflow(k)
        solver.add(z3.Implies(q, z3.Or(stuck, overflow)))
        answer = solver.check(q)
        if answer == z3.sat:
            model = solver.model()
            if z3.is_true(model.eval(overflow, model_completion=True)):
                raise WidthError("a step of the deadlock search overflows")
            steps = [(a, tuple(p)) for a, p in (s for s in model_steps(un, model, k, inst, "bmc") if s is not None)]
            return steps, k, False
        if answer == z3.unknown:
            raise_if_canceled(solver)
            return None, k, False
        if k == options.max_depth:
            break
        solver.add(*un.transition(k))
        if solver.check() == z3.unsat:
            return None, k, True
    return None, options.max_depth, False


def _where(fn: Any) -> tuple[str | None, int | None]:
    code = getattr(fn, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code is not None else (None, None)
