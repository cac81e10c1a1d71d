"""Surfaces that used to pass what the checking engines call a violation, or to run unguarded.

Each test fails without the change it covers: a model-based test and the
graph export ignoring flagged steps, ``--engine all`` exiting with the
explorer's status alone, and the Python API running without the instance-size
check the command line has (or a way to raise it that its error names).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import networkx as nx
import pytest
from typer.testing import CliRunner

import ownership.engines.explore  # noqa: F401 - one copy for the session: the inner pytest run drops what it imports
from ownership.cli import app
from ownership.core.result import CoverageKind, StopReason, Verdict
from ownership.engines.graph import state_graph
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.session import Settings
from ownership.testing import Adapter, MBTOptions, assert_conforms, run_mbt
from ownership.testing.assertions import assert_safe, run_check

pytest_plugins = ["pytester"]

TRUST = Path(__file__).resolve().parent / "trust"
FLAGGED = TRUST / "left_flagged_release.py"
INVARIANT = "no_release_while_writing"


class _Page:
    """An implementation that does what the spec says, dropped write included."""

    def __init__(self) -> None:
        self.held = False
        self.writing = False


class FlaggedReleaseAdapter(Adapter):
    """Drives :class:`_Page` in lock step with ``left_flagged_release``: the two always agree."""

    spec = str(FLAGGED)
    page: _Page
    params: ClassVar[dict[str, int]] = {}

    def setup(self) -> None:
        self.page = _Page()

    def take(self) -> None:
        self.page.held = True

    def write(self) -> None:
        self.page.writing = True

    def land(self) -> None:
        self.page.writing = False

    def release(self) -> None:
        self.page.held = self.page.writing = False

    def observe(self) -> dict[str, Any]:
        return {"held": self.page.held, "writing": self.page.writing}

    def expected(self, s: Any) -> dict[str, Any]:
        return {"held": bool(s.held), "writing": bool(s.writing)}


# -- mbt: a flagged step fails the run --------------------------------------------------


def test_mbt_fails_at_a_step_the_spec_flags() -> None:
    r = run_mbt(FlaggedReleaseAdapter, MBTOptions(max_examples=50, steps=10, seed=0))
    assert r.verdict is Verdict.VIOLATED, r.notes
    assert r.violated == INVARIANT
    headline = r.notes[0]
    assert "release()" in headline and "step" in headline and INVARIANT in headline, headline
    assert "flags" in headline and "in flight" in headline, headline  # the invariant's doc says why
    assert r.reproduction is not None and f"flags a violation of {INVARIANT}" in r.reproduction
    # The trace ends in the flagged step and replays as a violation of it.
    assert r.trace is not None and r.trace.violation == INVARIANT
    assert r.trace.steps[-1].action == "release"


def test_mbt_command_exits_1_on_a_flagged_step(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["mbt", str(FLAGGED), "--adapter", f"{__file__}:FlaggedReleaseAdapter",
                                   "--max-examples", "50", "--steps", "10", "--seed", "0", "--out", str(tmp_path / "o")])
    assert res.exit_code == 1, res.output
    assert "VIOLATED" in res.output and INVARIANT in res.output


# -- graph: flagged edges are violations ----------------------------------------------------


def test_graph_marks_flagged_edges_and_the_states_only_they_reach() -> None:
    g = state_graph(Instance(load_spec(FLAGGED)))
    flagged = [(a, b) for a, b, d in g.edges(data=True) if d["violates"] == INVARIANT]
    assert flagged and all("release()" in g.edges[e]["action"] for e in flagged)
    # Every state satisfies the invariant; the state after the dropped write is reached only by a flagged step.
    assert not any(d["violates"] for _, d in g.nodes(data=True))
    only = [n for n, d in g.nodes(data=True) if d["flagged"] == INVARIANT]
    assert len(only) == 1 and all(b == only[0] for _, b in flagged)


@pytest.mark.parametrize("suffix", [".graphml", ".gexf", ".dot"])
def test_every_graph_format_shows_flagged_steps(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"g{suffix}"
    res = CliRunner().invoke(app, ["graph", str(FLAGGED), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "2 violating steps" in res.output and "1 state reached only through one" in res.output, res.output
    if suffix == ".dot":
        text = out.read_text()
        assert text.count(f"violates {INVARIANT}") == 2 and 'style="dashed"' in text
        return
    read = nx.read_graphml if suffix == ".graphml" else nx.read_gexf
    g = read(out)
    assert sum(1 for *_, d in g.edges(data=True) if d.get("violates") == INVARIANT) == 2
    assert sum(1 for _, d in g.nodes(data=True) if d.get("flagged") == INVARIANT) == 1


# -- --engine all: the exit status is every engine's ---------------------------------------


def _engines_say(monkeypatch: pytest.MonkeyPatch, **say: Any) -> None:
    """Each engine of ``all`` reports explore's real result rewritten by ``say[engine]`` (a function of it)."""
    from ownership.engines import registry

    real = registry.run_engine

    def run_engine(name: str, inst: Any, options: Any, progress: Any = None) -> Any:
        base = real("explore", inst, registry.ENGINES["explore"].options(Settings(progress=False)), None)
        return say[name](base)

    monkeypatch.setattr(registry, "run_engine", run_engine)


def _safe(r: Any) -> Any:
    return replace(r, verdict=Verdict.PROVED, stop_reason=StopReason.EXHAUSTED, violated=None, trace=None)


