"""The reachable state graph as a networkx ``DiGraph``, for export and path queries.

The explorer's hot loop does not build this graph (it keeps canonical states
and parent links only); this module runs the same search
(:class:`~ownership.engines.search.BreadthFirst`, same semantics and symmetry
reduction) with a visitor that records every edge, so it is for instances of
up to a few hundred thousand states.  Nodes are state numbers in discovery order
(0 = initial) with attributes ``violates`` (first violated invariant or ""),
``flagged`` (the invariant of the flagged step that is the only way in, or
"") and ``depth``; edges carry ``action`` (e.g. ``decode_forward(B)``) and
``violates``: the first checked invariant a transition of the edge flags
(``s.flag``, an event marked ``violates=``), or "".  A flagged step is a
violation in every engine even when the state it reaches satisfies every
invariant, so the graph must show it on the edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ownership.core.result import StopReason
from ownership.engines.search import BreadthFirst, Limits, Stop, Visitor
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.invariants import select_invariants
from ownership.lang.successors import ActionInstance, Successor

if TYPE_CHECKING:
    import networkx as nx


@dataclass(frozen=True)
class GraphOptions:
    """Options for building the state graph."""

    max_states: int = 200_000
    symmetry: bool = True
    invariants: tuple[str, ...] | None = None
    """The invariants a node's ``violates`` names (all by default)."""


class _Recorder(Visitor):
    """Every new state a node, every transition an edge (parallel actions joined by `` | ``)."""

    def __init__(self, inst: Instance, g: nx.DiGraph, invariants: tuple[str, ...]) -> None:
        self.inst = inst
        self.g = g
        self.invariants = invariants
        self.clean_in: set[int] = {0}
        """Nodes with a way in that is not flagged (the initial state is one by definition)."""
        self.flagged_in: dict[int, str] = {}
        """Each node's first flagged way in: the invariant it violates."""

    def on_state(self, node: int, state: State, depth: int) -> None:
        violates = next((n for n in self.invariants if not self.inst.holds(state, n)), "")
        self.g.add_node(node, depth=depth, violates=violates, flagged="")

    def on_edge(self, src: int, action: ActionInstance, succ: Successor, dst: int) -> Stop | None:
        g = self.g
        flag = next((n for n in self.invariants if n in succ.violations), "") if succ.violations else ""
        if flag:
            self.flagged_in.setdefault(dst, flag)
        else:
            self.clean_in.add(dst)
        if g.has_edge(src, dst):
            edge = g.edges[src, dst]
            edge["action"] += " | " + action.label
            edge["violates"] = edge["violates"] or flag
        else:
            g.add_edge(src, dst, action=action.label, violates=flag)
        return None

    def mark_flagged_only(self) -> None:
        """Mark the states every way into which is a flagged step: they exist only through a violation."""
        for node, flag in self.flagged_in.items():
            if node not in self.clean_in:
                self.g.nodes[node]["flagged"] = flag


def state_graph(inst: Instance, options: GraphOptions = GraphOptions()) -> nx.DiGraph:
    """Every reachable state (up to symmetry) and every transition between them."""
    import networkx as nx

    invariants = tuple(i.name for i in select_invariants(inst, options.invariants))
    g = nx.DiGraph(spec=inst.spec.name, params=inst.describe_params())
    search = BreadthFirst(inst, symmetry=options.symmetry, limits=Limits(max_states=options.max_states),
                          catch_stops=False)
    if search.reduced:
        # A graph up to symmetry is only the spec's graph if the spec is symmetric: the graph goes on
        # past violations, so every state it expands is checked as a fallback search would (OWN061).
        from ownership.engines.symevery import EveryState
        from ownership.engines.symmetry import make_canonicalizer

        plan = search.plan
        names = list(invariants)

        def values(st: State) -> str | None:
            held = tuple(inst.holds(st, n) for n in names)
            return None if all(held) else repr(held)

        search.expand = EveryState(inst, make_canonicalizer(inst, plan, exact=True), (*plan.permuted, *plan.sorted),
                                   names, values, search.expand, proof_after=None, expands_violations=True)
    recorder = _Recorder(inst, g, invariants)
    outcome = search.run(recorder)
    if outcome.stop.reason is StopReason.STATE_LIMIT:
        raise OwnershipError(
            Code.BAD_OPTION,
            f"state graph has more than {options.max_states:,} states; raise --max-states",
        )
    recorder.mark_flagged_only()
    return g


def violating_nodes(g: nx.DiGraph) -> list[int]:
    """States that violate some invariant."""
    return [n for n, d in g.nodes(data=True) if d.get("violates")]


def flagged_edges(g: nx.DiGraph) -> list[tuple[int, int]]:
    """Edges with a transition the spec flags as violating a checked invariant."""
    return [(a, b) for a, b, d in g.edges(data=True) if d.get("violates")]


def flagged_nodes(g: nx.DiGraph) -> list[int]:
    """States reached only through flagged steps."""
    return [n for n, d in g.nodes(data=True) if d.get("flagged")]
