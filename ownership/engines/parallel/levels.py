"""The coordinator of a sharded breadth-first search: levels, the barrier, and the sequential search's answer.

Each level: every shard expands its states of the level in rank order and
batches the successors other shards own (:meth:`Shard.expand
<ownership.engines.parallel.shard.Shard.expand>`); the batches are handed to
their owners, which keep the new states and check them
(:meth:`~ownership.engines.parallel.shard.Shard.receive`).  At the barrier
the coordinator merges the new states' order keys into the next level's
ranks, and takes the reason to stop with the smallest order key: the one
the sequential search meets first.  Counts at a stop are what the
sequential search had counted at that key, so states, transitions, actions
fired, the shortest counterexample and its path are the same whatever the
number of workers.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ownership.core.limits import stop_reason_of
from ownership.core.memory import Meter
from ownership.core.progress import Progress, ProgressFn, WorkerProgress
from ownership.core.result import StopReason
from ownership.engines.parallel.shard import Candidate, Expanded, Received, ShardConfig
from ownership.engines.parallel.transport import WorkerMemoryError, Workers, WorkersNotStartedError
from ownership.engines.search import Outcome, Stop


@dataclass(frozen=True)
class LevelLimits:
    """The explorer's limits, as the sharded search applies them (``None``: none)."""

    max_depth: int | None = None
    max_states: int | None = None
    max_seconds: float | None = None
    progress_every: float = 1.0


@dataclass
class ShardedRun:
    """How a sharded search ended: the outcome, the counts of actions, the path to the stop, what was checked."""

    outcome: Outcome
    fired: list[int]
    enabled: list[int]
    steps: list[tuple[int, tuple[Any, ...]]] | None
    finished: list[dict[str, Any]] = field(default_factory=list)
    """Each shard's :meth:`~ownership.engines.parallel.shard.Shard.finish` (empty if the run was cut short)."""
    where: str = ""
    """Where the shards ran (the pool's description)."""
    startup: float = 0.0
    """Seconds spent starting the workers (a Ray cluster's start-up), not counted in the outcome's time."""


def _ranks(keys: list[bytes]) -> tuple[list[bytes], Any]:
    """Per shard, the global ranks of its new states (the order of their keys over every shard); the merged keys."""
    import numpy as np

    parts = [np.frombuffer(k, dtype=np.int64) for k in keys]
    merged = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    order = np.argsort(merged, kind="stable")
    ranks = np.empty(len(merged), dtype=np.int64)
    ranks[order] = np.arange(len(merged), dtype=np.int64)
    out, at = [], 0
    for p in parts:
        out.append(ranks[at:at + len(p)].tobytes())
        at += len(p)
    return out, merged[order]


