"""k-induction on the simple paths of the symbolic transition relation, with its base case.

For k = 0, 1, ... ``max_k``: the base case (no violation, and no overflowing
step, within k steps of the initial states), then the inductive step (k + 1
steps from an arbitrary state satisfying every invariant, the proven lemmas
and the type ranges, all states distinct, cannot end in a violation).  A
violation carried by a step's flag may end in a state seen before on the
path (a step that changes nothing, or one back to an earlier state): only the
states the steps start from must be distinct then.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import z3

from ownership.core.limits import raise_if_canceled
from ownership.core.progress import Progress
from ownership.core.result import StopReason
from ownership.core.trace import Trace
from ownership.engines.prove.outcome import Kind, Outcome, stoppable
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.symbolic.encoding import SymbolicSpec
from ownership.symbolic.extract import declared_first, extract, instance_factory, violation_in
from ownership.symbolic.solver import qf_bv, where
from ownership.symbolic.unroll import Unroller


def k_induction(sym: SymbolicSpec, inst: Instance, options: BmcOptions, invariants: Sequence[str],
                lemmas: Sequence[z3.BoolRef], overflows: z3.BoolRef, progress: Callable[[Any], None] | None,
                start: float) -> Outcome:
    """PROVED (bounded exhaustion or induction), REFUTED (the base case fails), CTI, UNKNOWN or STOPPED.

    Raises ``WidthError`` when a step within the base case overflows the
    encoding's integers (encode again, wider).
    """
    return stoppable(lambda: _k_induction(sym, inst, options, list(invariants), lemmas, overflows, progress, start))


def _k_induction(sym: SymbolicSpec, inst: Instance, options: BmcOptions, all_invs: list[str],
                 lemmas: Sequence[z3.BoolRef], overflows: z3.BoolRef, progress: Callable[[Any], None] | None,
                 start: float) -> Outcome:
    base = Unroller(sym, prefix="b", overflow_points=overflows)
    base_solver = qf_bv(options.solver_timeout)
    base_solver.add(*base.init(inst))
    base_solver.add(*where(sym, options))
    cti: Trace | None = None
    last_k = 0
    overflow_cti = False
    unreplayable_cti = False
    for k in range(0, options.max_k + 1):
        last_k = k
        # Base case at depth k (an overflowing step counts as a violation: it needs more bits).
        base_solver.push()
        overflow = base.overflow(k)
        base_solver.add(z3.Or(base.violation(all_invs, k), overflow))
        answer = base_solver.check()
        if answer == z3.sat:
            model = declared_first(base_solver, [], base, base_solver.model(), overflow, all_invs, k)
            bad, trace = violation_in(base, model, overflow, all_invs, k, inst, "prove")
            return Outcome(Kind.REFUTED, f"base case fails at depth {k}", k, violated=bad, trace=trace)
        if answer == z3.unknown:
            raise_if_canceled(base_solver)
            return Outcome(Kind.UNKNOWN, f"inconclusive: z3 answered unknown ({base_solver.reason_unknown()}) "
                           f"in the base case at depth {k}", k)
        base_solver.pop()
        base_solver.add(*base.transition(k))
        if base_solver.check() == z3.unsat:
            return Outcome(Kind.PROVED, f"PROVED by bounded exhaustion: no execution is longer than {k} steps "
                           f"and none up to {k} violates", k, StopReason.EXHAUSTED)
        # Inductive step of length k + 1 from an arbitrary state.
        step = Unroller(sym, prefix="i", overflow_points=overflows)
        s = qf_bv(options.solver_timeout)
        s.add(*where(sym, options))
        for i in range(k + 2):
            s.add(*step.types(i))
            s.add(*[step.at(c, i) for c in lemmas])
        for i in range(k + 1):
            s.add(*step.transition(i))
            s.add(*[step.invariant(n, i) for n in all_invs])
            s.add(z3.Not(step.event_step(all_invs, i)))
        overflow = step.overflow(k + 1)
        # Simple paths: the states a step starts from are distinct, since a shortest violation repeats
        # none (cut the loop and it is shorter).  Its last state may repeat one of them when the violation
        # is the step's flag (a step back to an earlier state, or one that changes nothing); when it is
        # the state's (an invariant false there, or an overflowing step from it), it repeats none either.
        for a in range(k + 1):
            for b in range(a + 1, k + 1):
                s.add(_differ(step, a, b))
        last_new = z3.And(*[_differ(step, a, k + 1) for a in range(k + 1)])
        bad_state = z3.Or(*[z3.Not(step.invariant(n, k + 1)) for n in all_invs], overflow)
        s.add(z3.Or(z3.And(bad_state, last_new), step.event_step(all_invs, k + 1)))
        if progress is not None:
            progress(Progress(time.perf_counter() - start, depth=k))
        answer = s.check()
        if answer == z3.unsat:
            return Outcome(Kind.PROVED, f"PROVED by {k + 1}-induction (simple paths): invariants hold for "
                           "executions of any length", k + 1, StopReason.INDUCTION)
        if answer == z3.unknown:
            raise_if_canceled(s)
            return Outcome(Kind.UNKNOWN, f"inconclusive: z3 answered unknown ({s.reason_unknown()}) in the "
                           f"induction step at k={k + 1}", k)
        model = s.model()
        failing = [n for n in all_invs if z3.is_false(model.eval(step.invariant(n, k + 1), model_completion=True))
                   or z3.is_true(model.eval(step.event_step([n], k + 1), model_completion=True))]
        overflow_cti = not failing  # only the overflow check failed, from a state that may be unreachable
        cti = None
        if failing:
            try:
                cti, _ = extract(step, model, k + 1, instance_factory(inst), "prove", failing[0], cti=True)
            except OwnershipError as exc:
                # The vocabulary's encodings need only agree with the concrete code on reachable
                # states (bmc's replays check that); this start state is one no execution reaches,
                # e.g. two pages in one page-table slot.  The induction failed all the same.
                if exc.code is not Code.INTERNAL_REPLAY:
                    raise
                unreplayable_cti = True
    caveats: list[str] = []
    if cti is None and unreplayable_cti:
        caveats.append("the counterexample to induction starts from a state that no execution reaches and that the "
                       "vocabulary's symbolic encoding does not model as the concrete code does (for example two "
                       "pages in one page-table slot), so it is not shown")
    if overflow_cti:
        caveats.append(f"the induction step fails because, from a state that satisfies every invariant but may be "
                       f"unreachable, a step overflows {sym.width}-bit integers")
    return Outcome(Kind.CTI, f"k-induction did not close up to k={last_k + 1} (no violation in the first {last_k} "
                   "steps)", last_k, violated=cti.violation if cti else None, trace=cti, caveats=tuple(caveats))


def _differ(un: Unroller, a: int, b: int) -> z3.BoolRef:
    """States ``a`` and ``b`` of the unrolling differ in some cell."""
    return z3.Or(*[x != y for x, y in zip(un.state(a), un.state(b), strict=True)])
