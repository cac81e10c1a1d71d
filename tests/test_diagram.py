"""The explicit reachable set and its decision diagram (used by ``prove``)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from ownership.engines.diagram import build_diagram, reachable_states
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from tests.conftest import SPECS


def test_a_product_of_choices_needs_one_node_per_cell() -> None:
    states = list(itertools.product([False, True], repeat=4))
    d = build_diagram(states)
    assert d.size == 4
    assert all(st in d for st in states)


def test_membership_is_exact_on_random_sets() -> None:
    rng = random.Random(7)
    universe = list(itertools.product(range(3), [None, 0, 1], [False, True], range(4)))
    for _ in range(20):
        chosen = rng.sample(universe, rng.randint(1, len(universe)))
        d = build_diagram(chosen)
        inside = set(chosen)
        assert [st in d for st in universe] == [st in inside for st in universe]
        assert d.size <= len(chosen) * 4


def test_bools_and_ints_are_not_confused() -> None:
    # True == 1 in Python; a diagram of (1,) must not contain (True,).
    d = build_diagram([(1, 0)])
    assert (1, 0) in d and (True, 0) not in d and (1, False) not in d


def test_an_empty_set_has_no_diagram() -> None:
    with pytest.raises(ValueError):
        build_diagram([])


@pytest.mark.slow
def test_reachable_states_of_the_fixed_disaggregation_spec() -> None:
    inst = Instance(load_spec(SPECS / "sglang_disagg_v0_5_21.py"))
    reach = reachable_states(inst, 100_000)
    assert reach.complete and reach.unfit is None
    assert len(reach.states) == 16_313 and reach.depth == 16  # pinned: no symmetry reduction here
    assert len(set(reach.states)) == len(reach.states) and reach.states[0] == inst.init_state
    small = reachable_states(inst, 1_000)
    assert not small.complete and len(small.states) == 1_000


def test_the_search_stops_at_a_state_that_does_not_fit() -> None:
    inst = Instance(load_spec(Path(__file__).resolve().parent / "solver" / "tripling.py"))
    reach = reachable_states(inst, 1_000, lambda st: st[0] < 100)
    assert not reach.complete and reach.unfit == (243,)
    assert [st[0] for st in reach.states] == [1, 3, 9, 27, 81]