class LevelSearch:
    """One sharded breadth-first search (:meth:`run` once)."""

    def __init__(self, make_workers: Callable[[list[ShardConfig], Any, Any], Workers], configs: list[ShardConfig],
                 n_actions: int, limits: LevelLimits, progress: ProgressFn | None) -> None:
        self.make_workers = make_workers
        self.configs = configs
        self.count = len(configs)
        self.limits = limits
        self.progress = progress
        self.n_actions = n_actions
        self.fired = [0] * n_actions
        self.enabled = [0] * n_actions
        self.states = self.transitions = self.expanded = self.level = 0
        self.started = 0.0
        self.level_started = 0.0
        self.level_size = 0
        self.shard_sizes = [0] * self.count
        self.busy: dict[int, tuple[int, float, int]] = {}
        self.memory = [0] * self.count
        self.exchanging = False
        self.last_report = 0.0
        self.where = ""
        self.startup = 0.0

    def run(self) -> ShardedRun:
        """Search until the states run out, a limit is reached or a violation is found."""
        self.started = self.last_report = time.perf_counter()
        workers: Workers | None = None
        with Meter() as meter:
            start_memory = meter()
            try:
                try:
                    import numpy  # noqa: F401 - the barrier merges keys with it: fail here, before any worker starts
                except (ImportError, OSError, MemoryError) as exc:
                    raise WorkersNotStartedError(f"numpy cannot load: {type(exc).__name__}") from None
                workers = self.make_workers(self.configs, self._on_progress, self._idle)
                self.where, self.startup = workers.description, getattr(workers, "startup", 0.0)
                run = self._levels(workers)
            except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, the wall-clock limit
                run = self._cut(Stop(stop_reason_of(exc), depth=self.level + 1))
            except (WorkerMemoryError, MemoryError):  # a worker, or this process, under an address-space limit
                run = self._cut(Stop(StopReason.MEMORY_LIMIT, depth=self.level + 1))
            finally:
                if workers is not None:
                    workers.close()
            coordinator = max(meter(), 0)
        peak = sum(f["memory"][1] for f in run.finished) + coordinator if run.finished else None
        start = sum(f["memory"][0] for f in run.finished) + start_memory if run.finished else None
        o = run.outcome
        run.outcome = Outcome(o.stop, o.level, o.states, o.transitions, o.expanded,
                              time.perf_counter() - self.started - self.startup, o.complete, peak_memory=peak,
                              start_memory=start, storage=f"exact (dict of states), sharded over {self.count} workers")
        run.where, run.startup = self.where, self.startup
        return run

    def _cut(self, stop: Stop) -> ShardedRun:
        """The result of a run stopped from outside: the counts of the levels finished."""
        outcome = Outcome(stop, self.level, self.states, self.transitions, self.expanded, 0.0, False)
        return ShardedRun(outcome, self.fired, self.enabled, None)

    def _levels(self, workers: Workers) -> ShardedRun:  # noqa: C901 - one level's barrier, in order
        limits = self.limits
        begun = workers.call_each("begin", [() for _ in range(self.count)])
        owner = next(i for i, (owned, _) in enumerate(begun) if owned)
        self.states = 1
        first = begun[owner][1]
        if first is not None:
            return self._stop(workers, Stop(StopReason.VIOLATION, first.ref, 0, first.detail), first, None)
        ranks = [array("q", [0]).tobytes() if i == owner else b"" for i in range(self.count)]
        self.shard_sizes = [1 if i == owner else 0 for i in range(self.count)]
        deadline = None if limits.max_seconds is None else self.started + limits.max_seconds
        while True:
            self.level_size = sum(self.shard_sizes)
            if limits.max_depth is not None and self.level >= limits.max_depth:
                return self._stop(workers, Stop(StopReason.DEPTH_LIMIT, depth=self.level), None, None)
            self.level_started = time.perf_counter()
            self.busy = {i: (0, 0.0, 0) for i in range(self.count)}
            expanded: list[Expanded] = workers.call_each("expand", [(r,) for r in ranks])
            self.busy = {}
            self.memory = [e.memory for e in expanded]
            halted = next((e.stopped for e in expanded if e.stopped is not None), None)
            if halted is not None:
                self._add(expanded)
                return self._stop(workers, Stop(halted, depth=self.level + 1), None, None, audit=False)
            inboxes = [[e.outboxes[dest] for src, e in enumerate(expanded) if src != dest] for dest in range(self.count)]
            self.busy = {i: (0, 0.0, 0) for i in range(self.count)}
            self.exchanging = True  # every worker takes in the batches sent to it
            received: list[Received] = workers.call_each("receive", [(box,) for box in inboxes])
            self.busy, self.exchanging = {}, False
            ranks, merged = _ranks([r.keys for r in received])
            candidates = [c for c in (*(e.candidate for e in expanded), *(r.candidate for r in received)) if c is not None]
            # A flagged step and the new state it reaches share a key: the step comes first.
            stop = min(candidates, key=lambda c: (c.key, c.step is None), default=None)
            if limits.max_states is not None and self.states + len(merged) > limits.max_states:
                at = int(merged[limits.max_states - self.states])
                # The limit is checked before a new state's invariants, after a flagged step.
                if stop is None or at < stop.key or (at == stop.key and stop.step is None):
                    return self._stop(workers, Stop(StopReason.STATE_LIMIT, depth=self.level + 1), None, merged, key=at)
            if stop is not None:
                return self._stop(workers, Stop(stop.reason, stop.ref, stop.depth, stop.detail), stop, merged)
            self._add(expanded)
            self.states += len(merged)
            self.shard_sizes = [len(r) // 8 for r in ranks]
            if not len(merged):
                return self._stop(workers, Stop(StopReason.EXHAUSTED, depth=self.level), None, None)
            self.level += 1
            now = time.perf_counter()
            if deadline is not None and now > deadline:
                return self._stop(workers, Stop(StopReason.TIME_LIMIT, depth=self.level + 1), None, None, audit=False)
            self._report(now)

    def _add(self, expanded: list[Expanded]) -> None:
        """Count a whole level (its expansions and firings) into the totals."""
        for e in expanded:
            self.transitions += e.transitions
            self.expanded += e.expanded
            for a in range(self.n_actions):
                self.fired[a] += e.fired[a]
                self.enabled[a] += e.enabled[a]

    def _stop(self, workers: Workers, stop: Stop, candidate: Candidate | None, merged: Any,
              key: int | None = None, audit: bool = True) -> ShardedRun:
        """The run's end at ``stop``: counts as the sequential search's at the stop's key, the path, the notes."""
        at = candidate.key if candidate is not None else key
        if at is not None and at >= 0 and merged is not None:
            # The level was cut at ``at``: count its part before that key, as the sequential search had.
            for transitions, expanded, fired, enabled in workers.call_each("tally", [(at,)] * self.count):
                self.transitions += transitions
                self.expanded += expanded
                for a in range(self.n_actions):
                    self.fired[a] += fired[a]
                    self.enabled[a] += enabled[a]
            before = int(merged.searchsorted(at))
            if stop.reason is StopReason.STATE_LIMIT:
                self.states += before
            else:
                # A new state that violates is stored before it is checked; a flagged step gets a node of its own.
                self.states += before + (1 if stop.reason is StopReason.VIOLATION else 0)
        steps = None
        if candidate is not None:
            steps = self._path(workers, candidate.ref)
            if candidate.step is not None:
                steps.append(candidate.step)
        complete = stop.reason is StopReason.EXHAUSTED
        finished = workers.call_each("finish", [(audit,)] * self.count)
        outcome = Outcome(stop, self.level, self.states, self.transitions, self.expanded, 0.0, complete)
        return ShardedRun(outcome, self.fired, self.enabled, steps, finished)

    def _path(self, workers: Workers, ref: int) -> list[tuple[int, tuple[Any, ...]]]:
        """The steps from the initial state to the state ``ref`` (a global reference), asked of its owners."""
        out: list[tuple[int, tuple[Any, ...]]] = []
        while True:
            parent, action, picks = workers.call_one(ref % self.count, "link", ref // self.count)
            if parent < 0:
                break
            out.append((action, picks))
            ref = parent
        out.reverse()
        return out

    # -- progress ------------------------------------------------------------------------------------

    def _on_progress(self, msg: tuple[Any, ...]) -> None:
        _, shard, done, size, seconds, memory = msg
        self.busy[shard] = (done, seconds, size)
        self.memory[shard] = memory
        self._report(time.perf_counter())

    def _idle(self) -> None:
        self._report(time.perf_counter())

    def _report(self, now: float) -> None:
        if self.progress is None or now - self.last_report < self.limits.progress_every:
            return
        self.last_report = now
        done = sum(d for d, _, _ in self.busy.values())
        level_seconds = now - self.level_started
        rate = done / level_seconds if level_seconds > 0 else 0.0
        left = max(self.level_size - done, 0) if self.busy and not self.exchanging else 0
        workers = tuple(
            WorkerProgress(busy=i in self.busy,
                           rate=(self.busy[i][0] / self.busy[i][1]) if i in self.busy and self.busy[i][1] > 0 else 0.0,
                           frontier=self.shard_sizes[i], memory=self.memory[i] or None)
            for i in range(self.count))
        memory = sum(self.memory) or None
        self.progress(Progress(now - self.started, self.states, self.transitions, self.level, left,
                               memory=memory, bytes_per_state=(memory / self.states) if memory and self.states else None,
                               level_states=self.level_size, level_left=left,
                               level_seconds_left=left / rate if rate > 0 else None, workers=workers))
