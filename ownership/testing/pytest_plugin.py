"""pytest plugin: check ownership specs as part of an existing test run.

Installed with the package (entry point ``pytest11``) and inactive until
asked for::

    pytest --ownership specs/                      # the specs next to the usual tests
    pytest --ownership --ownership-engine explore,bmc specs/sglang_disagg_v0_5_19.py

With ``--ownership`` every ``*.py`` file that imports ``ownership`` (not a
test module, not ``conftest.py``, not starting with ``_``) is loaded as a
spec and yields one test item per invariant and engine, e.g.
``specs/paged_alloc.py::no_foreign_read[explore]``.  Each spec is checked
once per engine; its items share that run.

Pass/fail is the decision ``ownership test`` makes (see
:mod:`ownership.core.expectation`): a spec declaring
``expect=violates(X)`` passes when the check finds a violation of ``X``; a
spec declaring ``expect=safe()`` passes only when PROVED.  An invariant the
run did not decide (it stopped at another violation first) is skipped with
the reason, and a spec that declares no ``expect=`` is skipped, as ``ownership
test`` does.  A failure shows the trace table and the paths of the
counterexample files (``--ownership-out DIR``, else pytest's temporary
directory).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ownership.inputs import DEFAULT_MAX_DOMAIN

if TYPE_CHECKING:
    from ownership.core.expectation import InvariantOutcome
    from ownership.core.result import CheckResult
    from ownership.lang.model import Spec
    from ownership.session import Outcome
    from ownership.session.run import Limits

_IMPORTS_OWNERSHIP = re.compile(rb"^[ \t]*(?:from|import)[ \t]+ownership\b", re.MULTILINE)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--ownership``, ``--ownership-engine``, ``--ownership-out``, ``--ownership-max-seconds``, ``--ownership-max-domain``."""
    group = parser.getgroup("ownership", "ownership: check KV-cache page ownership specs")
    group.addoption(
        "--ownership",
        action="store_true",
        default=False,
        help="Collect spec files (*.py importing ownership) as test items, one per invariant and engine.",
    )
    group.addoption(
        "--ownership-engine",
        action="append",
        default=None,
        metavar="ENGINE",
        help="Engine to check specs with: explore (default), bmc, hypothesis, prove, or all (explore, bmc and hypothesis); repeatable or comma-separated.",
    )
    group.addoption(
        "--ownership-out",
        default=None,
        metavar="DIR",
        help="Write counterexample files to DIR/<spec>/<engine>/ (default: pytest's temporary directory).",
    )
    group.addoption(
        "--ownership-max-seconds",
        type=float,
        default=None,
        metavar="S",
        help="Per-spec time limit (ini: ownership_max_seconds); a safe spec that hits it fails, "
             "as with `ownership test --max-seconds`.",
    )
    group.addoption(
        "--ownership-max-domain",
        type=int,
        default=None,
        metavar="N",
        help="Refuse (OWN017) a spec with a domain of more than N elements, as `--max-domain` does "
             f"(ini: ownership_max_domain; default {DEFAULT_MAX_DOMAIN}).",
    )
    parser.addini("ownership_max_seconds", "Per-spec time limit in seconds (the option --ownership-max-seconds wins).",
                  default=None)
    parser.addini("ownership_max_domain", "Largest domain a checked spec may have (the option --ownership-max-domain "
                  f"wins; default {DEFAULT_MAX_DOMAIN}).", default=None)


@dataclass(frozen=True)
class _Guards:
    """The guards of every check in this run: the command-line option, else the ini option, else the CLI's default."""

    max_seconds: float | None
    max_domain: int


def _limits() -> Limits:
    """The knobs the guards' messages name: the ini options (the command-line options are spelt alike)."""
    from ownership.session.run import Limits

    return Limits(max_domain="ownership_max_domain", max_seconds="ownership_max_seconds")


def _guards(config: pytest.Config) -> _Guards:
    """Read ``--ownership-max-seconds``/``--ownership-max-domain`` or their ini options; a bad ini value is a usage error."""
    seconds = config.getoption("ownership_max_seconds", default=None)
    domain = config.getoption("ownership_max_domain", default=None)
    try:
        if seconds is None and config.getini("ownership_max_seconds") not in (None, ""):
            seconds = float(config.getini("ownership_max_seconds"))
        if domain is None and config.getini("ownership_max_domain") not in (None, ""):
            domain = int(config.getini("ownership_max_domain"))
    except ValueError as exc:
        raise pytest.UsageError(f"ownership_max_seconds/ownership_max_domain: not a number ({exc})") from None
    return _Guards(seconds, DEFAULT_MAX_DOMAIN if domain is None else domain)


