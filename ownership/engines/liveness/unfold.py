"""Deciding temporal properties on the annotated quotient, and turning its lasso into a concrete one.

:class:`QuotientDecider` runs the same search as the full graph's
(:mod:`.decide`) on the annotated quotient (:mod:`.quotient`), with fairness
judged on each component's concrete preimage.  What it finds is a path of
quotient nodes; :func:`realize` follows it concretely (from a stored state,
reached by a concrete path, choosing at each step the concrete successor in
the next node's orbit with the tracked element where the annotation says),
then searches the component's concrete preimage for a fair cycle.  The
result is an ordinary :class:`~.decide.Lasso`, replayed and re-judged before
it is shown.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

from ownership.engines.liveness.decide import Lasso, fair_actions, find_lasso
from ownership.engines.liveness.fair import cycle_through, fair_components, reach_within
from ownership.engines.liveness.graph import StateGraph
from ownership.engines.liveness.quotient import Annotated, Quotient, annotate, orbit_judge
from ownership.engines.storage import Tree
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.lasso import argument, evaluator
from ownership.lang.temporal import Form, Property


class QuotientDecider:
    """Decides properties of one instance on its symmetry-reduced graph."""

    def __init__(self, inst: Instance, q: Quotient) -> None:
        self.inst = inst
        self.q = q
        self.fair = fair_actions(inst)
        self.value = evaluator(inst)
        self._annotated: dict[str | None, Annotated] = {}

    def annotated(self, prop: Property) -> Annotated:
        name = prop.each.name if prop.each is not None else None
        if name not in self._annotated:
            self._annotated[name] = annotate(self.q, name, self.inst.sizes[name] if name is not None else 1)
        return self._annotated[name]

    def decide(self, prop: Property) -> Lasso | None:
        """A fair lasso (concrete) breaking ``prop``, or ``None``: it holds."""
        ann = self.annotated(prop)
        graph, k = ann.graph, ann.k
        value, inst = self.value, self.inst

        def holds(role: str) -> list[bool]:
            return [value(prop, role, graph.states[x], argument(inst, prop, x % k if ann.domain else None))
                    for x in range(len(graph))]

        then = holds("then")
        when = holds("when") if prop.form is Form.LEADS_TO else None
        judge = orbit_judge(inst, self.q, ann, self.fair)
        found = find_lasso(graph, prop.form, then, when,
                           lambda allowed: fair_components(graph, allowed, self.fair, judge))
        if found is None:
            return None
        start, path, comp, _entry = found
        return realize(inst, self.q, ann, prop, start, path, comp, then)


def realize(inst: Instance, q: Quotient, ann: Annotated, prop: Property, start: int, path: list[int],
            comp: frozenset[int], then: list[bool]) -> Lasso:
    """A concrete lasso for an annotated one: the stem followed concretely, a fair cycle of the component's preimage."""
    k, domain = ann.k, ann.domain
    base_start = start // k
    element = start % k if domain is not None else None
    steps: list[tuple[int, tuple[Any, ...]]] = list(q.graph.tree.path(base_start))
    since = len(steps)
    state = q.graph.states[base_start]

    def annotation(s: State) -> int | None:
        found = q.sigma(s)
        if found is None:
            return None
        node, sigma = found
        return node * k + (sigma[domain][element] if domain is not None and element is not None else 0)

    with inst.mode(recording=False, choice_reduction=()):
        for e in path:
            want = ann.graph.targets[e]
            for ai, sc in inst.expand(state):
                if annotation(sc.state) == want:
                    steps.append((ai.index, sc.picks))
                    state = sc.state
                    break
            else:
                raise OwnershipError(Code.INTERNAL_REPLAY, f"liveness: no concrete step follows the quotient's "
                                     f"lasso for {prop.name}")
        concrete = _preimage(inst, state, lambda s: annotation(s) in comp)
    fair = fair_actions(inst)
    value = evaluator(inst)
    args = argument(inst, prop, element)
    fair_comps = fair_components(concrete, range(len(concrete)), fair)
    visit: list[int] = []
    if prop.form is Form.EVENTUALLY_ALWAYS:
        fair_comps = [c for c in fair_comps if any(not value(prop, "then", concrete.states[x], args) for x in c)]
    if not fair_comps:
        raise OwnershipError(Code.INTERNAL_REPLAY, f"liveness: the concrete preimage of the quotient's fair "
                             f"component for {prop.name} has no fair component (please report this spec)")
    owner = {x: c for c in fair_comps for x in c}
    found = reach_within(concrete, [0], range(len(concrete)), owner)
    assert found is not None
    _, inner = found
    entry = concrete.targets[inner[-1]] if inner else 0
    chosen = owner[entry]
    if prop.form is Form.EVENTUALLY_ALWAYS:
        visit = [next(x for x in chosen if not value(prop, "then", concrete.states[x], args))]
    steps += [concrete.step(e) for e in inner]
    loop = len(steps)
    steps += [concrete.step(e) for e in cycle_through(concrete, chosen, entry, fair, visit)]
    return Lasso(prop, element, tuple(steps), loop, since)


def _preimage(inst: Instance, start: State, inside: Callable[[State], bool]) -> StateGraph:
    """The concrete states reachable from ``start`` without leaving ``inside``, with every edge among them.

    An edge that leaves is kept with target ``-1``: it still says its action is enabled there.
    """
    states = [start]
    index = {start: 0}
    heads, targets, actions = array("q", [0]), array("q"), array("i")
    picks: dict[int, tuple[Any, ...]] = {}
    tree = Tree()
    node = 0
    while node < len(states):
        for ai, sc in inst.expand(states[node]):
            t = sc.state
            dst = index.get(t)
            if dst is None and inside(t):
                dst = index[t] = len(states)
                states.append(t)
                tree.add(node, ai.index, sc.picks)
            if sc.picks:
                picks[len(targets)] = sc.picks
            targets.append(-1 if dst is None else dst)
            actions.append(ai.index)
        heads.append(len(targets))
        node += 1
    depth = array("i", [0] * len(states))
    for i in range(1, len(states)):
        depth[i] = depth[tree.parent[i]] + 1
    return StateGraph(states, heads, targets, actions, picks, tree, depth)
