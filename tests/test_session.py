"""The engine registry and the session: one pipeline behind the CLI, the pytest plugin and ownership.testing."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import CORPUS
from ownership import session
from ownership.cli import app
from ownership.core.result import CoverageKind, Verdict
from ownership.engines import registry
from ownership.engines.schema import Kind
from ownership.errors import Code, OwnershipError
from ownership.session import FLAGS, Settings

TOY = CORPUS / "toy_double_free.py"
SAFE = CORPUS / "toy_safe_counter.py"


# -- the registry --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(registry.ENGINES))
def test_every_engine_declares_what_it_decides_and_owns_its_options(name: str) -> None:
    engine = registry.get(name)
    assert engine.name == name
    assert isinstance(engine.decides, CoverageKind)
    types = engine.options_types()
    assert types
    for t in types:
        assert dataclasses.is_dataclass(t) and t.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert callable(getattr(t, "from_settings", None)) and callable(getattr(t, "validate", None))
    # The default settings give each engine options of one of its own types.
    options = engine.options(Settings(engine=name))
    assert isinstance(options, types)
    options.validate()


def test_the_registry_declares_what_each_engine_decides() -> None:
    decides = {name: e.decides for name, e in registry.ENGINES.items()}
    assert decides == {"explore": CoverageKind.EXHAUSTIVE, "bmc": CoverageKind.BOUNDED,
                       "hypothesis": CoverageKind.SAMPLED, "prove": CoverageKind.PROOF}


def test_an_unknown_engine_is_own013_with_the_list() -> None:
    with pytest.raises(OwnershipError) as err:
        registry.get("nope")
    assert err.value.code is Code.BAD_OPTION
    assert "unknown engine 'nope'" in err.value.message
    for name in registry.ENGINE_NAMES:
        assert name in err.value.message
    with pytest.raises(OwnershipError):
        registry.resolve(Settings(engine="nope"))


def test_all_is_defined_once_and_its_reference_comes_first() -> None:
    assert registry.expand("all") == registry.ALL.engines
    assert registry.ALL.reference == registry.ALL.engines[0] == "explore"
    assert all(name in registry.ENGINES for name in registry.ALL.engines)
    assert [e.name for e, _ in registry.resolve(Settings(engine="all"))] == list(registry.ALL.engines)


def test_the_pytest_plugin_expands_all_as_the_registry_does() -> None:
    from ownership.testing.pytest_plugin import _engines

    class Config:
        def getoption(self, name: str) -> Any:
            return ["all"]

    assert _engines(Config()) == registry.ALL.engines  # type: ignore[arg-type]


@pytest.mark.parametrize(("options", "flag"), [
    ("ownership.engines.explore:ExploreOptions(max_depth=-1)", "--max-depth"),
    ("ownership.engines.z3run:BmcOptions(max_k=-1)", "--max-k"),
    ("ownership.engines.hypothesis_engine.options:HypothesisOptions(max_examples=0)", "--max-examples"),
    ("ownership.engines.paramexplore:ParamOptions(free=('a',), minimize='b')", "--minimize b"),
])
def test_validate_refuses_values_out_of_range(options: str, flag: str) -> None:
    target, _, call = options.partition(":")
    import importlib

    module = importlib.import_module(target)
    value = eval(call, vars(module))  # noqa: S307 - a constructor call written in this file
    with pytest.raises(OwnershipError) as err:
        value.validate()
    assert flag in err.value.message


# -- the settings' flags ---------------------------------------------------------------------------


def test_every_flag_names_a_settings_field_or_an_engine_option_once() -> None:
    fields = {f.name for f in dataclasses.fields(Settings)}
    assert all((row.field in fields) != (row.field in registry.OPTION_BY_FIELD) for row in FLAGS)
    assert len({row.field for row in FLAGS}) == len(FLAGS)
    assert len({row.flag for row in FLAGS}) == len(FLAGS)


def _settings_of(args: list[str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings the command line hands the session for ``args``."""
    seen: list[Settings] = []

    class SeenError(Exception):
        pass

    def fake(path: Any, settings: Settings, **kwargs: Any) -> Any:
        seen.append(settings)
        raise SeenError

    monkeypatch.setattr(session, "check", fake)
    CliRunner().invoke(app, args)
    assert seen, args
    return seen[0]


