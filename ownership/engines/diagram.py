"""Every reachable state of an instance, and a decision diagram that stores them compactly.

``prove`` uses these as a candidate inductive invariant: when breadth-first
search runs out of new states, the set it found is closed under the concrete
semantics, so it is an inductive invariant unless the symbolic encoding
disagrees with the concrete code.  Z3 then checks it against the symbolic
transition relation; nothing here is trusted on its own.

The set is stored as a reduced multi-valued decision diagram (one level per
state cell, equal sub-diagrams shared), because the same choices recur across
requests: 16,313 states of ``sglang_disagg_v0_5_21`` need 3,972 nodes where
the states themselves have 0.9 million cells.  The formula Z3 gets grows with
the nodes, not the states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.core.progress import Progress
from ownership.core.result import ActionCoverage, Measure, StopReason
from ownership.engines.search import BreadthFirst, Limits, Stop, Visitor
from ownership.lang.instance import Instance, State

LEAF = 0
"""Node id of the accepting leaf: every path that reaches it spells a stored state."""


@dataclass(frozen=True)
class ReachableStates:
    """The states breadth-first search found from the initial state.

    ``complete`` is true when the search ran out of new states, so ``states``
    is everything the concrete semantics can reach; ``depth`` is then the
    length of the longest shortest path (no state needs more steps).
    """

    states: tuple[State, ...]
    depth: int
    transitions: int
    complete: bool
    unfit: State | None = None
    """A reached state that ``fits`` refused; the search stopped there."""
    actions: tuple[ActionCoverage, ...] = ()
    """Per action, the states (of those expanded) that enable it and its transitions."""


class _Collector(Visitor):
    """Keeps every new state, in discovery order; stops at the first one ``fits`` refuses."""

    def __init__(self, fits: Callable[[State], bool] | None) -> None:
        self.fits = fits
        self.order: list[State] = []
        self.unfit: State | None = None

    def on_state(self, node: int, state: State, depth: int) -> Stop | None:
        if self.fits is not None and node and not self.fits(state):
            self.unfit = state
            # The set cannot be complete: reported like a state limit (complete=False).
            return Stop(StopReason.STATE_LIMIT, node, depth)
        self.order.append(state)
        return None


def reachable_states(inst: Instance, max_states: int, fits: Callable[[State], bool] | None = None,
                     report: Callable[[int, int, int, int], None] | None = None) -> ReachableStates:
    """Breadth-first search without symmetry reduction, stopping after ``max_states`` states.

    Symmetry reduction would store one state per orbit, and the invariant must
    hold of every state, so every choice is taken and nothing is merged.  The
    search also stops at the first state ``fits`` refuses (an integer too wide
    for an encoding), since values that grow without bound would otherwise
    fill memory before the state limit.  ``report(states, transitions, depth,
    frontier)`` is called every 256 expanded states (the caller limits how
    often it prints).
    """

    def progress(p: Progress) -> None:
        if report is not None:
            report(p.states, p.transitions, p.depth + 1, p.frontier)

    search = BreadthFirst(inst, symmetry=False, limits=Limits(max_states=max_states, progress_every=0.0),
                          progress=progress if report is not None else None, catch_stops=False)
    collect = _Collector(fits)
    outcome = search.run(collect)
    order = tuple(collect.order)
    if not outcome.complete:
        return ReachableStates(order, outcome.depth, outcome.transitions, False, collect.unfit)
    actions = search.tally.coverage(inst, Measure.EXACT, outcome.expanded, outcome.depth, True)
    return ReachableStates(order, outcome.depth, outcome.transitions, complete=True, actions=actions)


@dataclass(frozen=True)
class Diagram:
    """A reduced, ordered decision diagram over the cells of a state.

    ``nodes[i]`` for ``i > 0`` is ``(cell, ((value, child), ...))``: the
    states whose ``cell`` has ``value`` continue at ``child``.  Children have
    smaller ids than their parents, so one pass in id order builds anything
    bottom-up.  ``nodes[0]`` is the leaf.  Level ``i`` tests cell ``i``.
    """

    nodes: tuple[tuple[int, tuple[tuple[Any, int], ...]], ...]
    root: int

    @property
    def size(self) -> int:
        """Inner nodes (the leaf not counted)."""
        return len(self.nodes) - 1

    def __contains__(self, state: State) -> bool:
        node = self.root
        while node != LEAF:
            cell, edges = self.nodes[node]
            for value, child in edges:
                if value == state[cell] and type(value) is type(state[cell]):
                    node = child
                    break
            else:
                return False
        return True


def build_diagram(states: Sequence[State]) -> Diagram:
    """The reduced diagram of ``states`` (all of one length; at least one).

    Two passes, each mostly inside C: top-down, every distinct prefix of the
    states gets a dense id per level (a prefix of length ``i + 1`` is a pair
    of a prefix id of length ``i`` and a value); bottom-up, each prefix's
    sub-diagram is the set of its (value, sub-diagram) pairs, hash-consed so
    equal sub-diagrams are one node.  A cell holds values of one type (bools
    in a bool cell, ints or ``None`` in an int cell), so ``True == 1`` never
    merges two different values.
    """
    if not states:
        raise ValueError("a decision diagram needs at least one state")
    columns = list(zip(*states, strict=True))
    prev: list[int] = [0] * len(states)
    # extensions[i][j] = (prefix id at level i, value of cell i) of the j-th distinct prefix of length i + 1
    extensions: list[list[tuple[int, Any]]] = []
    for column in columns:
        keys = list(zip(prev, column, strict=True))
        distinct = list(dict.fromkeys(keys))
        index = {k: j for j, k in enumerate(distinct)}
        prev = list(map(index.__getitem__, keys))
        extensions.append(distinct)
    nodes: list[tuple[int, tuple[tuple[Any, int], ...]]] = [(-1, ())]
    unique: dict[tuple[int, frozenset[tuple[Any, int]]], int] = {}
    below = [LEAF] * len(extensions[-1])
    for i in range(len(columns) - 1, -1, -1):
        prefixes = len(extensions[i - 1]) if i else 1
        edges: list[list[tuple[Any, int]]] = [[] for _ in range(prefixes)]
        for (p, value), child in zip(extensions[i], below, strict=True):
            edges[p].append((value, child))
        here: list[int] = []
        for es in edges:
            key = (i, frozenset(es))
            node = unique.get(key)
            if node is None:
                node = len(nodes)
                unique[key] = node
                nodes.append((i, tuple(es)))
            here.append(node)
        below = here
    return Diagram(tuple(nodes), below[0])
