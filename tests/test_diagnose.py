"""The diagnosis: actions and conditions every path to a violation shares, checked against the graph itself."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
from typer.testing import CliRunner

from conftest import CORPUS, ROOT, SPECS, instance
from ownership import require
from ownership.analysis.explain.diagnosis import DiagnoseOptions
from ownership.analysis.explain.necessary import diagnose
from ownership.cli import app
from ownership.core.result import Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.graph import GraphOptions, state_graph
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.render.text import explain_report

V21 = SPECS / "sglang_disagg_v0_5_21.py"


def line_of(path: Path, text: str) -> int:
    """1-based line of the first line of ``path`` containing ``text`` (so no line number is hard-coded)."""
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if text in line:
            return n
    raise AssertionError(f"{text!r} not in {path}")


def necessary_by_graph(inst: Instance, invariant: str) -> set[str]:
    """Action names on every path to a violation, from `ownership graph`'s own graph (independent code)."""
    g = state_graph(inst, GraphOptions())
    bad = [n for n, d in g.nodes(data=True) if d["violates"] == invariant]
    assert bad, "the spec has no violating state"
    names = {label.split("(")[0] for _, _, d in g.edges(data=True) for label in d["action"].split(" | ")}
    out = set()
    for name in names:
        keep = [
            (a, b)
            for a, b, d in g.edges(data=True)
            if any(label.split("(")[0] != name for label in d["action"].split(" | "))
        ]
        h = nx.DiGraph(keep)
        h.add_node(0)
        reach = nx.descendants(h, 0) | {0}
        if not reach & set(bad):
            out.add(name)
    return out


@pytest.fixture(scope="module")
def v21():
    return diagnose(instance("sglang_disagg_v0_5_21"), "no_foreign_read")


def test_v21_points_at_decode_admission_and_commit(v21) -> None:
    assert v21.complete and v21.violating_states > 0
    missing = {a.action: a for a in v21.missing_checks}
    assert list(missing) == ["decode_pop_preallocated", "decode_pop_transferred"]
    admit = missing["decode_pop_preallocated"]
    assert "p_to_finish = yes" in {c.key for c in admit.first_unchecked}
    assert admit.line == line_of(V21, "def decode_pop_preallocated") - 1  # the decorator line, as inspect gives it
    commit = missing["decode_pop_transferred"]
    keys = {c.key for c in commit.first_unchecked}
    assert "kv_tokens < d_input_len" in keys
    # The commit branch: `if s.kv[r] == KV.FAILED:` went the "false" way on every violating path.
    branch = [c for c in commit.conditions if c.kind == "branch"]
    assert [(c.line, c.text.endswith("is false")) for c in branch] == [(line_of(V21, "if s.kv[r] == KV.FAILED:"), True)]


def test_v21_necessary_actions_match_an_independent_cut_on_the_graph(v21) -> None:
    inst = instance("sglang_disagg_v0_5_21")
    assert {a.action for a in v21.necessary} == necessary_by_graph(inst, "no_foreign_read")
    # The timeout and the transfer failure are escapes, never needed for the leak.
    assert "decode_transfer_timeout" not in {a.action for a in v21.necessary}


def _guarded(name: str, guard) -> Instance:
    """v0.5.21 with ``require(not guard(s, r))`` in front of action ``name``: the fix the diagnosis proposes."""
    base = load_spec(V21)
    original = base.actions[name].fn
    patched = base.derive(f"v21_guarded_{name}")

    def action(s, r):  # type: ignore[no-untyped-def]
        require(not guard(s, r))
        return original(s, r)

    action.__annotations__ = {"r": base.domains["Req"]}
    action.__name__ = name
    patched.replace(action)
    return Instance(patched)


@pytest.mark.parametrize(
    ("name", "guard"),
    [
        ("decode_pop_preallocated", lambda s, r: s.p_to_finish[r]),
        ("decode_pop_transferred", lambda s, r: s.kv_tokens[r] < s.d_input_len[r]),
    ],
)
def test_a_check_on_the_reported_condition_removes_every_violation(name, guard) -> None:
    result = explore(_guarded(name, guard), ExploreOptions(invariants=("no_foreign_read",)))
    assert result.verdict is Verdict.PROVED, result.coverage()


