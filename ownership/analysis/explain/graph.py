"""The bounded state graph a diagnosis is computed over, and reachability of a violation with transitions removed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ownership.analysis.explain.diagnosis import DiagnoseOptions
from ownership.engines.search import BreadthFirst, Control, Limits, Visitor
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance, Successor

if TYPE_CHECKING:
    import networkx as nx

SINK = -1  # one extra node every violating state points to: "a violation is reachable"


@dataclass(frozen=True)
class Transition:
    """One edge of the graph: ``ai`` with ``picks`` from state ``src`` to state ``dst`` (node numbers)."""

    src: int
    dst: int
    ai: ActionInstance
    picks: tuple[Any, ...]


@dataclass
class StateGraph:
    """States, transitions and the networkx graph over them (edges list transition indices)."""

    inst: Instance
    states: list[tuple[Any, ...]]
    depth: list[int]
    trans: list[Transition]
    bad: set[int]
    complete: bool
    g: nx.DiGraph


class _Builder(Visitor):
    """Records states, depths and transitions; states violating the invariant are targets, not expanded."""

    def __init__(self, inst: Instance, invariant: str, search: BreadthFirst) -> None:
        self.inst = inst
        self.invariant = invariant
        self.search = search
        self.states: list[tuple[Any, ...]] = []
        self.depth: list[int] = []
        self.trans: list[Transition] = []
        self.bad: set[int] = set()

    def on_state(self, node: int, state: State, depth: int) -> Control | None:
        self.states.append(state)
        self.depth.append(depth)
        if not self.inst.holds(state, self.invariant):
            self.bad.add(node)  # a target: the paths that matter end here
            return Control.PRUNE
        return None

    def on_edge(self, src: int, action: ActionInstance, succ: Successor, dst: int) -> None:
        self.trans.append(Transition(src, dst, action, succ.picks))

    def on_flagged(self, src: int, action: ActionInstance, succ: Successor, depth: int) -> Control | None:
        if self.invariant not in succ.violations or not self.inst.holds(succ.state, self.invariant):
            return None
        # Only an event of the step shows the violation: the step itself is a target,
        # so it gets a node of its own (its state is fine when reached another way).
        target = self.search.tree.add(src, action.index, succ.picks)
        self.states.append(succ.state)
        self.depth.append(depth)
        self.bad.add(target)
        self.trans.append(Transition(src, target, action, succ.picks))
        return Control.HANDLED


def build_graph(inst: Instance, invariant: str, options: DiagnoseOptions) -> StateGraph:
    """The reachable graph of ``inst`` up to ``options.max_states``, violating states pointing to :data:`SINK`."""
    import networkx as nx

    # At the state limit the states found are still expanded, and new ones dropped.
    limits = Limits(max_states=options.max_states, drop_when_full=True)
    search = BreadthFirst(inst, symmetry=options.symmetry, limits=limits, catch_stops=False)
    builder = _Builder(inst, invariant, search)
    complete = search.run(builder).complete
    states, trans, bad = builder.states, builder.trans, builder.bad
    g = nx.DiGraph()
    g.add_nodes_from(range(len(states)))
    for i, t in enumerate(trans):
        if g.has_edge(t.src, t.dst):
            g.edges[t.src, t.dst]["t"].append(i)
        else:
            g.add_edge(t.src, t.dst, t=[i])
    for b in bad:
        g.add_edge(b, SINK, t=[])
    return StateGraph(inst, states, builder.depth, trans, bad, complete, g)


class Cutter:
    """Answers "is a violation still reachable without these transitions?" on the relevant subgraph."""

    def __init__(self, graph: StateGraph) -> None:
        import networkx as nx

        self.nx = nx
        g = graph.g
        # Only states that can still reach a violation matter for reachability of one.
        relevant = nx.ancestors(g, SINK) | {SINK}
        self.h = g.subgraph(relevant)
        self.relevant = relevant
        self.edges = [(u, v, set(d["t"])) for u, v, d in self.h.edges(data=True) if d["t"]]

    def reachable_without(self, blocked: set[int]) -> bool:
        """Whether a violation stays reachable from the initial state with ``blocked`` transitions removed."""
        if 0 not in self.relevant:
            return False
        hidden = [(u, v) for u, v, ts in self.edges if ts <= blocked]
        view = self.nx.restricted_view(self.h, [], hidden)
        return bool(self.nx.has_path(view, 0, SINK))


def lost_states(graph: StateGraph, blocked: set[int]) -> int:
    """Non-violating states no longer reachable from the initial state once ``blocked`` transitions are removed.

    What a check that blocks those steps costs besides the violations: the
    behaviour of the protocol it takes away.
    """
    import networkx as nx

    hidden = [(t.src, t.dst) for i, t in enumerate(graph.trans)
              if i in blocked and set(graph.g.edges[t.src, t.dst]["t"]) <= blocked]
    view = nx.restricted_view(graph.g, [], hidden)
    reach = nx.descendants(view, 0) | {0}
    return sum(1 for n in range(len(graph.states)) if n not in graph.bad and n not in reach)
