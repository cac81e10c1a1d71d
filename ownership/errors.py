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
    NOT_COVERED = 5  # preflight: no library spec models this deployment, so it is neither SAFE nor UNSAFE
    BAD_DEPLOYMENT = 6  # preflight: a deployment file is unreadable, incomplete or contradicts itself


class Code(enum.Enum):
    """Stable error codes: (number, short title)."""

    SPEC_SYNTAX = (1, "spec does not parse")
    SPEC_IMPORT = (2, "spec raised while loading")
    SPEC_NO_SPEC = (3, "file defines no Spec")
    SPEC_INVALID = (4, "spec is malformed")
    SPEC_NO_INVARIANTS = (5, "spec declares no invariants")
    SPEC_RUNTIME = (6, "spec code raised while running an action or invariant")
    PARAM_DECLARATION = (7, "a parameter declaration is malformed (its range, or a default outside it)")
    REDEFINITION_IGNORED = (8, "a derived spec redefines a function of its base in a way that changes nothing")
    SPEC_INVARIANT_STEP = (64, "invariant reads or marks a step (s.flag, s.emit, s.events), not the state")
    SPEC_NOT_BOOL = (65, "invariant or guard is not a bool")
    SPEC_NONDETERMINISTIC = (66, "action is not a deterministic function of the state")
    SPEC_IMPURE = (67, "spec code depends on something other than the state")
    UNKNOWN_PARAM = (10, "unknown parameter")
    BAD_PARAM = (11, "bad parameter value")
    UNKNOWN_INVARIANT = (12, "unknown invariant")
    BAD_OPTION = (13, "bad option")
    OUTPUT_PATH = (14, "output path cannot be written")
    BAD_NUMBER = (15, "numeric option out of range")
    PARAM_CONFLICT = (16, "parameter given twice or both fixed and free")
    INSTANCE_TOO_LARGE = (17, "instance too large")
    SPEC_UNREADABLE = (18, "spec file is not Python source text")
    TRACE_MISMATCH = (19, "trace does not fit its spec")
    TRACE_CORRUPT = (20, "trace file is not a valid trace")
    TRACE_SPEC_MISSING = (21, "trace names a spec that cannot be found")
    REPLAY_DIVERGED = (22, "trace does not replay")
    RENDER_FAILED = (30, "rendering failed")
    NO_RENDERER = (31, "no graphviz renderer available")
    ENGINE_DISAGREEMENT = (40, "engines disagree")
    INTERNAL_REPLAY = (41, "engine produced a trace that does not replay")
    ADAPTER_LOAD = (50, "adapter cannot be loaded")
    ADAPTER_INVALID = (51, "adapter does not match its spec")
    SYMMETRY_BROKEN = (60, "spec code orders or computes with elements of a symmetric domain")
    SYMMETRY_MISMATCH = (61, "a symmetric domain's permutations do not commute with an action or invariant")
    BAD_VALUE = (62, "value written does not have the variable's declared type")
    WRONG_DOMAIN = (63, "index or reference of the wrong domain")
    DEAD_ACTION = (70, "an action never fired (the verdict may be vacuous)")
    UNREGISTERED_ACTION = (71, "a function looks like an action but is not registered")
    ALLOC_EXCEEDS_POOL = (72, "an allocation asks for more pages than the pool has")
    NOTHING_ENABLED = (73, "no action is enabled in the initial state")
    BAD_MAY_BE_DEAD = (74, "a may_be_dead declaration is malformed")
    PREFLIGHT_UNREADABLE = (75, "a deployment file cannot be read")
    PREFLIGHT_MISSING = (76, "a deployment file lacks the configuration preflight reads")
    PREFLIGHT_CONTRADICTORY = (77, "deployment files contradict each other or themselves")
    PREFLIGHT_VERSION = (78, "the engine version is unknown or unreadable")
    MUTATE_BASELINE = (80, "the unmutated spec does not have its expected verdict")
    MUTATE_NOTHING = (81, "the spec file defines no code to mutate")
    MUTATE_STALE_ACCEPT = (82, "an accepted mutant matches no mutant of the spec")
    MUTATE_BASELINE_LIMIT = (83, "the unmutated spec is not decided within the time limit")
    MUTATE_EXPECTS_VIOLATION = (97, "mutation testing needs a safe spec; this one demonstrates a violation")
    MONITOR_BAD_EVENT = (84, "a monitor event or event-log record is malformed")
    LOG_NOT_JSON = (85, "an event log line is not a JSON object")
    LOG_SCHEMA = (86, "an event log line lacks a field or has one of the wrong type")
    LOG_SEQ = (87, "an event log's seq numbers skip or repeat")
    LOG_UNKNOWN_ID = (88, "an event log names a node or page its header does not have")
    LOG_MISFIT = (89, "an event log does not fit the spec it is validated against")
    LOG_RULE_INVALID = (92, "a spec's event-log declaration (log_ids, logs) is malformed")
    DEADLINE_INVALID = (90, "a deadline declaration is malformed")
    REGIONS_NO_TRANSFERS = (91, "a registration invariant watches no posted transfers")

    CONTENT_HASH_TOO_SMALL = (100, "an injective hash needs at least as many hash values as content keys")
    CONTENT_NO_SCOPES = (101, "a content-index operation names a scope, but the index declares no scopes")
    CONTENT_ALSO_NOT_INDEX = (102, "a content index's also= names something that is not an index")
    CONTENT_BAD_KEYS = (103, "a content index's keys are empty or repeated")

    CACHE_INVALID = (105, "a cache or a pair of caches is declared wrongly")

    INSTANCE_NOT_PORTABLE = (106, "an instance cannot be rebuilt from its description")

    NEGATIVE_COUNT = (113, "a vocabulary operation is given a negative count of pages or a negative slot")
    PROPERTY_INVALID = (114, "a temporal property or a fairness declaration is malformed")
    PROPERTY_UNDECIDED = (115, "a temporal property was not decided by this engine")

    OPERATIONS_INVALID = (95, "a declaration of operations per request or of jobs is malformed")
    COUNTER_NOT_INT = (96, "counters_nonnegative names a variable that is not a declared integer")

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
    Code.PREFLIGHT_UNREADABLE: ExitCode.BAD_DEPLOYMENT,
    Code.PREFLIGHT_MISSING: ExitCode.BAD_DEPLOYMENT,
    Code.PREFLIGHT_CONTRADICTORY: ExitCode.BAD_DEPLOYMENT,
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


@dataclass(frozen=True)
class SpecWarning:
    """Something that makes a safe verdict say less than it seems to, with where it is.

    Printed as ``warning[OWN0xx]: file:line: message``.  A check still exits 0
    with warnings; ``ownership test`` fails on them (see
    :mod:`ownership.core.expectation`).  ``subject`` names what the warning is
    about (an action or function name) so reports can group and fingerprint it.
    """

    code: Code
    message: str
    file: str | None = None
    line: int | None = None
    subject: str = ""

    def one_line(self) -> str:
        """``warning[OWN070]: specs/x.py:12: message`` with no newline inside."""
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line is not None else f"{self.file}: "
        text = " ".join(self.message.split())
        return f"warning[{self.code.label}]: {where}{text}"


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
