"""CI reports of `check` and `test`: JUnit XML, SARIF 2.1.0 (schema-validated) and JSON.

The SARIF schema is vendored in tests/data/ (see tests/data/README.md: the
npm package @microsoft/jest-sarif ships it as sarif-2.1.0-rtm.5.json).
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, ROOT, SPECS
from ownership.cli import app
from ownership.core.expectation import Status, invariant_outcomes, judge
from ownership.core.result import CheckResult, Stats, StopReason, Verdict
from ownership.core.trace import Trace
from ownership.lang.declarations import Expect
from ownership.lang.loader import load_spec

jsonschema = pytest.importorskip("jsonschema")

SCHEMA_FILE = Path(__file__).parent / "data" / "sarif-2.1.0-rtm.5.json"
V21 = SPECS / "sglang_disagg_v0_5_19.py"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def sarif_errors(log: dict[str, Any]) -> list[str]:
    """Every schema violation in ``log`` (the validator class follows the schema's $schema: draft-04)."""
    schema = json.loads(SCHEMA_FILE.read_text())
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator_cls(schema).iter_errors(log)]


def def_line(path: Path, name: str) -> int:
    """The line of ``def name(`` in ``path``, found by reading the file (not through the spec)."""
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if line.startswith(f"def {name}("):
            return i
    raise AssertionError(f"no def {name} in {path}")


