"""The Hypothesis engine: generated state machines, shrunk traces, honest passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, ROOT, instance
from ownership.cli import app
from ownership.core.replay import replay
from ownership.core.result import StopReason, Verdict
from ownership.engines.explore import explore
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.hypothesis_engine.machine import InvariantViolation, machine_class
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

# exhaustive_states=0: these tests are about the random phase, which a space this small never reaches by default.
FAST = HypothesisOptions(max_examples=60, steps=20, seed=1, exhaustive_states=0)


def test_finds_and_shrinks_the_double_free() -> None:
    inst = instance("toy_double_free")
    r = check_stateful(inst, FAST)
    assert r.verdict is Verdict.VIOLATED and r.violated == "no_double_ownership"
    assert r.trace is not None and r.trace.engine == "hypothesis"
    assert replay(inst, r.trace).ok
    # Shrinking reaches the explorer's shortest length on this toy.
    assert len(r.trace) == len(explore(instance("toy_double_free")).trace or ())


@pytest.mark.slow
def test_a_pass_is_bounded_and_says_what_ran() -> None:
    r = check_stateful(instance("toy_safe_counter"), FAST)
    assert r.verdict is Verdict.BOUNDED_OK and r.stop_reason is StopReason.EXAMPLES_DONE
    assert r.action_counts is not None and r.action_counts["prefill"] > 0 and r.action_counts["decode_and_finish"] > 0
    text = r.coverage()
    assert "random examples" in text and "NOT checked" in text
    assert r.stats.transitions == sum(r.action_counts.values())


def test_same_seed_same_trace() -> None:
    a = check_stateful(instance("toy_double_free"), FAST)
    b = check_stateful(instance("toy_double_free"), FAST)
    assert a.trace is not None and b.trace is not None
    assert [s.call for s in a.trace.steps] == [s.call for s in b.trace.steps]


def test_reproduction_is_pasteable_and_fails_at_the_step() -> None:
    r = check_stateful(instance("toy_double_free"), FAST)
    assert r.reproduction is not None and "load_machine(" in r.reproduction
    code = r.reproduction.replace("'tests/corpus/", repr(str(CORPUS) + "/")[:-1])
    with pytest.raises(InvariantViolation, match="no_double_ownership"):
        exec(compile(code, "<reproduction>", "exec"), {})  # noqa: S102 - the point of the test


def test_an_action_never_enabled_is_a_warning(tmp_path: Path) -> None:
    text = (CORPUS / "toy_safe_counter.py").read_text() + (
        "\n\n@spec.action\ndef never(s, r: Req):\n    require(s.phase[r] == Phase.DONE and s.phase[r] == Phase.IDLE)\n"
    )
    path = tmp_path / "toy_never.py"
    path.write_text(text)
    r = check_stateful(Instance(load_spec(path)), FAST)
    assert r.verdict is Verdict.BOUNDED_OK and r.vacuous
    [dead] = r.dead_actions()
    assert dead.name == "never" and dead.enabled_states == 0 and dead.transitions == 0
    assert any(w.subject == "never" and "never fired" in w.message for w in r.vacuity())


def test_rules_are_per_action_not_per_instance() -> None:
    inst = instance("sglang_disagg_v0_5_19", requests=16)
    cls = machine_class(inst)
    rules = [n for n in vars(cls) if not n.startswith("_") and callable(getattr(cls, n))]
    assert len(inst.action_instances) > 100
    assert len([n for n in rules if not n.startswith("invariant_")]) == len(inst.spec.actions) + 1  # + restart


@pytest.mark.slow
def test_runs_where_exhaustive_search_cannot() -> None:
    inst = instance("sglang_disagg_v0_5_19", requests=16, decode_pool_tokens=512, prefill_pool_tokens=256, context_len=1024)
    r = check_stateful(inst, HypothesisOptions(max_examples=3, steps=40, seed=0))
    assert r.verdict in (Verdict.BOUNDED_OK, Verdict.VIOLATED)
    assert r.stats.transitions > 0 and r.stats.states > 1


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["check", *args])
    return res.exit_code, res.stdout


def test_cli_derandomize_prints_the_same_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = ("tests/corpus/toy_double_free.py", "--engine", "hypothesis", "--derandomize", "--no-render", "--max-examples", "50",
            "--max-states", "1")
    code1, out1 = _cli(*args, "--out", str(tmp_path / "a"))
    code2, out2 = _cli(*args, "--out", str(tmp_path / "a"))
    assert code1 == code2 == 1
    assert out1 == out2
    assert "Hypothesis' reproduction" in out1 and "--derandomize" in out1


def test_cli_writes_the_same_artefacts_as_other_engines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    code, out = _cli("tests/corpus/toy_double_free.py", "--engine", "hypothesis", "--seed", "3", "--out", str(tmp_path))
    assert code == 1, out
    for name in ("trace.json", "trace.itf.json", "trace.dot", "trace.svg"):
        assert (tmp_path / name).exists()
    assert "--seed 3" in out
    res = CliRunner().invoke(app, ["replay", str(tmp_path / "trace.json")])
    assert res.exit_code == 0 and "no_double_ownership is violated, as the trace says" in res.output


def test_cli_refuses_random_options_for_other_engines() -> None:
    code, _ = _cli(str(CORPUS / "toy_double_free.py"), "--seed", "3")
    assert code == 2


def test_engine_all_runs_hypothesis_and_its_reproduce_line_has_no_seed_for_an_exact_answer(tmp_path: Path) -> None:
    code, out = _cli(str(CORPUS / "toy_double_free.py"), "--engine", "all", "--no-render", "--out", str(tmp_path))
    assert code == 1, out
    assert "agrees: hypothesis says VIOLATED" in out
    # The space is small: hypothesis searched it breadth-first, so its answer does not depend on a seed.
    reproduce = [ln for ln in out.splitlines() if ln.strip().startswith("reproduce:")][0]
    assert "--engine all" in reproduce and "--seed " not in reproduce
