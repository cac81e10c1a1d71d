"""Fair strongly connected components: where a fair path can stay for ever.

An infinite path of a finite graph ends up going round one strongly
connected component (SCC), or stays in a state where nothing can run.  Which
of those components a *fair* path can end in depends on the fairness of the
actions (:class:`~ownership.lang.temporal.Fairness`), per action instance:

* weak: an instance enabled in every state of the component must be taken on
  one of its edges, or no path that stays inside is fair.  Dropping states
  cannot help (what is enabled everywhere stays enabled everywhere, what is
  taken can only shrink), so the component is discarded;
* strong: an instance enabled in some state of the component must be taken on
  one of its edges.  If it is not, a fair path can still stay inside while
  avoiding the states where it is enabled: those are removed and the rest is
  split into components again (Emerson and Lei's refinement, 1986).

A component that survives is fair: a path that goes round all of it, taking
every edge it needs, is fair (:func:`cycle_through` builds one).  A state
where nothing can run is a fair component of its own (the path stutters there,
nothing is enabled).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from ownership.engines.liveness.graph import StateGraph


@dataclass(frozen=True)
class FairActions:
    """The fair action instances, by number."""

    weak: frozenset[int] = frozenset()
    strong: frozenset[int] = frozenset()


def components(graph: StateGraph, allowed: Collection[int]) -> list[list[int]]:
    """The SCCs of the subgraph induced by ``allowed`` (Tarjan's algorithm, iterative)."""
    heads, targets = graph.heads, graph.targets
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in allowed:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work = [(root, heads[root])]
        while work:
            node, edge = work[-1]
            end = heads[node + 1]
            while edge < end:
                nxt = targets[edge]
                edge += 1
                if nxt not in allowed:
                    continue
                if nxt not in index:
                    work[-1] = (node, edge)
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, heads[nxt]))
                    break
                if nxt in on_stack and index[nxt] < low[node]:
                    low[node] = index[nxt]
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    if low[node] < low[parent]:
                        low[parent] = low[node]
                if low[node] == index[node]:
                    comp: list[int] = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    out.append(comp)
    return out


def _cyclic(graph: StateGraph, comp: list[int]) -> bool:
    """Whether a path can stay in ``comp`` for ever: more than one state, a self-loop, or a dead end."""
    if len(comp) > 1:
        return True
    node = comp[0]
    return graph.dead_end(node) or any(t == node for t in graph.successors(node))


def concrete_judge(graph: StateGraph, fair: FairActions) -> Callable[[list[int], frozenset[int]], frozenset[int] | None]:
    """The fairness of a component of a concrete graph, per action instance (see the module docstring)."""
    actions, targets = graph.actions, graph.targets

    def judge(comp: list[int], members: frozenset[int]) -> frozenset[int] | None:
        everywhere: set[int] | None = None
        somewhere: set[int] = set()
        taken: set[int] = set()
        for node in comp:
            enabled = graph.enabled(node)
            everywhere = set(enabled) if everywhere is None else everywhere & enabled
            somewhere |= enabled
            for e in graph.out(node):
                if targets[e] in members:
                    taken.add(actions[e])
        if fair.weak & ((everywhere or set()) - taken):
            return frozenset()
        starved = (fair.strong & somewhere) - taken
        if starved:
            return frozenset(n for n in comp if starved.isdisjoint(graph.enabled(n)))
        return None

    return judge


def fair_components(graph: StateGraph, allowed: Collection[int], fair: FairActions,
                    judge: Callable[[list[int], frozenset[int]], frozenset[int] | None] | None = None,
                    ) -> list[frozenset[int]]:
    """The maximal fair components of the subgraph induced by ``allowed``.

    ``judge`` decides the fairness of a cyclic component (default: per
    concrete action instance, :func:`concrete_judge`); a state where nothing
    can run is fair on its own.  Without fair actions every cyclic component is fair.
    """
    if judge is None:
        judge = concrete_judge(graph, fair)
    unconstrained = not fair.weak and not fair.strong
    found: list[frozenset[int]] = []
    work: list[Collection[int]] = [allowed]
    while work:
        nodes = work.pop()
        for comp in components(graph, nodes):
            if not _cyclic(graph, comp):
                continue
            members = frozenset(comp)
            if unconstrained or (len(comp) == 1 and graph.dead_end(comp[0])):
                found.append(members)
                continue
            verdict = judge(comp, members)
            if verdict is None:
                found.append(members)
            elif verdict:
                work.append(verdict)
    return found


