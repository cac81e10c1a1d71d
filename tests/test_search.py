"""The one breadth-first search: visitors that stop it, replaceable frontier and seen-set, Instance modes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import instance
from ownership.analysis.explain.necessary import diagnose
from ownership.core.result import StopReason
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.graph import state_graph
from ownership.engines.search import BreadthFirst, Control, Limits, Stop, Visitor
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.invariants import select_invariants
from ownership.lang.loader import load_spec
from ownership.lang.successors import ActionInstance, Successor


class _StopAt(Visitor):
    """Stops at the first state at ``depth``, with a reason of its own."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.seen: list[int] = []
        self.states: list[State] = []

    def on_state(self, node: int, state: State, depth: int) -> Stop | None:
        self.seen.append(node)
        self.states.append(state)
        if depth == self.depth:
            return Stop(StopReason.DEADLOCK, node, depth, "mine")
        return None


def test_a_visitor_stops_the_search_with_its_reason_and_the_path_replays() -> None:
    inst = instance("sglang_single_node")
    search = BreadthFirst(inst)
    visitor = _StopAt(4)
    out = search.run(visitor)
    assert out.stop.reason is StopReason.DEADLOCK and out.stop.detail == "mine"
    assert out.depth == 4 and not out.complete
    # Stopped at once: the stopping state is the last one stored, nothing after it was looked at.
    assert out.stop.node == visitor.seen[-1] == out.states - 1
    path = search.tree.path(out.stop.node)
    assert len(path) == 4
    state = inst.init_state
    for action, picks in path:
        succ = inst.run_with_picks(state, inst.action_instances[action], picks)
        assert succ is not None
        state = succ.state
    assert state == visitor.states[-1]


class _Counter(Visitor):
    def __init__(self) -> None:
        self.edges = 0
        self.levels: list[tuple[int, int]] = []

    def on_edge(self, src: int, action: ActionInstance, succ: Successor, dst: int) -> None:
        self.edges += 1

    def on_level(self, depth: int, states: int) -> Stop | None:
        self.levels.append((depth, states))
        return None


def test_every_transition_reaches_on_edge_and_levels_add_up() -> None:
    search = BreadthFirst(instance("sglang_single_node"))
    counter = _Counter()
    out = search.run(counter)
    assert out.stop.reason is StopReason.EXHAUSTED and out.complete
    assert (out.states, out.transitions, out.depth) == (57, 92, 10)  # the explorer's pinned counts
    assert counter.edges == out.transitions
    assert [d for d, _ in counter.levels] == list(range(11))
    assert sum(n for _, n in counter.levels) == out.states


def test_on_level_can_stop_before_a_level() -> None:
    class Shallow(Visitor):
        def on_level(self, depth: int, states: int) -> Stop | None:
            return Stop(StopReason.DEPTH_LIMIT) if depth == 3 else None

    out = BreadthFirst(instance("sglang_single_node")).run(Shallow())
    bounded = BreadthFirst(instance("sglang_single_node"), limits=Limits(max_depth=3)).run(Visitor())
    assert out.stop.reason is bounded.stop.reason is StopReason.DEPTH_LIMIT
    assert (out.states, out.transitions, out.level) == (bounded.states, bounded.transitions, bounded.level)


def test_pruned_states_are_stored_but_not_expanded() -> None:
    depths: list[int] = []

    class NoFurther(Visitor):
        def on_state(self, node: int, state: State, depth: int) -> Control | None:
            depths.append(depth)
            return Control.PRUNE if depth == 2 else None

    out = BreadthFirst(instance("sglang_single_node")).run(NoFurther())
    assert out.stop.reason is StopReason.EXHAUSTED and out.level == 1  # the last level expanded
    assert max(depths) == 2 and out.states == len(depths)
    assert out.expanded == sum(1 for d in depths if d < 2)


class _Stack:
    """A frontier of its own: records the levels it hands out (the protocol, not the default class)."""

    def __init__(self) -> None:
        self._next: list[tuple[int, Any]] = []
        self.handed: list[int] = []

    def push(self, item: tuple[int, Any]) -> None:
        self._next.append(item)

    def next_level(self) -> Sequence[tuple[int, Any]]:
        level, self._next = self._next, []
        self.handed.append(len(level))
        return level


