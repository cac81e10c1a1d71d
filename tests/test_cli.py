"""The command line through typer's CliRunner: every exit code and bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, SPECS
from ownership.cli import app

V21 = str(SPECS / "sglang_disagg_v0_5_19.py")
V22 = str(SPECS / "sglang_disagg_v0_5_21.py")


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def one_error_line(output: str) -> str:
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_check_violation_exits_1_prints_trace_and_writes_files(tmp_path: Path) -> None:
    res = invoke("check", V21, "--out", str(tmp_path))
    assert res.exit_code == 1, res.output
    out = res.output
    # stdout: a loaded machine may print a progress line on stderr first.
    assert res.stdout.startswith("VIOLATED  no_foreign_read  in sglang_disagg_v0_5_19")
    assert "Counterexample: 15 steps" in out
    assert "B reads D0, which holds A's KV" in out or "which holds A's KV" in out
    assert "client of B gets HTTP 200" in out
    assert "reproduce: ownership check" in out
    for name in ("trace.json", "trace.dot", "trace.svg"):
        assert (tmp_path / name).stat().st_size > 0
    assert "<svg" in (tmp_path / "trace.svg").read_text()


def test_check_safe_exits_0_and_says_what_it_covered() -> None:
    res = invoke("check", V22, "--no-render")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("PROVED  sglang_disagg_v0_5_21")
    assert "all reachable states of this instance checked" in res.output
    assert "334 distinct states" in res.output


def test_check_depth_bound_exits_0_and_names_the_bound() -> None:
    res = invoke("check", V22, "--max-depth", "8")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("BOUNDED_OK  ")
    assert "up to 8 steps" in res.output and "NOT checked" in res.output


def test_a_bound_too_shallow_for_an_action_is_vacuous_exit_3() -> None:
    res = invoke("check", V22, "--max-depth", "7")
    assert res.exit_code == 3, res.output
    assert res.stdout.startswith("BOUNDED_OK (vacuous: 1 action not seen to fire: decode_finish)  "), res.output
    assert invoke("check", V22, "--max-depth", "7", "--allow-vacuous").exit_code == 0


def test_check_state_limit_is_inconclusive_exit_3() -> None:
    res = invoke("check", V22, "--max-states", "20")
    assert res.exit_code == 3, res.output
    assert res.stdout.startswith("UNKNOWN") and "inconclusive" in res.output


def test_param_override_changes_the_instance() -> None:
    # With a prefill pool large enough for the long prompt, nothing is rejected: no leak.
    res = invoke("check", V21, "--param", "prefill_pool_tokens=8", "--no-render")
    assert res.exit_code == 0, res.output
    assert "prefill_pool_tokens=8" in res.output
    assert "--param prefill_pool_tokens=8" in res.output  # the reproduce line carries it


def test_multiple_specs_exit_with_the_worst() -> None:
    res = invoke("check", V22, V21, "--no-render")
    assert res.exit_code == 1
    assert "PROVED" in res.output and "VIOLATED" in res.output


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["check", V21, "--param", "nope=3"], "OWN010", "no parameter 'nope'"),
        (["check", V21, "--param", "page_size"], "OWN011", "NAME=VALUE"),
        (["check", V21, "--param", "page_size=x"], "OWN011", "not an integer"),
        (["check", V21, "--bogus"], "OWN013", "unknown option --bogus"),
        (["check", V21, "--invariant", "nope"], "OWN012", "no invariant 'nope'"),
        (["check", V21, "--engine", "magic"], "OWN013",
         "Invalid value for '--engine': 'magic' is not one of 'explore', 'bmc', 'hypothesis', 'prove', 'all'; see --help"),
        (["check", "does/not/exist.py"], "OWN002", "no such spec file"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args: list[str], code: str, needle: str) -> None:
    res = invoke(*args)
    assert res.exit_code == 2, res.output
    line = one_error_line(res.output)
    assert code in line and needle in line


def test_unknown_param_error_points_at_the_spec_file() -> None:
    res = invoke("check", V21, "--param", "nope=3")
    assert "sglang_disagg_v0_5_19.py:" in res.output


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_syntax_error_in_spec(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.py", "from ownership import Spec\n\nspec = Spec('x'\nx = 1\n")
    line = one_error_line(invoke("check", path).output)
    assert "OWN001" in line and "broken.py:3" in line


def test_spec_without_invariants(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "noinv.py",
        "from ownership import Spec\n\nspec = Spec('noinv')\nspec.param('n', 1)\n\n\n@spec.action\ndef a(s):\n    pass\n",
    )
    res = invoke("check", path)
    assert res.exit_code == 2
    line = one_error_line(res.output)
    assert "OWN005" in line and "noinv.py:3" in line


def test_spec_raising_at_import_and_at_run_time(tmp_path: Path) -> None:
    path = write(tmp_path, "boom.py", "from ownership import Spec\n\nspec = Spec('boom')\n1 / 0\n")
    line = one_error_line(invoke("check", path).output)
    assert "OWN002" in line and "boom.py:4" in line and "ZeroDivisionError" in line
    runtime = (
        "from ownership import Spec\nspec = Spec('rt')\nspec.var('x', int, init=0)\n"
        "@spec.action\ndef a(s):\n    s.x = 1 // s.x\n"
        "@spec.invariant\ndef ok(s):\n    return True\n"
    )
    res = invoke("check", write(tmp_path, "rt.py", runtime))
    assert res.exit_code == 2
    line = one_error_line(res.output)
    assert "OWN006" in line and "rt.py:6" in line


def test_file_without_spec(tmp_path: Path) -> None:
    line = one_error_line(invoke("check", write(tmp_path, "empty.py", "x = 1\n")).output)
    assert "OWN003" in line


def test_replay_confirms_and_detects_divergence(tmp_path: Path) -> None:
    assert invoke("check", V21, "--out", str(tmp_path), "--no-render").exit_code == 1
    trace = tmp_path / "trace.json"
    res = invoke("replay", str(trace))
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("REPLAYED") and "no_foreign_read is violated" in res.output
    data = json.loads(trace.read_text())
    data["steps"][9]["state"]["d_queue"]["B"] = "RUNNING"
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(data))
    res = invoke("replay", str(bad), "--spec", V21)
    assert res.exit_code == 1
    assert "step 10" in res.output and "d_queue[B]" in res.output


def test_corrupt_trace_is_a_one_line_error_with_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "format": "ownership-trace",\n  "steps": [,]\n}\n')
    for cmd in ("replay", "render"):
        res = invoke(cmd, str(bad))
        assert res.exit_code == 2
        line = one_error_line(res.output)
        assert "OWN020" in line and "bad.json:3" in line
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"format": "ITF"}')
    assert "OWN020" in one_error_line(invoke("replay", str(wrong)).output)


@pytest.mark.parametrize("fmt", ["svg", "png", "dot"])
def test_render_formats(tmp_path: Path, fmt: str) -> None:
    assert invoke("check", V21, "--out", str(tmp_path), "--no-render").exit_code == 1
    target = tmp_path / f"picture.{fmt}"
    res = invoke("render", str(tmp_path / "trace.json"), "--format", fmt, "--out", str(target))
    assert res.exit_code == 0, res.output
    data = target.read_bytes()
    assert {"svg": b"<svg", "png": b"\x89PNG", "dot": b"digraph"}[fmt] in data[:400]


def test_list_shows_specs_with_sources_and_expectations() -> None:
    res = invoke("list", str(SPECS))
    assert res.exit_code == 0
    assert "sglang_disagg_v0_5_19" in res.output and "violates no_foreign_read" in res.output
    assert "sglang PR #38935" in res.output and "expect:     safe" in res.output


@pytest.mark.slow
def test_test_command_passes_on_the_library_and_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    res = invoke("test", str(SPECS))
    assert res.exit_code == 0, res.output
    assert f"{len(list(SPECS.glob('*.py')))} passed, 0 failed" in res.output
    # A known-buggy spec whose bug is no longer found fails the run.
    text = (CORPUS / "toy_double_free.py").read_text().replace(
        "expect=violates(\"no_double_ownership\")", "expect=violates(\"no_foreign_read\")"
    )
    (tmp_path / "toy.py").write_text(text)
    res = invoke("test", str(tmp_path))
    assert res.exit_code == 1
    assert "FAIL  toy_double_free: expected violates no_foreign_read, got violates no_double_ownership" in res.output


def test_help_is_fast_path_without_solvers() -> None:
    import subprocess
    import sys

    code = "import sys, ownership.cli; print('z3' in sys.modules, 'hypothesis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


@pytest.mark.slow
def test_other_engines_never_overwrite_the_explorers_trace_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The explorer's traces are committed next to the specs; bmc and prove write beside them.
    spec = str(CORPUS / "toy_double_free.py")
    monkeypatch.chdir(tmp_path)
    assert invoke("check", spec, "--no-render").exit_code == 1
    explore_trace = tmp_path / "counterexamples" / "toy_double_free" / "trace.json"
    before = explore_trace.read_text()
    assert invoke("check", spec, "--engine", "bmc", "--no-render").exit_code == 1
    assert (tmp_path / "counterexamples" / "toy_double_free" / "bmc" / "trace.json").exists()
    assert invoke("prove", spec, "--max-k", "4", "--no-spacer").exit_code == 1  # base case: depth 4
    assert (tmp_path / "counterexamples" / "toy_double_free" / "prove" / "trace.json").exists()
    assert explore_trace.read_text() == before


# -- the help -----------------------------------------------------------------------------------------


COMMANDS = ["check", "prove", "report", "test", "list", "mbt", "replay", "render", "graph", "mutate", "validate",
            "preflight"]
TYPE_PLACEHOLDER = re.compile(r"<(bool|int|float|str|text|path|Path|file|directory|list\[[^]]*\])( range)?>")


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_reads_at_80_columns(command: str | None) -> None:
    """Nothing cut by an ellipsis, no line past 80 columns, no Python type where a value's name belongs."""
    res = CliRunner().invoke(app, [*([command] if command else []), "--help"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "\u2026" not in res.output, res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80, res.output
    assert not TYPE_PLACEHOLDER.search(res.output), TYPE_PLACEHOLDER.search(res.output)


def test_check_help_is_grouped_and_much_shorter_than_one_option_per_panel() -> None:
    out = CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "80"}).output
    for panel in ("What to check", "Instance", "Limits", "Random testing (--engine hypothesis)", "Output",
                  "Reports and exit status"):
        assert f"\u256d\u2500 {panel} " in out, panel
    assert len(out.splitlines()) < 100


def test_engine_lists_the_registrys_choices_including_prove() -> None:
    from ownership.engines.registry import ENGINE_NAMES

    assert "prove" in ENGINE_NAMES
    flat = " ".join(CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "80"}).output.split())
    for name in ENGINE_NAMES:
        assert f"{name} (" in flat, name
    # The shell completes the same choices.
    res = CliRunner().invoke(app, [], prog_name="ownership", env={
        "_OWNERSHIP_COMPLETE": "complete_bash", "COMP_WORDS": "ownership check x.py --engine ", "COMP_CWORD": "4"})
    assert res.output.split() == list(ENGINE_NAMES)


def test_shell_completion_is_installed_and_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    root = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}).output
    assert "--install-completion" in root and "--show-completion" in root
    # Name the shell: typer otherwise detects it from the parent process, which a test run may not have.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    res = CliRunner().invoke(app, ["--show-completion", "bash"], prog_name="ownership")
    assert res.exit_code == 0 and "_OWNERSHIP_COMPLETE=complete_bash" in res.output, res.output