@pytest.mark.parametrize("engine_flags", [
    ["--no-symmetry", "--deadlock", "--max-depth", "7", "--max-states", "90", "--max-seconds", "5.0", "-i", "a", "-i", "b"],
    ["--engine", "bmc", "--solver-timeout", "2.5", "--free", "requests", "--where", "requests <= 2", "--minimize", "requests"],
    ["--engine", "hypothesis", "--max-examples", "9", "--steps", "4", "--walks", "0", "--seed", "11"],
    ["--engine", "hypothesis", "--derandomize"],
    ["--explain"],
])
def test_the_reproduce_flags_give_back_the_same_settings(engine_flags: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    first = _settings_of(["check", str(TOY), *engine_flags], monkeypatch)
    flags = first.reproduce_flags()
    again = _settings_of(["check", str(TOY), *flags], monkeypatch)
    assert again == first, flags


# -- the session -------------------------------------------------------------------------------------


def test_one_outcome_object_says_everything(tmp_path: Path) -> None:
    outcome = session.check(TOY, Settings(out=tmp_path, render=False, progress=False))
    assert outcome.result is outcome.results[0] and len(outcome.results) == 1
    assert outcome.result.verdict is Verdict.VIOLATED
    assert outcome.params == {"requests": 2, "pages": 2}
    assert outcome.judgement is not None and outcome.judgement.ok  # the spec declares this violation
    assert outcome.trace_dir == tmp_path
    assert {p.name for p in outcome.files} == {"trace.json", "trace.itf.json", "trace.dot"}
    assert outcome.reproduce is not None and outcome.reproduce.startswith("ownership check ")
    assert outcome.exit_code == 1 and not outcome.stopped_in_setup


def test_all_relates_every_other_engine_to_the_reference() -> None:
    outcome = session.check(TOY, Settings(engine="all", progress=False, options={"seed": 1}), outputs=False)
    assert [r.engine for r in outcome.results] == list(registry.ALL.engines)
    assert [(other.engine, relation) for other, relation, _ in outcome.relations] == [
        ("bmc", "agrees"), ("hypothesis", "agrees")]
    assert outcome.files == ()


def test_the_cli_and_run_check_get_the_same_outcome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ownership.testing import run_check
    from ownership.testing.assertions import check_outcome

    real = session.check
    seen: list[session.Outcome] = []

    def spy(*args: Any, **kwargs: Any) -> session.Outcome:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(session, "check", spy)
    res = CliRunner().invoke(app, ["check", str(TOY), "--no-render", "--no-progress", "--out", str(tmp_path)])
    assert res.exit_code == 1
    (cli,) = seen
    lib = check_outcome(TOY)
    assert f"reproduce: {cli.reproduce}" in res.output
    assert lib.reproduce == cli.reproduce
    for a, b in ((cli.result, lib.result), (cli.result, run_check(TOY))):
        assert (a.verdict, a.violated, a.stats.states, a.stats.transitions) == (b.verdict, b.violated, b.stats.states, b.stats.transitions)
        assert a.trace is not None and b.trace is not None and a.trace.steps == b.trace.steps
    assert cli.judgement == lib.judgement


def test_run_check_does_not_import_the_command_line() -> None:
    import os
    import subprocess
    import sys

    import ownership

    code = (f"import sys; from ownership.testing import run_check; run_check({str(SAFE)!r}); "
            "sys.exit('ownership.cli' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(Path(ownership.__file__).resolve().parents[1])}
    assert subprocess.run([sys.executable, "-c", code], check=False, env=env).returncode == 0


# -- prove through the session ---------------------------------------------------------------------


def test_prove_writes_the_ci_reports_like_check(tmp_path: Path) -> None:
    j, x, s = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.sarif"
    res = CliRunner().invoke(app, ["prove", str(TOY), "--max-k", "4", "--no-spacer", "--out", str(tmp_path / "o"),
                                   "--json", str(j), "--junit", str(x), "--sarif", str(s)])
    assert res.exit_code == 1, res.output
    assert res.stdout.startswith("VIOLATED  no_double_ownership  in toy_double_free (prove)")
    data = json.loads(j.read_text())
    assert data["command"] == "prove"
    (spec,) = data["specs"]
    assert spec["verdict"] == "VIOLATED" and spec["coverage_kind"] == "proof"
    assert any(f.endswith("trace.json") for f in spec["trace"]["files"])
    assert ET.parse(x).getroot().get("name") == "ownership prove"
    results = json.loads(s.read_text())["runs"][0]["results"]
    assert [r["ruleId"] for r in results] and "no_double_ownership" in json.dumps(results)


def test_check_engine_prove_is_the_prove_command(tmp_path: Path) -> None:
    a = CliRunner().invoke(app, ["prove", str(SAFE), "--out", str(tmp_path / "a")])
    b = CliRunner().invoke(app, ["check", str(SAFE), "--engine", "prove", "--out", str(tmp_path / "b")])
    assert a.exit_code == b.exit_code == 0, (a.output, b.output)
    assert a.stdout.splitlines()[0] == b.stdout.splitlines()[0]
    assert a.stdout.splitlines()[0].startswith("PROVED")


@pytest.mark.parametrize("flags", [["--max-depth", "3"], ["--max-states", "9"]])
def test_check_engine_prove_refuses_the_search_limits_it_cannot_honour(flags: list[str]) -> None:
    res = CliRunner().invoke(app, ["check", str(SAFE), "--engine", "prove", *flags])
    assert res.exit_code == 2
    assert res.output.startswith("error[OWN013]: ") and flags[0] in res.output


@pytest.mark.parametrize(("engine", "shortest"), [("explore", "breadth-first"), ("bmc", "depth by depth"),
                                                   ("hypothesis", None)])
def test_a_counterexample_says_it_is_shortest_only_where_the_engine_declares_so(engine: str, shortest: str | None) -> None:
    settings = Settings(engine=engine, render=False, progress=False,
                        options={"seed": 1, "max_examples": 50} if engine == "hypothesis" else {})
    result = session.check(TOY, settings, outputs=False).result
    assert result.trace is not None and result.shortest == shortest
    assert registry.get(engine).capabilities.shortest == shortest
    from ownership.render.text import result_report

    said = next(line for line in result_report(result) if "Counterexample:" in line)
    assert ("(shortest: " in said) == (shortest is not None), said


def test_the_shared_flags_default_to_the_settings_defaults() -> None:
    from ownership.session.settings import SHARED

    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    for row in SHARED:
        if row.kind is not Kind.EACH:
            assert row.default == defaults[row.field], row.field
    assert Settings().reproduce_flags() == []
