"""The random phase as a swarm: the walks and examples spread over worker processes or Ray actors.

As in SPIN's swarm verification, each worker runs its share of the walks
and of Hypothesis' examples on a seed of its own, derived from the run's
seed and its number (:func:`worker_seed`), and the coordinator reports the
union of what they covered (:func:`~.sample.merge`).  Workers build their
instance from the spec file and the parameter values, as the explorer's
shards do, and share the breadth-first phase's deepest states as starting
points.  Every worker runs its share to the end or to its first failure;
the failure reported is the lowest-numbered worker's, so the same seed and
the same number of workers give the same answer (``--workers`` is on the
reproduce line).  Workers never derandomize: their seeds already fix them.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from ownership.core.progress import Progress, ProgressFn, WorkerProgress
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.hypothesis_engine.sample import Sample, merge, sample
from ownership.engines.hypothesis_engine.walks import Path, start_points
from ownership.lang.description import InstanceDescription, describe
from ownership.lang.instance import Instance


def worker_seed(seed: int | None, worker: int) -> int:
    """Worker ``worker``'s seed: drawn from the run's (``None``, derandomized: 0) and its number."""
    return random.Random(f"{seed or 0}:{worker}").randrange(2**63)


def share(total: int, workers: int, worker: int) -> int:
    """Worker ``worker``'s part of ``total`` (the first ones take the remainder)."""
    return total // workers + (worker < total % workers)


@dataclass(frozen=True)
class SwarmJob:
    """One worker's part of the random phase: what it builds its instance from and how much it samples."""

    description: InstanceDescription
    options: HypothesisOptions
    worker: int
    seed: int
    walks: int
    examples: int
    starts: tuple[Path, ...]
    deadline: float | None
    """Wall-clock time (``time.time()``) at which it stops with what it covered."""


class SwarmWorker:
    """A worker of the swarm: its instance, built once, and its share of the sampling on call."""

    def __init__(self, job: SwarmJob, report: Any = None) -> None:
        self.job = job
        self.report = report
        self.inst = job.description.instantiate()

    def ready(self) -> bool:
        return True

    def run(self) -> Sample:
        """Its walks and examples: stopped at the deadline with what it covered."""
        from ownership.core.limits import limited

        job, inst = self.job, self.inst
        options = replace(job.options, walks=job.walks, max_examples=max(job.examples, 1), seed=job.seed,
                          derandomize=False)
        starts = start_points(inst, job.starts)
        seconds = None if job.deadline is None else max(0.001, job.deadline - time.time())
        with limited(seconds):
            return sample(inst, options, job.seed, starts, self._progress, examples=job.examples > 0)

    def _progress(self, p: Progress) -> None:
        if self.report is not None:
            self.report(("progress", self.job.worker, p.seconds, p.states, p.examples or 0, p.steps or 0))


def time_left() -> float | None:
    """Seconds until the check's wall-clock limit (its interval timer, :func:`ownership.core.limits.limited`)."""
    left = signal.getitimer(signal.ITIMER_REAL)[0]
    return left if left > 0 else None


def sample_swarm(inst: Instance, options: HypothesisOptions, seed: int | None, starts: Sequence[Path],
                 progress: ProgressFn | None) -> tuple[Sample, str]:
    """The merged sample of ``options.workers`` workers (Ray actors with ``options.ray``) and where they ran.

    Workers stop a little before the check's time limit, so what they
    covered reaches the coordinator before the limit stops it.
    """
    from ownership.engines.parallel.transport import LocalWorkers, Workers

    left = time_left()
    deadline = None if left is None else time.time() + left - min(1.0, left / 10)
    description = describe(inst)
    session: Any = None
    pool: Workers | None = None
    try:
        if options.ray is not None:
            from ownership.engines.parallel.raypool import RaySession

            session = RaySession(options.ray)
        count = options.workers or (session.cpus if session is not None else 1)
        walks, examples = options.walk_budget, options.max_examples
        jobs = [SwarmJob(description, options, i, worker_seed(seed, i), share(walks, count, i),
                         share(examples, count, i), tuple(starts), deadline) for i in range(count)]
        factories = [partial(SwarmWorker, job) for job in jobs]
        if session is not None:
            from ownership.engines.parallel.raypool import RayWorkers

            pool = RayWorkers(session, factories, None, options.progress_every)
        else:
            pool = LocalWorkers(factories, _Aggregate(count, progress), None, options.progress_every)
        samples = pool.call_each("run", [() for _ in jobs])
        where = pool.description
    finally:
        if pool is not None:
            pool.close()
        if session is not None:
            session.close()
    return merge(samples), where


class _Aggregate:
    """The workers' progress messages, summed into one :class:`Progress` line for the run."""

    def __init__(self, count: int, progress: ProgressFn | None) -> None:
        self.count, self.progress = count, progress
        self.latest: dict[int, tuple[Any, ...]] = {}
        self.started = time.monotonic()

    def __call__(self, msg: tuple[Any, ...]) -> None:
        self.latest[msg[1]] = msg
        if self.progress is None:
            return
        rows = [self.latest.get(i) for i in range(self.count)]
        self.progress(Progress(
            time.monotonic() - self.started, states=sum(r[3] for r in rows if r),
            examples=sum(r[4] for r in rows if r), steps=sum(r[5] for r in rows if r),
            workers=tuple(WorkerProgress(busy=True, rate=r[5] / r[2] if r and r[2] else 0.0, frontier=0)
                          for r in rows)))
