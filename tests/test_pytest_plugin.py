"""The pytest plugin (`pytest --ownership specs/`) and the assertion helpers.

Inner pytest runs use `pytester` with plugin autoloading off and the plugin
named with -p, so they test this source tree whether or not the package's
entry point is installed; one subprocess run checks the entry point itself.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ownership.engines.bmc  # noqa: F401 - see below
import ownership.engines.explore  # noqa: F401
import ownership.symbolic.encoding  # noqa: F401
from conftest import CORPUS
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.lang.loader import load_spec
from ownership.testing.assertions import assert_safe, assert_violates

pytest_plugins = ["pytester"]
# In-process pytester runs drop the modules they imported from sys.modules
# afterwards; a later import then makes second copies of the engine modules
# whose classes no longer match the objects other tests hold.  Importing the
# engines above keeps one copy for the whole session.

PLUGIN = "ownership.testing.pytest_plugin"


def invariants_of(name: str) -> list[str]:
    return list(load_spec(CORPUS / f"{name}.py").invariants)


@pytest.fixture
def specs(pytester: pytest.Pytester) -> Path:
    """The corpus specs copied into the inner run's folder as specs/."""
    folder = pytester.path / "specs"
    folder.mkdir()
    for path in CORPUS.glob("*.py"):
        shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def go(*args: str) -> pytest.RunResult:
        # The plugin module is already imported in this process: pytest cannot assert-rewrite it again.
        quiet = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
        return pytester.runpytest("-p", PLUGIN, "-p", "no:cacheprovider", *quiet, *args)

    return go


def test_one_item_per_invariant_and_engine(run, specs: Path) -> None:  # type: ignore[no-untyped-def]
    res = run("--ownership", "--collect-only", "-q", "specs")
    ids = {line.strip() for line in res.stdout.lines if "::" in line}
    want = {
        f"specs/{name}.py::{inv}[explore]"
        for name in ("toy_deadlock", "toy_double_free", "toy_safe_counter")
        for inv in invariants_of(name)
    }
    assert ids == want
    res = run("--ownership", "--ownership-engine", "explore,bmc", "--collect-only", "-q", "specs/toy_safe_counter.py")
    ids = {line.strip() for line in res.stdout.lines if "::" in line}
    assert ids == {
        f"specs/toy_safe_counter.py::{inv}[{e}]"
        for inv in invariants_of("toy_safe_counter")
        for e in ("explore", "bmc")
    }


def test_declared_violation_passes_next_to_ordinary_tests(run, specs: Path, pytester: pytest.Pytester) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_engine="def test_engine_code():\n    assert 1 + 1 == 2\n")
    res = run("--ownership", "-rs", "specs", "test_engine.py")
    n_free = len(invariants_of("toy_double_free"))
    # toy_double_free expects violates(no_double_ownership): that item passes; the run stopped there,
    # so its other invariants are undecided (skipped, never reported as holding).
    passed = 1 + len(invariants_of("toy_deadlock")) + len(invariants_of("toy_safe_counter")) + 1
    res.assert_outcomes(passed=passed, skipped=n_free - 1)
    res.stdout.fnmatch_lines(
        ["*specs/toy_double_free.py:*not decided: the check stops at the first violation (no_double_ownership)*"]
    )


