"""``check_stateful``: walks, then Hypothesis' search, and the :class:`~ownership.core.result.CheckResult` of the run."""

from __future__ import annotations

import random
import time
from dataclasses import asdict
from typing import Any

from ownership.core.limits import stop_reason_of
from ownership.core.progress import ProgressFn
from ownership.core.replay import build_trace
from ownership.core.result import CheckResult, CoverageKind, Measure, Stats, StopReason, Verdict
from ownership.engines.bmcprefix import audit_prefix
from ownership.engines.coverage import action_records, with_coverage
from ownership.engines.hypothesis_engine.exhaustive import BfsPhase, breadth_first
from ownership.engines.hypothesis_engine.machine import Covered, machine_class
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.hypothesis_engine.reproduction import path_reproduction
from ownership.engines.hypothesis_engine.sample import Sample, sample
from ownership.engines.hypothesis_engine.walks import shrink_path, start_points
from ownership.engines.symcheck import precheck
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance


def _enabled_counts(inst: Instance, log: Covered) -> list[int]:
    """Per action, the visited states in which it was seen enabled.

    Hypothesis asks preconditions lazily, so for an action it was asked about
    the count is a lower bound; an action never seen enabled is looked for in
    every visited state, so a 0 means it is enabled in none of them.
    """
    counts = [len(log.enabled_in.get(a, ())) for a in inst.spec.actions]
    unseen = {a for a, n in zip(inst.spec.actions, counts, strict=True) if not n}
    if not unseen:
        return counts
    found: dict[str, int] = dict.fromkeys(unseen, 0)
    with inst.mode(recording=False):
        for state in log.states:
            hit = {ai.action.name for ai in inst.action_instances
                   if ai.action.name in unseen and inst.first_outcome(state, ai) is not None}
            for a in hit:
                found[a] += 1
    return [found.get(a, n) for a, n in zip(inst.spec.actions, counts, strict=True)]


def check_stateful(
    inst: Instance, options: HypothesisOptions = HypothesisOptions(),  # noqa: B008 - frozen
    progress: ProgressFn | None = None,
) -> CheckResult:
    """Check ``inst``'s invariants (:func:`check_invariants`), then deadlocks (``--deadlock``) and its temporal
    properties by walks.

    The properties are judged only once the invariants held (exactly when the
    breadth-first phase exhausted the space: :func:`~.lassos.with_properties`).
    """
    from ownership.engines.hypothesis_engine.lassos import with_deadlocks, with_properties

    result = check_invariants(inst, options, progress)
    seed = result.options.get("seed", options.seed)
    return with_properties(inst, with_deadlocks(inst, result, options, seed), options, seed)