def reach_within(graph: StateGraph, sources: Iterable[int], allowed: Collection[int],
                 goal: Collection[int]) -> tuple[int, list[int]] | None:
    """The source and edge numbers of a shortest path from one of ``sources`` to ``goal``, inside ``allowed``.

    Sources are tried in the order given (the first of two at the same
    distance wins); ``None`` when no goal state is reachable.
    """
    came: dict[int, int] = {}
    queue: deque[int] = deque()
    for s in sources:
        if s in goal:
            return s, []
        if s not in came:
            came[s] = -1
            queue.append(s)
    heads, targets = graph.heads, graph.targets
    while queue:
        node = queue.popleft()
        for e in range(heads[node], heads[node + 1]):
            nxt = targets[e]
            if nxt in came or nxt not in allowed:
                continue
            came[nxt] = e
            if nxt in goal:
                path = _edges_to(graph, came, nxt)
                return source_of(graph, path[0]), path
            queue.append(nxt)
    return None


def _edges_to(graph: StateGraph, came: dict[int, int], node: int) -> list[int]:
    path: list[int] = []
    while came[node] != -1:
        e = came[node]
        path.append(e)
        node = source_of(graph, e)
    path.reverse()
    return path


def source_of(graph: StateGraph, edge: int) -> int:
    """The state edge number ``edge`` leaves (binary search in the heads)."""
    heads = graph.heads
    lo, hi = 0, len(heads) - 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if heads[mid] <= edge:
            lo = mid
        else:
            hi = mid - 1
    return lo


def cycle_through(graph: StateGraph, comp: frozenset[int], entry: int, fair: FairActions,
                  visit: Iterable[int] = ()) -> list[int]:
    """Edge numbers of a fair cycle from ``entry`` back to it, inside the fair component ``comp``.

    The cycle takes one edge of every fair action instance taken inside
    ``comp``, passes a state where each weakly fair instance it never takes is
    disabled, and visits the states ``visit``: it goes to the nearest thing
    still missing, again and again (short, not always shortest), then back to
    ``entry``.  ``[]`` for a dead end (the path stutters there).
    """
    if graph.dead_end(entry):
        return []
    actions, targets = graph.actions, graph.targets
    take: set[int] = set()
    for node in comp:
        for e in graph.out(node):
            if targets[e] in comp and (actions[e] in fair.weak or actions[e] in fair.strong):
                take.add(actions[e])
    # Weakly fair instances never taken here are disabled somewhere in the component: pass such a state.
    disabled_somewhere = set(fair.weak) - take
    pending_states = set(visit)
    path: list[int] = []
    here = entry
    seen_states = {entry}

    def settle(node: int) -> None:
        pending_states.discard(node)
        if disabled_somewhere:
            disabled_somewhere.difference_update(disabled_somewhere - graph.enabled(node))

    settle(entry)
    while take or disabled_somewhere or pending_states:
        leg = _nearest(graph, here, comp, take, disabled_somewhere, pending_states)
        if leg is None:  # pragma: no cover - comp is strongly connected and fair
            raise AssertionError("a fair component lacks what made it fair")
        for e in leg:
            take.discard(actions[e])
            settle(targets[e])
            seen_states.add(targets[e])
        path += leg
        here = targets[leg[-1]] if leg else here
    if not path:  # nothing to visit: any step inside and back
        first = next(e for e in graph.out(entry) if targets[e] in comp)
        path.append(first)
        here = targets[first]
    path += _path(graph, here, entry, comp)
    return path


def _nearest(graph: StateGraph, src: int, comp: Collection[int], take: set[int], disabled: set[int],
             states: set[int]) -> list[int] | None:
    """Edges from ``src`` to the nearest edge taking an action in ``take`` (included) or state still wanted."""
    came: dict[int, int] = {src: -1}
    queue: deque[int] = deque([src])
    heads, targets, actions = graph.heads, graph.targets, graph.actions
    while queue:
        node = queue.popleft()
        for e in range(heads[node], heads[node + 1]):
            nxt = targets[e]
            if nxt not in comp:
                continue
            if actions[e] in take:
                return [*_edges_to(graph, came, node), e]
            if nxt in came:
                continue
            came[nxt] = e
            if nxt in states or (disabled and not disabled <= graph.enabled(nxt)):
                return _edges_to(graph, came, nxt)
            queue.append(nxt)
    return None


def _path(graph: StateGraph, src: int, dst: int, comp: Collection[int]) -> list[int]:
    found = reach_within(graph, [src], comp, {dst})
    if found is None:  # pragma: no cover - comp is strongly connected
        raise AssertionError("a component's states do not reach each other")
    return found[1]
