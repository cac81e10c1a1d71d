"""Bounded model checking with Z3: the shortest violation up to ``max_depth`` steps.

The spec's transition relation (:mod:`ownership.symbolic.unroll`) is unrolled
one step at a time on one incremental solver; each model found becomes a
replayed trace (:mod:`ownership.symbolic.extract`).  The depths a budgeted
concrete search finishes first (:mod:`ownership.engines.bmcprefix`) are not
asked about violations again.  ``--minimize`` and
``--maximize`` ask Z3's optimiser for the extreme value of a free parameter
over every violation within the bound.  Proofs are :mod:`ownership.engines.prove`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import z3

from ownership.core.limits import raise_if_canceled
from ownership.core.progress import Progress
from ownership.core.result import CheckResult, CoverageKind, Stats, StopReason, Verdict
from ownership.core.trace import Trace
from ownership.engines.bmcprefix import NO_PREFIX, Prefix, search_prefix
from ownership.engines.coverage import search_coverage, with_coverage
from ownership.engines.symcheck import precheck
from ownership.engines.z3run import (
    STOPPED,
    BmcOptions,
    Reached,
    checked_invariants,
    encode,
    free_coverage_note,
    noted,
    result_options,
    shown_params,
    until_stopped,
    widening,
)
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.invariants import select_invariants
from ownership.symbolic.encoding import SymbolicSpec
from ownership.symbolic.extract import declared_first, extract, first_failing, instance_factory, violation_in
from ownership.symbolic.lemmas import live_overflows, proven_lemmas
from ownership.symbolic.solver import qf_bv, where
from ownership.symbolic.terms import conjunction, coverage_note, int_of
from ownership.symbolic.unroll import Unroller


def bmc(inst: Instance, options: BmcOptions = BmcOptions(), progress: Any = None) -> CheckResult:
    """Bounded model checking: the shortest violation up to ``max_depth`` steps.

    Integers start narrow (:func:`initial_width`); a reachable step that would
    overflow them is one more violation to look for, and finding one restarts
    the search at twice the width, so every answer holds for Python's
    unbounded integers.
    """
    result = bounded_search(inst, options, progress)
    if result.stop_reason in STOPPED:
        return with_coverage(result, inst, ())  # stopped: no further search past the limit or the signal
    result = _deadlocks(inst, options, result)
    result = _properties(inst, options, result)
    if result.stop_reason in STOPPED:
        return with_coverage(result, inst, ())
    # The solver never enumerates states: a small concrete search, as deep as the bound, says which actions fire.
    return with_coverage(free_coverage_note(result, options), inst,
                         search_coverage(inst, max_depth=options.max_depth, symmetry=options.symmetry))


def _deadlocks(inst: Instance, options: BmcOptions, result: CheckResult) -> CheckResult:
    """``result`` (the invariants held within the bound) with deadlocks looked for too (``--deadlock``).

    On the concrete search's graph when it exhausts the states (exact), else
    depth by depth with Z3 up to the bound (the first found is a shortest one).
    """
    if not options.deadlock or not result.safe:
        return result
    from ownership.core.replay import build_trace
    from ownership.engines.deadlocks import deadlock_result, with_deadlocks
    from ownership.engines.liveness.bounded import bounded_deadlock
    from ownership.engines.search import Limits

    if options.prefix_states:
        exact = with_deadlocks(inst, result, Limits(max_states=options.prefix_states), "bmc",
                               "bmc's concrete search")
        if exact is not result:
            return exact
    steps, depth, exhausted = bounded_deadlock(inst, options)
    if steps is not None:
        trace = build_trace(inst, steps, engine="bmc", violation=None, deadlock=True)
        return deadlock_result(inst, result, trace, f"found by Z3 at depth {depth} (a shortest one)")
    said = ("no deadlock: no execution outlasts the bound, and none of them ends in one" if exhausted else
            f"no deadlock within {depth} steps (bounded: longer executions NOT checked)")
    return dataclasses.replace(result, notes=(*result.notes, said))


def _properties(inst: Instance, options: BmcOptions, result: CheckResult) -> CheckResult:
    """``result`` (the invariants' bounded check) with the temporal properties searched for a fair lasso too.

    Only once the invariants held within the bound; a lasso found replaces
    the result, else the bound (or, when no execution outlasts it, the proof)
    covers the properties too.
    """
    props = [p for p in inst.spec.properties.values() if options.invariants is None or p.name in options.invariants]
    if not props or not result.safe:
        return result
    if options.free or options.minimize or options.maximize:
        from ownership.errors import SpecWarning

        warnings = tuple(SpecWarning(Code.PROPERTY_UNDECIDED, f"bmc does not decide temporal properties with --free: "
                                     f"{p.name} was not checked (fix the parameter)", p.file, p.line, p.name)
                         for p in props)
        return dataclasses.replace(result, warnings=(*result.warnings, *warnings))
    from ownership.engines.liveness import check_properties
    from ownership.engines.liveness.bounded import bounded_lasso
    from ownership.engines.search import Limits

    start = time.perf_counter()
    if options.prefix_states:
        # As for the invariants, a concrete search first: if it exhausts the reachable states within its
        # budget, the properties are decided exactly on that graph (a lasso of any length, or none).
        exact = check_properties(inst, result, props, Limits(max_states=options.prefix_states),
                                 symmetry=options.symmetry, engine="bmc")
        if exact.verdict is not Verdict.UNKNOWN:
            decided = exact.notes[-1].replace("decided on the ", "decided exactly, by a concrete search of every reachable state, on the ")
            return dataclasses.replace(exact, notes=(*exact.notes[:-1], decided),
                                       stats=dataclasses.replace(exact.stats, seconds=result.stats.seconds
                                                                 + time.perf_counter() - start))
    reached = Reached(None)
    live = until_stopped("bmc", inst, options, start, reached, lambda: bounded_lasso(inst, props, options, start))
    seconds = result.stats.seconds + live.stats.seconds
    fresh = tuple(n for n in live.notes if n not in result.notes)  # the audit's note is said once
    if live.verdict is Verdict.VIOLATED:
        return dataclasses.replace(live, invariants=result.invariants, notes=(*result.notes, *fresh),
                                   stats=dataclasses.replace(live.stats, seconds=seconds))
    verdict = min(result.verdict, live.verdict)
    reason = result.stop_reason if verdict is result.verdict else live.stop_reason
    return dataclasses.replace(result, verdict=verdict, stop_reason=reason, properties=live.properties,
                               notes=(*result.notes, *fresh),
                               stats=dataclasses.replace(result.stats, seconds=seconds))


def bounded_search(inst: Instance, options: BmcOptions, progress: Any) -> CheckResult:
    """:func:`bmc` without the action counts (``prove`` runs it to find a shortest trace)."""
    start = time.perf_counter()
    reached = Reached(progress)

    def run() -> CheckResult:
        # Symmetry is broken only where Z3 proved the spec symmetric for every state.
        note, reduce = precheck(inst, options.symmetry, options.free)
        opts = options if reduce else dataclasses.replace(options, symmetry=False)
        if opts.minimize or opts.maximize:
            sym = encode(inst, opts)
            return noted(_optimize(inst, sym, checked_invariants(sym, opts), opts, start), note)
        # The concrete prefix is searched once, not once per integer width.
        prefix = _prefix(inst, [inv.name for inv in select_invariants(inst, opts.invariants)], opts, reached)
        return noted(widening("bmc", inst, opts, start, lambda sym, names, widened: _bmc_at(
            inst, sym, names, opts, reached, start, widened, prefix)), note)

    return until_stopped("bmc", inst, options, start, reached, run)


def _bmc_at(inst: Instance, sym: SymbolicSpec, names: list[str], options: BmcOptions, progress: Any,
            start: float, widened: list[str], prefix: Prefix) -> CheckResult:
    un = Unroller(sym)  # every overflow point until the lemmas prune them (below)
    opts = result_options(options)
    notes: list[str] = [f"{len(un.paths)} action paths from {len(sym.actions)} action instances",
                        *widened, coverage_note(sym.width)]
    if prefix.states:
        notes.append(prefix.note())

    def result(verdict: Verdict, reason: StopReason, depth: int, violated: str | None = None,
               trace: Trace | None = None, extra: Sequence[str] = ()) -> CheckResult:
        return CheckResult(
            spec=inst.spec.name, engine="bmc", verdict=verdict, stop_reason=reason,
            stats=Stats(0, 0, depth, time.perf_counter() - start), params=shown_params(inst, options),
            invariants=tuple(names), violated=violated, trace=trace, options=opts, notes=tuple(notes + list(extra)),
            coverage_kind=CoverageKind.BOUNDED,
        )

    if prefix.complete and prefix.witnesses:
        # The concrete search reached a violation: ask for a model along its witness first.
        d = prefix.clean + 1
        found = _guided(inst, un, names, prefix, options)
        if found is not None:
            model, overflow = found
            bad_inv, trace = violation_in(un, model, overflow, names, d, inst, "bmc")
            return result(Verdict.VIOLATED, StopReason.VIOLATION, d, bad_inv, trace)
    lemmas = proven_lemmas(sym, options)
    un.overflow_points = live_overflows(sym, lemmas, options)
    solver = qf_bv(options.solver_timeout)
    solver.add(*un.init(inst))
    solver.add(*where(sym, options))
    # The lemmas as one term, moved to each step by one substitution (one per lemma cost more than solving).
    lemma = conjunction(lemmas) if lemmas else None
    if lemma is not None:
        solver.add(un.at(lemma, 0))

    for k in range(options.max_depth + 1):
        # One solver for all depths; the depth-k question is asked under an assumption
        # literal, so what the solver learned at earlier depths is kept.  A step that would
        # overflow the integers counts as a violation too: it sends the search to a wider encoding.
        # Depths the concrete search finished hold no violation: only the overflow is asked there.
        bad = z3.Bool(f"bad!{k}")
        overflow = un.overflow(k)
        known_clean = k <= prefix.clean
        if not (known_clean and z3.is_false(overflow)):
            solver.add(z3.Implies(bad, overflow if known_clean else z3.Or(un.violation(names, k), overflow)))
            answer = solver.check(bad)
            if answer == z3.sat:
                model = declared_first(solver, [bad], un, solver.model(), overflow, names, k)
                bad_inv, trace = violation_in(un, model, overflow, names, k, inst, "bmc")
                return result(Verdict.VIOLATED, StopReason.VIOLATION, k, bad_inv, trace)
            if answer == z3.unknown:
                raise_if_canceled(solver)
                reason = solver.reason_unknown()
                return result(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, k, extra=[
                    f"inconclusive: z3 answered unknown ({reason}) at depth {k}; no violation up to depth {k - 1}"])
        if k == options.max_depth:
            break
        # No state at depth <= k violates an invariant, so the shortest violation (if any)
        # passes only through states that satisfy them all: assume so (it prunes the search).
        solver.add(*[un.invariant(n, k) for n in names])
        solver.add(*un.transition(k))
        solver.add(*un.first_use_order(k))
        solver.add(*un.commutation_order(k))
        if lemma is not None:
            solver.add(un.at(lemma, k + 1))
        if progress is not None:
            progress(Progress(time.perf_counter() - start, depth=k + 1))
        if k < prefix.reached:
            continue  # the concrete search holds an execution of k + 1 steps: no need to ask
        # No path of k+1 steps: every execution ends within k steps, all of them checked.
        answer = solver.check()
        if answer == z3.unsat:
            notes.append(f"no execution is longer than {k} steps, so every reachable state was checked")
            return result(Verdict.PROVED, StopReason.EXHAUSTED, k)
        if answer == z3.unknown:
            raise_if_canceled(solver)
            return result(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, k, extra=[
                f"inconclusive: z3 answered unknown ({solver.reason_unknown()}) unrolling step {k + 1}"])
    return result(Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT, options.max_depth)


def _prefix(inst: Instance, names: Sequence[str], options: BmcOptions, progress: Any) -> Prefix:
    """The concrete search of the first levels, where it is sound (the instance's own parameter values)."""
    if options.free:
        return NO_PREFIX
    return search_prefix(inst, names, max_states=options.prefix_states, max_depth=options.max_depth,
                         symmetry=options.symmetry, progress=progress)


def _guided(inst: Instance, un: Unroller, names: list[str], prefix: Prefix,
            options: BmcOptions) -> tuple[z3.ModelRef, z3.BoolRef] | None:
    """A model along the concrete search's execution to the first invariant violated at its depth ``d``.

    The search finished depth ``d``, so that invariant is the first (in the
    order checked) any execution of ``d`` steps violates, as
    :func:`declared_first` would find.  The question is the one bmc asks at
    ``d`` (a violation, or an overflowing step from any state on the way),
    with every state fixed to the witness's, in a solver of its own: Z3's
    preprocessing folds the steps to constants before bit-blasting, so the
    lemmas and reductions, which only prune, are not built for it.  Returns
    the model and the overflow condition it was asked with, or ``None`` if no
    model follows the witness (an encoding that disagrees with the concrete
    semantics): the caller then asks without it, and the replay of whatever
    it finds tells.
    """
    d = prefix.clean + 1
    _name, states = prefix.witnesses[0]
    fresh = z3.Then("simplify", "propagate-values", "solve-eqs", "bit-blast", "sat").solver()
    if options.solver_timeout is not None:
        fresh.set("timeout", max(1, int(options.solver_timeout * 1000)))
    fresh.add(*un.init(inst))
    fresh.add(*where(un.sym, options))
    for j in range(d):
        fresh.add(*un.transition(j))
    for j, st in enumerate(states):
        fresh.add(*[cell == un.sym.value_term(_cell(v), i) for i, (v, cell) in enumerate(zip(st, un.state(j), strict=True))])
    overflow = z3.Or(*[un.overflow(j) for j in range(d + 1)])
    fresh.add(z3.Or(un.violation(names, d), overflow))
    answer = fresh.check()
    if answer == z3.unknown:
        raise_if_canceled(fresh)
    return (fresh.model(), overflow) if answer == z3.sat else None


def _cell(value: Any) -> Any:
    """A concrete cell value as the encoding holds it (an absent reference is -1)."""
    return -1 if value is None else value


def _optimize(inst: Instance, sym: SymbolicSpec, names: list[str], options: BmcOptions, start: float) -> CheckResult:
    """Extreme value of a free parameter over all violations within ``max_depth`` steps."""
    target = options.minimize or options.maximize
    assert target is not None
    if target not in sym.param_terms:
        raise OwnershipError(Code.BAD_OPTION, f"--minimize/--maximize {target}: also pass --free {target}")
    un = Unroller(sym, stutter=True)
    opt = z3.Optimize()
    if options.solver_timeout is not None:
        opt.set("timeout", max(1, int(options.solver_timeout * 1000)))
    opt.add(*un.init(inst))
    opt.add(*where(sym, options))
    k_max = options.max_depth
    for k in range(k_max):
        opt.add(*un.transition(k))
    # Stutter steps (selector -1) pad shorter violations, so one query covers every depth: a state's
    # violation lasts to the end; a step's flag is asked of every step (the steps after it may undo nothing).
    opt.add(z3.Or(*[z3.Not(un.invariant(n, k_max)) for n in names], *[un.event_step(names, k) for k in range(1, k_max + 1)]))
    term = sym.param_terms[target]
    handle = opt.minimize(term) if options.minimize else opt.maximize(term)
    answer = opt.check()
    opts = result_options(options)
    shown = shown_params(inst, options)
    if answer == z3.unsat:
        return CheckResult(inst.spec.name, "bmc", Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT,
                           Stats(0, 0, k_max, time.perf_counter() - start), shown, tuple(names), options=opts,
                           notes=(f"no value of {target} leads to a violation within {k_max} steps",))
    if answer == z3.unknown:
        raise_if_canceled(opt)
        return CheckResult(inst.spec.name, "bmc", Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN,
                           Stats(0, 0, k_max, time.perf_counter() - start), shown, tuple(names), options=opts,
                           notes=(f"inconclusive: z3 answered unknown ({opt.reason_unknown()})",))
    model = opt.model()
    value = int_of(model.eval(term, model_completion=True))
    del handle
    # The trace ends at the first violation (a flagged step may be followed by others).
    end = next(k for k in range(k_max + 1) if z3.is_true(model.eval(un.violation(names, k), model_completion=True)))
    bad = first_failing(un, model, names, end)
    trace, _ = extract(un, model, end, instance_factory(inst), "bmc", bad)
    word = "smallest" if options.minimize else "largest"
    return CheckResult(inst.spec.name, "bmc", Verdict.VIOLATED, StopReason.VIOLATION,
                       Stats(0, 0, len(trace), time.perf_counter() - start), shown, tuple(names), violated=bad,
                       trace=trace, options=opts,
                       notes=(f"{word} {target} that violates {bad} within {k_max} steps: {value}",),
                       extremum=(target, value))

