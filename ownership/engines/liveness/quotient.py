"""Temporal properties on the symmetry-reduced graph, soundly.

Renaming requests maps paths to paths, but a property about request ``r``
is not preserved by it, and neither is fairness per action instance: a
quotient cycle may be the image of a concrete path that keeps renaming the
requests, so "``free(A)`` is enabled in every state of this component" in the
representatives' frames says nothing about one concrete instance.  TLC
decides liveness on its symmetry quotient as if it did, and can miss
violations (tlaplus #59).  Here:

* every quotient edge keeps the permutation ``sigma`` that maps the concrete
  successor to the stored state of its target (the quotient's nodes are
  concrete states, the first found of each orbit, reached by concrete paths);
* a property per element is decided on the *annotated* quotient (Emerson and
  Sistla): a node is (stored state, index of the tracked element in that
  state's frame), and an edge carries the index through ``sigma``;
* a component's fairness is judged on its concrete preimage: frames along a
  spanning tree, the permutations of its other edges generate the group ``H``
  that a walk round the component can realise, and the concrete preimage is
  the component's states under every element of ``H``.  So an action instance
  is enabled everywhere (taken, enabled somewhere) in the preimage exactly when
  its whole ``H``-orbit is (one of it is), computed with orbits of action
  instances under the generators alone (:func:`orbit_judge`);
* a component judged fair is turned into a concrete lasso by searching its
  concrete preimage from a concrete entry (:func:`realize`), and that lasso is
  replayed and re-judged like any other.

The property functions must treat a symmetric domain's elements alike: they
are checked under the same renamings as the invariants on every stored state
(OWN061 if one does not, naming ``--no-symmetry``).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.core.progress import ProgressFn
from ownership.engines.liveness.fair import (
    FairActions,
)
from ownership.engines.liveness.graph import StateGraph
from ownership.engines.search import BreadthFirst, Limits, Outcome, Visitor
from ownership.engines.storage import Tree
from ownership.engines.symevery import checked_renamings
from ownership.engines.symmetry import SymmetryPlan, make_canonical_permuter
from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Domain
from ownership.lang.instance import Instance, State
from ownership.lang.lasso import argument, evaluator
from ownership.lang.permutation import Permutation
from ownership.lang.successors import ActionInstance, Successor
from ownership.lang.temporal import Property


@dataclass
class Quotient:
    """The symmetry-reduced graph: stored states (concrete, first of their orbit) and every edge's renaming."""

    graph: StateGraph
    perms: array
    """Per edge, the number in :attr:`table` of the permutation taking its successor to its target's state."""
    table: list[Permutation]
    seen: dict[Any, int]
    """Canonical key -> node."""
    canon: Callable[[State], tuple[Any, Permutation]]
    node_perm: list[Permutation]
    """Per node, the permutation taking its state to the orbit's representative."""

    def sigma(self, state: State) -> tuple[int, Permutation] | None:
        """The node of ``state``'s orbit and the permutation taking ``state`` to that node's state."""
        key, pi = self.canon(state)
        node = self.seen.get(key)
        if node is None:
            return None
        return node, self.node_perm[node].inverse().compose(pi)


class _QuotientEdges(Visitor):
    def __init__(self, canon: Callable[[State], tuple[Any, Permutation]]) -> None:
        self.canon = canon
        self.states: list[State] = []
        self.node_perm: list[Permutation] = []
        self.heads = array("q", [0])
        self.targets = array("q")
        self.actions = array("i")
        self.perms = array("i")
        self.picks: dict[int, tuple[Any, ...]] = {}
        self.table: list[Permutation] = []
        self.ids: dict[Permutation, int] = {}
        self.inverse: list[Permutation] = []

    def on_state(self, node: int, state: State, depth: int) -> None:
        self.states.append(state)
        self.node_perm.append(self.canon(state)[1])
        self.inverse.append(self.node_perm[-1].inverse())

    def on_edge(self, src: int, action: ActionInstance, succ: Successor, dst: int) -> None:
        heads, edge = self.heads, len(self.targets)
        while len(heads) <= src:
            heads.append(edge)
        sigma = self.inverse[dst].compose(self.canon(succ.state)[1])
        if sigma.apply(succ.state) != self.states[dst]:
            raise OwnershipError(Code.INTERNAL_REPLAY, "liveness: a canonical renaming does not reach its orbit's "
                                 "stored state (the symmetry reduction is not exact here): check with --no-symmetry")
        pid = self.ids.get(sigma)
        if pid is None:
            pid = self.ids[sigma] = len(self.table)
            self.table.append(sigma)
        self.targets.append(dst)
        self.actions.append(action.index)
        self.perms.append(pid)
        if succ.picks:
            self.picks[edge] = succ.picks


