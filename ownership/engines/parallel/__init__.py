"""The explorer's search on several workers: every core of this machine, or Ray actors.

The seen-set is partitioned by a hash of each state's canonical key
(:func:`~ownership.engines.parallel.shard.shard_of`); each worker builds its
own instance from the spec file and the parameter values and searches the
states it owns (:mod:`~ownership.engines.parallel.shard`); the coordinator
runs the levels and their barrier (:mod:`~ownership.engines.parallel.levels`)
over a pool of workers (:mod:`~ownership.engines.parallel.transport`).  The
answer is the sequential search's: the same states, transitions, actions
fired, shortest counterexample and path, whatever the number of workers.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ownership.core.progress import ProgressFn
from ownership.core.result import CheckResult
from ownership.engines.coverage import ActionTally
from ownership.engines.symmetry import plan_symmetry
from ownership.lang.instance import Instance

if TYPE_CHECKING:
    from ownership.engines.explore import ExploreOptions

AUTO_SWITCH = 20_000
"""With ``--workers auto``, a search on the Python path that passes this many states starts again on every core
(below it, one process is done before the workers would have started)."""


def machine_workers() -> int:
    """The cores this process may run on (its CPU affinity where the platform says, else the CPU count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def explore_sharded(inst: Instance, options: ExploreOptions, names: tuple[str, ...], notes: list[str],
                    progress: ProgressFn | None, elapsed: float = 0.0) -> CheckResult:
    """The explorer's result for a search sharded over ``options.workers`` worker processes or Ray actors."""
    from ownership.lang.description import describe

    description = describe(inst)
    session = None
    if options.ray is not None:
        from ownership.engines.parallel.raypool import RaySession

        session = RaySession(options.ray)
    try:
        count = options.workers or (session.cpus if session is not None else machine_workers())
        return _sharded(inst, options, names, notes, progress, elapsed, description, count, session)
    finally:
        if session is not None:
            session.close()


def _sharded(inst: Instance, options: ExploreOptions, names: tuple[str, ...], notes: list[str],
             progress: ProgressFn | None, elapsed: float, description: Any, count: int, session: Any) -> CheckResult:
    from ownership.engines.explore import _result
    from ownership.engines.parallel.levels import LevelLimits, LevelSearch
    from ownership.engines.parallel.shard import Shard, ShardConfig
    from ownership.engines.parallel.transport import LocalWorkers, forks
    from ownership.engines.symevery import describe_checks
    from ownership.lang.audit import audit_note

    max_seconds = None if options.max_seconds is None else max(0.0, options.max_seconds - elapsed)
    deadline = None if max_seconds is None else time.time() + max_seconds
    share = None if options.max_memory is None else options.max_memory // (count + 1)
    configs = [ShardConfig(description, i, count, options.symmetry, names, options.deadlock, deadline=deadline,
                           max_memory=share, progress_every=options.progress_every) for i in range(count)]
    limits = LevelLimits(max_depth=options.max_depth, max_states=options.max_states, max_seconds=max_seconds,
                         progress_every=options.progress_every)

    def pool(cfgs: list[ShardConfig], on_progress: Any, idle: Any) -> Any:
        if session is not None:
            from ownership.engines.parallel.raypool import RayWorkers

            return RayWorkers(session, [partial(Shard, c) for c in cfgs], idle, options.progress_every)
        # Forked workers share the coordinator's hash() seed, so they may shard by hash(): cheaper than crc32.
        forked = [replace(c, forked=forks()) for c in cfgs]
        return LocalWorkers([partial(Shard, c) for c in forked], on_progress, idle, options.progress_every)

    run = LevelSearch(pool, configs, len(inst.spec.actions), limits, progress).run()
    tally = ActionTally(inst)
    tally.fired, tally.enabled = run.fired, run.enabled
    plan = plan_symmetry(inst)
    reduced = bool(options.symmetry and (plan.permuted or plan.sorted))
    notes = list(notes)
    symmetry = [f["symmetry"] for f in run.finished if "symmetry" in f]
    if symmetry:
        notes.insert(1, describe_checks(symmetry))
    for f in run.finished:
        for warning in f["warnings"]:
            inst.add_warning(warning)
    notes.append(f"searched by {run.where or f'{count} workers'}, each holding the states whose key hashes to it; "
                 "the counts and the counterexample are those of one process")
    if session is not None:
        notes.append(f"Ray start-up took {run.startup:.1f}s, not counted in the search's time")
    if elapsed:
        notes.append(f"one process passed {AUTO_SWITCH:,} states in {elapsed:.1f}s and the workers searched again "
                     "from the start")
    outcome = run.outcome
    if run.finished:
        outcome = replace(outcome, seconds=outcome.seconds + elapsed,
                          audit=audit_note([f["audit"] for f in run.finished]))
    return _result(inst, options, lambda node: [], tally, reduced, outcome, names, notes, steps=run.steps)
