"""``ownership preflight`` on the command line: exit statuses a deploy gate reads, ``--json``, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from ownership.cli import app

DATA = ROOT / "tests" / "data" / "preflight"
EXAMPLES = ROOT / "examples" / "preflight"
PREFILL, DECODE = str(EXAMPLES / "incident-prefill.log"), str(EXAMPLES / "incident-decode.log")
KEYS = {"format", "version", "verdict", "headline", "exit_code", "engine", "engine_version", "engine_version_from",
        "nodes", "reasons", "spec", "release", "limits", "leaking_prompt_tokens", "formula", "mechanism", "remedy",
        "spec_params",
        "covered", "reproduce"}


def invoke(*args: str):
    return CliRunner().invoke(app, ["preflight", *args])


def one_error(res, code: str, exit_code: int, *needles: str) -> str:
    assert "Traceback" not in res.output, res.output
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error[{code}]: "), res.output
    assert res.exit_code == exit_code, res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_examples_are_the_committed_fixtures() -> None:
    for role in ("prefill", "decode"):
        assert (EXAMPLES / f"incident-{role}.log").read_text() == (DATA / f"incident-{role}.log").read_text()


def test_not_covered_exits_5_with_the_reason_and_json(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    res = invoke("--node", str(DATA / "vllm-node.log"), "--json", str(out))
    assert res.exit_code == 5, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == ("NOT COVERED: no verdict: needs a spec of vLLM's admission of over-long prompts (the library "
                        "has none); its KV cache check passed")
    assert lines[1] == "  vllm 0.33.0"
    assert "  not covered: vLLM's admission of prompts longer than it can serve" in res.stdout
    doc = json.loads(out.read_text())
    assert set(doc) == KEYS
    assert (doc["format"], doc["verdict"], doc["exit_code"], doc["covered"]) == ("ownership-preflight", "NOT_COVERED", 5, None)
    assert doc["headline"] == lines[0]


def test_json_dash_writes_the_verdict_alone_on_stdout_and_the_report_on_stderr() -> None:
    res = invoke("--node", str(DATA / "vllm-node.log"), "--json", "-")
    assert res.exit_code == 5, res.output
    doc = json.loads(res.stdout)  # nothing but the document
    assert set(doc) == KEYS and doc["verdict"] == "NOT_COVERED"
    assert res.stderr.startswith("NOT COVERED: no verdict: ") and "  reproduce: ownership preflight --node" in res.stderr


def test_json_dot_slash_dash_is_a_file_named_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = invoke("--node", str(DATA / "vllm-node.log"), "--json", "./-")
    assert res.exit_code == 5, res.output
    assert res.stdout.startswith("NOT COVERED: ") and json.loads((tmp_path / "-").read_text())["exit_code"] == 5


@pytest.mark.parametrize(("version", "needle"), [
    ("0.6.0", "NOT COVERED: no verdict: needs a row of the release table for SGLang 0.6.0"),
])
def test_not_covered_first_line_says_what_is_needed(version: str, needle: str) -> None:
    res = invoke("--prefill", PREFILL, "--decode", DECODE, "--version", version)
    assert res.exit_code == 5 and res.stdout.splitlines()[0].startswith(needle), res.output


def test_single_node_first_line_says_what_is_needed() -> None:
    res = invoke("--node", PREFILL, "--version", "0.5.19")
    assert res.exit_code == 5, res.output
    assert res.stdout.splitlines()[0].startswith("NOT COVERED: no verdict: needs a spec of one SGLang node")


@pytest.mark.parametrize(("args", "code", "status", "needles"), [
    (["--prefill", "nope.log", "--decode", DECODE], "OWN075", 6, ["nope.log: cannot read"]),
    (["--prefill", PREFILL, "--decode", PREFILL, "--version", "0.5.19"], "OWN077", 6,
     ["incident-prefill.log:1: given as the decode node"]),
    (["--prefill", PREFILL, "--decode", DECODE], "OWN078", 2, ["pass --version"]),
    (["--prefill", PREFILL, "--decode", DECODE, "--version", "latest"], "OWN078", 2, ["'latest'"]),
    (["--prefill", PREFILL], "OWN013", 2, ["--decode FILE"]),
    (["--node", PREFILL, "--prefill", PREFILL], "OWN013", 2, ["--node is for a single node"]),
    (["--node", str(DATA / "vllm-node.log"), "--engine", "sglang"], "OWN077", 6, ["this is a vllm log"]),
    (["--node", PREFILL, "--max-seconds", "0"], "OWN015", 2, ["--max-seconds"]),
])
def test_bad_input_is_one_located_line(args: list[str], code: str, status: int, needles: list[str]) -> None:
    one_error(invoke(*args), code, status, *needles)


def test_a_corrupt_json_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "info.json"
    bad.write_text('{\n "page_size": 64,\n "max_total_num_tokens": ]\n}\n')
    one_error(invoke("--node", str(bad)), "OWN076", 6, f"{bad}:3: not JSON")


def test_unwritable_json_is_refused_before_reading(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    one_error(invoke("--node", "nope.log", "--json", str(tmp_path / "afile" / "r.json")), "OWN014", 2, "--json")


@pytest.mark.slow
def test_incident_unsafe_exit_1_text_and_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = invoke("--prefill", PREFILL, "--decode", DECODE, "--version", "0.5.19", "--json", str(out))
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == ("UNSAFE: do not deploy: upgrade both nodes to SGLang >= 0.5.20, or restart both nodes with "
                        "--context-length 681280")
    assert lines[1] == "  sglang 0.5.19 prefill/decode disaggregation"
    # the run takes several seconds: progress went to stderr (not a terminal here: a line per report), not stdout
    assert "  ... free-parameter analysis: " in res.stderr and "states/s" in res.stderr
    assert "  ... remedy re-check: restart both nodes with --context-length 681280" in res.stderr
    assert not any(ln.startswith("  ... ") for ln in lines)
    assert "  unsafe: prompts of 681,274 to 1,048,569 tokens (no_foreign_read): prefill rejects them" in res.stdout
    assert any(ln.startswith("  remedy: upgrade both nodes to SGLang >= 0.5.20 (checked: SAFE") for ln in lines)
    assert any(ln.startswith("  remedy: or restart both nodes with --context-length 681280 (checked: SAFE") for ln in lines)
    assert any(ln.startswith("  reproduce: ownership check ") for ln in lines)
    doc = json.loads(out.read_text())
    assert set(doc) == KEYS
    assert (doc["verdict"], doc["exit_code"], doc["leaking_prompt_tokens"]) == ("UNSAFE", 1, {"min": 681_274, "max": 1_048_569})
    assert doc["remedy"] == {
        "upgrade": {"action": "upgrade both nodes to SGLang >= 0.5.20", "value": "0.5.20", "checked": "PROVED"},
        "context_length": {"action": "restart both nodes with --context-length 681280", "value": 681_280,
                           "checked": "PROVED"}}
    assert doc["covered"]["verdict"] == "VIOLATED" and doc["covered"]["states"] > 0
    assert doc["limits"] == {"prefill": 681_274, "decode": 1_048_570}


@pytest.mark.slow
def test_the_reproduce_command_gives_the_same_region(tmp_path: Path) -> None:
    """The printed ``ownership check`` line runs as written and describes the same region."""
    import shlex

    res = invoke("--prefill", PREFILL, "--decode", DECODE, "--version", "0.5.19", "--no-check-remedy")
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("  reproduce: ownership check "))
    argv = shlex.split(line.removeprefix("  reproduce: ownership "))
    argv[1] = str(ROOT / argv[1])
    check = CliRunner().invoke(app, [*argv, "--out", str(tmp_path / "ce"), "--no-render"])
    assert check.exit_code == 1, check.output
    assert "unsafe exactly when prompt_tokens >= prefill_max_req_input_len and prompt_tokens < " in check.stdout


@pytest.mark.slow
def test_server_info_of_0_5_23_is_safe_exit_0(tmp_path: Path) -> None:
    res = invoke("--prefill", str(DATA / "server-info-prefill.json"), "--decode", str(DATA / "server-info-decode.json"))
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "SAFE: deploy: at these numbers no prompt length up to the context leaks KV between requests"
    assert lines[1] == "  sglang 0.5.23 prefill/decode disaggregation"
    assert "version 0.5.23 from" in res.stdout and "spec specs/sglang_disagg_v0_5_21.py" in res.stdout
    assert "; all 10 actions fired" in res.stdout  # a SAFE says which actions the analysis saw fire


def test_unsafe_report_and_exit_status_without_running_the_explorer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The report's parts and the gate's status for a violated analysis (the real analysis: the slow tests above)."""
    from ownership.preflight import verdict

    calls: list[dict[str, int]] = []

    def fake(spec_path: Path, mapped, max_seconds, progress=None):  # noqa: ANN001, ANN202 - stands in for analyse
        calls.append(dict(mapped.params))
        p = mapped.params
        derived = {"prefill_max_req_input_len": min(p["context_len"] - 1, p["prefill_pool_tokens"] - 1),
                   "decode_max_req_input_len": min(p["context_len"] - 1, p["decode_pool_tokens"] - 1)}
        closed = (derived["prefill_max_req_input_len"] == derived["decode_max_req_input_len"]
                  or spec_path.name == "sglang_disagg_v0_5_20.py")  # the upgrade's spec: fixed
        region = None if closed else ("unsafe exactly when prompt_tokens >= prefill_max_req_input_len and "
                                      "prompt_tokens < decode_max_req_input_len (...)")
        return verdict.Analysis("PROVED" if closed else "VIOLATED", 7, 9, 0.1, region, "ownership check x", derived,
                                None if closed else "no_foreign_read", fired=("arrive", "decode_forward"),
                                unfired=() if closed else ("decode_transfer_timeout",))

    monkeypatch.setattr(verdict, "analyse", fake)
    out = tmp_path / "r.json"
    res = invoke("--prefill", PREFILL, "--decode", DECODE, "--version", "0.5.11", "--json", str(out))
    assert res.exit_code == 1, res.output
    assert res.stdout.splitlines()[0] == ("UNSAFE: do not deploy: upgrade both nodes to SGLang >= 0.5.20, or restart "
                                          "both nodes with --context-length 681280")
    assert "  unsafe: prompts of 681,274 to 1,048,569 tokens (no_foreign_read)" in res.stdout
    assert "  remedy: upgrade both nodes to SGLang >= 0.5.20 (checked: SAFE, 0.1s)" in res.stdout
    assert "  remedy: or restart both nodes with --context-length 681280 (checked: SAFE, 0.1s)" in res.stdout
    assert calls[1]["prefill_pool_tokens"] != calls[1]["decode_pool_tokens"]  # the upgrade: same numbers
    assert "release: SGLang 0.5.4.post2 to 0.5.19 (affected" in res.stdout
    # the upgrade was checked on 0.5.20's spec, the lowered context where both limits are equal
    assert calls[2]["prefill_pool_tokens"] == calls[2]["decode_pool_tokens"] == 681_275
    assert "; 2 of 3 actions fired (never: decode_transfer_timeout)" in res.stdout
    doc = json.loads(out.read_text())
    assert doc["leaking_prompt_tokens"] == {"min": 681_274, "max": 1_048_569} and doc["exit_code"] == 1
    assert doc["covered"]["actions_never_fired"] == ["decode_transfer_timeout"]


