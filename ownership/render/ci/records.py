"""The record of one spec's run that every CI report reads.

A :class:`SpecRun` holds the engine's :class:`~ownership.core.result.CheckResult`
plus what the reports need from the spec (where its actions and invariants are
defined) and the counterexample files written; :func:`spec_run`,
:func:`skipped_run` and :func:`error_run` build one.  Pass/fail per invariant
comes from :mod:`ownership.core.expectation`, the same decision ``ownership
test`` and the pytest plugin make.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ownership.core.expectation import InvariantOutcome, invariant_outcomes, judge
from ownership.core.result import CheckResult, Verdict
from ownership.errors import ExitCode, OwnershipError
from ownership.lang.declarations import Derived, Expect
from ownership.lang.model import Spec

Mode = Literal["check", "test", "prove"]


@dataclass(frozen=True)
class Location:
    """A file and line in spec source (``line`` is 1-based)."""

    file: str | None
    line: int | None


@dataclass(frozen=True)
class SpecRun:
    """One spec's check as the reports need it.

    ``result`` is ``None`` when the spec was not checked: ``skipped`` then
    says why (``ownership test`` skips specs with no ``expect=``), or
    ``error`` holds the one-line error that stopped it.
    """

    spec: str
    path: str
    mode: Mode = "check"
    result: CheckResult | None = None
    expect: Expect | None = None
    spec_location: Location = Location(None, None)
    actions: Mapping[str, Location] = field(default_factory=dict)
    invariants: Mapping[str, Location] = field(default_factory=dict)
    invariant_docs: Mapping[str, str] = field(default_factory=dict)
    ghosts: tuple[str, ...] = ()
    derived: tuple[Derived, ...] = ()
    files: tuple[str, ...] = ()
    skipped: str | None = None
    error: str | None = None
    error_location: Location = Location(None, None)
    allow_vacuous: bool = False
    """``--allow-vacuous``: a vacuous safe verdict passes (with its warnings) instead of being inconclusive."""

    @property
    def outcomes(self) -> tuple[InvariantOutcome, ...]:
        """One outcome per invariant (empty for a skipped or failed-to-load spec)."""
        if self.result is None:
            return ()
        return invariant_outcomes(self.result, self.expect if self.mode == "test" else None,
                                  allow_vacuous=self.allow_vacuous)

    @property
    def status(self) -> str:
        """``passed``, ``failed``, ``inconclusive``, ``skipped`` or ``error`` for the spec as a whole."""
        if self.error is not None:
            return "error"
        if self.result is None:
            return "skipped"
        if self.mode == "test" and self.expect is not None:
            return "passed" if judge(self.expect, self.result).ok else "failed"
        if self.result.verdict is Verdict.VIOLATED:
            return "failed"
        if self.result.exit_code_allowing(self.allow_vacuous) is ExitCode.INCONCLUSIVE:
            return "inconclusive"  # UNKNOWN, or a vacuous safe verdict the user did not accept
        return "passed"

    @property
    def violation_location(self) -> Location | None:
        """Where the violation happens: the action of the trace's last step, else the invariant."""
        result = self.result
        if result is None or result.violated is None or result.trace is None:
            return None
        if result.trace.steps:
            loc = self.actions.get(result.trace.steps[-1].action)
            if loc is not None and loc.file is not None:
                return loc
        return self.invariants.get(result.violated) or self.spec_location


def _def_line(file: str | None, line: int | None) -> int | None:
    """The ``def`` line of a function whose code starts at ``line`` (its first decorator)."""
    if file is None or line is None:
        return line
    try:
        lines = Path(file).read_text(encoding="utf-8").splitlines()
    except OSError:
        return line
    for i in range(line - 1, min(len(lines), line + 20)):
        if lines[i].lstrip().startswith(("def ", "async def ")):
            return i + 1
    return line


def spec_run(
    spec: Spec,
    path: str | Path,
    result: CheckResult,
    *,
    mode: Mode = "check",
    files: Iterable[str | Path] = (),
    allow_vacuous: bool = False,
) -> SpecRun:
    """The record of one checked spec; in ``test`` mode its declared ``expect=`` decides pass/fail."""
    return SpecRun(
        spec=spec.name,
        path=str(path),
        mode=mode,
        result=result,
        expect=spec.expect,
        spec_location=Location(spec.file, spec.line),
        actions={n: Location(a.file, _def_line(a.file, a.line)) for n, a in spec.actions.items()},
        invariants=checked_locations(spec),
        invariant_docs=checked_docs(spec),
        ghosts=tuple(v.name for v in spec.vars.values() if v.ghost),
        derived=tuple(spec.derived_values.values()),
        files=tuple(str(f) for f in files),
        allow_vacuous=allow_vacuous,
    )


def skipped_run(spec: Spec, path: str | Path, reason: str, *, mode: Mode = "test") -> SpecRun:
    """The record of a spec that was loaded but not checked, and why."""
    return SpecRun(
        spec=spec.name,
        path=str(path),
        mode=mode,
        spec_location=Location(spec.file, spec.line),
        invariants=checked_locations(spec),
        invariant_docs=checked_docs(spec),
        skipped=reason,
    )


def error_run(path: str | Path | None, exc: OwnershipError, *, mode: Mode = "check") -> SpecRun:
    """The record of a spec whose check stopped with a user error (a broken spec, a bad option)."""
    where = path if path is not None else exc.file
    name = Path(where).stem if where is not None else "(no spec)"
    return SpecRun(
        spec=name,
        path=str(where) if where is not None else "",
        mode=mode,
        error=exc.one_line(),
        error_location=Location(exc.file, exc.line),
    )


def checked_locations(spec: Spec) -> dict[str, Location]:
    """Where each invariant and temporal property is declared (one report entry each)."""
    out = {n: Location(i.file, _def_line(i.file, i.line)) for n, i in spec.invariants.items()}
    out.update({n: Location(p.file, p.line) for n, p in spec.properties.items()})  # the declaring call's line
    return out


def checked_docs(spec: Spec) -> dict[str, str]:
    """The first-line documentation of each invariant and temporal property (a property's: its formula)."""
    docs = {n: i.doc for n, i in spec.invariants.items()}
    docs.update({n: p.doc or p.formula() for n, p in spec.properties.items()})
    return docs