def _engines(config: pytest.Config) -> tuple[str, ...]:
    from ownership.engines import registry
    from ownership.errors import OwnershipError

    raw = config.getoption("ownership_engine") or [registry.DEFAULT]
    names: list[str] = []
    for item in raw:
        for name in (n.strip() for n in str(item).split(",")):
            if not name:
                continue
            try:
                # `all` is every engine of registry.ALL, each as its own items (the CLI's `all` compares them too).
                expanded = registry.expand(name)
            except OwnershipError:
                raise pytest.UsageError(
                    f"--ownership-engine {name!r}: unknown engine (available: {', '.join(registry.ENGINE_NAMES)})"
                ) from None
            names += [engine for engine in expanded if engine not in names]
    return tuple(names)


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``ownership`` marker and validate the engine names early."""
    config.addinivalue_line("markers", "ownership: a check of an ownership spec (added by --ownership)")
    if config.getoption("ownership", default=False):
        _engines(config)


def pytest_report_header(config: pytest.Config) -> str | None:
    """One header line saying that specs are collected, with which engines and where files go."""
    if not config.getoption("ownership", default=False):
        return None
    out = config.getoption("ownership_out") or "pytest's temporary directory"
    return f"ownership: specs checked with {', '.join(_engines(config))}; counterexamples to {out}"


def _is_spec_file(path: Path, config: pytest.Config) -> bool:
    """A ``.py`` file that imports ownership and is neither a test module, a conftest nor private."""
    if not config.getoption("ownership", default=False):
        return False
    if path.suffix != ".py" or path.name.startswith("_") or path.name == "conftest.py":
        return False
    if any(fnmatch.fnmatch(path.name, pattern) for pattern in config.getini("python_files")):
        return False  # a test module: pytest's own collector runs it
    try:
        head = path.read_bytes()
    except OSError:
        return False
    return _IMPORTS_OWNERSHIP.search(head) is not None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Spec files found while walking a folder."""
    if _is_spec_file(file_path, parent.config) and not parent.session.isinitpath(file_path):
        return SpecFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A spec file named on the command line: pytest would import it as a test module; check it instead."""
    if _is_spec_file(module_path, parent.config):
        return SpecFile.from_parent(parent, path=module_path)
    return None


class SpecLoadError(Exception):
    """A spec file that does not load; shown as its one-line ``error[OWN0xx]`` message."""


@dataclass(frozen=True)
class _Run:
    """One engine's check of one spec, shared by that spec's items."""

    result: CheckResult
    outcomes: dict[str, InvariantOutcome]
    files: tuple[str, ...]
    session: Outcome


class SpecFile(pytest.File):
    """A spec file: one item per invariant and engine; each engine runs once."""

    spec: Spec
    _runs: dict[str, _Run | BaseException]

    def collect(self) -> Iterator[pytest.Item]:
        from ownership.errors import Code, OwnershipError
        from ownership.lang.loader import load_spec

        try:
            self.spec = load_spec(self.path)
        except OwnershipError as exc:
            if exc.code is Code.SPEC_NO_SPEC:
                return  # imports ownership but defines no spec: a helper module, not ours to check
            raise SpecLoadError(exc.one_line()) from None
        self._runs: dict[str, _Run | BaseException] = {}
        for engine in _engines(self.config):
            for name in self.spec.invariants:
                item = SpecItem.from_parent(self, name=f"{name}[{engine}]", invariant=name, engine=engine)
                item.add_marker("ownership")
                yield item

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, SpecLoadError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def run(self, engine: str) -> _Run:
        """The check of this spec with ``engine`` (run on first use, then shared)."""
        cached = self._runs.get(engine)
        if cached is None:
            try:
                cached = self._check(engine)
            except Exception as exc:  # noqa: BLE001 - every item of this engine reports the same error
                cached = exc
            self._runs[engine] = cached
        if isinstance(cached, BaseException):
            raise cached
        return cached

    def _check(self, engine: str) -> _Run:
        from ownership.core.expectation import Status, invariant_outcomes
        from ownership.testing.assertions import check_outcome

        guards = _guards(self.config)
        session = check_outcome(self.spec, engine, max_seconds=guards.max_seconds, max_domain=guards.max_domain,
                                limits=_limits())
        result = session.result
        outcomes = {o.invariant: o for o in invariant_outcomes(result, self.spec.expect)}
        files: tuple[str, ...] = ()
        violated = outcomes.get(result.violated or "")
        if result.trace is not None and violated is not None and violated.status is Status.FAILED:
            files = self._write(result, engine)  # only a failure's trace is worth a file; an expected one is not
        return _Run(result, outcomes, files, session)

    def _write(self, result: CheckResult, engine: str) -> tuple[str, ...]:
        """The counterexample's files (a renderer failure keeps the text files and says so)."""
        from ownership.session import write_trace

        assert result.trace is not None
        out = self.config.getoption("ownership_out")
        if out is not None:
            folder = Path(out) / self.spec.name / engine
        else:
            factory = getattr(self.config, "_tmp_path_factory", None)  # set by pytest's tmp_path plugin
            if factory is not None:
                folder = factory.mktemp(f"ownership-{self.spec.name}-{engine}", numbered=True)
            else:  # pragma: no cover - only with -p no:tmpdir
                import tempfile

                folder = Path(tempfile.mkdtemp(prefix=f"ownership-{self.spec.name}-{engine}-"))
        written, error = write_trace(result.trace, folder, ("svg",))
        note = (f"(no picture: {error.one_line()})",) if error is not None else ()
        return (*(str(p) for p in written), *note)