@pytest.fixture(scope="module")
def v21_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`ownership check` on the v0.5.19 spec with every report, run from the repository root."""
    out = tmp_path_factory.mktemp("v20")
    mp = pytest.MonkeyPatch()
    mp.chdir(ROOT)
    try:
        res = invoke(
            "check",
            "specs/sglang_disagg_v0_5_19.py",
            "--out",
            str(out / "ce"),
            "--junit",
            str(out / "junit.xml"),
            "--sarif",
            str(out / "o.sarif"),
            "--json",
            str(out / "r.json"),
        )
    finally:
        mp.undo()
    assert res.exit_code == 1, res.output
    return {
        "output": res.output,
        "out": out,
        "junit": ET.parse(out / "junit.xml").getroot(),
        "sarif": json.loads((out / "o.sarif").read_text()),
        "json": json.loads((out / "r.json").read_text()),
    }


# -- SARIF -------------------------------------------------------------------


def test_sarif_of_a_violation_is_valid_and_points_at_the_breaking_action(v21_reports: dict[str, Any]) -> None:
    log = v21_reports["sarif"]
    assert sarif_errors(log) == []
    (run,) = log["runs"]
    (result,) = run["results"]
    assert result["ruleId"] == "no_foreign_read" and result["level"] == "error"
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "no_foreign_read"
    # The trace's last step is decode_forward(B): the result sits on that action's def line.
    trace = Trace.load(v21_reports["out"] / "ce" / "trace.json")
    assert trace.steps[-1].action == "decode_forward"
    phys = result["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"] == {"uri": "specs/sglang_disagg_v0_5_19.py", "uriBaseId": "%SRCROOT%"}
    assert phys["region"]["startLine"] == def_line(V21, "decode_forward")
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == ROOT.resolve().as_uri() + "/"
    assert "B reads D0, which holds A's KV" in result["message"]["text"]
    # The code flow is the whole trace, step by step, each at its action.
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [f["location"]["message"]["text"] for f in flow] == [f"{i}. {s.call}" for i, s in enumerate(trace.steps, 1)]
    first = flow[0]["location"]["physicalLocation"]["region"]["startLine"]
    assert first == def_line(V21, trace.steps[0].action)
    assert "suppressions" not in result  # `check` has no expectations: every violation is an error


def test_the_schema_check_rejects_a_broken_log(v21_reports: dict[str, Any]) -> None:
    log = json.loads(json.dumps(v21_reports["sarif"]))
    log["runs"][0]["results"][0]["level"] = "fatal"
    del log["runs"][0]["tool"]["driver"]["name"]
    errors = sarif_errors(log)
    assert len(errors) == 2, errors


# -- JUnit -------------------------------------------------------------------


def test_junit_has_one_case_per_invariant_and_the_trace_as_failure_text(v21_reports: dict[str, Any]) -> None:
    root = v21_reports["junit"]
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["sglang_disagg_v0_5_19"]
    cases = suites[0].findall("testcase")
    invariants = list(load_spec(V21).invariants)
    assert [c.get("name") for c in cases] == invariants
    failed = [c for c in cases if c.find("failure") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert [c.get("name") for c in failed] == ["no_foreign_read"]
    assert len(skipped) == len(invariants) - 1  # stopped at the first violation: the others are undecided
    text = failed[0].find("failure").text or ""  # type: ignore[union-attr]
    assert "Counterexample: 15 steps" in text and "decode_forward(B)" in text
    assert "which holds A's KV  <-- no_foreign_read" in text
    assert "replay: ownership replay" in text
    # The counts on the elements agree with the elements.
    for el in (root, suites[0]):
        assert el.get("tests") == str(len(cases))
        assert el.get("failures") == "1" and el.get("errors") == "0"
        assert el.get("skipped") == str(len(skipped))
    props = {p.get("name"): p.get("value") for p in suites[0].iter("property")}
    assert props["verdict"] == "VIOLATED" and props["engine"] == "explore" and props["param.requests"] == "2"


# -- JSON --------------------------------------------------------------------


def test_json_results_carry_verdict_coverage_statistics_and_files(v21_reports: dict[str, Any]) -> None:
    data = v21_reports["json"]
    assert data["format"] == "ownership-results" and data["command"] == "check"
    assert data["ok"] is False and data["summary"]["failed"] == 1
    (spec,) = data["specs"]
    assert spec["verdict"] == "VIOLATED" and spec["stop_reason"] == "VIOLATION"
    assert spec["coverage"] in v21_reports["output"]  # the same sentence the terminal shows
    assert spec["stats"]["depth"] == 15 and spec["stats"]["states"] > 0
    files = spec["trace"]["files"]
    assert [Path(f).name for f in files] == ["trace.json", "trace.itf.json", "trace.dot", "trace.svg"]
    assert all(Path(f).is_file() for f in files)
    assert spec["trace"]["steps"] == len(Trace.load(files[0]))
    assert spec["trace"]["last_action"] == "decode_forward(B)"
    assert spec["trace"]["location"]["line"] == def_line(V21, "decode_forward")
    statuses = {i["name"]: i["status"] for i in spec["invariants"]}
    assert statuses.pop("no_foreign_read") == "failed" and set(statuses.values()) == {"undecided"}


# -- `ownership test` --------------------------------------------------------


def test_test_reports_mark_declared_violations_as_expected(tmp_path: Path) -> None:
    res = invoke(
        "test",
        str(CORPUS),
        "--out",
        str(tmp_path / "ce"),
        "--junit",
        str(tmp_path / "j.xml"),
        "--sarif",
        str(tmp_path / "s.sarif"),
        "--json",
        str(tmp_path / "r.json"),
    )
    assert res.exit_code == 0, res.output
    log = json.loads((tmp_path / "s.sarif").read_text())
    assert sarif_errors(log) == []
    (result,) = log["runs"][0]["results"]  # toy_double_free declares its violation
    assert result["ruleId"] == "no_double_ownership" and result["level"] == "note"
    assert result["suppressions"][0]["kind"] == "inSource"
    # --out wrote the picture the workflow uploads.
    assert (tmp_path / "ce" / "toy_double_free" / "trace.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert root.get("failures") == "0" and root.get("errors") == "0"
    assert {s.get("name") for s in root.findall("testsuite")} == {p.stem for p in CORPUS.glob("*.py")}
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["ok"] is True and data["summary"]["passed"] == len(data["specs"]) == 3
    assert {s["spec"]: s["expect"] for s in data["specs"]}["toy_double_free"] == "violates no_double_ownership"


def test_test_reports_an_unmet_expectation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the repository root: SARIF locates only files inside it
    specs = tmp_path / "specs"
    specs.mkdir()
    text = (CORPUS / "toy_double_free.py").read_text()
    (specs / "wrong.py").write_text(text.replace('violates("no_double_ownership")', 'violates("no_foreign_read")'))
    text = (CORPUS / "toy_safe_counter.py").read_text()
    text = "from ownership import violates\n" + text.replace("expect=safe()", 'expect=violates("no_foreign_read")')
    (specs / "safe_but_expected_bad.py").write_text(text)
    res = invoke("test", str(specs), "--junit", str(tmp_path / "j.xml"), "--sarif", str(tmp_path / "s.sarif"))
    assert res.exit_code == 1, res.output
    log = json.loads((tmp_path / "s.sarif").read_text())
    assert sarif_errors(log) == []
    by_rule = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    assert by_rule["no_double_ownership"]["level"] == "error"  # a violation the spec does not declare
    assert "suppressions" not in by_rule["no_double_ownership"]
    unmet = by_rule["unmet-expectation"]
    assert "expected violates no_foreign_read, got safe" in unmet["message"]["text"]
    spec_line = load_spec(specs / "safe_but_expected_bad.py").line
    assert unmet["locations"][0]["physicalLocation"]["region"]["startLine"] == spec_line
    root = ET.parse(tmp_path / "j.xml").getroot()
    failures = {
        (s.get("name"), c.get("name"))
        for s in root.findall("testsuite")
        for c in s.findall("testcase")
        if c.find("failure") is not None
    }
    assert failures == {
        ("toy_double_free", "no_double_ownership"),  # violated, not expected
        ("toy_double_free", "no_foreign_read"),  # expected, but another violation came first
        ("toy_safe_counter", "no_foreign_read"),  # expected, never found
    }
    assert root.get("failures") == "3"


def test_inconclusive_check_is_a_junit_error_not_a_pass(tmp_path: Path) -> None:
    res = invoke(
        "check",
        str(SPECS / "sglang_disagg_v0_5_21.py"),
        "--max-states",
        "20",
        "--junit",
        str(tmp_path / "j.xml"),
        "--json",
        str(tmp_path / "r.json"),
    )
    assert res.exit_code == 3, res.output
    root = ET.parse(tmp_path / "j.xml").getroot()
    cases = root.findall("testsuite/testcase")
    assert cases and all(c.find("error") is not None for c in cases)
    assert root.get("errors") == str(len(cases))
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["specs"][0]["status"] == "inconclusive" and data["specs"][0]["verdict"] == "UNKNOWN"
    assert data["ok"] is False


def test_deadlock_is_a_result_and_a_test_case(tmp_path: Path) -> None:
    res = invoke(
        "check",
        str(CORPUS / "toy_deadlock.py"),
        "--deadlock",
        "--no-render",
        "--out",
        str(tmp_path / "ce"),
        "--sarif",
        str(tmp_path / "s.sarif"),
        "--junit",
        str(tmp_path / "j.xml"),
    )
    assert res.exit_code == 1, res.output
    log = json.loads((tmp_path / "s.sarif").read_text())
    assert sarif_errors(log) == []
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "deadlock"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == def_line(
        CORPUS / "toy_deadlock.py", "admit"
    )
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")}
    assert cases["deadlock"].find("failure") is not None


def test_a_broken_spec_still_gets_reports_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text("from ownership import Spec\nspec = Spec('x'\n")
    res = invoke(
        "check",
        str(CORPUS / "toy_safe_counter.py"),
        str(bad),
        "--no-render",
        "--junit",
        str(tmp_path / "j.xml"),
        "--sarif",
        str(tmp_path / "s.sarif"),
        "--json",
        str(tmp_path / "r.json"),
    )
    assert res.exit_code == 2
    log = json.loads((tmp_path / "s.sarif").read_text())
    assert sarif_errors(log) == []
    (invocation,) = log["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    (note,) = invocation["toolExecutionNotifications"]
    assert note["message"]["text"].startswith("error[OWN001]")
    # The broken file is outside the repository (the working directory): code scanning could not place it,
    # so the notification names it in its text and carries no absolute location.
    assert "locations" not in note and str(bad) in note["message"]["text"]
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert root.get("errors") == "1" and root.get("failures") == "0"
    errors = [c for c in root.iter("testcase") if c.find("error") is not None]
    assert len(errors) == 1 and "OWN001" in (errors[0].find("error").get("message") or "")  # type: ignore[union-attr]
    data = json.loads((tmp_path / "r.json").read_text())
    assert [s["status"] for s in data["specs"]] == ["passed", "error"]


# -- the adoption examples ----------------------------------------------------


def test_the_documented_workflow_writes_what_it_uploads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "docs" / "ci" / "ownership.yml").read_text()
    (command,) = [
        ln.split("run:", 1)[1].strip() for ln in text.splitlines() if ln.strip().startswith("run: ownership ")
    ]
    argv = shlex.split(command)
    assert argv[:3] == ["ownership", "test", "specs/"]
    shutil.copytree(CORPUS, tmp_path / "specs")  # small specs standing in for a project's own
    monkeypatch.chdir(tmp_path)
    res = invoke(*argv[1:])
    assert res.exit_code == 0, res.output
    (sarif_file,) = re.findall(r"sarif_file:\s*(\S+)", text)
    assert sarif_errors(json.loads(Path(sarif_file).read_text())) == []
    block = text.split("path: |", 1)[1].split("if-no-files-found", 1)[0]
    patterns = [ln.strip() for ln in block.splitlines() if ln.strip()]
    assert "counterexamples/**/*.svg" in patterns
    for pattern in patterns:
        assert list(Path().glob(pattern)), f"the workflow uploads {pattern}, which the command did not write"


def test_the_pre_commit_hook_runs_ownership_test() -> None:
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert re.search(r"^- id: ownership-test$", text, re.MULTILINE)
    assert re.search(r"^  entry: ownership test$", text, re.MULTILINE)
    assert re.search(r"^  pass_filenames: false$", text, re.MULTILINE)


# -- the shared pass/fail decision -------------------------------------------


def _result(verdict: Verdict, violated: str | None) -> CheckResult:
    reason = {
        Verdict.PROVED: StopReason.EXHAUSTED,
        Verdict.BOUNDED_OK: StopReason.DEPTH_LIMIT,
        Verdict.UNKNOWN: StopReason.TIME_LIMIT,
        Verdict.VIOLATED: StopReason.VIOLATION,
    }[verdict]
    return CheckResult("s", "explore", verdict, reason, Stats(10, 20, 3, 0.1), {"n": 1}, ("a", "b", "c"), violated)


RESULTS = [
    _result(Verdict.PROVED, None),
    _result(Verdict.BOUNDED_OK, None),
    _result(Verdict.UNKNOWN, None),
    _result(Verdict.VIOLATED, "a"),
    _result(Verdict.VIOLATED, "b"),
]


@pytest.mark.parametrize(("expect", "result"), list(itertools.product([Expect(None), Expect("a")], RESULTS)))
def test_per_invariant_outcomes_agree_with_the_spec_judgement(expect: Expect, result: CheckResult) -> None:
    outcomes = invariant_outcomes(result, expect)
    assert [o.invariant for o in outcomes] == ["a", "b", "c"]
    assert judge(expect, result).ok == all(o.status is not Status.FAILED for o in outcomes)
    if result.violated is not None:
        # Never claim an invariant holds after the run stopped at another one's violation.
        others = [o for o in outcomes if o.invariant not in (result.violated, expect.violates)]
        assert others and all(o.status is Status.UNDECIDED for o in others)


def test_judge_requires_a_proof_for_safe_and_the_named_violation_otherwise() -> None:
    proved, bounded, unknown, viol_a, viol_b = RESULTS
    assert judge(Expect(None), proved).ok
    assert not judge(Expect(None), bounded).ok
    assert judge(Expect(None), bounded).got == "no violation, but not exhaustive (reached the depth limit)"
    assert judge(Expect(None), unknown).got.startswith("an inconclusive verdict (")
    assert not judge(Expect(None), unknown).ok and not judge(Expect(None), viol_a).ok
    assert judge(Expect("a"), viol_a).ok and not judge(Expect("a"), viol_b).ok and not judge(Expect("a"), proved).ok
    # Without an expectation (`check`): no violation within the bounds passes, a limit is inconclusive.
    assert {o.status for o in invariant_outcomes(bounded)} == {Status.PASSED}
    assert {o.status for o in invariant_outcomes(unknown)} == {Status.INCONCLUSIVE}
