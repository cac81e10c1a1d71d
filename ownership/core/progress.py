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


@dataclass(frozen=True)
class Progress:
    """How far a run has got: counts so far and seconds since it started.

    ``states``, ``transitions``, ``depth`` and ``frontier`` are a search's
    counts (a solver engine reports ``depth``, the steps unrolled, only);
    ``examples`` and ``steps`` are a sampling engine's (random examples and
    walks run, steps taken), ``None`` for the other engines.
    """

    seconds: float
    states: int = 0
    transitions: int = 0
    depth: int = 0
    frontier: int = 0
    examples: int | None = None
    steps: int | None = None

    def line(self) -> str:
        """The progress line the command line prints."""
        if self.examples is not None:
            return (f"  ... {self.examples:,} examples, {self.steps or 0:,} steps, "
                    f"{self.states:,} distinct states, {self.seconds:.0f}s")
        if not self.states:  # solver engines report depth and time only
            return f"  ... unrolled {self.depth} steps, {self.seconds:.0f}s"
        rate = self.states / self.seconds if self.seconds else 0.0
        return (f"  ... {self.states:,} states, {self.transitions:,} transitions, depth {self.depth}, "
                f"frontier {self.frontier:,}, {rate:,.0f} states/s, {self.seconds:.0f}s")


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
