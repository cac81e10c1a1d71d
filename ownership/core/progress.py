"""The one progress report every engine sends during a long run.

Engines call a :data:`ProgressFn` with a :class:`Progress` about once a
second; the command line prints :meth:`Progress.line` on stderr.  One type
means a front end never has to guess which engine is talking (no
``hasattr`` on the report): the fields an engine does not measure stay at
their zero defaults and the line leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ownership.core.memory import format_size


@dataclass(frozen=True)
class WorkerProgress:
    """One worker of a sharded search: busy with the level or waiting at its barrier, its states expanded
    per second in this level, the states of the level it owns, its resident memory in bytes."""

    busy: bool
    rate: float
    frontier: int
    memory: int | None = None


@dataclass(frozen=True)
class Progress:
    """How far a run has got: counts so far and seconds since it started.

    ``states``, ``transitions``, ``depth`` and ``frontier`` are a search's
    counts (a solver engine reports ``depth``, the steps unrolled, only);
    ``frontier`` is every state waiting to be expanded (the rest of the
    current level and those queued for the next).  ``memory`` is the
    process's resident memory in bytes and ``bytes_per_state`` what the
    search grew by per stored state (an upper bound: the interpreter's own
    garbage counts too).  ``level_states``, ``level_left`` and
    ``level_seconds_left`` say how much of the current breadth-first level
    is left, at its rate so far: a search never says how long the levels it
    has not reached will take, since their size is unknown.  ``examples``
    and ``steps`` are a sampling engine's (random examples and walks run,
    steps taken).  ``None`` is "not measured", left out of the line.
    """

    seconds: float
    states: int = 0
    transitions: int = 0
    depth: int = 0
    frontier: int = 0
    examples: int | None = None
    steps: int | None = None
    memory: int | None = None
    bytes_per_state: float | None = None
    level_states: int | None = None
    level_left: int | None = None
    level_seconds_left: float | None = None
    workers: tuple[WorkerProgress, ...] | None = None
    """A parallel run's workers, one each (a sharded search's, or a random swarm's)."""

    def line(self) -> str:
        """The progress line the command line prints (one line)."""
        if self.examples is not None:
            swarm = ""
            if self.workers:  # a swarm: each worker's states are its own, so their sum may count one twice
                rates = " + ".join(f"{w.rate:,.0f}" for w in self.workers)
                swarm = f" (summed over workers), {len(self.workers)} workers ({rates} steps/s)"
            return (f"  ... {self.examples:,} examples, {self.steps or 0:,} steps, "
                    f"{self.states:,} distinct states{swarm}, {self.seconds:.0f}s")
        if not self.states:  # solver engines report depth and time only
            return f"  ... unrolled {self.depth} steps, {self.seconds:.0f}s"
        rate = self.states / self.seconds if self.seconds else 0.0
        parts = [f"  ... {self.states:,} states", f"{self.transitions:,} transitions", self._depth(),
                 f"frontier {self.frontier:,}", f"{rate:,.0f} states/s"]
        if self.memory is not None:
            per = f" ({format_size(self.bytes_per_state)}/state)" if self.bytes_per_state is not None else ""
            parts.append(f"{format_size(self.memory)}{per}")
        if self.workers:
            busy = sum(w.busy for w in self.workers)
            rates = " + ".join(f"{w.rate:,.0f}" for w in self.workers)
            shards = "/".join(f"{w.frontier:,}" for w in self.workers)
            parts.append(f"{busy} of {len(self.workers)} workers busy ({rates} states/s; level per shard {shards})")
        parts.append(f"{self.seconds:.0f}s")
        return ", ".join(parts)

    def _depth(self) -> str:
        """``depth 7`` and, when known, what is left of it: ``depth 7 (41,200 of 120,000 left, ~8s)``."""
        if self.level_left is None or self.level_states is None:
            return f"depth {self.depth}"
        eta = f", ~{self.level_seconds_left:.0f}s" if self.level_seconds_left is not None else ""
        return f"depth {self.depth} ({self.level_left:,} of {self.level_states:,} left{eta})"


ProgressFn = Callable[[Progress], None]
"""What an engine calls with each :class:`Progress` report."""


class PhasedProgress(Protocol):
    """A :data:`ProgressFn` that is also told when a command moves to its next phase.

    A command that runs several steps (``preflight``: reading the logs,
    mapping, the analysis, the remedy's re-check) names each with
    :meth:`phase`; the engines it runs get the same object as their
    :data:`ProgressFn`, so their reports are shown under the phase's name.
    """

    def phase(self, name: str) -> None:
        """The command has started ``name``; engine reports that follow belong to it."""

    def __call__(self, p: Progress) -> None:
        """An engine's report, as for :data:`ProgressFn`."""
