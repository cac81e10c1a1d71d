"""Vacuous verdicts: a safe verdict must say when part of the spec never ran.

Each adversarial spec in ``tests/trust/vacuity_*.py`` used to get a clean
PROVED (exit 0, ``ownership test`` passing): a guard that can never hold, a
cleanup action enabled in no reachable state, a function missing its
``@spec.action``, an ``alloc`` of more pages than the pool has.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import SPECS
from ownership.cli import app
from ownership.core.result import Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.errors import OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec, spec_files

TRUST = Path(__file__).resolve().parent / "trust"
NEVER = TRUST / "vacuity_never_true_guard.py"
DEAD = TRUST / "vacuity_dead_cleanup.py"
DECLARED = TRUST / "vacuity_dead_cleanup_declared.py"
MISSING = TRUST / "vacuity_missing_action.py"
ALLOC = TRUST / "vacuity_alloc_beyond_pool.py"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def check(path: Path, *extra: str, tmp: Path):
    return invoke("check", str(path), "--no-render", "--no-progress", "--out", str(tmp / "ce"), *extra)


def line_of(path: Path, text: str) -> int:
    """1-based line of the first line of ``path`` containing ``text``."""
    return next(i for i, ln in enumerate(path.read_text().splitlines(), start=1) if text in ln)


def only(tmp_path: Path, *specs: Path) -> Path:
    """A folder holding copies of ``specs`` (``ownership test`` checks a whole folder)."""
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    for p in specs:
        shutil.copy(p, folder / p.name)
    return folder


# -- zero transitions ----------------------------------------------------------


@pytest.mark.parametrize("engine", ["explore", "bmc", "hypothesis"])
def test_a_guard_that_never_holds_is_not_proved(engine: str, tmp_path: Path) -> None:
    extra = ("--max-examples", "20", "--steps", "5", "--derandomize") if engine == "hypothesis" else ()
    res = check(NEVER, "--engine", engine, *extra, tmp=tmp_path)
    assert res.exit_code == 3, res.output
    head = res.stdout.splitlines()[0]
    assert head.startswith("UNKNOWN") and "PROVED" not in head and "BOUNDED_OK" not in head, head
    assert "no action enabled in the initial state" in res.output
    assert "warning[OWN073]: " in res.output and "vacuity_never_true_guard.py:" in res.output


def test_prove_on_a_guard_that_never_holds_is_unknown() -> None:
    res = invoke("prove", str(NEVER))
    assert res.exit_code == 3, res.output
    assert res.stdout.startswith("UNKNOWN"), res.output
    assert "no action enabled in the initial state" in res.output


def test_zero_transitions_fails_ownership_test(tmp_path: Path) -> None:
    res = invoke("test", str(only(tmp_path, NEVER)))
    assert res.exit_code == 1, res.output
    assert "FAIL  vacuity_never_true_guard" in res.output and "no action is enabled" in res.output


# -- a dead action -----------------------------------------------------------------


def test_dead_cleanup_is_a_vacuous_proof_in_the_text(tmp_path: Path) -> None:
    res = check(DEAD, tmp=tmp_path)
    assert res.exit_code == 3, res.output  # vacuous is not a pass: inconclusive
    head = res.stdout.splitlines()[0]
    assert head == "PROVED (vacuous: 1 action never fired: cleanup)  vacuity_dead_cleanup (explore)", head
    assert "vacuous is not a pass: exit 3 (inconclusive); make cleanup fire or declare it may_be_dead" in \
        " ".join(res.output.split())
    flat = " ".join(res.output.split())
    where = f"vacuity_dead_cleanup.py:{line_of(DEAD, 'def cleanup') - 1}:"  # the decorator line
    assert "warning[OWN070]:" in flat and where in flat and "action cleanup never fired" in flat
    assert "may_be_dead" in flat
    assert "actions fired" in flat and "cleanup 0/0 (never fired)" in flat


def test_dead_cleanup_in_json_junit_and_sarif(tmp_path: Path) -> None:
    out_json, out_xml, out_sarif = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.sarif"
    res = check(DEAD, "--json", str(out_json), "--junit", str(out_xml), "--sarif", str(out_sarif), tmp=tmp_path)
    assert res.exit_code == 3, res.output
    doc = json.loads(out_json.read_text())
    spec = doc["specs"][0]
    assert spec["verdict"] == "PROVED" and spec["vacuous"] is True
    assert spec["status"] == "inconclusive" and doc["ok"] is False and doc["summary"]["inconclusive"] == 1
    assert spec["qualifier"] == "vacuous: 1 action never fired: cleanup"
    assert all(i["status"] == "inconclusive" for i in spec["invariants"])
    assert [w["subject"] for w in spec["warnings"]] == ["cleanup"]
    assert spec["warnings"][0]["code"] == "OWN070" and spec["warnings"][0]["rule"] == "vacuous-action"
    counts = {a["name"]: (a["enabled_states"], a["transitions"]) for a in spec["actions"]}
    assert counts["cleanup"] == (0, 0) and all(t > 0 for n, (_e, t) in counts.items() if n != "cleanup")
    assert all(a["measured"] == "exact" and a["complete"] for a in spec["actions"])

    suite = ET.parse(out_xml).getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["vacuity"] == "vacuous: 1 action never fired: cleanup"
    assert "cleanup" in (props.get("warning.1") or "")
    errors = list(suite.iter("error"))
    assert suite.get("errors") == str(len(errors)) == "2" and all(e.get("type") == "VACUOUS" for e in errors)
    assert all((e.get("message") or "").startswith("vacuous: action cleanup never fired") for e in errors)

    results = json.loads(out_sarif.read_text())["runs"][0]["results"]
    warn = [r for r in results if r["ruleId"] == "vacuous-action"]
    assert len(warn) == 1 and warn[0]["level"] == "warning"
    assert warn[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == line_of(DEAD, "def cleanup") - 1


def test_allow_vacuous_exits_0_and_passes_the_reports_with_the_warning(tmp_path: Path) -> None:
    out_json, out_xml = tmp_path / "r.json", tmp_path / "r.xml"
    res = check(DEAD, "--allow-vacuous", "--json", str(out_json), "--junit", str(out_xml), tmp=tmp_path)
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("PROVED (vacuous: 1 action never fired: cleanup)"), res.output
    assert "vacuous, accepted by --allow-vacuous: exit 0" in res.output
    assert "warning[OWN070]:" in res.output  # the opt-in keeps the warning
    spec = json.loads(out_json.read_text())["specs"][0]
    assert spec["status"] == "passed" and spec["vacuous"] is True
    assert all(i["status"] == "passed" and i["message"].startswith("warning: vacuous:") for i in spec["invariants"])
    suite = ET.parse(out_xml).getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "0" and suite.get("failures") == "0"


def test_dead_cleanup_fails_ownership_test_and_its_reports(tmp_path: Path) -> None:
    out_xml, out_sarif, out_json = tmp_path / "t.xml", tmp_path / "t.sarif", tmp_path / "t.json"
    res = invoke("test", str(only(tmp_path, DEAD)), "--junit", str(out_xml), "--sarif", str(out_sarif),
                 "--json", str(out_json))
    assert res.exit_code == 1, res.output
    assert ("FAIL  vacuity_dead_cleanup: expected safe, got a vacuous safe verdict (action cleanup never fired); "
            in res.output), res.output
    assert "got safe" not in res.output
    failures = list(ET.parse(out_xml).getroot().iter("failure"))
    assert failures and all(f.get("type") == "VACUOUS" for f in failures)
    results = json.loads(out_sarif.read_text())["runs"][0]["results"]
    assert {"vacuous-action", "unmet-expectation"} <= {r["ruleId"] for r in results}
    [unmet] = [r for r in results if r["ruleId"] == "unmet-expectation"]
    assert unmet["message"]["text"].startswith(
        "vacuity_dead_cleanup: expected safe, got a vacuous safe verdict (action cleanup never fired)")
    assert json.loads(out_json.read_text())["specs"][0]["status"] == "failed"


def test_the_html_badge_of_a_vacuous_proof_is_amber(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    res = invoke("report", str(DEAD), str(DECLARED), "--out", str(out))
    assert res.exit_code == 3, res.output  # the report's exit status follows the same rule
    assert "explore PROVED (vacuous: 1 action never fired: cleanup)" in res.output
    page = out.read_text()
    assert '<span class="badge VACUOUS" title="action cleanup never fired">PROVED (vacuous)</span>' in page
    assert ".badge.VACUOUS { color:var(--amber)" in page
    # The declared spec's proof is the only green badge: one per place a verdict is shown (toc, heading, run).
    assert page.count('<span class="badge PROVED">') == 3
    assert invoke("report", str(DEAD), "--out", str(out), "--allow-vacuous").exit_code == 0


def test_declaring_the_action_may_be_dead_passes_ownership_test(tmp_path: Path) -> None:
    res = invoke("test", str(only(tmp_path, DEAD, DECLARED)))
    assert "PASS  vacuity_dead_cleanup_declared" in res.output, res.output
    assert "FAIL  vacuity_dead_cleanup:" in res.output
    listed = invoke("list", str(tmp_path / "specs"))
    assert "may be dead: cleanup: kept to show the declaration" in listed.output
    head = check(DECLARED, tmp=tmp_path).stdout.splitlines()[0]
    assert head == "PROVED  vacuity_dead_cleanup_declared (explore)"


@pytest.mark.parametrize("engine", ["bmc", "hypothesis"])
def test_other_engines_report_the_dead_action(engine: str, tmp_path: Path) -> None:
    extra = ("--max-examples", "30", "--steps", "10", "--derandomize") if engine == "hypothesis" else ()
    res = check(DEAD, "--engine", engine, *extra, tmp=tmp_path)
    assert res.exit_code == 3, res.output
    assert "vacuous: 1 action never fired: cleanup)" in res.stdout.splitlines()[0], res.output
    assert "action cleanup never fired" in " ".join(res.output.split())


def test_prove_reports_the_dead_action() -> None:
    res = invoke("prove", str(DEAD))
    assert res.exit_code == 3, res.output
    assert res.stdout.startswith("PROVED (vacuous: 1 action never fired: cleanup)"), res.output
    allowed = invoke("prove", str(DEAD), "--allow-vacuous")
    assert allowed.exit_code == 0 and allowed.stdout.startswith("PROVED (vacuous:"), allowed.output


def test_bounded_search_says_not_seen_to_fire() -> None:
    """A budget-cut search does not claim more than it saw."""
    from ownership.engines.coverage import search_coverage

    acts = {a.name: a for a in search_coverage(Instance(load_spec(DEAD)), max_states=2)}
    assert not acts["cleanup"].complete and acts["cleanup"].states == 2
    from ownership.core.result import dead_action_warning

    assert "was not seen to fire in a breadth-first search of 2 states" in dead_action_warning(acts["cleanup"]).message


def test_explore_counts_every_transition_per_action() -> None:
    inst = Instance(load_spec(DEAD))
    r = explore(inst, ExploreOptions(symmetry=False))
    assert sum(a.transitions for a in r.actions) == r.stats.transitions
    # Enabled states, recounted by brute force over the reachable states.
    seen = {inst.init_state}
    frontier = [inst.init_state]
    enabled = dict.fromkeys(inst.spec.actions, 0)
    while frontier:
        nxt = []
        for st in frontier:
            succs = inst.expand(st)
            for name in {ai.action.name for ai, _ in succs}:
                enabled[name] += 1
            for _ai, sc in succs:
                if sc.state not in seen:
                    seen.add(sc.state)
                    nxt.append(sc.state)
        frontier = nxt
    assert {a.name: a.enabled_states for a in r.actions} == enabled


# -- a missing @spec.action ----------------------------------------------------------


def test_a_function_missing_its_decorator_is_reported(tmp_path: Path) -> None:
    spec = load_spec(MISSING)
    [w] = spec.warnings
    assert w.code.label == "OWN071" and w.subject == "finish" and w.line == line_of(MISSING, "def finish")
    assert "add @spec.action" in w.message
    res = check(MISSING, tmp=tmp_path)
    assert res.exit_code == 3
    assert res.stdout.startswith("PROVED (vacuous: 1 warning: OWN071)"), res.output
    flat = " ".join(res.output.split())
    assert "warning[OWN071]: " in flat and f"vacuity_missing_action.py:{w.line}: function finish" in flat
    test = invoke("test", str(only(tmp_path, MISSING)))
    assert test.exit_code == 1, test.output
    assert ("FAIL  vacuity_missing_action: expected safe, got a vacuous safe verdict "
            "(function finish is not a registered action)") in test.output, test.output


def test_helpers_and_registered_functions_are_not_reported(tmp_path: Path) -> None:
    path = tmp_path / "helpers.py"
    path.write_text(MISSING.read_text().replace("def finish(s, r: Req):  # BUG: no @spec.action",
                                                "def finish(s, r: Req):") + (
        "\n\n@spec.action\ndef done(s, r: Req):\n    finish(s, r)\n\n\ndef _free_pages(s, r: Req, extra: int):\n"
        "    return extra\n"
    ))
    assert load_spec(path).warnings == []


def test_no_library_spec_has_an_unregistered_action() -> None:
    for path in spec_files(SPECS):
        assert load_spec(path).warnings == [], path


# -- alloc beyond the pool ---------------------------------------------------------------


def test_alloc_beyond_the_pool_is_reported_where_it_is_called(tmp_path: Path) -> None:
    res = check(ALLOC, tmp=tmp_path)
    assert res.exit_code == 3
    head = res.stdout.splitlines()[0]
    assert head.startswith("PROVED (vacuous: 1 action never fired: grow; 1 more warning: OWN072)"), head
    flat = " ".join(res.output.split())
    where = f"vacuity_alloc_beyond_pool.py:{line_of(ALLOC, 'pool.alloc(s, r, 3')}:"
    assert "warning[OWN072]:" in flat and where in flat and "alloc of 3 kv pages" in flat and "only 2" in flat
    assert "action grow never fired" in flat
    # A pool large enough makes both warnings go away.
    big = check(ALLOC, "-p", "pages=4", tmp=tmp_path)
    assert big.stdout.splitlines()[0] == "PROVED  vacuity_alloc_beyond_pool (explore)", big.output
    test = invoke("test", str(only(tmp_path, ALLOC)))
    assert test.exit_code == 1 and "OWN072" in test.output, test.output


# -- the declaration -------------------------------------------------------------------


def _spec_text(body: str) -> str:
    return (
        "from ownership import Spec, require, safe\n"
        "spec = Spec('decl', expect=safe())\n"
        "Req = spec.domain('Req', 1)\n"
        "spec.var('on', bool, per=Req, init=False)\n"
        "@spec.invariant\n"
        "def ok(s):\n"
        "    return True\n" + body
    )


def test_may_be_dead_works_bare_and_with_arguments(tmp_path: Path) -> None:
    path = tmp_path / "decl.py"
    path.write_text(_spec_text(
        "@spec.action\ndef go(s, r: Req):\n    require(not s.on[r])\n    s.on[r] = True\n"
        "@spec.action(may_be_dead='only with two requests')\ndef other(s, r: Req):\n    require(False)\n"
    ))
    spec = load_spec(path)
    assert spec.actions["go"].may_be_dead is None
    assert spec.actions["other"].may_be_dead == "only with two requests"
    r = explore(Instance(spec))
    assert r.verdict is Verdict.PROVED and not r.vacuous and r.vacuity() == ()


@pytest.mark.parametrize("body,where", [
    ("@spec.action(may_be_dead='')\ndef go(s, r: Req):\n    pass\n", "@spec.action(may_be_dead="),
    ("@spec.action\ndef go(s, r: Req):\n    pass\nspec.may_be_dead('nope', reason='x')\n", "spec.may_be_dead("),
    ("@spec.action\ndef go(s, r: Req):\n    pass\nspec.may_be_dead('go', reason='  ')\n", "spec.may_be_dead("),
    ("@spec.action('why')\ndef go(s, r: Req):\n    pass\n", "@spec.action("),
])
def test_a_malformed_declaration_is_a_located_error(body: str, where: str, tmp_path: Path) -> None:
    path = tmp_path / "decl.py"
    path.write_text(_spec_text(body))
    with pytest.raises(OwnershipError) as info:
        load_spec(path)
    assert info.value.code.label == "OWN074"
    assert info.value.line == line_of(path, where), info.value.one_line()


# -- the library ---------------------------------------------------------------------------


def test_every_library_action_fires_or_is_declared() -> None:
    """Over each library spec's whole reachable space (no invariant stops the search early)."""
    for path in spec_files(SPECS):
        r = explore(Instance(load_spec(path)), ExploreOptions(invariants=()))
        assert r.verdict is Verdict.PROVED, path
        assert r.dead_actions() == (), (path, [a.name for a in r.dead_actions()])


