"""The one result type every engine returns."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ownership.core.memory import format_size
from ownership.core.trace import Trace
from ownership.errors import Code, ExitCode, SpecWarning


class Verdict(enum.IntEnum):
    """How safe the spec is known to be; ordered from worst to best."""

    VIOLATED = 0
    UNKNOWN = 1
    BOUNDED_OK = 2
    PROVED = 3

    @property
    def exit_code(self) -> ExitCode:
        if self is Verdict.VIOLATED:
            return ExitCode.VIOLATION
        if self is Verdict.UNKNOWN:
            return ExitCode.INCONCLUSIVE
        return ExitCode.OK


class StopReason(enum.Enum):
    """Why an engine stopped; each says what was (not) covered."""

    VIOLATION = "found a violation"
    DEADLOCK = "found a deadlock"
    EXHAUSTED = "explored every reachable state"
    DEPTH_LIMIT = "reached the depth limit"
    STATE_LIMIT = "reached the state limit"
    TIME_LIMIT = "reached the time limit"
    MEMORY_LIMIT = "reached the memory limit"
    INTERRUPTED = "interrupted"
    SOLVER_UNKNOWN = "got 'unknown' from the solver"
    INDUCTION = "closed an induction proof"
    INDUCTION_FAILED = "could not close the induction proof"
    INVARIANT_FOUND = "found an inductive invariant"
    EXAMPLES_DONE = "ran every requested random example"
    DISAGREEMENT = "found a step where the implementation and the spec disagree"
    NOTHING_ENABLED = "found no action enabled in the initial state, so nothing ever runs"


class Measure(enum.Enum):
    """How an engine counted the firings of each action."""

    EXACT = "exact"
    """Every state the engine explored was expanded and counted (explore, prove's reachable set)."""
    SAMPLED = "sampled"
    """Counted along random runs (hypothesis): an action may fire in states no run visited."""
    BOUNDED = "bounded search"
    """A separate concrete breadth-first search with a state budget (bmc, prove by induction or Spacer)."""


@dataclass(frozen=True)
class ActionCoverage:
    """How often one action fired in a check: the states where it was enabled, the steps it took.

    ``states``, ``depth`` and ``complete`` describe what the measurement looked
    at: ``complete`` means every reachable state of the instance (up to
    symmetry) was expanded, so an action with no transitions can never fire
    there.  ``may_be_dead`` is the spec's reason, when it declares the action
    may never fire.
    """

    name: str
    enabled_states: int | None
    """States in which some instance of the action was enabled (``None``: not measured)."""
    transitions: int
    measured: Measure
    states: int
    depth: int
    complete: bool
    may_be_dead: str | None = None
    file: str | None = None
    line: int | None = None

    @property
    def fired(self) -> bool:
        return self.transitions > 0

    def scope(self) -> str:
        """What the count covers, e.g. ``the 435 reachable states``."""
        if self.measured is Measure.SAMPLED:
            return f"the {self.states:,} distinct states the random runs visited"
        if self.complete:
            return f"the {self.states:,} reachable states"
        if self.measured is Measure.EXACT:
            return f"the {self.states:,} states the search expanded (within depth {self.depth})"
        return f"a breadth-first search of {self.states:,} states to depth {self.depth}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "enabled_states": self.enabled_states,
            "transitions": self.transitions,
            "measured": self.measured.value,
            "states": self.states,
            "depth": self.depth,
            "complete": self.complete,
            "may_be_dead": self.may_be_dead,
        }


def dead_action_warning(a: ActionCoverage) -> SpecWarning:
    """The warning for an action that never fired, saying what the count covered."""
    if a.measured is Measure.SAMPLED:
        seen = f"never fired in {a.scope()} (random testing)"
    elif a.complete:
        seen = f"never fired: it is enabled in none of {a.scope()}"
    else:
        seen = f"was not seen to fire in {a.scope()}"
    if a.complete or a.measured is Measure.SAMPLED:
        why = "a guard that never holds, or an instance too small for it?"
    else:
        why = "a bound too small to reach it (raise --max-depth), or a guard that never holds?"
    return SpecWarning(
        Code.DEAD_ACTION,
        f"action {a.name} {seen}, so the verdict says nothing about what it does ({why}); if that is intended, "
        f'declare it: @spec.action(may_be_dead="why") or spec.may_be_dead({a.name!r}, reason="why")',
        a.file,
        a.line,
        a.name,
    )


