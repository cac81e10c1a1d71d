"""Comparing engines honestly, sampled passes that never read as proofs, and pasteable reproductions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import hypothesis
import pytest
from test_corpus import liveness_marks
from typer.testing import CliRunner

from conftest import CORPUS, ROOT, SPECS, instance
from ownership.cli import app
from ownership.core.result import CheckResult, CoverageKind, Stats, StopReason, Verdict
from ownership.engines import AGREES, DISAGREES, MISSED, NOT_COMPARABLE, compare, relate
from ownership.engines.explore import explore
from ownership.engines.hypothesis_engine import machine as hypothesis_machine
from ownership.engines.hypothesis_engine import sample as hypothesis_sample
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

pytest_plugins = ["pytester"]

def _result(engine: str, verdict: Verdict, violated: str | None = None, depth: int = 3) -> CheckResult:
    reason = StopReason.VIOLATION if verdict is Verdict.VIOLATED else StopReason.EXAMPLES_DONE
    return CheckResult("s", engine, verdict, reason, Stats(depth=depth), {}, ("a", "b"), violated=violated)


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


# -- relations -----------------------------------------------------------------


def test_a_sampled_pass_next_to_a_violation_is_missed_not_agreement() -> None:
    relation, why = relate(_result("explore", Verdict.VIOLATED, "a"), _result("hypothesis", Verdict.BOUNDED_OK))
    assert relation == MISSED and "random sample" in why
    assert compare([_result("explore", Verdict.VIOLATED, "a"), _result("hypothesis", Verdict.BOUNDED_OK)]) is None


def test_a_sampled_pass_next_to_a_proof_is_not_comparable() -> None:
    explored = CheckResult("s", "explore", Verdict.PROVED, StopReason.EXHAUSTED, Stats(), {}, ("a",))
    relation, _ = relate(explored, _result("hypothesis", Verdict.BOUNDED_OK))
    assert relation == NOT_COMPARABLE


def test_a_different_first_violated_invariant_is_a_disagreement() -> None:
    a, b = _result("explore", Verdict.VIOLATED, "a"), _result("hypothesis", Verdict.VIOLATED, "b")
    assert relate(a, b)[0] == DISAGREES
    assert "hypothesis finds b" in (compare([a, b]) or "")
    assert relate(a, _result("hypothesis", Verdict.VIOLATED, "a"))[0] == AGREES


def test_a_bounded_pass_below_a_violation_length_is_a_disagreement() -> None:
    explored = _result("explore", Verdict.VIOLATED, "a")
    explored = CheckResult("s", "explore", Verdict.VIOLATED, StopReason.VIOLATION, Stats(depth=2), {}, ("a",),
                           violated="a", trace=explore(instance("toy_double_free")).trace)
    steps = len(explored.trace or ())
    bounded = CheckResult("s", "bmc", Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT, Stats(depth=steps + 1), {}, ("a",))
    assert relate(explored, bounded)[0] == DISAGREES
    shallow = CheckResult("s", "bmc", Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT, Stats(depth=steps - 1), {}, ("a",))
    assert relate(explored, shallow)[0] == NOT_COMPARABLE


@pytest.mark.slow
def test_every_engine_says_its_kind_of_coverage() -> None:
    assert _result("hypothesis", Verdict.BOUNDED_OK).coverage_kind is CoverageKind.SAMPLED
    assert explore(instance("toy_safe_counter")).coverage_kind is CoverageKind.EXHAUSTIVE
    r = check_stateful(instance("toy_safe_counter"), HypothesisOptions(max_examples=5, steps=5, seed=1, exhaustive_states=0))
    assert r.coverage_kind is CoverageKind.SAMPLED and r.sampled


def test_engine_all_reports_a_missed_bug_as_missed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One example of one step cannot reach the 4-step double free (once the breadth-first
    # phase, which answers a space this small exactly, is off).
    monkeypatch.setattr(HypothesisOptions, "exhaustive_states", 0)
    code, out = _cli("check", str(CORPUS / "toy_double_free.py"), "--engine", "all", "--no-render", "--no-progress",
                     "--max-examples", "1", "--steps", "1", "--seed", "0", "--out", str(tmp_path))
    assert code == 1, out
    assert "agrees: hypothesis" not in out
    assert "missed: hypothesis says NO VIOLATION FOUND (sampled)" in out


TWO_INVARIANTS = '''
from ownership import Spec, require, safe

spec = Spec("two_invariants", expect=safe())
spec.var("x", int, init=0)


@spec.action
def bump(s):
    require(s.x < 3)
    s.x = s.x + 1


@spec.invariant
def zz_declared_first(s):
    return s.x < 2


@spec.invariant
def aa_declared_second(s):
    return s.x < 2
'''


def test_hypothesis_names_the_first_declared_invariant_as_explore_does(tmp_path: Path) -> None:
    path = tmp_path / "two_invariants.py"
    path.write_text(TWO_INVARIANTS)
    inst = Instance(load_spec(path))
    assert explore(inst).violated == "zz_declared_first"
    r = check_stateful(Instance(load_spec(path)), HypothesisOptions(max_examples=20, steps=5, seed=0))
    assert r.violated == "zz_declared_first"


# -- sampled passes in every output format -------------------------------------------


def test_a_sampled_pass_is_visibly_sampled_in_every_format(tmp_path: Path) -> None:
    j, x, s = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.sarif"
    code, out = _cli("check", str(CORPUS / "toy_safe_counter.py"), "--engine", "hypothesis", "--max-examples", "5",
                     "--steps", "5", "--seed", "1", "--max-states", "1", "--no-progress", "--json", str(j), "--junit", str(x), "--sarif", str(s))
    assert code == 0, out
    assert out.startswith("NO VIOLATION FOUND (sampled)  toy_safe_counter (hypothesis)")
    assert "PROVED" not in out and "BOUNDED_OK" not in out.splitlines()[0]
    assert json.loads(j.read_text())["specs"][0]["coverage_kind"] == "sampled"
    props = {p.get("name"): p.get("value") for p in ET.parse(x).getroot().iter("property")}
    assert props["coverage_kind"] == "sampled"
    inv = json.loads(s.read_text())["runs"][0]["invocations"][0]
    assert inv["properties"]["verdicts"][0]["coverageKind"] == "sampled"
    assert any("(sampled)" in n["message"]["text"] for n in inv["toolExecutionNotifications"])


def test_an_exhaustive_pass_says_exhaustive(tmp_path: Path) -> None:
    j = tmp_path / "r.json"
    code, _ = _cli("check", str(CORPUS / "toy_safe_counter.py"), "--json", str(j))
    assert code == 0
    assert json.loads(j.read_text())["specs"][0]["coverage_kind"] == "exhaustive"


@pytest.mark.slow
def test_pytest_plugin_records_the_coverage_kind(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    folder = pytester.path / "specs"
    folder.mkdir()
    spec = folder / "toy_safe_counter.py"
    spec.write_text((CORPUS / "toy_safe_counter.py").read_text())
    xml = pytester.path / "out.xml"
    result = pytester.runpytest(
        "-p", "ownership.testing.pytest_plugin", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning",
        "--ownership", "--ownership-engine", "hypothesis", f"--junitxml={xml}", "specs",
    )
    # The random engine searches a space this small exhaustively first: an exact PROVED, recorded as such
    # (a sampled pass would be skipped with its coverage, never passed).
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) > 0 and "skipped" not in outcomes and "failed" not in outcomes
    props = [p.get("value") for p in ET.parse(xml).getroot().iter("property") if p.get("name") == "coverage_kind"]
    assert props and set(props) == {"exhaustive"}


# -- Hypothesis' reproduction ---------------------------------------------------------------

RESTARTS = '''
from ownership import Spec, require, safe

spec = Spec("toy_restarts", expect=safe())
spec.var("v", int, init=-1)


@spec.action
def pick(s):
    require(s.v == -1)
    s.v = s.choose(list(range(12)))


@spec.invariant
def not_seven(s):
    return s.v != 7
'''


def _run_reproduction(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_reproduction_of_a_real_failing_run_raises_at_the_failing_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    # walks=0: the reproduction Hypothesis itself printed for its shrunk run.
    opts = HypothesisOptions(derandomize=True, walks=0, exhaustive_states=0)
    r = check_stateful(Instance(load_spec(SPECS / "vllm_fork_double_free_buggy.py")), opts)
    assert r.reproduction is not None and r.trace is not None
    proc = _run_reproduction(r.reproduction, ROOT)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (f"ownership.engines.hypothesis_engine.machine.InvariantViolation: invariant {r.violated} violated after "
                    f"step {len(r.trace)} {r.trace.steps[-1].call}")


def test_reproduction_with_restarts_runs_and_raises_at_the_failing_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "toy_restarts.py"
    path.write_text(RESTARTS)
    monkeypatch.chdir(tmp_path)
    # Without shrinking the failing example keeps the runs before it, each ended by a restart.
    plain = hypothesis_sample.hypothesis_settings
    monkeypatch.setattr(hypothesis_sample, "hypothesis_settings", lambda o: hypothesis.settings(plain(o), phases=[hypothesis.Phase.generate]))
    r = check_stateful(Instance(load_spec(path)), HypothesisOptions(max_examples=200, steps=40, seed=2, walks=0,
                                                                       exhaustive_states=0))
    assert r.violated == "not_seven" and r.reproduction is not None
    restart = [ln for ln in r.reproduction.splitlines() if ln.startswith("state.") and "restart" in ln]
    assert restart, r.reproduction
    assert all(re.fullmatch(r"state\.restart_when_done\(\)", ln) for ln in restart)
    proc = _run_reproduction(r.reproduction, tmp_path)
    assert "AttributeError" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == "ownership.engines.hypothesis_engine.machine.InvariantViolation: invariant not_seven violated after step 1 pick()"


def test_every_printed_step_names_an_attribute_of_the_machine() -> None:
    cls = hypothesis_machine.machine_class(instance("sglang_disagg_v0_5_19"))
    rules = cls.setup_state().rules
    assert len(rules) == len(instance("sglang_disagg_v0_5_19").spec.actions) + 1  # + the restart
    for rule in rules:
        assert getattr(cls, rule.function.__name__).__name__ == rule.function.__name__


def test_reproduction_of_a_walk_raises_at_the_failing_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    opts = HypothesisOptions(derandomize=True, exhaustive_states=0)  # the walks, not the breadth-first phase
    r = check_stateful(Instance(load_spec(SPECS / "sglang_disagg_v0_5_19.py")), opts)
    assert r.reproduction is not None and r.trace is not None
    assert r.options.get("found_by") == "walk"
    proc = _run_reproduction(r.reproduction, ROOT)
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (f"ownership.engines.hypothesis_engine.machine.InvariantViolation: invariant {r.violated} violated after "
                    f"step {len(r.trace)} {r.trace.steps[-1].call}")


# -- default budget finds every known bug of the library -------------------------------------

KNOWN_BUGS = sorted(p.name for p in SPECS.glob("*_buggy.py")) + ["sglang_disagg_v0_5_19.py"]


def _known_bug(name: str) -> object:
    """A known bug; one that is a temporal property is not found here unless hypothesis decides properties."""
    return pytest.param(name, id=name, marks=liveness_marks("hypothesis", name.removesuffix(".py")))


@pytest.mark.parametrize("name", [_known_bug(n) for n in KNOWN_BUGS])
def test_default_options_find_every_known_bug(name: str) -> None:
    inst = Instance(load_spec(SPECS / name))
    r = check_stateful(inst, HypothesisOptions(derandomize=True))
    expected = explore(Instance(load_spec(SPECS / name)))
    assert r.verdict is Verdict.VIOLATED, r.coverage()
    assert r.violated == expected.violated  # the same first violation as the explorer names
    assert r.trace is not None and expected.trace is not None
    assert len(r.trace) <= len(expected.trace) + 3  # shrunk to near the shortest


def test_cli_hypothesis_finds_the_v0_5_19_leak_with_default_options(tmp_path: Path) -> None:
    code, out = _cli("check", str(SPECS / "sglang_disagg_v0_5_19.py"), "--engine", "hypothesis", "--derandomize", "--no-render",
                     "--no-progress", "--out", str(tmp_path))
    assert code == 1, out
    assert out.startswith("VIOLATED  no_foreign_read  in sglang_disagg_v0_5_19 (hypothesis)")


def test_engine_all_asks_bmc_s_solver_from_depth_0_so_it_checks_the_encoding(tmp_path: Path) -> None:
    # Alone, bmc first searches the shallow depths concretely; compared with the explorer that would
    # repeat the explorer's own search, so under --engine all the solver answers every depth.
    code, alone = _cli("check", str(CORPUS / "toy_double_free.py"), "--engine", "bmc", "--no-render", "--no-progress",
                       "--out", str(tmp_path / "a"))
    assert code == 1, alone
    assert "before the solver started" in alone
    code, both = _cli("check", str(CORPUS / "toy_double_free.py"), "--engine", "all", "--no-render", "--no-progress",
                      "--seed", "0", "--out", str(tmp_path / "b"))
    assert code == 1, both
    assert "before the solver started" not in both