def test_assert_safe_and_the_pytest_outcomes_fail_a_vacuous_proof() -> None:
    from ownership.core.expectation import Status, invariant_outcomes
    from ownership.testing.assertions import assert_safe

    with pytest.raises(AssertionError, match=r"got a vacuous safe verdict \(action cleanup never fired\)"):
        assert_safe(DEAD)
    assert_safe(DECLARED)
    spec = load_spec(DEAD)
    outcomes = invariant_outcomes(explore(Instance(spec)), spec.expect)
    assert outcomes and all(o.status is Status.FAILED and "cleanup never fired" in o.message for o in outcomes)


def test_the_vacuity_sarif_is_valid_sarif(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parent / "data" / "sarif-2.1.0-rtm.5.json").read_text())
    out = tmp_path / "v.sarif"
    invoke("test", str(only(tmp_path, DEAD, MISSING, ALLOC)), "--sarif", str(out))
    log = json.loads(out.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert [e.message for e in validator.iter_errors(log)] == []
    rules = [r["ruleId"] for r in log["runs"][0]["results"]]
    assert {"vacuous-action", "unregistered-action", "alloc-exceeds-pool"} <= set(rules)
    levels = {r["ruleId"]: r["level"] for r in log["runs"][0]["results"]}
    assert levels["vacuous-action"] == levels["unregistered-action"] == levels["alloc-exceeds-pool"] == "warning"


def test_a_missing_decorator_is_found_under_future_annotations(tmp_path: Path) -> None:
    path = tmp_path / "fut.py"
    path.write_text("from __future__ import annotations\n" + MISSING.read_text())
    assert [w.subject for w in load_spec(path).warnings] == ["finish"]


def test_an_expected_violation_with_a_spec_warning_fails_and_says_why(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    folder.mkdir()
    source = (SPECS.parent / "docs" / "examples" / "paged_alloc.py").read_text()
    (folder / "paged_alloc.py").write_text(source + "\n\ndef stray(s, r: Req):  # no @spec.action\n    pool.free(s, r)\n")
    res = invoke("test", str(folder))
    assert res.exit_code == 1, res.output
    assert ("FAIL  paged_alloc: expected violates no_foreign_read, got violates no_foreign_read with a warning "
            "(function stray is not a registered action)") in res.output, res.output
