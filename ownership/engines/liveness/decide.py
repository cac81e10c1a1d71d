"""Deciding temporal properties on the reachable graph: a fair lasso that breaks one, or none.

For each property (and each element of its ``each`` domain):

* ``leads_to(P, Q)`` fails when a fair path reaches a state where ``P`` holds
  and ``Q`` does not, and then never sees ``Q``: a fair component of the
  states where ``Q`` is false, reachable through such states from one where
  ``P`` holds;
* ``always_eventually(P)`` is ``leads_to(True, P)``;
* ``eventually_always(P)`` fails when a fair component of the whole graph
  holds a state where ``P`` is false (a fair path can go round it for ever).

The answer is a :class:`Lasso`: steps from the initial state, the position
where the loop starts, and the position from which the property is broken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.engines.liveness.fair import FairActions, cycle_through, fair_components, reach_within
from ownership.engines.liveness.graph import StateGraph
from ownership.lang.instance import Instance
from ownership.lang.lasso import argument, evaluator, fair_instances
from ownership.lang.temporal import Form, Property


@dataclass(frozen=True)
class Lasso:
    """A path that breaks ``prop`` for ever: ``steps`` then back to position ``loop`` (again and again).

    ``loop == len(steps)`` means the last state has no enabled action and the
    path stays there.  ``since`` is the position from which the property is
    broken (where ``P`` held without ``Q``, for ``leads_to``); ``element`` the
    index of the element it is broken for (``None`` without ``each``).
    """

    prop: Property
    element: int | None
    steps: tuple[tuple[int, tuple[Any, ...]], ...]
    loop: int
    since: int


def fair_actions(inst: Instance) -> FairActions:
    """The spec's fair actions as sets of action instance numbers."""
    return FairActions(*fair_instances(inst))


Found = tuple[int, list[int], frozenset[int], int]
"""Where a lasso is on a graph: the state it breaks the property from, the edges from there to its fair
component, the component, and the state the loop starts at."""


def find_lasso(graph: StateGraph, form: Form, then: Sequence[bool], when: Sequence[bool] | None,
               components_of: Callable[[frozenset[int]], list[frozenset[int]]],
               whole: list[frozenset[int]] | None = None) -> Found | None:
    """The search both deciders run (module docstring): ``then``/``when`` per state, fair components on demand.

    ``whole`` is the fair components of the whole graph (for
    ``eventually_always``); the shallowest state is preferred at each choice.
    """
    if form is Form.EVENTUALLY_ALWAYS:
        for comp in whole if whole is not None else components_of(frozenset(range(len(graph)))):
            bad = [n for n in comp if not then[n]]
            if bad:
                entry = min(bad, key=lambda n: (graph.depth[n], n))
                return entry, [], comp, entry
        return None
    allowed = frozenset(n for n in range(len(graph)) if not then[n])
    starts = [n for n in allowed if when is None or when[n]]
    if not starts:
        return None
    comps = components_of(allowed)
    if not comps:
        return None
    owner = {n: comp for comp in comps for n in comp}
    starts.sort(key=lambda n: (graph.depth[n], n))
    reached = reach_within(graph, starts, allowed, owner)
    if reached is None:
        return None
    start, path = reached
    entry = graph.targets[path[-1]] if path else start
    return start, path, owner[entry], entry


class Decider:
    """Decides properties of one instance on its graph; fair components of the whole graph are shared."""

    def __init__(self, inst: Instance, graph: StateGraph) -> None:
        self.inst = inst
        self.graph = graph
        self.fair = fair_actions(inst)
        self.value = evaluator(inst)
        self._whole: list[frozenset[int]] | None = None

    def elements(self, prop: Property) -> Sequence[int | None]:
        """The elements a property is checked for (``[None]`` without ``each``)."""
        return [None] if prop.each is None else range(self.inst.sizes[prop.each.name])

    def decide(self, prop: Property) -> Lasso | None:
        """A fair lasso breaking ``prop`` (for its first element that has one), or ``None``: it holds."""
        for element in self.elements(prop):
            found = self._decide_one(prop, element)
            if found is not None:
                return found
        return None

    def _holds(self, prop: Property, role: str, element: int | None) -> list[bool]:
        args = argument(self.inst, prop, element)
        value = self.value
        return [value(prop, role, st, args) for st in self.graph.states]

    def _decide_one(self, prop: Property, element: int | None) -> Lasso | None:
        graph = self.graph
        then = self._holds(prop, "then", element)
        when = self._holds(prop, "when", element) if prop.form is Form.LEADS_TO else None
        if prop.form is Form.EVENTUALLY_ALWAYS and self._whole is None:
            self._whole = fair_components(graph, range(len(graph)), self.fair)
        found = find_lasso(graph, prop.form, then, when, lambda allowed: fair_components(graph, allowed, self.fair),
                           self._whole)
        return None if found is None else self._lasso(prop, element, *found)

    def _lasso(self, prop: Property, element: int | None, start: int, middle: list[int], comp: frozenset[int],
               entry: int) -> Lasso:
        graph = self.graph
        stem = graph.tree.path(start)
        since = len(stem)
        steps = [*stem, *(graph.step(e) for e in middle)]
        loop = len(steps)
        steps += [graph.step(e) for e in cycle_through(graph, comp, entry, self.fair)]
        return Lasso(prop, element, tuple(steps), loop, since)

