"""``prove``: the invariants for executions of any length, by a portfolio of strategies.

In turn: k-induction (:mod:`.kinduction`), the explicit reachable set as an
inductive invariant (:mod:`.reach`), Spacer (:mod:`.spacer`).  Each returns a
typed :class:`~ownership.engines.prove.outcome.Outcome`; the first that
decides gives the verdict, and a violation found without a trace is shown
with bmc's (or breadth-first search's) shortest one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from ownership.core.progress import Progress
from ownership.core.result import ActionCoverage, CheckResult, CoverageKind, Stats, StopReason, Verdict
from ownership.core.trace import Trace
from ownership.engines.bmc import bounded_search
from ownership.engines.coverage import search_coverage, with_coverage
from ownership.engines.prove.kinduction import k_induction
from ownership.engines.prove.outcome import Kind, Outcome
from ownership.engines.prove.reach import reachable_certificate
from ownership.engines.prove.spacer import spacer
from ownership.engines.symcheck import precheck
from ownership.engines.z3run import (
    STOPPED,
    BmcOptions,
    Reached,
    free_coverage_note,
    noted,
    result_options,
    shown_params,
    until_stopped,
    widening,
)
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.symbolic.encoding import SymbolicSpec
from ownership.symbolic.lemmas import live_overflows, proven_lemmas
from ownership.symbolic.terms import WidthError, coverage_note


def prove(inst: Instance, options: BmcOptions = BmcOptions(), progress: Any = None) -> CheckResult:
    """Prove the invariants for executions of any length by k-induction (and Spacer).

    As in :func:`~ownership.engines.bmc.bmc`, integers start narrow and "no
    step overflows them" is proved along with the invariants; if it fails the
    proof restarts wider.
    """
    start = time.perf_counter()
    reached = Reached(progress)

    def run() -> CheckResult:
        # Symmetry is broken only where Z3 proved the spec symmetric for every state.
        note, reduce = precheck(inst, options.symmetry, options.free)
        opts = options if reduce else dataclasses.replace(options, symmetry=False)
        return noted(widening("prove", inst, opts, start,
                              lambda sym, names, widened: _prove_at(inst, sym, names, opts, reached, start, widened)),
                     note)

    result = until_stopped("prove", inst, options, start, reached, run)
    if result.stop_reason in STOPPED:
        return with_coverage(result, inst, result.actions)  # no coverage search past the limit or the signal
    result = _deadlocks(inst, options, result)
    result = _properties(inst, options, result)
    actions = result.actions
    if not actions and result.stop_reason not in STOPPED:
        # Proved by induction or Spacer (or refuted): no states were enumerated, so a small
        # concrete search says which actions fire.
        result = free_coverage_note(result, options)
        actions = search_coverage(inst, symmetry=options.symmetry)
    return with_coverage(result, inst, actions)


def _deadlocks(inst: Instance, options: BmcOptions, result: CheckResult) -> CheckResult:
    """``result`` (the invariants proved) with deadlocks looked for on the enumerated reachable states.

    A deadlock-freedom proof past ``--reach-states`` is not built: the
    verdict is then UNKNOWN, never PROVED.
    """
    if not options.deadlock or result.verdict is not Verdict.PROVED:
        return result
    from ownership.engines.deadlocks import with_deadlocks
    from ownership.engines.search import Limits

    checked = with_deadlocks(inst, result, Limits(max_states=options.reach_states or None), "prove",
                             "the enumerated reachable states")
    if checked is result:
        return dataclasses.replace(result, verdict=Verdict.UNKNOWN, stop_reason=StopReason.SOLVER_UNKNOWN,
                                   notes=(*result.notes, "deadlocks not decided: prove looks for them on the "
                                          "enumerated reachable states only (raise --reach-states)"))
    return checked


def _properties(inst: Instance, options: BmcOptions, result: CheckResult) -> CheckResult:
    """``result`` (the invariants proved) with the temporal properties decided on the reachable graph.

    prove decides a property where the reachable states can be enumerated
    (up to ``--reach-states``): the explorer's fair-component search on that
    graph, exact.  Past it, by k-liveness (:mod:`.klive`): a proof, or the
    verdict says UNKNOWN (so does ``--free``).  Liveness-to-safety is not
    built yet.
    """
    from ownership.engines.liveness import check_properties, select_properties
    from ownership.engines.search import Limits

    props = select_properties(inst, options.invariants)
    if not props or result.verdict is not Verdict.PROVED:
        return result
    names = ", ".join(p.name for p in props)
    if options.free:
        return dataclasses.replace(result, verdict=Verdict.UNKNOWN, stop_reason=StopReason.SOLVER_UNKNOWN,
                                   notes=(*result.notes, f"temporal properties not decided ({names}): prove "
                                          "decides them on the reachable states, which --free leaves open"))
    decided = check_properties(inst, result, props, Limits(max_states=options.reach_states or None),
                               symmetry=options.symmetry, engine="prove")
    if decided.verdict is not Verdict.UNKNOWN:
        return decided
    # Too many states to enumerate: k-liveness, each property (and element) a safety question for Spacer.
    from ownership.engines.prove.klive import k_liveness
    from ownership.engines.z3run import encode

    sym = encode(inst, dataclasses.replace(options, symmetry=False))
    said: list[str] = []
    for prop in props:
        for element in ([None] if prop.each is None else range(inst.sizes[prop.each.name])):
            ok, words = k_liveness(sym, inst, prop, element, options)
            who = "" if element is None or prop.each is None else f" for {inst.names[prop.each.name][element]}"
            said.append(f"{prop.name}{who}: {words}")
            if not ok:
                return dataclasses.replace(decided, notes=(*decided.notes, *said, "temporal properties not "
                                                           "decided: neither the enumerated reachable states "
                                                           "(raise --reach-states) nor k-liveness closed them"))
    return dataclasses.replace(result, properties=tuple(p.name for p in props), notes=(*result.notes, *said))


def _decided(out: Outcome) -> Outcome:
    """``out``, unless the run was stopped: then the stop goes on to the one stop handler (``until_stopped``)."""
    if out.kind is Kind.STOPPED and out.stop is not None:
        raise out.stop
    return out


def _prove_at(inst: Instance, sym: SymbolicSpec, chosen: list[str], options: BmcOptions, progress: Any,
              start: float, widened: list[str]) -> CheckResult:
    # The invariants proved are the chosen ones plus the helpers, which strengthen the
    # induction; only these are assumed along the path (assuming any other would be unsound).
    helpers = [n for n, i in inst.spec.invariants.items() if i.helper]
    all_invs = list(dict.fromkeys([*chosen, *helpers]))
    # Proven bookkeeping lemmas strengthen the induction (they rule out unreachable starts).
    lemmas = proven_lemmas(sym, options)
    overflows = live_overflows(sym, lemmas, options)
    opts = result_options(options)
    shown = shown_params(inst, options)

    def done(verdict: Verdict, reason: StopReason, depth: int, notes: Sequence[str], violated: str | None = None,
             trace: Trace | None = None, states: int = 0, transitions: int = 0,
             actions: tuple[ActionCoverage, ...] = ()) -> CheckResult:
        return CheckResult(inst.spec.name, "prove", verdict, reason,
                           Stats(states, transitions, depth, time.perf_counter() - start),
                           shown, tuple(all_invs), violated=violated, trace=trace, options=opts,
                           notes=(*notes, *widened, coverage_note(sym.width)), actions=actions,
                           coverage_kind=CoverageKind.PROOF)

    def shortest_by_bmc() -> CheckResult:
        return bounded_search(inst, dataclasses.replace(options, invariants=tuple(all_invs)), progress)

    def violated(found: CheckResult, notes: Sequence[str]) -> CheckResult:
        # ``found`` holds another engine's shortest trace, replayed when it was built.
        return done(Verdict.VIOLATED, StopReason.VIOLATION, found.stats.depth, notes, found.violated, found.trace,
                    actions=found.actions)

    def shortest_violation(notes: list[str], found_by: str, last_k: int) -> CheckResult:
        # A violation (or an overflow) is reachable; bmc finds the shortest one to show.
        found = shortest_by_bmc()
        if found.trace is not None:
            return violated(found, [*notes, f"{found_by} found a violation; the shortest trace is from bmc"])
        if _decided(spacer(sym, inst, options, [], overflows)).kind is Kind.REFUTED:
            raise WidthError(f"{found_by} found a step that overflows them")
        return done(Verdict.VIOLATED, StopReason.VIOLATION, last_k, [
            *notes, f"{found_by} found a violation deeper than {options.max_depth} steps; "
            "raise --max-depth with check --engine bmc to see a trace"])

    ind = _decided(k_induction(sym, inst, options, all_invs, lemmas, overflows, progress, start))
    if ind.kind is Kind.PROVED:
        return done(Verdict.PROVED, ind.reason, ind.depth, [ind.note])
    if ind.kind is Kind.REFUTED:
        return done(Verdict.VIOLATED, StopReason.VIOLATION, ind.depth, [ind.note], ind.violated, ind.trace)
    if ind.kind is Kind.UNKNOWN:
        return done(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, ind.depth, [ind.note])
    last_k = ind.depth
    notes = [ind.note]
    if options.reach_states > 0 and not options.free:
        last = [0.0]

        def report(states: int, transitions: int, depth: int, frontier: int) -> None:
            now = time.perf_counter()
            if progress is not None and now - last[0] >= 1.0:  # at most one line a second
                last[0] = now
                progress(Progress(now - start, states, transitions, depth, frontier))

        cert = _decided(reachable_certificate(sym, inst, options, all_invs, overflows, report))
        if cert.kind is Kind.PROVED:
            return done(Verdict.PROVED, cert.reason, cert.depth, [*notes, cert.note],
                        states=cert.states, transitions=cert.transitions, actions=cert.actions)
        if cert.kind is Kind.REFUTED:
            # A state the concrete code reaches violates an invariant: breadth-first search
            # gives a shortest trace, replayed like every other.
            from ownership.engines.explore import ExploreOptions, explore

            # Reduced only if Z3 proved the symmetry (precheck), as the proof attempt was.
            found = explore(inst, ExploreOptions(invariants=tuple(all_invs), symmetry=options.symmetry))
            if found.trace is not None:
                return violated(found, [*notes, cert.note, "the shortest trace is from breadth-first search"])
            raise OwnershipError(Code.ENGINE_DISAGREEMENT, "Z3 found a reachable state that violates "
                                 f"{cert.violated}, but breadth-first search found no violation")
        notes.append(cert.note)
    if options.spacer:
        found_inv = _decided(spacer(sym, inst, options, all_invs, overflows))
        if found_inv.kind is Kind.PROVED:
            return done(Verdict.PROVED, found_inv.reason, last_k, [*notes, found_inv.note])
        if found_inv.kind is Kind.REFUTED:
            return shortest_violation(notes, "Spacer", last_k)
        notes.append(f"Spacer (IC3/PDR) was inconclusive: {found_inv.note}")
        if found_inv.suspect:
            # A rejected invariant is a wrong answer, and Spacer's answers have been seen to
            # depend on what the process solved before: a buggy spec must still get its trace.
            found = shortest_by_bmc()
            if found.trace is not None:
                return violated(found, [*notes, "bmc found a violation"])
            notes.append(f"bmc found no violation up to depth {found.stats.depth}")
    notes += [
        *ind.caveats,
        "the trace below starts from a state that satisfies every invariant but may be unreachable: "
        "add a helper invariant (@spec.invariant(helper=True)) that rules it out",
    ]
    return done(Verdict.UNKNOWN, StopReason.INDUCTION_FAILED, last_k, notes, ind.violated, ind.trace)
