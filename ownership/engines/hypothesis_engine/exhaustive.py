"""The random engine's first phase: a breadth-first search capped at a few thousand states.

Random interleavings miss shallow bugs that hide behind one specific order
of actions or one specific ``s.choose`` value: a 2-step bug behind four
specific page picks is one run in 1,680.  Small state spaces are where such
bugs live, and where enumerating every state costs less than sampling.  So
before it samples, the engine runs the explorer's breadth-first search
(:class:`~ownership.engines.search.BreadthFirst`, with the same symmetry
reduction) up to ``HypothesisOptions.exhaustive_states`` states:

* it runs out of states: the answer is exact (every reachable state was
  checked, or the violation found is a shortest one) and the result says so;
* it finds a violation first: that is a shortest violation, breadth-first;
* it reaches the cap: every interleaving of up to ``depth - 1`` steps was
  checked, and the random phase starts its walks from the deepest states it
  stored (:class:`BfsPhase`'s ``frontier``) as well as from the initial state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ownership.core.progress import ProgressFn
from ownership.core.result import StopReason
from ownership.engines.search import BreadthFirst, Limits, Outcome, Stop, Visitor
from ownership.engines.symevery import EveryState
from ownership.engines.symmetry import make_canonicalizer
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance, Successor

FRONTIER_KEPT = 4096
"""Deepest states kept as starting points of the random phase (a uniform sample of them)."""


class _Checker(Visitor):
    """Checks the invariants on every new state and violating events on every step; keeps the deepest states."""

    def __init__(self, inst: Instance, search: BreadthFirst, checked: tuple[str, ...], rng: random.Random) -> None:
        self.inst = inst
        self.search = search
        self.checked = checked
        self.names = frozenset(checked)
        self.rng = rng
        self.deepest = -1
        self.frontier: list[int] = []
        self.seen_at_depth = 0

    def on_state(self, node: int, state: State, depth: int) -> Stop | None:
        for name in self.checked:
            if not self.inst.holds(state, name):
                return Stop(StopReason.VIOLATION, node, depth, name)
        if depth > self.deepest:
            self.deepest, self.frontier, self.seen_at_depth = depth, [], 0
        if depth == self.deepest:
            # Reservoir sampling: a uniform sample of the deepest level, whatever its size.
            self.seen_at_depth += 1
            if len(self.frontier) < FRONTIER_KEPT:
                self.frontier.append(node)
            else:
                k = self.rng.randrange(self.seen_at_depth)
                if k < FRONTIER_KEPT:
                    self.frontier[k] = node
        return None

    def on_flagged(self, src: int, action: ActionInstance, succ: Successor, depth: int) -> Stop | None:
        # An event of this step is marked as violating a checked invariant: the step is a violation.
        bad = next((n for n in self.checked if n in succ.violations), None)
        if bad is None:
            return None
        node = self.search.tree.add(src, action.index, succ.picks)
        return Stop(StopReason.VIOLATION, node, depth, bad)


@dataclass
class BfsPhase:
    """What the capped breadth-first search found."""

    search: BreadthFirst
    outcome: Outcome
    frontier: list[list[tuple[int, tuple[Any, ...]]]] = field(default_factory=list)
    """Paths from the initial state to a sample of the deepest states stored (when the cap was reached)."""
    symmetry_note: str | None = None
    """What the reduced search checked of the spec's symmetry (``None``: no reduction)."""

    @property
    def complete(self) -> bool:
        """Every reachable state was stored and checked."""
        return self.outcome.complete

    @property
    def violated(self) -> str | None:
        """The invariant a shortest violation breaks, if the search found one."""
        stop = self.outcome.stop
        return stop.detail if stop.reason is StopReason.VIOLATION else None

    @property
    def path(self) -> list[tuple[int, tuple[Any, ...]]]:
        """The steps to the violation (empty without one)."""
        node = self.outcome.stop.node
        return self.search.tree.path(node) if node is not None and self.violated else []

    @property
    def clean_depth(self) -> int:
        """Every interleaving of up to this many steps was checked (when the cap was reached)."""
        return max(self.outcome.level - 1, 0) if not self.complete else self.outcome.level

    def describe(self) -> str:
        """What the phase covered, for the result's notes."""
        o = self.outcome
        kind = " (up to symmetry)" if self.search.reduced else ""
        if self.violated is not None:
            return (f"found by the breadth-first phase after {o.states:,} states{kind}: a shortest violation, "
                    f"{len(self.path)} steps")
        if self.complete:
            return (f"the space has {o.states:,} states{kind}: searched exhaustively (breadth-first, every reachable "
                    "state checked), so this answer is exact, not sampled")
        return (f"breadth-first phase: {o.states:,} states{kind}, every interleaving of up to {self.clean_depth} steps "
                f"checked, then stopped ({o.stop.reason.value}); the random walks also start from "
                f"{len(self.frontier):,} of its deepest states")


def breadth_first(inst: Instance, checked: tuple[str, ...], max_states: int, symmetry: bool,
                  rng: random.Random, progress: ProgressFn | None = None) -> BfsPhase:
    """The capped search; Ctrl-C, SIGTERM and the time limit propagate (the engine reports them)."""
    search = BreadthFirst(inst, symmetry=symmetry, limits=Limits(max_states=max_states), progress=progress,
                          catch_stops=False)
    every: EveryState | None = None
    if search.reduced:
        # As in the explorer: the reduction is sound only if the spec is symmetric, so every state
        # the search expands is checked under generators of each reduced domain (OWN061).
        plan = search.plan

        def first_violation(st: State) -> str | None:
            return next((name for name in checked if not inst.holds(st, name)), None)

        every = EveryState(inst, make_canonicalizer(inst, plan, exact=True), (*plan.permuted, *plan.sorted), checked,
                           first_violation, search.expand, proof_after=None)
        search.expand = every
    checker = _Checker(inst, search, checked, rng)
    outcome = search.run(checker)
    phase = BfsPhase(search, outcome, symmetry_note=every.describe() if every is not None else None)
    if outcome.stop.reason is StopReason.STATE_LIMIT:
        phase.frontier = [search.tree.path(node) for node in checker.frontier]
    return phase
