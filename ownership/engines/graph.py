"""The reachable state graph as a networkx ``DiGraph``, for export and path queries.

The explorer's hot loop does not build this graph (it keeps canonical states
and parent links only); this module runs the same search
(:class:`~ownership.engines.search.BreadthFirst`, same semantics and symmetry
reduction) with a visitor that records every edge, so it is for instances of
up to a few hundred thousand states.  Nodes are state numbers in discovery order
(0 = initial) with attributes ``violates`` (first violated invariant or "")
and ``depth``; edges carry ``action`` (e.g. ``decode_forward(B)``).
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

    def on_state(self, node: int, state: State, depth: int) -> None:
        violates = next((n for n in self.invariants if not self.inst.holds(state, n)), "")
        self.g.add_node(node, depth=depth, violates=violates)

    def on_edge(self, src: int, action: ActionInstance, succ: Successor, dst: int) -> Stop | None:
        g = self.g
        if g.has_edge(src, dst):
            g.edges[src, dst]["action"] += " | " + action.label
        else:
            g.add_edge(src, dst, action=action.label)
        return None


def state_graph(inst: Instance, options: GraphOptions = GraphOptions()) -> nx.DiGraph:
    """Every reachable state (up to symmetry) and every transition between them."""
    import networkx as nx

    invariants = tuple(i.name for i in select_invariants(inst, options.invariants))
    g = nx.DiGraph(spec=inst.spec.name, params=inst.describe_params())
    search = BreadthFirst(inst, symmetry=options.symmetry, limits=Limits(max_states=options.max_states),
                          catch_stops=False)
    outcome = search.run(_Recorder(inst, g, invariants))
    if outcome.stop.reason is StopReason.STATE_LIMIT:
        raise OwnershipError(
            Code.BAD_OPTION,
            f"state graph has more than {options.max_states:,} states; raise --max-states",
        )
    return g


def violating_nodes(g: nx.DiGraph) -> list[int]:
    """States that violate some invariant."""
    return [n for n, d in g.nodes(data=True) if d.get("violates")]