class _CountingSeen:
    """A seen-set of its own: keys stored as their repr, lookups counted."""

    def __init__(self) -> None:
        self.d: dict[str, int] = {}
        self.lookups = 0

    def __contains__(self, key: object) -> bool:
        self.lookups += 1
        return repr(key) in self.d

    def __getitem__(self, key: Any) -> int:
        return self.d[repr(key)]

    def __setitem__(self, key: Any, node: int) -> None:
        self.d[repr(key)] = node

    def __len__(self) -> int:
        return len(self.d)


@pytest.mark.parametrize("symmetry", [True, False])
def test_a_replaced_frontier_and_seen_set_find_the_same_states(symmetry: bool) -> None:
    frontier, seen = _Stack(), _CountingSeen()
    search = BreadthFirst(instance("sglang_disagg_v0_5_21"), symmetry=symmetry, frontier=frontier, seen=seen)
    out = search.run(Visitor())
    pinned = explore(instance("sglang_disagg_v0_5_21"), ExploreOptions(symmetry=symmetry)).stats
    assert (out.states, out.transitions, out.depth) == (pinned.states, pinned.transitions, pinned.depth)
    assert len(seen) == out.states and seen.lookups == out.transitions
    assert sum(frontier.handed) == out.states and frontier.handed[-1] == 0


def test_state_limit_stops_or_drops() -> None:
    stopped = BreadthFirst(instance("sglang_disagg_v0_5_21"), limits=Limits(max_states=100)).run(Visitor())
    assert stopped.stop.reason is StopReason.STATE_LIMIT and stopped.states == 100 and not stopped.complete
    dropped = BreadthFirst(instance("sglang_disagg_v0_5_21"),
                           limits=Limits(max_states=100, drop_when_full=True)).run(Visitor())
    assert dropped.stop.reason is StopReason.EXHAUSTED and dropped.states == 100 and not dropped.complete
    assert dropped.transitions > stopped.transitions


def test_mode_restores_on_an_exception() -> None:
    inst = instance("sglang_single_node")
    doms = tuple(inst.spec.domains)
    with pytest.raises(RuntimeError), inst.mode(recording=False, choice_reduction=doms):
        assert not inst.view.recording and inst.view._reduce == frozenset(doms)
        raise RuntimeError
    assert inst.view.recording and inst.view._reduce == frozenset()


def test_engines_leave_the_callers_modes_as_they_were() -> None:
    # Engines used to reset the modes to "recording, no reduction" whatever they had been.
    inst = instance("sglang_disagg_v0_5_19")
    doms = tuple(inst.spec.domains)
    with inst.mode(recording=False, choice_reduction=doms[:1]):
        explore(inst, ExploreOptions(max_states=200))
        state_graph(inst)
        diagnose(inst, "no_foreign_read")
        assert not inst.view.recording and inst.view._reduce == frozenset(doms[:1])
    assert inst.view.recording and inst.view._reduce == frozenset()


RAISES = """
from ownership import Spec, require
spec = Spec("raises_at_two")
spec.var("x", int, init=0)

@spec.action
def step(s):
    require(s.x < 3)
    s.x = s.x + 1

@spec.invariant
def small(s):
    if s.x == 2:
        raise ValueError("boom")
    return True
"""


def test_a_spec_error_inside_a_search_restores_the_modes(tmp_path: Path) -> None:
    path = tmp_path / "raises_at_two.py"
    path.write_text(RAISES)
    inst = Instance(load_spec(path))
    with inst.mode(choice_reduction=("Page",)):
        with pytest.raises(OwnershipError):
            explore(inst)
        assert inst.view.recording and inst.view._reduce == frozenset({"Page"})


def test_select_invariants_refuses_an_unknown_name_at_the_spec() -> None:
    inst = instance("sglang_single_node")
    assert [i.name for i in select_invariants(inst, None)] == list(inst.spec.invariants)
    first = next(iter(inst.spec.invariants))
    assert [i.name for i in select_invariants(inst, (first,))] == [first]
    with pytest.raises(OwnershipError) as info:
        select_invariants(inst, ("nope",))
    # The spec has temporal properties too, so the message names both kinds.
    assert info.value.code is Code.UNKNOWN_INVARIANT and "has no invariant or property 'nope'" in str(info.value)
    assert info.value.file == inst.spec.file