def _sampled_pass(r: Any) -> Any:
    return replace(_safe(r), engine="hypothesis", verdict=Verdict.BOUNDED_OK, stop_reason=StopReason.EXAMPLES_DONE,
                   coverage_kind=CoverageKind.SAMPLED)


def test_engine_all_exits_3_when_an_engine_is_inconclusive_behind_a_proof(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    _engines_say(monkeypatch, explore=_safe, hypothesis=_sampled_pass,
                 bmc=lambda r: replace(_safe(r), engine="bmc", verdict=Verdict.UNKNOWN,
                                       stop_reason=StopReason.SOLVER_UNKNOWN))
    res = CliRunner().invoke(app, ["check", str(FLAGGED), "--engine", "all", "--no-render", "--out", str(tmp_path)])
    assert res.exit_code == 3, res.output
    assert "exit 3, not explore's 0: bmc is inconclusive" in res.output, res.output


def test_engine_all_exits_1_when_another_engine_finds_a_violation(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    # explore stops at its state limit: it cannot compare, so only the exit status can tell.
    _engines_say(monkeypatch, hypothesis=_sampled_pass, bmc=lambda r: replace(r, engine="bmc"),
                 explore=lambda r: replace(_safe(r), verdict=Verdict.UNKNOWN, stop_reason=StopReason.STATE_LIMIT))
    res = CliRunner().invoke(app, ["check", str(FLAGGED), "--engine", "all", "--no-render", "--out", str(tmp_path),
                                   "--json", str(tmp_path / "r.json")])
    assert res.exit_code == 1, res.output
    assert f"exit 1, not explore's 3: bmc finds {INVARIANT} violated" in res.output, res.output
    assert (tmp_path / "trace.json").exists()  # the counterexample that decides the status is written
    report = json.loads((tmp_path / "r.json").read_text())
    assert "VIOLATED" in json.dumps(report) and "bmc" in json.dumps(report), report



# -- the Python API: the command line's guards, and knobs its messages name ---------------------

WIDE = TRUST / "left_wide_pool.py"
SLOW = TRUST / "left_slow_counter.py"


def test_run_check_refuses_a_huge_instance_naming_its_keyword() -> None:
    with pytest.raises(OwnershipError) as err:
        run_check(WIDE, params={"pages": 100})
    assert err.value.code is Code.INSTANCE_TOO_LARGE
    assert "more than max_domain 64" in err.value.message and "raise max_domain if you mean it" in err.value.message
    assert "--max-domain" not in err.value.message  # not a flag of the Python API
    assert run_check(WIDE, params={"pages": 70}, max_domain=70).verdict is Verdict.PROVED


def test_assertions_take_the_guards_as_keywords() -> None:
    with pytest.raises(OwnershipError) as err:
        assert_safe(WIDE, pages=70)
    assert "raise max_domain" in err.value.message
    assert_safe(WIDE, max_domain=70, pages=70)
    with pytest.raises(AssertionError) as failed:
        assert_safe(SLOW, max_seconds=0.5)
    assert "UNKNOWN" in str(failed.value) and "raise max_seconds to let it finish" in str(failed.value)


class WidePoolAdapter(Adapter):
    """A set of taken pages, in lock step with ``left_wide_pool``."""

    spec = str(WIDE)
    taken: set[int]

    def setup(self) -> None:
        self.taken = set()

    def take(self, p: int) -> None:
        self.taken.add(p)

    def give_back(self, p: int) -> None:
        self.taken.discard(p)

    def observe(self) -> dict[str, Any]:
        return {"taken": sorted(self.taken)}

    def expected(self, s: Any) -> dict[str, Any]:
        return {"taken": [p for p in range(s.params.pages) if s.taken[p]]}


def test_mbt_refuses_a_huge_instance_and_stops_at_its_time_limit() -> None:
    with pytest.raises(OwnershipError) as err:
        run_mbt(WidePoolAdapter, MBTOptions(max_examples=5, steps=5, seed=0), params={"pages": 100})
    assert err.value.code is Code.INSTANCE_TOO_LARGE and "raise max_domain" in err.value.message
    r = run_mbt(WidePoolAdapter, MBTOptions(max_examples=100_000, steps=50, seed=0, max_seconds=0.5))
    assert r.verdict is Verdict.UNKNOWN and r.stop_reason is StopReason.TIME_LIMIT
    assert any("raise max_seconds" in n for n in r.notes), r.notes
    with pytest.raises(AssertionError, match="no verdict"):
        assert_conforms(WidePoolAdapter, max_examples=100_000, steps=50, seed=0, max_seconds=0.5)


def _inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.RunResult:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester.runpytest("-p", "ownership.testing.pytest_plugin", "-p", "no:cacheprovider",
                              "-W", "ignore::pytest.PytestAssertRewriteWarning", *args)


def test_the_pytest_plugin_refuses_a_huge_spec_and_names_its_ini_option(pytester: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    text = WIDE.read_text().replace('spec.param("pages", 2, min=1)', 'spec.param("pages", 70, min=1)')
    pytester.path.joinpath("wide.py").write_text(text)
    res = _inner(pytester, monkeypatch, "--ownership", "wide.py")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*OWN017*more than ownership_max_domain 64*raise ownership_max_domain*"])
    pytester.makeini("[pytest]\nownership_max_domain = 70\n")
    _inner(pytester, monkeypatch, "--ownership", "wide.py").assert_outcomes(passed=1)