_WARNING_PHRASES = {
    Code.UNREGISTERED_ACTION: "function {subject} is not a registered action",
    Code.ALLOC_EXCEEDS_POOL: "{subject} asks for more pages than the pool has",
    Code.NOTHING_ENABLED: "no action of {subject} is enabled in the initial state",
}
"""The short phrase of each warning that qualifies a verdict (others: ``subject: the code's title``)."""


class CoverageKind(enum.Enum):
    """What kind of coverage an engine gives: what a verdict without a violation can claim."""

    EXHAUSTIVE = "exhaustive"
    """Every reachable state of the instance, or of those up to a stated depth (explore)."""
    BOUNDED = "bounded"
    """Every execution up to a stated depth, checked by a solver (bmc)."""
    SAMPLED = "sampled"
    """Random interleavings: a pass means none of the sampled ones fails, nothing more (hypothesis, mbt)."""
    PROOF = "proof"
    """Executions of any length, by induction or an inductive invariant (prove)."""


_ENGINE_KIND = {
    "explore": CoverageKind.EXHAUSTIVE,
    "bmc": CoverageKind.BOUNDED,
    "prove": CoverageKind.PROOF,
    "hypothesis": CoverageKind.SAMPLED,
    "mbt": CoverageKind.SAMPLED,
}


@dataclass(frozen=True)
class Stats:
    """What an engine covered: distinct states, transitions, depth, time, and what storing them cost.

    ``peak_memory`` is the process's peak resident memory during the run,
    in bytes.  ``bytes_per_state`` is how much the resident memory grew
    while searching, divided by the states stored: an upper bound on what
    one state costs, since the interpreter's own arenas, garbage and the
    frontier count too.  ``storage`` says how states were stored
    (``exact (dict of states)``; a search storing fingerprints says so and
    estimates its collisions there).  ``None``: the engine did not measure it.
    """

    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    peak_memory: int | None = None
    bytes_per_state: float | None = None
    storage: str | None = None

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else float(self.states)

    def memory_line(self) -> str | None:
        """``peak memory 412 MiB, at most 230 B per stored state, storage exact (dict of states)`` (``None``: not measured)."""
        parts = []
        if self.peak_memory is not None:
            parts.append(f"peak memory {format_size(self.peak_memory)}")
        if self.bytes_per_state is not None:
            parts.append(f"at most {format_size(self.bytes_per_state)} per stored state")
        if self.storage is not None:
            parts.append(f"storage {self.storage}")
        return ", ".join(parts) if parts else None

    def to_json(self) -> dict[str, Any]:
        """The statistics as a JSON object (``--json``); unmeasured memory figures are ``null``."""
        return {
            "states": self.states,
            "transitions": self.transitions,
            "depth": self.depth,
            "seconds": round(self.seconds, 6),
            "peak_memory_bytes": self.peak_memory,
            "bytes_per_state": round(self.bytes_per_state, 1) if self.bytes_per_state is not None else None,
            "storage": self.storage,
        }


