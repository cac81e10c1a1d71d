"""What one proof strategy concludes: a typed outcome, so the portfolio never compares strings."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from ownership.core.limits import stop_in
from ownership.core.result import ActionCoverage, StopReason
from ownership.core.trace import Trace


class Kind(enum.Enum):
    """The five things a strategy can conclude."""

    PROVED = "proved"
    """The invariants hold for executions of any length (``reason`` says how)."""
    REFUTED = "refuted"
    """A reachable state violates ``violated`` (with a replayed ``trace`` when the strategy has one)."""
    CTI = "counterexample to induction"
    """The strategy's induction did not close; ``trace`` (if any) starts from a possibly unreachable state."""
    UNKNOWN = "unknown"
    """The strategy could not decide; ``note`` says why."""
    STOPPED = "stopped"
    """Ctrl-C, SIGTERM or the time limit stopped it; ``stop`` is the exception to report."""


@dataclass(frozen=True)
class Outcome:
    """One strategy's conclusion, with what the portfolio needs to build the result."""

    kind: Kind
    note: str = ""
    """The sentence for the result's notes (why it is proved, refuted or undecided)."""
    depth: int = 0
    reason: StopReason = StopReason.SOLVER_UNKNOWN
    """For PROVED: how (bounded exhaustion, induction, an inductive invariant found)."""
    violated: str | None = None
    trace: Trace | None = None
    states: int = 0
    transitions: int = 0
    actions: tuple[ActionCoverage, ...] = ()
    suspect: bool = False
    """For UNKNOWN: the strategy's own answer failed an independent check, so it may also be wrong
    about a buggy spec (the portfolio then looks for a violation with bmc)."""
    caveats: tuple[str, ...] = ()
    """For CTI: notes on the counterexample, for the result when nothing else decides."""
    stop: BaseException | None = None


def stoppable(run: Callable[[], Outcome]) -> Outcome:
    """``run()``, or a STOPPED outcome if Ctrl-C, SIGTERM or the time limit interrupts it."""
    try:
        return run()
    except KeyboardInterrupt as exc:
        return Outcome(Kind.STOPPED, stop=exc)
    except Exception as exc:  # noqa: BLE001 - a stop that came out of a Z3 call; anything else is re-raised
        stop = stop_in(exc)
        if stop is None:
            raise
        return Outcome(Kind.STOPPED, stop=stop)
