"""Honest limits: a wall-clock ``--max-seconds`` and SIGTERM that stop every phase of a check.

An engine that checks its deadline between states cannot stop while one
state forks into thousands of choices, while the instance is being built, or
while Z3 is inside one ``check()``.  :func:`limited` makes both the time
limit and SIGTERM raise inside the running code, whatever it is doing:

* the time limit is an interval timer (``SIGALRM``) whose handler raises
  :class:`TimeUp`;
* SIGTERM's handler raises :class:`Terminated` (SIGINT keeps raising
  :class:`KeyboardInterrupt`);
* Python runs signal handlers only between bytecodes, so a Z3 call would
  hold them back: a watcher thread reads the signal numbers that the C
  handler writes to a wakeup pipe and interrupts Z3's context, so the call
  returns and the handler runs.

Both exceptions derive from :class:`KeyboardInterrupt`, so every engine's
Ctrl-C handler also stops on them and reports the coverage reached; the
engines use :func:`stop_reason_of` to say which limit stopped them.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from ownership.core.result import StopReason

REPEAT_SECONDS = 0.5
"""After the time limit, the alarm fires again this often until the guarded block has stopped."""


class Stopped(KeyboardInterrupt):  # noqa: N818 - a stop, raised like Ctrl-C
    """The run was stopped from outside the engine (time limit or signal)."""

    reason = StopReason.INTERRUPTED
    reported = False
    """Set by :func:`stop_reason_of` once an engine has caught the stop and reported its coverage."""


class TimeUp(Stopped):
    """The wall-clock limit (``--max-seconds``) passed."""

    reason = StopReason.TIME_LIMIT


class Terminated(Stopped):
    """SIGTERM arrived."""


class Interrupted(Stopped):
    """SIGINT (Ctrl-C) arrived while a limit guarded the run."""


def stop_reason_of(exc: BaseException) -> StopReason:
    """``TIME_LIMIT`` for the wall-clock limit, else ``INTERRUPTED`` (Ctrl-C, SIGTERM).

    Engines call it where they catch a stop, so it also marks the stop as
    reported: :func:`limited` stops raising it again.
    """
    if isinstance(exc, Stopped):
        exc.reported = True
        return exc.reason
    return StopReason.INTERRUPTED


def stop_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The stop (Ctrl-C, SIGTERM, time limit) behind ``exc``, or ``None`` if it is an ordinary error.

    A handler that raises while ctypes converts a Z3 call's arguments comes
    out as ``ctypes.ArgumentError`` naming the stop in its text, and a Z3
    call that the watcher interrupted raises "canceled".
    """
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, KeyboardInterrupt):
            return seen
        seen = seen.__cause__ or seen.__context__
    if type(exc).__name__ == "ArgumentError":  # ctypes keeps only the text of what the handler raised
        text = str(exc)
        for kind in (TimeUp, Terminated, KeyboardInterrupt):
            if f"{kind.__name__}:" in text or text.endswith(kind.__name__):
                return kind(text)
    if type(exc).__name__ == "Z3Exception" and "cancel" in str(exc).lower():
        return Stopped("interrupted (Z3 call canceled)")
    return None


def raise_if_canceled(solver: Any) -> None:
    """Raise the stop if ``solver`` answered unknown because the watcher interrupted it.

    The stop's own ``KeyboardInterrupt`` can be swallowed (Python drops an
    exception raised inside a finaliser, and Z3 objects have many), leaving
    only the solver's "canceled": that is still a stop, not a solver that
    could not decide.
    """
    reason = str(solver.reason_unknown()).lower()
    if "cancel" in reason or "interrupt" in reason:
        raise Stopped(f"interrupted (Z3 call {reason})")


def _interrupt_z3() -> None:
    z3 = sys.modules.get("z3")  # only when an engine loaded it; never imported here
    if z3 is not None:
        with contextlib.suppress(Exception):
            z3.main_ctx().interrupt()


def _watch(read_fd: int, stop_fd: int) -> None:
    """Interrupt Z3 whenever a signal byte arrives; end when ``stop_fd`` is readable."""
    while True:
        ready, _, _ = select.select([read_fd, stop_fd], [], [])
        if stop_fd in ready:
            return
        try:
            data = os.read(read_fd, 64)
        except BlockingIOError:
            continue
        if data:
            _interrupt_z3()


_STOP_NAMES = ("Stopped", "TimeUp", "Terminated", "Interrupted")


def _is_stop(exc: BaseException | None) -> bool:
    """Whether ``exc`` is one of our stops, also as ctypes reports one raised while it converted an argument.

    A stop that lands inside a ctypes call (a Z3 object's finaliser calling
    ``Z3_dec_ref``) comes back as ``ArgumentError("argument 1: TimeUp: ...")``
    with the stop's type only in its message.
    """
    if isinstance(exc, Stopped):
        return True
    ctypes = sys.modules.get("ctypes")
    if ctypes is None or not isinstance(exc, ctypes.ArgumentError):
        return False
    _, _, rest = str(exc).partition(": ")
    return rest.split(":", 1)[0] in _STOP_NAMES


@contextlib.contextmanager
def limited(max_seconds: float | None = None) -> Iterator[None]:
    """Within the block, the time limit raises :class:`TimeUp` and SIGTERM :class:`Terminated`.

    Outside the main thread (signals cannot be handled there) the block runs
    unguarded and the engines' own deadline checks remain.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    # Python swallows an exception raised while a finaliser or a gc callback runs
    # ("Exception ignored in ..."), and Z3 objects have many: a stop is raised again
    # every REPEAT_SECONDS until an engine has reported it (stop_reason_of).
    pending: list[Stopped] = []

    def again(stop: Stopped) -> None:
        pending[:] = [stop]
        signal.setitimer(signal.ITIMER_REAL, REPEAT_SECONDS)
        raise stop

    def on_alarm(_sig: int, _frame: FrameType | None) -> None:
        if pending:
            if not pending[0].reported:
                again(pending[0])
            return
        if max_seconds is not None:
            again(TimeUp(f"time limit of {max_seconds}s reached"))

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        # Raised once: a second SIGTERM during the report is ignored, not a traceback.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        again(Terminated("terminated (SIGTERM)"))

    def on_int(_sig: int, _frame: FrameType | None) -> None:
        if pending:
            raise KeyboardInterrupt  # a second Ctrl-C: as without the guard
        again(Interrupted("interrupted (Ctrl-C)"))

    previous_hook = sys.unraisablehook

    def quiet_stops(unraisable: Any) -> None:
        # Our own stop, swallowed because it landed in a finaliser or a gc callback:
        # not worth a traceback (the alarm fires again); anything else is reported as usual.
        if not _is_stop(unraisable.exc_value):
            previous_hook(unraisable)

    read_fd, write_fd = os.pipe()
    stop_r, stop_w = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    old_term = signal.signal(signal.SIGTERM, on_term)
    old_int = signal.signal(signal.SIGINT, on_int)
    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch, args=(read_fd, stop_r), name="ownership-limits", daemon=True)
    watcher.start()
    sys.unraisablehook = quiet_stops
    try:
        if max_seconds is not None:
            signal.setitimer(signal.ITIMER_REAL, max(max_seconds, 0.001))
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_alarm)
        signal.signal(signal.SIGINT, old_int)
        sys.unraisablehook = previous_hook
        signal.set_wakeup_fd(old_wakeup)
        signal.signal(signal.SIGTERM, old_term)
        os.write(stop_w, b"x")
        watcher.join(timeout=1.0)
        for fd in (read_fd, write_fd, stop_r, stop_w):
            os.close(fd)