def build_quotient(inst: Instance, plan: SymmetryPlan, limits: Limits,
                   progress: ProgressFn | None = None) -> tuple[Quotient, Outcome]:
    """Search ``inst`` up to symmetry (no choice merging) and keep every edge with its renaming."""
    canon = make_canonical_permuter(inst, plan)
    search = BreadthFirst(inst, symmetry=True, limits=limits, progress=progress, reduce=())
    edges = _QuotientEdges(canon)
    outcome = search.run(edges)
    heads, end = edges.heads, len(edges.targets)
    while len(heads) <= len(edges.states):
        heads.append(end)
    n = len(edges.states)
    depth = array("i", [0] * n)
    parent = search.tree.parent
    for i in range(1, n):
        depth[i] = depth[parent[i]] + 1
    graph = StateGraph(edges.states, heads, edges.targets, edges.actions, edges.picks, search.tree, depth)
    seen = search.seen if isinstance(search.seen, dict) else {}
    return Quotient(graph, edges.perms, edges.table, seen, canon, edges.node_perm), outcome


# -- symmetry of the properties ----------------------------------------------------------------------------------
def check_symmetric(inst: Instance, q: Quotient, props: Sequence[Property], domains: Sequence[str]) -> str:
    """OWN061 unless every property function gives the same value on each stored state renamed; what was checked."""
    renamings, words = checked_renamings(inst, domains)
    perms = [Permutation.of(inst, dict(r)) for r in renamings]
    value = evaluator(inst)
    for prop in props:
        roles = ("then",) if prop.when is None else ("when", "then")
        size = inst.sizes[prop.each.name] if prop.each is not None else 1
        for state in q.graph.states:
            renamed = [p.apply(state) for p in perms]
            for element in ([None] if prop.each is None else range(size)):
                args = argument(inst, prop, element)
                for role in roles:
                    here = value(prop, role, state, args)
                    for p, other in zip(perms, renamed, strict=True):
                        moved = None if element is None or prop.each is None else p[prop.each.name][element]
                        if value(prop, role, other, argument(inst, prop, moved)) != here:
                            who = "" if element is None or prop.each is None else \
                                f" for {inst.names[prop.each.name][element]}"
                            raise OwnershipError(
                                Code.SYMMETRY_MISMATCH,
                                f"property {prop.name} ({role}) is not symmetric: it is {here}{who} in a state and "
                                f"{not here} in the same state with its elements renamed ({_renaming(inst, p)}); a "
                                "property must treat a symmetric domain's elements alike, or check with --no-symmetry",
                                prop.file, prop.line)
    return words


def _renaming(inst: Instance, p: Permutation) -> str:
    parts = []
    for d, perm in p.maps:
        names = inst.names[d]
        parts += [f"{names[i]}->{names[j]}" for i, j in enumerate(perm) if i != j]
    return ", ".join(parts)


# -- the annotated quotient --------------------------------------------------------------------------------------
@dataclass
class Annotated:
    """The quotient with the tracked element's index in each node: node ``x`` is (``x // k``, ``x % k``)."""

    graph: StateGraph
    perms: array
    k: int
    domain: str | None


