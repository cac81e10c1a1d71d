"""Shared fixtures: paths to the library specs and a loader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ownership.core.trace import Trace
from ownership.engines.explore import explore
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.lang.model import Spec
from ownership.lang.successors import Successor

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
CORPUS = Path(__file__).resolve().parent / "corpus"


def instance(name: str, **params: int) -> Instance:
    """An instance of a library spec (``specs/NAME.py``) or corpus spec."""
    path = SPECS / f"{name}.py"
    if not path.exists():
        path = CORPUS / f"{name}.py"
    return Instance(load_spec(path), params)


def run_once(spec: Spec, body: Callable[[Any], None], *, recording: bool = True,
             **params: int) -> tuple[Instance, list[Successor]]:
    """Run ``body(s)`` as the spec's only action on the initial state; return the instance and its outcomes."""
    spec.actions.clear()
    spec.action(body)
    inst = Instance(spec, params or None)
    (ai,) = inst.action_instances
    with inst.mode(recording=recording):
        return inst, inst.successors_of(inst.init_state, ai)


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(scope="module")
def trace() -> Trace:
    """The v0.5.19 counterexample at default size (what the renderers draw)."""
    result = explore(instance("sglang_disagg_v0_5_19"))
    assert result.trace is not None
    return result.trace


# -- the fast / slow / quality split --------------------------------------------
# A plain `pytest` runs the fast tests (a couple of minutes on two cores).
# `slow` marks engine runs of tens of seconds (whole-library checks, Z3 on the
# incident model); `quality` marks tests that measure how strong the checker is
# (mutation scores of the library's invariants) rather than whether it is right.
# `.ci/run` runs everything: `pytest --all` (or any `-m` expression).

_HEAVY = ("slow", "quality")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all", action="store_true", default=False,
                     help="also run the tests marked slow and quality (a plain run deselects them)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # An explicit choice wins: --all, a -m expression, or a test named by its id.
    if config.getoption("--all") or config.getoption("-m") or any("::" in a for a in config.args):
        return
    heavy = [item for item in items if any(item.get_closest_marker(m) for m in _HEAVY)]
    if heavy:
        config.hook.pytest_deselected(items=heavy)
        dropped = {id(item) for item in heavy}
        items[:] = [item for item in items if id(item) not in dropped]