def _stub(monkeypatch: pytest.MonkeyPatch, verdicts: tuple[str, ...]) -> None:
    """``analyse`` answering ``verdicts[0]`` at the deployment's numbers, then one answer per remedy re-checked."""
    from ownership.preflight import verdict

    answers = iter(verdicts)

    def fake(spec_path: Path, mapped, max_seconds, progress=None):  # noqa: ANN001, ANN202 - stands in for analyse
        answer = next(answers)
        region = "unsafe exactly when prompt_tokens >= lo and prompt_tokens < hi" if answer == "VIOLATED" else None
        return verdict.Analysis(answer, 7, 9, 42.0, region, "ownership check x", {"lo": 681_274, "hi": 1_048_570},
                                "no_foreign_read" if answer == "VIOLATED" else None)

    monkeypatch.setattr(verdict, "analyse", fake)


NO_REMEDY = ("  remedy: none of upgrading, a shorter --context-length, turning off --allow-auto-truncate or the KV "
             "checksum makes the analysis safe; keep this deployment from serving")


@pytest.mark.parametrize(("version", "verdicts", "first", "remedies"), [
    # 0.5.20: the upgrade to 0.5.21 is re-checked too; only what the re-check finds SAFE is advised
    ("0.5.20", ("VIOLATED", "VIOLATED", "PROVED"),
     "UNSAFE: do not deploy: restart both nodes with --context-length 681280",
     ["  remedy: restart both nodes with --context-length 681280 (checked: SAFE, 42.0s)"]),
    ("0.5.11", ("VIOLATED", "PROVED", "VIOLATED"), "UNSAFE: do not deploy: upgrade both nodes to SGLang >= 0.5.20",
     ["  remedy: upgrade both nodes to SGLang >= 0.5.20 (checked: SAFE, 42.0s)"]),
    # 0.5.21: no later release; the context and the KV checksum are re-checked, both still unsafe
    ("0.5.21", ("VIOLATED", "VIOLATED", "VIOLATED"),
     "UNSAFE: do not deploy: no remedy found; see the leaking prompt range below", [NO_REMEDY]),
    ("0.5.21", ("UNKNOWN",),
     "UNKNOWN: no verdict: the analysis stopped after 42s; run again with a larger --max-seconds", []),
])
def test_first_line_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: str,
                                    verdicts: tuple[str, ...], first: str, remedies: list[str]) -> None:
    _stub(monkeypatch, verdicts)
    out = tmp_path / "r.json"
    res = invoke("--prefill", PREFILL, "--decode", DECODE, "--version", version, "--json", str(out))
    lines = res.stdout.splitlines()
    assert lines[0] == first, res.output
    assert [ln for ln in lines if ln.startswith("  remedy: ")] == remedies
    doc = json.loads(out.read_text())
    assert doc["headline"] == first
    if doc["remedy"] is not None:
        assert ("upgrade" in doc["remedy"]) == ("upgrade" in first)


def test_progress_lines_wait_a_second_and_rewrite_one_terminal_line() -> None:
    """Nothing in the first second; then a line per report, or on a terminal one line rewritten and cleared."""
    import io

    from ownership.cli.preflight import PhaseLines
    from ownership.core.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    log, term, off = io.StringIO(), Terminal(), io.StringIO()
    shown = [PhaseLines(True, log), PhaseLines(True, term), PhaseLines(False, off)]
    for lines in shown:
        lines.phase("reading the logs")  # within the first second: not shown
        lines.start -= 2.0  # as if two seconds had passed
        lines.phase("free-parameter analysis")
        lines(Progress(1.0, states=1_234, transitions=5_678, depth=3, frontier=9))
        lines.done()
    assert log.getvalue().splitlines() == [
        "  ... free-parameter analysis, starting after 2s",
        "  ... free-parameter analysis: 1,234 states, 5,678 transitions, depth 3, frontier 9, 1,234 states/s, 1s"]
    assert term.getvalue().count("\r") == 3 and "\n" not in term.getvalue()
    assert term.getvalue().endswith("\r\033[K")  # cleared before the report
    assert off.getvalue() == ""