class SpecFailureError(Exception):
    """An item whose invariant did not meet the spec's expectation; its text is the report."""


class SpecItem(pytest.Item):
    """One invariant of one spec under one engine."""

    def __init__(self, *, invariant: str, engine: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.invariant = invariant
        self.engine = engine

    @property
    def spec_file(self) -> SpecFile:
        assert isinstance(self.parent, SpecFile)
        return self.parent

    def runtest(self) -> None:
        spec = self.spec_file.spec
        if spec.expect is None:
            raise pytest.skip.Exception(
                f"{spec.name} declares no expected verdict (add expect=safe() or expect=violates(...))",
                _use_item_location=True,
            )
        run = self.spec_file.run(self.engine)
        from ownership.core.expectation import Status

        # pytest's JUnit XML carries it: a sampled (random) run never reads as a proof.
        kind = run.result.coverage_kind
        self.user_properties.append(("coverage_kind", kind.value if kind is not None else "exhaustive"))

        outcome = run.outcomes[self.invariant]
        if outcome.status is Status.PASSED:
            return
        from ownership.core.result import CoverageKind

        if kind is CoverageKind.SAMPLED and run.result.violated is None and spec.expect.violates is None:
            # Random walks cannot establish safe(): neither a pass nor the spec's fault.  A skip
            # with the coverage keeps the run honest without failing every `--ownership-engine all`.
            raise pytest.skip.Exception(
                f"{self.engine} samples executions and cannot confirm {spec.expect.describe()}: "
                f"{run.result.coverage()}",
                _use_item_location=True,
            )
        if outcome.status is Status.UNDECIDED:
            # Reported at the item (the spec's invariant), not at this line of the plugin.
            raise pytest.skip.Exception(outcome.message, _use_item_location=True)
        raise SpecFailureError(self._report(run, outcome.message))

    def _report(self, run: _Run, message: str) -> str:
        from ownership.testing.assertions import failure_report, time_limit_hint

        spec = self.spec_file.spec
        assert spec.expect is not None
        lines = [
            f"{spec.name}: {self.invariant} ({self.engine}): {message}",
            f"  expected: {spec.expect.describe()}",
            "",
        ]
        shown = self._shown_path()
        reproduce = None if run.session.stopped_in_setup else run.session.reproduce_at(shown)
        lines += time_limit_hint(run.result, _limits())
        lines += failure_report(run.result, spec, shown, reproduce)
        if run.files:
            lines += ["", "  files: " + ", ".join(run.files)]
            trace_json = next((f for f in run.files if f.endswith("trace.json")), None)
            if trace_json is not None:
                lines.append(f"  replay: ownership replay {trace_json}")
        return "\n".join(lines)

    def _shown_path(self) -> str:
        try:
            return str(self.path.relative_to(Path.cwd()))
        except ValueError:
            return str(self.path)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:  # type: ignore[override]
        from ownership.errors import OwnershipError

        if isinstance(excinfo.value, SpecFailureError):
            return str(excinfo.value)
        if isinstance(excinfo.value, OwnershipError):
            return excinfo.value.one_line()
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, int, str]:
        spec = self.spec_file.spec
        inv = spec.invariants.get(self.invariant)
        # The invariant's line when the spec file defines it, else the spec's declaration
        # (built-in invariants live in ownership.vocab).  pytest's lines are 0-based.
        line = 0
        for file, at in ((inv.file, inv.line) if inv is not None else (None, None), (spec.file, spec.line)):
            if file is not None and at is not None and _same_file(file, self.path):
                line = at - 1
                break
        return self.path, line, f"{spec.name}::{self.invariant}[{self.engine}]"


def _same_file(a: str | Path, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:  # pragma: no cover - unreadable paths
        return False