def test_failure_shows_the_trace_table_and_the_files(run, pytester: pytest.Pytester, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = (CORPUS / "toy_double_free.py").read_text()
    pytester.path.joinpath("wrong.py").write_text(
        text.replace('violates("no_double_ownership")', 'violates("no_foreign_read")')
    )
    out = tmp_path / "ce"
    res = run("--ownership", "--ownership-out", str(out), "wrong.py")
    # The unexpected violation fails, and so does the expected one that was never reached.
    res.assert_outcomes(failed=2, skipped=len(invariants_of("toy_double_free")) - 2)
    res.stdout.fnmatch_lines(
        [
            "*toy_double_free::no_double_ownership[[]explore[]]*",
            "toy_double_free: no_double_ownership (explore): no_double_ownership is violated after start(B)*",
            "  expected: violates no_foreign_read",
            "*Counterexample: 4 steps (shortest: breadth-first), replayed through the spec",
            "*abort_after_finish(A)*",
            "  reproduce: ownership check wrong.py",
            f"  files: {out}/toy_double_free/explore/trace.json, *trace.svg",
        ]
    )
    assert "Traceback" not in res.stdout.str()
    assert (out / "toy_double_free" / "explore" / "trace.svg").stat().st_size > 0


def test_failure_files_default_to_pytests_temporary_directory(run, pytester: pytest.Pytester) -> None:  # type: ignore[no-untyped-def]
    text = (CORPUS / "toy_safe_counter.py").read_text()
    pytester.path.joinpath("unsafe.py").write_text(text.replace("expect=safe()", "expect=None"))
    # No expectation: skipped like `ownership test` does, and nothing is written.
    res = run("--ownership", "-rs", "unsafe.py")
    res.assert_outcomes(skipped=len(invariants_of("toy_safe_counter")))
    res.stdout.fnmatch_lines(["*declares no expected verdict*"])
    text = (CORPUS / "toy_double_free.py").read_text()
    text = "from ownership import safe\n" + text.replace('expect=violates("no_double_ownership")', "expect=safe()")
    pytester.path.joinpath("unsafe.py").write_text(text)
    res = run("--ownership", "unsafe.py", "--basetemp", str(pytester.path / "bt"))
    res.assert_outcomes(failed=1, skipped=len(invariants_of("toy_double_free")) - 1)
    written = list((pytester.path / "bt").glob("ownership-toy_double_free-explore[0-9]*/trace.svg"))
    assert len(written) == 1
    res.stdout.fnmatch_lines([f"  files: *{written[0].parent.name}/trace.json*"])


def test_inactive_without_the_flag(run, specs: Path) -> None:  # type: ignore[no-untyped-def]
    res = run("specs")
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_broken_spec_is_a_one_line_collection_error_and_helpers_are_ignored(run, pytester: pytest.Pytester) -> None:  # type: ignore[no-untyped-def]
    pytester.path.joinpath("helper.py").write_text("from ownership import Enum\nPhase = Enum('Phase', 'A B')\n")
    pytester.path.joinpath("broken.py").write_text("from ownership import Spec\nspec = Spec('x'\n")
    res = run("--ownership", ".")
    assert res.ret == pytest.ExitCode.INTERRUPTED
    res.stdout.fnmatch_lines(["*error[[]OWN001[]]: *broken.py:*: syntax error*"])
    assert "Traceback" not in res.stdout.str() and "helper.py" not in res.stdout.str()
    (pytester.path / "broken.py").unlink()
    res = run("--ownership", ".")
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED  # helper.py imports ownership but is no spec


def test_unknown_engine_is_a_usage_error(run, specs: Path) -> None:  # type: ignore[no-untyped-def]
    res = run("--ownership", "--ownership-engine", "nope", "specs")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--ownership-engine 'nope': unknown engine*"])


def test_bmc_items_use_the_same_expectation(run, specs: Path) -> None:  # type: ignore[no-untyped-def]
    res = run("--ownership", "--ownership-engine", "bmc", "specs/toy_safe_counter.py")
    res.assert_outcomes(passed=len(invariants_of("toy_safe_counter")))


@pytest.mark.slow
def test_a_sampled_engine_skips_safe_specs_and_still_catches_violations(  # type: ignore[no-untyped-def]
        run, specs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random walks cannot confirm safe(): those items are skipped with the coverage, never failed or passed."""
    # The random phase alone: a space this small the breadth-first phase would answer exactly.
    monkeypatch.setattr(HypothesisOptions, "exhaustive_states", 0)
    res = run("--ownership", "--ownership-engine", "hypothesis", "-rs", "specs/toy_safe_counter.py",
              "specs/toy_double_free.py")
    n_safe = len(invariants_of("toy_safe_counter"))
    n_bug = len(invariants_of("toy_double_free"))
    # The buggy spec's expected violation passes; its other invariants are undecided (skipped) as under explore.
    outcomes = res.parseoutcomes()
    assert outcomes.get("failed", 0) == 0
    assert outcomes["skipped"] >= n_safe and outcomes["passed"] >= 1
    assert outcomes["skipped"] + outcomes["passed"] == n_safe + n_bug
    res.stdout.fnmatch_lines(["*hypothesis samples executions and cannot confirm safe*NOT checked*"])


def test_entry_point_loads_the_plugin(tmp_path: Path) -> None:
    """Installed packages register the plugin under pytest11; pytest loads it with no -p."""
    try:
        eps = importlib.metadata.entry_points(group="pytest11")
    except Exception:  # noqa: BLE001 - metadata unavailable
        pytest.skip("no package metadata")
    mine = [ep for ep in eps if ep.name == "ownership"]
    if not mine:
        pytest.skip("the package is not installed (pip install -e .): no entry point to test")
    assert mine[0].value == PLUGIN
    shutil.copy(CORPUS / "toy_double_free.py", tmp_path / "toy_double_free.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--ownership",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "toy_double_free.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"1 passed, {len(invariants_of('toy_double_free')) - 1} skipped" in proc.stdout


# -- assert_safe / assert_violates -------------------------------------------


def test_assert_safe_returns_the_proved_result() -> None:
    result = assert_safe(CORPUS / "toy_safe_counter.py", requests=1)
    assert result.verdict.name == "PROVED" and result.params["requests"] == 1
    spec = load_spec(CORPUS / "toy_safe_counter.py")
    assert assert_safe(spec).params["requests"] == spec.params["requests"].default


def test_assert_safe_fails_with_the_trace_table() -> None:
    with pytest.raises(AssertionError) as info:
        assert_safe(str(CORPUS / "toy_double_free.py"))
    text = str(info.value)
    assert text.startswith("toy_double_free is not proved safe by explore: got violates no_double_ownership")
    assert "Counterexample: 4 steps" in text and "start(B)" in text
    assert f"reproduce: ownership check {CORPUS / 'toy_double_free.py'}" in text


def test_assert_violates() -> None:
    result = assert_violates(CORPUS / "toy_double_free.py", "no_double_ownership")
    assert result.trace is not None and len(result.trace) == 4
    with pytest.raises(AssertionError, match="expected violates no_foreign_read from explore, got safe"):
        assert_violates(CORPUS / "toy_safe_counter.py", "no_foreign_read")


@pytest.mark.slow
def test_a_random_engines_failure_reproduces_with_its_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reproduce line is the session's: a sampled failure names the seed it drew, so it reruns exactly."""
    # Found by the breadth-first phase, the violation is exact: no seed matters, none is named.
    with pytest.raises(AssertionError) as info:
        assert_safe(str(CORPUS / "toy_double_free.py"), engine="hypothesis")
    line = next(x for x in str(info.value).splitlines() if "reproduce:" in x)
    assert "--engine hypothesis" in line and "--seed" not in line
    # Found by the random phase, it names the seed drawn.
    monkeypatch.setattr(HypothesisOptions, "exhaustive_states", 0)
    with pytest.raises(AssertionError) as info:
        assert_safe(str(CORPUS / "toy_double_free.py"), engine="hypothesis")
    line = next(x for x in str(info.value).splitlines() if "reproduce:" in x)
    assert "--engine hypothesis" in line and "--seed" in line
