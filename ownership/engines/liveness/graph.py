"""The reachable state graph that temporal properties are decided on.

Safety needs only parent links; a temporal property needs every edge,
because a counterexample is a cycle.  :func:`build_graph` runs the one
breadth-first search (:class:`~ownership.engines.search.BreadthFirst`) with a
visitor that keeps, per state, its outgoing edges as flat integer arrays: the
target state and the action instance number, and the choices the step made
only for the steps that made any.  States are numbered in breadth-first
order, so the search's parent links give a shortest path to each.

The graph is built without symmetry reduction: a temporal property about one
request is not preserved by renaming requests, and a quotient edge would
have to carry the renaming (see ``docs/liveness.md``).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ownership.core.progress import ProgressFn
from ownership.engines.search import BreadthFirst, Limits, Outcome, Visitor
from ownership.engines.storage import Tree
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance, Successor


@dataclass
class StateGraph:
    """Every reachable state of an instance and every transition between them."""

    states: list[State]
    heads: array
    """Per state, where its edges start in :attr:`targets` (one more entry than states)."""
    targets: array
    actions: array
    picks: dict[int, tuple[Any, ...]]
    """The choices of the edges (by edge number) whose step made any."""
    tree: Tree
    depth: array

    def __len__(self) -> int:
        return len(self.states)

    @property
    def edges(self) -> int:
        """How many transitions the graph has."""
        return len(self.targets)

    def out(self, node: int) -> range:
        """The numbers of ``node``'s outgoing edges."""
        return range(self.heads[node], self.heads[node + 1])

    def successors(self, node: int) -> Iterator[int]:
        """The states ``node`` steps to (with repeats when two actions reach the same one)."""
        targets = self.targets
        for e in range(self.heads[node], self.heads[node + 1]):
            yield targets[e]

    def enabled(self, node: int) -> frozenset[int]:
        """The action instances enabled in ``node`` (those with an outgoing edge)."""
        actions = self.actions
        return frozenset(actions[e] for e in range(self.heads[node], self.heads[node + 1]))

    def dead_end(self, node: int) -> bool:
        """No action can run in ``node``: a path that reaches it stays there for ever."""
        return self.heads[node] == self.heads[node + 1]

    def step(self, edge: int) -> tuple[int, tuple[Any, ...]]:
        """The step ``(action instance number, picks)`` of edge number ``edge`` (what a trace replays)."""
        return self.actions[edge], self.picks.get(edge, ())


class _Edges(Visitor):
    """Collects every transition into flat arrays.

    Breadth-first search expands states in the order it numbered them, so
    the edges arrive grouped by source in increasing order: the start of
    each state's edges is written when its first edge (or a later state's)
    arrives, and no edge list per state is ever built.
    """

    def __init__(self) -> None:
        self.states: list[State] = []
        self.heads = array("q", [0])
        self.targets = array("q")
        self.actions = array("i")
        self.picks: dict[int, tuple[Any, ...]] = {}

    def on_state(self, node: int, state: State, depth: int) -> None:
        self.states.append(state)

    def on_edge(self, src: int, action: ActionInstance, succ: Successor, dst: int) -> None:
        heads, edge = self.heads, len(self.targets)
        if src + 1 < len(heads):
            raise AssertionError("the search expanded states out of order")  # pragma: no cover - BFS order
        while len(heads) <= src:  # sources before it have all their edges (or none)
            heads.append(edge)
        self.targets.append(dst)
        self.actions.append(action.index)
        if succ.picks:
            self.picks[edge] = succ.picks

    def close(self) -> array:
        """The start of every state's edges, with the end of the last one's."""
        heads, end = self.heads, len(self.targets)
        while len(heads) <= len(self.states):
            heads.append(end)
        return heads


def build_graph(inst: Instance, limits: Limits, progress: ProgressFn | None = None) -> tuple[StateGraph, Outcome]:
    """Search ``inst`` without symmetry and keep every edge; the outcome says whether it ran to the end."""
    search = BreadthFirst(inst, symmetry=False, limits=limits, progress=progress)
    edges = _Edges()
    outcome = search.run(edges)
    n = len(edges.states)
    tree = search.tree
    depth = array("i", [0] * n)
    parent = tree.parent
    for i in range(1, n):
        depth[i] = depth[parent[i]] + 1
    return StateGraph(edges.states, edges.close(), edges.targets, edges.actions, edges.picks, tree, depth), outcome