def test_a_check_elsewhere_does_not(v21) -> None:
    # Control: guarding the timeout (not necessary) leaves the leak in place.
    result = explore(
        _guarded("decode_transfer_timeout", lambda s, r: True), ExploreOptions(invariants=("no_foreign_read",))
    )
    assert result.verdict is Verdict.VIOLATED


def test_state_limit_says_the_diagnosis_is_bounded() -> None:
    d = diagnose(instance("sglang_disagg_v0_5_21"), "no_foreign_read", DiagnoseOptions(max_states=300))
    assert not d.complete and d.states == 300
    assert "explored bound only" in d.coverage()


def test_safe_spec_has_nothing_to_explain() -> None:
    d = diagnose(instance("sglang_disagg_v0_5_22"), "no_foreign_read")
    assert d.complete and d.violating_states == 0 and d.necessary == ()


def test_unknown_invariant_is_a_numbered_error() -> None:
    with pytest.raises(OwnershipError) as info:
        diagnose(instance("sglang_disagg_v0_5_21"), "no_such_invariant")
    assert info.value.code is Code.UNKNOWN_INVARIANT


TWO_ROUTES = """
from ownership import Spec, require
spec = Spec("two_routes")
spec.var("x", int, init=0)

@spec.action
def a1(s):
    require(s.x == 0)
    s.x = 1

@spec.action
def b1(s):
    require(s.x == 1)
    s.x = 3

@spec.action
def a2(s):
    require(s.x == 0)
    s.x = 2

@spec.action
def b2(s):
    require(s.x == 2)
    s.x = 3

@spec.invariant
def never_three(s):
    return s.x != 3
"""


def test_two_routes_have_no_single_necessary_action_but_pair_cuts(tmp_path: Path) -> None:
    path = tmp_path / "two_routes.py"
    path.write_text(TWO_ROUTES)
    d = diagnose(Instance(load_spec(path)), "never_three")
    assert d.necessary == ()
    assert set(d.cuts) == {("a1", "a2"), ("a1", "b2"), ("b1", "a2"), ("b1", "b2")}


def test_corpus_double_free_blames_the_abort_branch() -> None:
    d = diagnose(instance("toy_double_free"), "no_double_ownership")
    inst = instance("toy_double_free")
    assert {a.action for a in d.necessary} == necessary_by_graph(inst, "no_double_ownership")
    abort = next(a for a in d.necessary if a.action == "abort_after_finish")
    line = line_of(CORPUS / "toy_double_free.py", "if s.kv_content[p] == r")
    assert any(c.kind == "branch" and c.line == line and c.text.endswith("is true") for c in abort.conditions)


def test_check_explain_prints_the_diagnosis_under_the_counterexample(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(
        app, ["check", "specs/sglang_disagg_v0_5_21.py", "--explain", "--no-render", "--out", str(tmp_path)]
    )
    assert res.exit_code == 1, res.output
    out = res.output
    assert out.index("Counterexample: 15 steps") < out.index("Explanation: what every path to no_foreign_read")
    assert "every path to no_foreign_read passes through: decode_pop_preallocated(r)" in " ".join(out.split())
    assert f"specs/sglang_disagg_v0_5_21.py:{line_of(V21, 'def decode_pop_transferred') - 1}" in out
    assert "complete reachable state graph" in out
    assert "--explain" in out.splitlines()[-1]  # the reproduce command keeps the flag


def test_check_explain_prints_nothing_when_the_explorer_finds_nothing(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["check", str(V21), "--explain", "--no-render", "--out", str(tmp_path), "--max-states", "100"]
    )
    assert res.exit_code == 3, res.output
    assert "Explanation" not in res.output


def test_bounded_explanation_says_it_holds_within_the_bound_only() -> None:
    lines = explain_report(
        diagnose(instance("sglang_disagg_v0_5_21"), "no_foreign_read", DiagnoseOptions(max_states=300))
    )
    text = " ".join(" ".join(lines).split())
    assert "the first 300 states only" in text and "explored bound only" in text
    assert "no state violating no_foreign_read within the explored graph" in text
