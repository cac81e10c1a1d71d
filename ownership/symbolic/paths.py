"""Forking: one run of spec code per sequence of branch decisions.

A Python ``if`` on a :class:`~ownership.symbolic.terms.Sym` calls
:meth:`PathExplorer.branch`; the function is re-run from the start once per
sequence of decisions (as concolic executors do), each run yielding one
:class:`Path` with its path condition, the cells it wrote and the choices it
made.  ``require`` is an ``if`` whose false branch ends the path as disabled.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import z3

from ownership.lang.guard import Disabled
from ownership.library import is_checker_code
from ownership.symbolic.terms import WIDTH, SymbolicError, conjunction

MAX_PATHS = 4096
"""Paths one action may fork into before the engine gives up on the spec."""


class PathExplosionError(SymbolicError):
    """More than :data:`MAX_PATHS` paths; ``where`` lists the spec lines the last run forked at."""

    def __init__(self, where: list[tuple[str, int]]) -> None:
        self.where = where
        counts: dict[tuple[str, int], int] = {}
        for w in where:
            counts[w] = counts.get(w, 0) + 1
        self.hottest = max(counts, key=counts.__getitem__) if counts else None
        at = f" (most forks at {self.hottest[0]}:{self.hottest[1]})" if self.hottest else ""
        super().__init__(
            f"more than {MAX_PATHS} paths: the spec branches on too many symbolic values{at}; "
            "combine conditions with all_of/any_of/not_, or move the branching into the vocabulary"
        )


def spec_frame() -> tuple[str, int]:
    """File and line of the innermost caller outside the ownership package (the spec line that forked)."""
    frame = sys._getframe(1)
    fallback: tuple[str, int] | None = None
    while frame is not None:
        file = frame.f_code.co_filename
        if not is_checker_code(file):
            return file, frame.f_lineno
        if fallback is None and os.sep + "vocab" + os.sep in file:
            fallback = (file, frame.f_lineno)
        frame = frame.f_back  # type: ignore[assignment]
    return fallback or ("<unknown>", 0)


@dataclass
class Path:
    """One path through an action or invariant."""

    pc: list[z3.BoolRef]
    writes: dict[int, Any]
    aux: list[z3.ExprRef]
    constraints: list[z3.BoolRef]
    picks: list[Any]
    result: Any
    enabled: bool
    overflows: list[z3.BoolRef] = field(default_factory=list)
    """Conditions under which this path computes an integer outside the encoding's range."""
    flags: list[tuple[str, z3.BoolRef]] = field(default_factory=list)
    """``(invariant, condition)``: the path emits an event violating the invariant when the condition holds."""


class PathExplorer:
    """Runs a function once per branch-decision sequence (see the module docstring)."""

    def __init__(self, width: int = WIDTH) -> None:
        self.width = width
        self.prefix: tuple[int, ...] = ()
        self.trail: list[tuple[int, int]] = []
        self.pc: list[z3.BoolRef] = []
        self.overflows: list[z3.BoolRef] = []
        self.merging = False
        """Whether rewritten spec code merges branches on this explorer's terms (:mod:`ownership.symbolic.merge`)."""
        self.guards: list[z3.BoolRef] = []
        """The conditions of the merged ``if`` branches running now: writes hold only under them."""
        self.view: Any = None
        """The symbolic view whose assumptions and choices a merged branch guards (set by its owner)."""
        self.decided: dict[int, bool] = {}
        """Conditions already decided on this path (by term id): deciding one again does not fork."""
        self.where: list[tuple[str, int]] | None = None
        """Spec lines of this run's forks, recorded only to locate a path explosion."""

    def no_overflow(self, ok: z3.BoolRef) -> None:
        """Arithmetic stays in range on this path only if ``ok``: record when it does not.

        The path itself continues under ``ok`` (an overflowing execution is not
        one the encoding can represent); the engines check separately that no
        reachable state can take the path with ``ok`` false.
        """
        ok = z3.simplify(ok)
        if z3.is_true(ok):
            return
        self.overflows.append(conjunction([*self.pc, z3.Not(ok)]))
        self.pc.append(ok)

    def branch(self, cond: z3.BoolRef) -> bool:
        cond = z3.simplify(cond)
        if z3.is_true(cond):
            return True
        if z3.is_false(cond):
            return False
        known = self.decided.get(cond.get_id())
        if known is not None:  # ``x or y`` tests x twice (the or, then its caller): fork once
            return known
        if self.where is not None:
            self.where.append(spec_frame())
        taken = self.decide(2, cond) == 0
        self.decided[cond.get_id()] = taken
        return taken

    def decide(self, count: int, cond: z3.BoolRef | None = None) -> int:
        pos = len(self.trail)
        taken = self.prefix[pos] if pos < len(self.prefix) else 0
        self.trail.append((taken, count))
        if cond is not None:
            self.pc.append(cond if taken == 0 else z3.Not(cond))
        return taken

    def run(self, fn: Callable[[], Any], on_start: Callable[[], None]) -> Iterator[tuple[bool, Any]]:
        """Yield ``(enabled, result)`` once per path; path state is read from this object."""
        pending: list[tuple[int, ...]] = [()]
        count = 0
        self.where = None
        while pending:
            self.prefix = pending.pop()
            self.trail = []
            self.pc = []
            self.overflows = []
            self.guards = []
            self.decided = {}
            on_start()
            enabled = True
            result = None
            try:
                result = fn()
            except Disabled:
                enabled = False
            for pos in range(len(self.prefix), len(self.trail)):
                taken, n = self.trail[pos]
                for alt in range(n - 1, taken, -1):
                    pending.append(tuple(t for t, _ in self.trail[:pos]) + (alt,))
            count += 1
            if count > MAX_PATHS:
                raise PathExplosionError(self.where or [])
            if count == MAX_PATHS:
                self.where = []  # the next run records where it forks, for the error
            yield enabled, result


