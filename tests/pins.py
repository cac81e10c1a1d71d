"""What the library pair tests share: explore's pinned figures and a step's events of one kind.

Whether each library spec gets its declared verdict is checked once, for every
spec in specs/, by tests/test_corpus.py and `ownership test specs/`.
"""

from __future__ import annotations

from typing import Any

from conftest import instance
from ownership.core.result import Verdict
from ownership.engines.explore import ExploreOptions, explore

Pinned = tuple[Verdict, int, int, int, str | None]


def explored(name: str, symmetry: bool = True, **params: int) -> Pinned:
    """(verdict, states, transitions, depth, violated invariant) of explore on a library spec."""
    result = explore(instance(name, **params), ExploreOptions(symmetry=symmetry))
    s = result.stats
    return result.verdict, s.states, s.transitions, s.depth, result.violated


def events(step: Any, kind: str) -> list[Any]:
    """The events of one trace step whose kind is ``kind``."""
    return [e for e in step.events if e.kind == kind]
