"""Log ids bound to elements of the spec's domains, and renaming the unbound ones.

:func:`bind` gives the elements an id seen for the first time may stand for.

An element of a symmetric domain (a request, a content key's hash) that no
log id is bound to is anonymous: a configuration in which an internal step
cached ``h0`` and one in which it cached ``h1`` are renamings of each other,
and either explains the same continuations of the log.  The canonical
configuration gives the unbound elements, sorted by what distinguishes them
in the state (their own cells, the cells naming them), the unbound labels
in order.  The renaming applied is always a real permutation of one domain,
so merging by it is sound for a symmetric domain even where the sort is not
exact (two different elements that sort alike merely stay apart).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ownership.lang.declarations import Domain
from ownership.lang.instance import Instance, State
from ownership.lang.permutation import Permutation, StateShape

Binding = tuple[tuple[str, int], ...]
"""Log ids bound to element indices, sorted by id (hashable, so configurations dedupe)."""

MAX_KEPT = 512
"""Permutations one :class:`Renamer` keeps built at most (a domain of 6 has 720)."""


class Renamer:
    """Applies permutations of one symmetric domain to states, and finds the canonical one."""

    def __init__(self, inst: Instance, domain: Domain) -> None:
        self.inst = inst
        self.domain = domain
        self.size = inst.sizes[domain.name]
        self.shape = StateShape.of(inst)
        # Cells whose value names an element of the domain: (position, whether it is a set mask).
        self.named: list[tuple[int, bool]] = []
        moves = False
        for var in self.shape.variables:
            moves = moves or domain.name in var.index
            if var.value_domain == domain.name:
                length = math.prod(var.shape)
                self.named.extend((var.offset + k, var.is_set) for k in range(length))
        self.own = inst.element_cells[domain.name]
        # A renaming of a domain that indexes no variable and that no value names changes no state.
        self.trivial = not moves and not self.named
        # Permutations already built (each keeps its index maps): the log's configurations
        # reuse few orderings, and building the maps costs a pass over the layout.
        self._perms: dict[tuple[int, ...], Permutation] = {}

    def signature(self, e: int, state: State) -> tuple[Any, ...]:
        """What tells element ``e`` apart in ``state``: its own cells, and which cells name it."""
        own = tuple((state[c] is None, state[c] or 0) for c in self.own[e])  # sortable: None apart from ints
        named = tuple(i for i, (c, is_set) in enumerate(self.named)
                      if state[c] is not None and (state[c] >> e & 1 if is_set else state[c] == e))
        return own, named

    def permute(self, state: State, perm: Sequence[int]) -> State:
        """``state`` with element ``i`` renamed ``perm[i]`` (cells indexed by it moved, values naming it changed)."""
        key = tuple(perm)
        pi = self._perms.get(key)
        if pi is None:
            if len(self._perms) >= MAX_KEPT:
                self._perms.clear()
            pi = self._perms[key] = Permutation(self.shape, {self.domain.name: key})
        return pi.apply(state)

    def signatures(self, state: State) -> list[tuple[Any, ...]]:
        """:meth:`signature` of every element, in one pass over the cells that name elements."""
        named: list[list[int]] = [[] for _ in range(self.size)]
        for i, (c, is_set) in enumerate(self.named):
            v = state[c]
            if v is None:
                continue
            if is_set:
                for e in range(self.size):
                    if v >> e & 1:
                        named[e].append(i)
            else:
                named[v].append(i)
        return [(tuple((state[c] is None, state[c] or 0) for c in self.own[e]), tuple(named[e]))
                for e in range(self.size)]

    def canonical(self, state: State, bound: set[int]) -> State:
        """``state`` with the unbound elements renamed into their canonical order."""
        if self.trivial:
            return state
        free = [e for e in range(self.size) if e not in bound]
        sigs = self.signatures(state)
        ranked = sorted(free, key=lambda e: (sigs[e], e))
        if ranked == free:
            return state
        perm = list(range(self.size))
        for old, new in zip(ranked, free, strict=True):
            perm[old] = new
        return self.permute(state, perm)


def bind(renamer: Renamer, key: str, binding: Binding, state: State,
         release_unnamed: bool) -> list[tuple[int | None, Binding]]:
    """The elements log id ``key`` may stand for in ``state``, each with the binding it leaves.

    A bound id keeps its element.  A new one may take an unbound element or
    (``release_unnamed``, for content keys) a bound one no cell names any more,
    whose old id is then forgotten.  For a symmetric domain one element per
    signature is enough: the others give configurations that are renamings of it.
    """
    for k, e in binding:
        if k == key:
            return [(e, binding)]
    owner = {e: k for k, e in binding}
    sigs = renamer.signatures(state)
    options: list[tuple[int, Binding]] = []
    for e in range(renamer.size):
        if e not in owner:
            options.append((e, binding))
        elif release_unnamed and not sigs[e][1]:
            options.append((e, tuple((k, v) for k, v in binding if v != e)))
    if renamer.domain.symmetric:
        seen: set[tuple[Any, ...]] = set()
        kept = []
        for e, b in options:
            if sigs[e] not in seen:
                seen.add(sigs[e])
                kept.append((e, b))
        options = kept
    return [(e, tuple(sorted((*b, (key, e))))) for e, b in options]
