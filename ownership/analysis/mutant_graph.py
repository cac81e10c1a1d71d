"""The full reachable state graph (no symmetry) of a spec or a mutant, to decide whether a survivor is equivalent."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from ownership.engines.search import Visitor


class ReachableGraph:
    """Reachable states and labelled edges of an instance (no symmetry reduction), with what
    the comparison also needs: the states where work is pending but nothing is enabled, and
    which actions ever fire."""

    def __init__(self, states: frozenset[Any], edges: frozenset[tuple[Any, str, Any]], deadlocks: int,
                 fired: frozenset[str], stuck: int) -> None:
        self.states = states
        self.edges = edges
        self.deadlocks = deadlocks
        self.fired = fired
        self.stuck = stuck
        """States from which no terminal state can be reached (work that can never finish)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReachableGraph) and self.states == other.states and self.edges == other.edges

    def moves(self) -> frozenset[tuple[Any, str, Any]]:
        """The edges that change the state (self-loops removed)."""
        return frozenset(e for e in self.edges if e[0] != e[2])

    __hash__ = None  # type: ignore[assignment]


def reachable_graph(inst: Any, deadline: float, max_states: int) -> ReachableGraph | str:
    """The full graph (every state, no symmetry), or why it was not built (too big, out of time)."""
    from ownership.core.result import StopReason
    from ownership.engines.search import BreadthFirst, Limits  # noqa: I001 - the engines load lazily

    seconds = deadline - time.perf_counter()
    if seconds <= 0:
        return "out of time while comparing state graphs"
    recorder = _GraphRecorder(inst)
    search = BreadthFirst(inst, symmetry=False, limits=Limits(max_states=max_states, max_seconds=seconds))
    stop = search.run(recorder).stop.reason
    if stop is StopReason.STATE_LIMIT:
        return f"more than {max_states:,} states: state graphs not compared"
    if stop is not StopReason.EXHAUSTED:
        return "out of time while comparing state graphs"
    seen = set(recorder.states.values())
    return ReachableGraph(frozenset(seen), frozenset(recorder.edges), recorder.deadlocks, frozenset(recorder.fired),
                  _stuck(inst, seen, recorder.edges))


class _GraphRecorder(Visitor):
    """Every state and labelled edge of the search, and the dead ends that are not terminal."""

    def __init__(self, inst: Any) -> None:
        self.inst = inst
        self.states: dict[int, Any] = {}
        self.edges: set[tuple[Any, str, Any]] = set()
        self.fired: set[str] = set()
        self.deadlocks = 0

    def on_state(self, node: int, state: Any, depth: int) -> None:
        self.states[node] = state

    def on_edge(self, src: int, action: Any, succ: Any, dst: int) -> None:
        self.edges.add((self.states[src], action.label, succ.state))
        self.fired.add(action.action.name)

    def on_dead_end(self, node: int, state: Any, depth: int) -> None:
        if self.inst.spec.done is not None and not self.inst.is_terminal(state):
            self.deadlocks += 1


def _stuck(inst: Any, states: set[Any], edges: set[tuple[Any, str, Any]]) -> int:
    """How many states cannot reach a terminal state (0 when the spec has no terminal predicate)."""
    if inst.spec.done is None:
        return 0
    preds: dict[Any, list[Any]] = {}
    for a, _, b in edges:
        preds.setdefault(b, []).append(a)
    can = {st for st in states if inst.is_terminal(st)}
    queue = deque(can)
    while queue:
        for a in preds.get(queue.popleft(), ()):
            if a not in can:
                can.add(a)
                queue.append(a)
    return len(states) - len(can)