def check_invariants(
    inst: Instance, options: HypothesisOptions = HypothesisOptions(),  # noqa: B008 - frozen
    progress: ProgressFn | None = None,
) -> CheckResult:
    """Check ``inst``: a capped breadth-first search, then random interleavings until one fails or the examples run out.

    The spec checks the other engines run come first (OWN060 on a concrete
    sample: :func:`~ownership.engines.symcheck.precheck`; OWN061 on every
    state the breadth-first phase expands, as in the explorer), so a spec
    they refuse is refused here too.  A space the breadth-first phase exhausts is answered
    exactly (:mod:`.exhaustive`); otherwise the walks start from its deepest
    states too, and the answer is sampled.
    """
    if options.max_examples < 1 or options.steps < 1:
        raise OwnershipError(Code.BAD_OPTION, "--max-examples and --steps must be at least 1")
    started = time.monotonic()
    checked = machine_class(inst, options.invariants)._checked
    # One seed drives the walks and Hypothesis, so `--seed S` reproduces the whole run;
    # --derandomize fixes both (the walks at seed 0).
    seed = options.seed
    if seed is None and not options.derandomize:
        seed = random.SystemRandom().randrange(2**63)
    opts = opts_of(options, seed)
    audited = "determinism not audited: the run was stopped first"
    phase: BfsPhase | None = None
    checks_note: str | None = None
    drawn = Sample()
    where: str | None = None
    try:
        # The spec run concretely on a sample (OWN060) as before bmc and prove; the symmetry promise
        # (OWN061) is checked on every state the breadth-first phase expands, as the explorer does.
        checks_note, _ = precheck(inst, False)
        if options.exhaustive_states:
            # The phase's own search audits determinism (its first states expanded again later).
            phase = breadth_first(inst, tuple(checked), options.exhaustive_states, options.symmetry,
                                  random.Random(seed or 0), progress)
            audited = phase.outcome.audit or audited
            if phase.complete or phase.violated is not None:
                return _exact_result(inst, phase, checked, opts_of(options, seed), checks_note)
        else:
            audited = audit_prefix(inst)  # a random run samples: the determinism audit runs on a breadth-first prefix first
        if options.swarm:
            from ownership.engines.hypothesis_engine.swarm import sample_swarm

            drawn, where = sample_swarm(inst, options, seed, phase.frontier if phase is not None else [], progress)
        else:
            with inst.mode(recording=False):
                starts = start_points(inst, phase.frontier) if phase is not None else []
            drawn = sample(inst, options, seed, starts, progress)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or the wall-clock limit, before or between the phases
        drawn.interrupted = stop_reason_of(exc)
    log = drawn
    elapsed = time.monotonic() - started
    actions = action_records(
        inst, _enabled_counts(inst, log), [log.action_counts.get(a, 0) for a in inst.spec.actions],
        Measure.SAMPLED, len(log.states), log.max_depth, False,
    )
    notes = [
        f"ran {log.walks:,} swarm random walks, then {log.examples:,} Hypothesis examples, of up to {options.steps} "
        f"steps ({log.steps:,} steps in all); Hypothesis counts only those that did not end early towards --max-examples",
        audited,
    ]
    if where is not None:
        notes.insert(1, f"sampled by {where}, each on a seed of its own drawn from {seed or 0}; the coverage is their "
                        "union")
    if phase is not None:
        notes += [n for n in (phase.describe(), phase.symmetry_note) if n]
    notes += [checks_note] if checks_note else []
    stats = Stats(states=len(log.states), transitions=log.steps, depth=log.max_depth, seconds=elapsed)
    common: dict[str, Any] = {
        "spec": inst.spec.name,
        "engine": "hypothesis",
        "params": dict(inst.param_values),
        "invariants": checked,
        "options": opts,
        "actions": actions,
        "coverage_kind": CoverageKind.SAMPLED,
    }
    found = drawn.found
    if drawn.interrupted is not None and found is None:
        if phase is None and options.exhaustive_states:
            notes.append(f"inconclusive: {drawn.interrupted.value} before the spec checks and the breadth-first phase "
                         "finished (nothing was sampled)")
        else:
            notes.append(f"inconclusive: {drawn.interrupted.value} after {log.examples:,} random examples")
        return with_coverage(CheckResult(
            verdict=Verdict.UNKNOWN, stop_reason=drawn.interrupted, stats=stats, notes=tuple(notes), **common
        ), inst, actions)
    if found is None:
        return with_coverage(CheckResult(
            verdict=Verdict.BOUNDED_OK, stop_reason=StopReason.EXAMPLES_DONE, stats=stats, notes=tuple(notes), **common
        ), inst, actions)
    who = "" if found.worker is None else f"worker {found.worker}'s "
    if found.by == "walk":
        shrunk = shrink_path(inst, found.path, found.invariant, checked)
        notes.insert(0, f"found by {who}swarm random walk {found.walk:,} ({len(found.path)} steps), shrunk to "
                        f"{len(shrunk)} steps by deleting steps")
        opts["found_by"] = "walk"
        return with_coverage(CheckResult(
            verdict=Verdict.VIOLATED, stop_reason=StopReason.VIOLATION, stats=stats, violated=found.invariant,
            trace=build_trace(inst, shrunk, engine="hypothesis", violation=found.invariant), notes=tuple(notes),
            reproduction=path_reproduction(inst, shrunk), **common,
        ), inst, actions)
    if who:
        notes.insert(0, f"found by {who}Hypothesis examples")
    trace = build_trace(inst, found.path, engine="hypothesis", violation=found.invariant)
    return with_coverage(CheckResult(
        verdict=Verdict.VIOLATED,
        stop_reason=StopReason.VIOLATION,
        stats=stats,
        violated=found.invariant,
        trace=trace,
        notes=tuple(notes),
        reproduction=found.reproduction,
        **common,
    ), inst, actions)


def opts_of(options: HypothesisOptions, seed: int | None) -> dict[str, Any]:
    """The options a result reports: the walks counted out, the seed drawn."""
    opts = {k: v for k, v in asdict(options).items() if k != "progress_every"}
    opts["walks"] = options.walk_budget
    if seed is not None:
        opts["seed"] = seed
    return opts


def _exact_result(inst: Instance, phase: BfsPhase, checked: tuple[str, ...], opts: dict[str, Any],
                  checks_note: str | None) -> CheckResult:
    """The answer of a breadth-first phase that exhausted the space or found a violation: exact, not sampled.

    Its coverage is the explorer's (exhaustive): every reachable state was
    checked, or the violation is a shortest one.  Nothing was sampled, so
    the seed does not matter.
    """
    outcome = phase.outcome
    violated = phase.violated
    trace = build_trace(inst, phase.path, engine="hypothesis", violation=violated) if violated is not None else None
    actions = phase.search.tally.coverage(inst, Measure.EXACT, outcome.expanded, outcome.depth, outcome.complete)
    notes = [n for n in (phase.describe(), phase.symmetry_note, phase.outcome.audit, checks_note) if n]
    return with_coverage(CheckResult(
        spec=inst.spec.name, engine="hypothesis",
        verdict=Verdict.VIOLATED if violated is not None else Verdict.PROVED,
        stop_reason=StopReason.VIOLATION if violated is not None else StopReason.EXHAUSTED,
        stats=Stats(outcome.states, outcome.transitions, outcome.depth, outcome.seconds),
        params=dict(inst.param_values), invariants=checked, violated=violated, trace=trace,
        options={**opts, "symmetry": phase.search.reduced, "exhaustive": True}, notes=tuple(notes),
        reproduction=path_reproduction(inst, phase.path) if violated is not None else None,
        coverage_kind=CoverageKind.EXHAUSTIVE,
    ), inst, actions)