@dataclass(frozen=True)
class CheckResult:
    """Verdict, stop reason, coverage and (for a violation) a replayed trace."""

    spec: str
    engine: str
    verdict: Verdict
    stop_reason: StopReason
    stats: Stats
    params: Mapping[str, Any]  # "free" for a symbolic parameter
    invariants: tuple[str, ...]
    violated: str | None = None
    trace: Trace | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    extremum: tuple[str, int] | None = None
    reproduction: str | None = None
    """Code that reproduces the failure (the random engines print Hypothesis' steps)."""
    actions: tuple[ActionCoverage, ...] = ()
    """How often each action fired (every engine; see :class:`ActionCoverage`)."""
    warnings: tuple[SpecWarning, ...] = ()
    """What the spec and the run were warned about (an unregistered action, an impossible allocation)."""
    coverage_kind: CoverageKind | None = None
    """The engine's kind of coverage; engines set it (``None``: inferred from the engine's name)."""
    properties: tuple[str, ...] = ()
    """The temporal properties the engine decided (on every fair path; explore only), beside the invariants."""
    shortest: str | None = None
    """How the counterexample is a shortest one (``breadth-first``), as the engine's capabilities declare it;
    ``None``: not promised.  Set when the registry runs the engine."""

    def __post_init__(self) -> None:
        if self.coverage_kind is None:
            object.__setattr__(self, "coverage_kind", _ENGINE_KIND.get(self.engine, CoverageKind.EXHAUSTIVE))

    @property
    def sampled(self) -> bool:
        """Whether a pass only means that no sampled run failed (random testing)."""
        return self.coverage_kind is CoverageKind.SAMPLED

    @property
    def exit_code(self) -> ExitCode:
        """The verdict's exit status; a vacuous safe verdict is inconclusive (3), never a pass.

        A safe verdict that did not see part of the spec (:meth:`vacuity`)
        says nothing about that part, so it is not reported as safe: the
        commands exit 3 for it unless the user opts in (``--allow-vacuous``,
        :meth:`exit_code_allowing`) or the spec declares the action
        ``may_be_dead``.
        """
        return ExitCode.INCONCLUSIVE if self.vacuous else self.verdict.exit_code

    def exit_code_allowing(self, allow_vacuous: bool) -> ExitCode:
        """:attr:`exit_code`, or the bare verdict's status when the user accepts vacuous verdicts."""
        return self.verdict.exit_code if allow_vacuous else self.exit_code

    @property
    def safe(self) -> bool:
        """PROVED or BOUNDED_OK: the verdicts a vacuity warning qualifies."""
        return self.verdict in (Verdict.PROVED, Verdict.BOUNDED_OK)

    @property
    def action_counts(self) -> Mapping[str, int] | None:
        """Transitions per action (``None`` when the engine counted nothing)."""
        return {a.name: a.transitions for a in self.actions} if self.actions else None

    def dead_actions(self) -> tuple[ActionCoverage, ...]:
        """Actions that never fired and that the spec does not declare may be dead."""
        return tuple(a for a in self.actions if not a.fired and a.may_be_dead is None)

    def vacuity(self) -> tuple[SpecWarning, ...]:
        """Every warning that qualifies this result: dead actions (safe verdicts only), then the rest.

        An engine that stops at a violation has not looked at every action,
        so dead actions qualify only a safe verdict; the spec's own warnings
        qualify every verdict.
        """
        dead = tuple(dead_action_warning(a) for a in self.dead_actions()) if self.safe else ()
        return dead + tuple(self.warnings)

    @property
    def vacuous(self) -> bool:
        """A safe verdict qualified by a warning: ``ownership test`` fails on it."""
        return self.safe and bool(self.vacuity())

    def vacuity_phrases(self) -> tuple[str, ...]:
        """What makes this result vacuous, in short phrases: ``action cleanup never fired``, ...

        The one wording every surface uses (the headline, ``ownership test``,
        the CI reports, the HTML badge's title); empty when nothing qualifies
        the verdict.
        """
        out: list[str] = []
        dead = self.dead_actions() if self.safe else ()
        if dead:
            word = "never fired" if all(a.complete or a.measured is Measure.SAMPLED for a in dead) else "not seen to fire"
            names = ", ".join(a.name for a in dead)
            out.append(f"action{'' if len(dead) == 1 else 's'} {names} {word}")
        for w in self.warnings:
            out.append(_WARNING_PHRASES.get(w.code, "{subject}: " + w.code.value[1]).format(subject=w.subject))
        return tuple(out)

    def qualifier(self) -> str:
        """``vacuous: 1 action never fired: cleanup`` (empty when nothing qualifies the verdict).

        The headline's parenthesis after PROVED or BOUNDED_OK: the verdict
        keeps its word, the qualifier says what it did not see.
        """
        parts: list[str] = []
        dead = self.dead_actions() if self.safe else ()
        if dead:
            word = "never fired" if all(a.complete or a.measured is Measure.SAMPLED for a in dead) else "not seen to fire"
            parts.append(f"{len(dead)} action{'' if len(dead) == 1 else 's'} {word}: {', '.join(a.name for a in dead)}")
        if self.warnings:
            n = len(self.warnings)
            more = "more " if parts else ""
            codes = ", ".join(dict.fromkeys(w.code.label for w in self.warnings))
            parts.append(f"{n} {more}warning{'' if n == 1 else 's'}: {codes}")
        return "vacuous: " + "; ".join(parts) if parts else ""

    def coverage(self) -> str:
        """One sentence saying exactly what was checked (written by :mod:`ownership.core.verdicts`)."""
        from ownership.core.verdicts import coverage

        return coverage(self)
