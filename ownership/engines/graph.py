"""The reachable state graph as a networkx ``DiGraph``, for export and path queries.

The explorer's hot loop does not build this graph (it keeps fingerprints and
parent pointers only); this module re-explores with the same semantics and
symmetry reduction and records every edge, so it is for instances of up to a
few hundred thousand states.  Nodes are state numbers in discovery order
(0 = initial) with attributes ``violates`` (first violated invariant or "")
and ``depth``; edges carry ``action`` (e.g. ``decode_forward(B)``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ownership.engines.symmetry import make_canonicalizer, plan_symmetry
from ownership.errors import Code, OwnershipError
from ownership.spec.instance import Instance

if TYPE_CHECKING:
    import networkx as nx


@dataclass(frozen=True)
class GraphOptions:
    """Options for building the state graph."""

    max_states: int = 200_000
    symmetry: bool = True


def state_graph(inst: Instance, options: GraphOptions = GraphOptions()) -> nx.DiGraph:
    """Every reachable state (up to symmetry) and every transition between them."""
    import networkx as nx

    plan = plan_symmetry(inst)
    canon = make_canonicalizer(inst, plan) if options.symmetry else (lambda st: st)
    inst.set_choice_reduction(plan.sorted if options.symmetry else ())
    try:
        g = nx.DiGraph(spec=inst.spec.name, params=inst.describe_params())
        ids = {canon(inst.init_state): 0}
        g.add_node(0, depth=0, violates=inst.violated(inst.init_state) or "")
        queue = deque([(0, inst.init_state, 0)])
        while queue:
            nid, st, depth = queue.popleft()
            for ai, sc in inst.expand(st):
                key = canon(sc.state)
                target = ids.get(key)
                if target is None:
                    if len(ids) >= options.max_states:
                        raise OwnershipError(
                            Code.BAD_OPTION,
                            f"state graph has more than {options.max_states:,} states; raise --max-states",
                        )
                    target = len(ids)
                    ids[key] = target
                    g.add_node(target, depth=depth + 1, violates=inst.violated(sc.state) or "")
                    queue.append((target, sc.state, depth + 1))
                if g.has_edge(nid, target):
                    g.edges[nid, target]["action"] += " | " + ai.label
                else:
                    g.add_edge(nid, target, action=ai.label)
        return g
    finally:
        inst.set_choice_reduction(())


def violating_nodes(g: nx.DiGraph) -> list[int]:
    """States that violate some invariant."""
    return [n for n, d in g.nodes(data=True) if d.get("violates")]