def annotate(q: Quotient, domain: str | None, k: int) -> Annotated:
    """The annotated quotient for a property per element of ``domain`` (``k`` elements; ``None``, 1: none)."""
    base = q.graph
    if domain is None or k == 1:  # nothing to track, or one element: the quotient itself
        return Annotated(base, q.perms, 1, domain)
    maps = [p[domain] for p in q.table]
    heads, targets, actions, perms = array("q", [0]), array("q"), array("i"), array("i")
    picks: dict[int, tuple[Any, ...]] = {}
    for n in range(len(base)):
        for i in range(k):
            for e in base.out(n):
                pid = q.perms[e]
                if e in base.picks:
                    picks[len(targets)] = base.picks[e]
                targets.append(base.targets[e] * k + maps[pid][i])
                actions.append(base.actions[e])
                perms.append(pid)
            heads.append(len(targets))
    depth = array("i", (base.depth[x // k] for x in range(len(base) * k)))
    states = [base.states[x // k] for x in range(len(base) * k)]
    return Annotated(StateGraph(states, heads, targets, actions, picks, Tree(), depth), perms, k, domain)


def orbit_judge(inst: Instance, q: Quotient, ann: Annotated,
                fair: FairActions) -> Callable[[list[int], frozenset[int]], frozenset[int] | None]:
    """A component's fairness judged on its concrete preimage (module docstring)."""
    graph = ann.graph
    index = {(ai.action.name, ai.args): ai.index for ai in inst.action_instances}
    instances = inst.action_instances
    mapped: dict[tuple[Permutation, int], int] = {}

    def image(p: Permutation, a: int) -> int:
        out = mapped.get((p, a))
        if out is None:
            ai = instances[a]
            args = tuple(p[d.name][x] if isinstance(d, Domain) else x
                         for d, x in zip(ai.action.arg_domains, ai.args, strict=True))
            out = mapped[(p, a)] = index[(ai.action.name, args)]
        return out

    identity = Permutation.of(inst)

    def judge(comp: list[int], members: frozenset[int]) -> frozenset[int] | None:
        root = comp[0]
        frame = {root: identity}
        queue = [root]
        gens: set[Permutation] = set()
        taken: set[int] = set()
        for x in queue:
            fx = frame[x]
            for e in graph.out(x):
                y = graph.targets[e]
                if y not in members:
                    continue
                taken.add(image(fx, graph.actions[e]))
                g = fx.compose(q.table[ann.perms[e]].inverse())
                if y not in frame:
                    frame[y] = g
                    queue.append(y)
                else:
                    h = g.compose(frame[y].inverse())
                    if not h.is_identity:
                        gens.add(h)
        enabled = {x: frozenset(image(frame[x], a) for a in graph.enabled(x)) for x in comp}
        orbit = _orbits(len(instances), gens, image)
        size: dict[int, int] = {}
        for a in range(len(instances)):
            size[orbit[a]] = size.get(orbit[a], 0) + 1
        everywhere = frozenset.intersection(*enabled.values())
        full = {r for r in size if sum(1 for a in everywhere if orbit[a] == r) == size[r]}
        taken_orbits = {orbit[a] for a in taken}
        if any(orbit[a] in full and orbit[a] not in taken_orbits for a in fair.weak):
            return frozenset()
        somewhere = {orbit[a] for s in enabled.values() for a in s}
        starved = {orbit[a] for a in fair.strong if orbit[a] in somewhere and orbit[a] not in taken_orbits}
        if starved:
            return frozenset(x for x in comp if not any(orbit[a] in starved for a in enabled[x]))
        return None

    return judge


def _orbits(n: int, gens: set[Permutation], image: Callable[[Permutation, int], int]) -> list[int]:
    """Each action instance's orbit (a representative number) under the group the generators make."""
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for g in gens:
        for a in range(n):
            ra, rb = find(a), find(image(g, a))
            if ra != rb:
                parent[ra] = rb
    return [find(a) for a in range(n)]
