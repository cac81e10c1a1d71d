"""Numbered, user-facing errors.

Every error a user can cause (a broken spec, an unknown parameter, a corrupt
trace file) is an :class:`OwnershipError` carrying a stable code, the file and
line it concerns, and a one-line message.  The CLI prints ``error[OWN0xx]:
file:line: message`` and exits with the error's exit code; it never shows a
Python traceback for these.
"""

from __future__ import annotations

import enum
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path


class ExitCode(enum.IntEnum):
    """Process exit codes shared by every command."""

    OK = 0
    VIOLATION = 1
    USAGE = 2
    INCONCLUSIVE = 3
    INTERNAL = 4


class Code(enum.Enum):
    """Stable error codes: (number, short title)."""

    SPEC_SYNTAX = (1, "spec does not parse")
    SPEC_IMPORT = (2, "spec raised while loading")
    SPEC_NO_SPEC = (3, "file defines no Spec")
    SPEC_INVALID = (4, "spec is malformed")
    SPEC_NO_INVARIANTS = (5, "spec declares no invariants")
    SPEC_RUNTIME = (6, "spec code raised while running an action or invariant")
    SPEC_NOT_BOOL = (65, "invariant or guard is not a bool")
    SPEC_NONDETERMINISTIC = (66, "action is not a deterministic function of the state")
    SPEC_IMPURE = (67, "spec code depends on something other than the state")
    UNKNOWN_PARAM = (10, "unknown parameter")
    BAD_PARAM = (11, "bad parameter value")
    UNKNOWN_INVARIANT = (12, "unknown invariant")
    BAD_OPTION = (13, "bad option")
    TRACE_CORRUPT = (20, "trace file is not a valid trace")
    TRACE_SPEC_MISSING = (21, "trace names a spec that cannot be found")
    REPLAY_DIVERGED = (22, "trace does not replay")
    RENDER_FAILED = (30, "rendering failed")
    NO_RENDERER = (31, "no graphviz renderer available")
    ENGINE_DISAGREEMENT = (40, "engines disagree")
    INTERNAL_REPLAY = (41, "engine produced a trace that does not replay")
    ADAPTER_LOAD = (50, "adapter cannot be loaded")
    ADAPTER_INVALID = (51, "adapter does not match its spec")

    @property
    def number(self) -> int:
        return self.value[0]

    @property
    def label(self) -> str:
        return f"OWN{self.value[0]:03d}"


_EXIT_FOR_CODE: dict[Code, ExitCode] = {
    Code.RENDER_FAILED: ExitCode.INTERNAL,
    Code.ENGINE_DISAGREEMENT: ExitCode.INTERNAL,
    Code.INTERNAL_REPLAY: ExitCode.INTERNAL,
    Code.REPLAY_DIVERGED: ExitCode.VIOLATION,
}


@dataclass
class OwnershipError(Exception):
    """An error caused by user input, reported as one line with file and line."""

    code: Code
    message: str
    file: str | None = None
    line: int | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def exit_code(self) -> ExitCode:
        """Exit code the CLI uses for this error (usage errors exit 2)."""
        return _EXIT_FOR_CODE.get(self.code, ExitCode.USAGE)

    def one_line(self) -> str:
        """``error[OWN004]: specs/x.py:12: message`` with no newline inside."""
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line is not None else f"{self.file}: "
        text = " ".join(self.message.split())
        return f"error[{self.code.label}]: {where}{text}"


def location_in(file: str | Path, exc: BaseException) -> int | None:
    """The innermost line of ``file`` in ``exc``'s traceback, if any."""
    target = str(Path(file).resolve())
    line: int | None = None
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            if str(Path(frame.filename).resolve()) == target:
                line = frame.lineno
        except OSError:  # pragma: no cover - unreadable paths
            continue
    return line


def caller_location(depth: int = 2) -> tuple[str | None, int | None]:
    """File and line of the code that called the function calling this one."""
    frame = sys._getframe(depth)
    return frame.f_code.co_filename, frame.f_lineno
