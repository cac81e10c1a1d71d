"""Where a breadth-first search keeps its states: the frontier, the seen-set and the parent links.

:class:`~ownership.engines.search.BreadthFirst` talks to the frontier and
the seen-set only through the small protocols here (:class:`Frontier`,
:class:`SeenSet`), so a parallel or distributed search, or a seen-set that
packs or fingerprints its states, replaces them without touching the loop.
The defaults are a list per level and a ``dict`` of exact states.  A
replacement seen-set names how it stores states with a ``storage`` string
(``"fingerprints (64-bit)"``, ...), which the run's statistics report.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Any, Protocol


class Frontier(Protocol):
    """The states waiting to be expanded, handed out one breadth-first level at a time."""

    @property
    def push(self) -> Callable[[tuple[int, Any]], None]:
        """Add ``(node, state)`` to the next level; read again after every :meth:`next_level`.

        A method, or an attribute the frontier rebinds per level (the
        default's is the next level's ``list.append``: no Python call per state).
        """
        ...

    def next_level(self) -> Sequence[tuple[int, Any]]:
        """The next level's ``(node, state)`` pairs, in the order pushed (empty when none is left)."""
        ...


class LevelLists:
    """The default frontier: a list per level (``push`` is the next level's ``list.append``)."""

    __slots__ = ("_next", "push")

    def __init__(self) -> None:
        self._next: list[tuple[int, Any]] = []
        self.push: Callable[[tuple[int, Any]], None] = self._next.append

    def next_level(self) -> list[tuple[int, Any]]:
        level, self._next = self._next, []
        self.push = self._next.append
        return level

    def __len__(self) -> int:
        """The states queued for the next level so far (a frontier without ``__len__`` is counted by its nodes)."""
        return len(self._next)


class SeenSet(Protocol):
    """The states found so far, by key (canonical form), each with its node number.

    A plain ``dict`` is the default: exact keys, never hashes, since a
    collision between two 64-bit hashes would silently drop states.
    """

    def __contains__(self, key: object) -> bool: ...

    def __getitem__(self, key: Any) -> int: ...

    def __setitem__(self, key: Any, node: int) -> None: ...

    def __len__(self) -> int: ...


class Tree:
    """Parent links: per node its parent, the action instance and the choices that reached it."""

    __slots__ = ("parent", "action", "picks")

    def __init__(self) -> None:
        self.parent = array("q", [-1])
        self.action = array("i", [-1])
        self.picks: dict[int, tuple[Any, ...]] = {}
        """Only for the nodes reached by a step that made choices."""

    def __len__(self) -> int:
        return len(self.parent)

    def add(self, parent: int, action: int, picks: tuple[Any, ...] = ()) -> int:
        """A new node reached from ``parent`` by action instance number ``action``; its number."""
        node = len(self.parent)
        self.parent.append(parent)
        self.action.append(action)
        if picks:
            self.picks[node] = picks
        return node

    def path(self, node: int) -> list[tuple[int, tuple[Any, ...]]]:
        """The steps ``(action instance number, picks)`` from the initial state to ``node``."""
        out: list[tuple[int, tuple[Any, ...]]] = []
        while node > 0:
            out.append((self.action[node], self.picks.get(node, ())))
            node = self.parent[node]
        out.reverse()
        return out
