"""Invariants only read, and events name real invariants (issue #12: no false PROVED).

Both specs in tests/trust/ were PROVED before these checks: an invariant that
resets a counter made every bound on it hold, and an event marked with a
misspelt invariant was never a violation.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.paramexplore import ParamOptions, explore_params
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

TRUST = Path(__file__).resolve().parent / "trust"

ENGINES: dict[str, Callable[[Instance], object]] = {
    "explore": lambda i: explore(i),
    "explore-no-symmetry": lambda i: explore(i, ExploreOptions(symmetry=False)),
    "bmc": lambda i: bmc(i, BmcOptions(max_depth=4)),
    "bmc-no-symmetry": lambda i: bmc(i, BmcOptions(max_depth=4, symmetry=False)),
    "prove": lambda i: prove(i, BmcOptions()),
    "hypothesis": lambda i: check_stateful(i, HypothesisOptions(max_examples=5, steps=5, derandomize=True)),
    "free": lambda i: explore_params(i, ParamOptions(free=("n",), where=("n <= 3",))),
}


def trust(name: str) -> Instance:
    return Instance(load_spec(TRUST / f"{name}.py"))


def line_of(name: str, text: str) -> int:
    lines = (TRUST / f"{name}.py").read_text().splitlines()
    return next(i for i, ln in enumerate(lines, start=1) if text in ln)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_an_invariant_that_writes_the_state_is_refused(engine: str) -> None:
    with pytest.raises(OwnershipError) as err:
        ENGINES[engine](trust("invariant_writes_state"))
    assert err.value.code is Code.SPEC_IMPURE
    assert "invariant resets writes the state" in err.value.message
    # The invariant's line is its decorator's (as for every invariant), the line before its def.
    assert err.value.line in (line_of("invariant_writes_state", "def resets") - 1,
                              line_of("invariant_writes_state", "def resets"))


def test_the_terminal_predicate_may_not_write_either() -> None:
    inst = trust("invariant_writes_state")
    state = inst.init_state
    inst.view._cells[:] = state
    inst.view.count = 5  # as a writing predicate would leave it
    with pytest.raises(OwnershipError) as err:
        inst.check_unchanged(state)
    assert err.value.code is Code.SPEC_IMPURE


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_an_event_naming_an_unknown_invariant_is_refused(engine: str) -> None:
    with pytest.raises(OwnershipError) as err:
        ENGINES[engine](trust("event_names_unknown_invariant"))
    assert err.value.code is Code.SPEC_INVALID
    assert "violates='no_oops'" in err.value.message and "known: no_opps" in err.value.message
    assert err.value.line == line_of("event_names_unknown_invariant", 'violates="no_oops"')
