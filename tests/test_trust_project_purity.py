"""Impurity in the spec's own project modules, and the determinism audit on every state of small searches.

Each spec in tests/trust/impure_project_*.py imports a helper module next to
it (the "project"): a memo dict keyed by request that opens a guard once, a
module-level counter, an ``lru_cache``.  explore, bmc and prove said PROVED
before; now every engine refuses them.  ``impure_project_registry`` hides its
memo in an object, which the static check cannot see: the audit refuses it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ownership.cli import app
from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

TRUST = Path(__file__).resolve().parent / "trust"


def fresh(name: str) -> None:
    """Forget the project helper modules, so each test starts with empty memos (as a new process would)."""
    for key in [k for k, m in sys.modules.items() if Path(str(getattr(m, "__file__", ""))).parent == TRUST
                and Path(str(getattr(m, "__file__", ""))).stem.startswith("project_")]:
        del sys.modules[key]


def inst_of(name: str) -> Instance:
    fresh(name)
    return Instance(load_spec(TRUST / f"{name}.py"), {})


def line_in(file: str, text: str) -> int:
    lines = (TRUST / file).read_text().splitlines()
    return next(i for i, ln in enumerate(lines, start=1) if text in ln)


def _hypothesis(inst: Instance) -> Any:
    from ownership.engines.hypothesis_engine.engine import check_stateful
    from ownership.engines.hypothesis_engine.options import HypothesisOptions

    return check_stateful(inst, HypothesisOptions(seed=1, max_examples=20))


def _free(inst: Instance) -> Any:
    from ownership.engines.paramexplore import ParamOptions, explore_params

    return explore_params(inst, ParamOptions(free=("bound",)))


ENGINES: dict[str, Callable[[Instance], Any]] = {
    "explore": lambda i: explore(i, ExploreOptions(kernel="python")),
    "compiled": lambda i: explore(i, ExploreOptions(kernel="compiled", symmetry=False)),
    "bmc": lambda i: bmc(i, BmcOptions(max_depth=4)),
    "bmc-no-prefix": lambda i: bmc(i, BmcOptions(max_depth=4, prefix_states=0)),
    "prove": lambda i: prove(i, BmcOptions(max_depth=4)),
    "hypothesis": _hypothesis,
    "free": _free,
}

STATIC = [
    ("impure_project_memo", "project_memo.py", "reads a module-level dict", "if r in _ASKED:"),
    ("impure_project_counter", "project_counter.py", "assigns the module global GRANTS", "GRANTS += 1"),
    ("impure_project_lru", "impure_project_lru.py", "lru_cache", "require(project_cache.is_running"),
]


@pytest.mark.parametrize(("name", "file", "words", "line_text"), STATIC)
def test_impurity_in_an_imported_project_module_is_refused_at_its_line(name: str, file: str, words: str,
                                                                      line_text: str) -> None:
    with pytest.raises(OwnershipError) as err:
        inst_of(name)
    assert err.value.code is Code.SPEC_IMPURE
    assert words in err.value.message
    assert err.value.file is not None and Path(err.value.file).name == file
    assert err.value.line == line_in(file, line_text)


@pytest.mark.parametrize("name", [n for n, *_ in STATIC])
@pytest.mark.parametrize("command", [["check"], ["check", "--engine", "bmc"], ["check", "--engine", "prove"],
                                     ["check", "--engine", "hypothesis"], ["check", "--free", "bound"]])
def test_every_engine_refuses_the_project_impurity(name: str, command: list[str]) -> None:
    fresh(name)
    out = CliRunner().invoke(app, [*command, str(TRUST / f"{name}.py")])
    assert out.exit_code != 0
    assert "OWN067" in out.output


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_memo_hidden_in_a_project_object_is_refused_by_the_audit_in_every_engine(engine: str) -> None:
    inst = inst_of("impure_project_registry")
    with pytest.raises(OwnershipError) as err:
        ENGINES[engine](inst)
    assert err.value.code is Code.SPEC_NONDETERMINISTIC
    assert "project_registry.REGISTRY changed inside" in err.value.message
    assert err.value.file is not None and Path(err.value.file).name == "project_registry.py"
    assert err.value.line == line_in("project_registry.py", "REGISTRY = _Registry()")


@pytest.mark.parametrize("engine", list(ENGINES))
def test_pure_project_helpers_stay_fine(engine: str) -> None:
    # Constants, a pure function, a frozen dataclass and an Enum imported from the project.
    result = ENGINES[engine](inst_of("pure_project_helpers"))
    assert result.verdict in (Verdict.PROVED, Verdict.BOUNDED_OK)
    assert any("determinism audited on every one of" in n for n in result.notes)


def test_the_explorer_says_which_states_it_audited() -> None:
    result = explore(inst_of("pure_project_helpers"), ExploreOptions(kernel="python"))
    assert "determinism audited on every one of 9 expanded states" in result.notes


def test_history_dependence_that_running_twice_in_a_state_never_shows_is_caught(tmp_path: Path) -> None:
    # The guard opens after the third call, counted by a generator (neither the static check nor the
    # module-data comparison can look inside one): any two runs in one state agree, and only the
    # initial state expanded again after the search shows the difference.
    (tmp_path / "pyproject.toml").write_text("")
    # The generator sits in an attribute of a plain object, where the static check does not look.
    (tmp_path / "opener.py").write_text("import itertools\n\n\nclass Box:\n    pass\n\n\nBOX = Box()\nBOX.ticks = (i for i in itertools.count())\n\n\n"
                                        "def opened():\n    return next(BOX.ticks) >= 3\n")
    (tmp_path / "late_open.py").write_text(
        "import opener\n\nfrom ownership import Spec, require\n\n"
        "spec = Spec('late_open', summary='a guard opened by the third call')\n"
        "spec.var('x', int, init=0)\n\n\n@spec.action\ndef step(s):\n    require(s.x < 2)\n    s.x = s.x + 1\n\n\n"
        "@spec.action\ndef jump(s):\n    require(opener.opened() and s.x == 0)\n    s.x = 5\n\n\n"
        "@spec.invariant\ndef small(s):\n    return s.x < 5\n")
    inst = Instance(load_spec(tmp_path / "late_open.py"), {})
    with pytest.raises(OwnershipError) as err:
        explore(inst, ExploreOptions(kernel="python"))
    assert err.value.code is Code.SPEC_NONDETERMINISTIC
    assert "action jump() is not a deterministic function of the state: run again later in the search" \
        in err.value.message


@pytest.mark.parametrize("kernel", ["python", "compiled"])
def test_an_invariant_that_changes_with_its_calls_is_refused(kernel: str, tmp_path: Path) -> None:
    # It holds for its first six calls, counted by a generator: evaluated again, it does not.
    (tmp_path / "pyproject.toml").write_text("")
    ticker = f"ticker_{kernel}"  # a module name of its own: an import is cached by name for the process
    (tmp_path / f"{ticker}.py").write_text("import itertools\n\n\nclass Box:\n    pass\n\n\nBOX = Box()\nBOX.ticks = (i for i in itertools.count())\n\n\n"
                                        "def fresh():\n    return next(BOX.ticks) < 6\n")
    (tmp_path / "inv_spec.py").write_text(
        f"import {ticker} as ticker\n\nfrom ownership import Spec, require\n\n"
        "spec = Spec('inv_spec', summary='an invariant that holds for its first calls')\n"
        "spec.var('x', int, init=0)\n\n\n@spec.action\ndef step(s):\n    require(s.x < 3)\n    s.x = s.x + 1\n\n\n"
        "@spec.action\ndef back(s):\n    require(s.x > 0)\n    s.x = s.x - 1\n\n\n"
        "@spec.invariant\ndef small(s):\n    return ticker.fresh() and s.x < 100\n")
    inst = Instance(load_spec(tmp_path / "inv_spec.py"), {})
    with pytest.raises(OwnershipError) as err:
        explore(inst, ExploreOptions(kernel=kernel, symmetry=False))
    assert err.value.code is Code.SPEC_NONDETERMINISTIC
    assert "invariant small is not a" in err.value.message


def test_a_project_module_imported_inside_an_action_is_followed(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helper_local.py").write_text(
        "SEEN = {}\n\n\ndef once(r):\n    if r in SEEN:\n        return False\n    SEEN[r] = True\n    return True\n")
    (tmp_path / "local_import.py").write_text(
        "import helper_local as _loaded  # noqa: F401\n\nfrom ownership import Spec, require\n\n"
        "spec = Spec('local_import', summary='a helper imported inside the action')\n"
        "spec.var('x', int, init=0)\n\n\n@spec.action\ndef step(s):\n    import helper_local\n"
        "    require(helper_local.once(1) and s.x == 0)\n    s.x = 1\n\n\n"
        "@spec.invariant\ndef small(s):\n    return s.x < 2\n")
    with pytest.raises(OwnershipError) as err:
        Instance(load_spec(tmp_path / "local_import.py"), {})
    assert err.value.code is Code.SPEC_IMPURE
    assert err.value.file is not None and Path(err.value.file).name == "helper_local.py"


def test_a_random_run_step_is_run_twice(tmp_path: Path) -> None:
    # What the random walks and Hypothesis' steps call: the same step again, in the same state.
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "stepper_box.py").write_text("import itertools\n\n\nclass Box:\n    pass\n\n\nBOX = Box()\nBOX.ticks = (i for i in itertools.count())\n\n\n" "def tick():\n    return next(BOX.ticks)\n")
    (tmp_path / "counter_spec.py").write_text(
        "import stepper_box\n\nfrom ownership import Spec\n\nspec = Spec('counter_spec')\nspec.var('x', int, init=0)\n\n\n"
        "@spec.action\ndef step(s):\n    s.x = stepper_box.tick() % 2\n\n\n@spec.invariant\ndef ok(s):\n    return True\n")
    inst = Instance(load_spec(tmp_path / "counter_spec.py"), {})
    ai = inst.action_instances[0]
    succ = inst.run_with_picks(inst.init_state, ai, ())
    assert succ is not None
    with pytest.raises(OwnershipError) as err:
        inst.audit_step(inst.init_state, ai, succ)
    assert err.value.code is Code.SPEC_NONDETERMINISTIC
    assert "action step() is not a deterministic function of the state" in err.value.message
