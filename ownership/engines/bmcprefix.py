"""The first levels of a bounded check, searched concretely before the solver takes over.

Proving that no violation exists at a shallow depth is the costly part of
bounded model checking: each unsatisfiable query covers every execution of
that length, and the state space at a shallow depth is small.  A breadth-first
search with a budget of stored states does that part instead.  Every level it
finishes is a *measured* lower bound on the depth of the shortest violation
(nothing is assumed about levels it did not finish), so the solver is first
asked at the depth after it.  When the search reaches a violation, it finishes
that level, so it knows every invariant violated at that depth, and keeps one
execution per invariant: the solver is asked for a model along it first (a
single cheap query), and the model is replayed concretely as any other.

Sound for the instance's own parameter values only: with ``--free`` the
solver ranges over values the concrete search never ran, so bmc does not use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ownership.core.replay import build_trace
from ownership.core.result import StopReason
from ownership.engines.search import BreadthFirst, Control, Limits, Stop, Visitor
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance, Successor


@dataclass(frozen=True)
class Prefix:
    """What the concrete search measured."""

    clean: int
    """Every execution of up to ``clean`` steps was checked: none violates (``-1``: the initial state does)."""
    reached: int
    """Some execution has this many steps (the deepest level the search stored a state at)."""
    witnesses: tuple[tuple[str, tuple[State, ...]], ...] = ()
    """Per invariant violated at depth ``clean + 1``, in the order checked, the states of one execution doing it."""
    complete: bool = False
    """Every execution of ``clean + 1`` steps was checked: ``witnesses`` names every invariant violated there."""
    states: int = 0

    def note(self) -> str:
        """What the result says about the search (the solver's depths start after it)."""
        return (f"a breadth-first search of {self.states:,} states checked every execution of up to "
                f"{self.clean} steps before the solver started")


NO_PREFIX = Prefix(clean=-1, reached=0)
"""No concrete search: the solver asks every depth from 0."""


class _Levels(Visitor):
    """Records the violations of the first violating level, then stops before expanding it."""

    def __init__(self, inst: Instance, search: BreadthFirst, names: Sequence[str]) -> None:
        self.inst = inst
        self.search = search
        self.names = list(names)
        self.depth: int | None = None
        self.found: dict[str, int] = {}
        """Per violated invariant, the node of the first execution found violating it."""

    def _record(self, node: int, depth: int, violated: list[str]) -> None:
        self.depth = depth
        for name in violated:
            self.found.setdefault(name, node)

    def on_state(self, node: int, state: State, depth: int) -> Stop | Control | None:
        violated = [n for n in self.names if not self.inst.holds(state, n)]
        if not violated:
            return None
        self._record(node, depth, violated)
        return Control.PRUNE  # the same level is finished, but nothing past it is needed

    def on_flagged(self, src: int, action: ActionInstance, succ: Successor, depth: int) -> Stop | Control | None:
        violated = [n for n in self.names if n in succ.violations or not self.inst.holds(succ.state, n)]
        if not any(n in succ.violations for n in violated):
            return None  # not a violating event: the state is checked as any other
        self._record(self.search.tree.add(src, action.index, succ.picks), depth, violated)
        return Control.HANDLED

    def on_level(self, depth: int, states: int) -> Stop | None:
        if self.depth is not None:
            return Stop(StopReason.VIOLATION, depth=self.depth)
        return None


def search_prefix(inst: Instance, names: Sequence[str], *, max_states: int, max_depth: int, symmetry: bool,
                  progress: Any = None) -> Prefix:
    """Check the first levels of ``inst`` concretely, storing at most ``max_states`` states.

    With ``symmetry`` the search stores one state per orbit; bmc's symmetry
    check (:func:`~ownership.engines.symcheck.precheck`) has run before, as
    for the explorer.  A stop from outside (Ctrl-C, the time limit) propagates.
    """
    if max_states <= 0:
        return NO_PREFIX
    search = BreadthFirst(inst, symmetry=symmetry, limits=Limits(max_depth=max_depth, max_states=max_states),
                          progress=progress, catch_stops=False)
    levels = _Levels(inst, search, names)
    outcome = search.run(levels)
    reason = outcome.stop.reason
    if levels.depth is not None:
        d = levels.depth
        # A limit may have cut the violating level short: then other invariants may be violated there too.
        complete = reason in (StopReason.VIOLATION, StopReason.EXHAUSTED, StopReason.DEPTH_LIMIT)
        witnesses = tuple((n, _states(inst, search.tree.path(levels.found[n]))) for n in names if n in levels.found)
        return Prefix(clean=d - 1, reached=d, witnesses=witnesses, complete=complete, states=outcome.states)
    if reason in (StopReason.EXHAUSTED, StopReason.DEPTH_LIMIT):
        # Every reachable state (or every one within the bound) was checked.
        return Prefix(clean=max_depth, reached=outcome.level, states=outcome.states)
    # A limit (states, memory): every level up to the one being expanded was finished.
    return Prefix(clean=outcome.level, reached=outcome.level, states=outcome.states)


def _states(inst: Instance, path: list[tuple[int, tuple[Any, ...]]]) -> tuple[State, ...]:
    """The states of the execution ``path`` from the initial state (replayed through the concrete semantics)."""
    trace = build_trace(inst, path, engine="bmc", violation=None)
    return tuple(inst.from_json(s) for s in trace.states)


AUDIT_STATES = 5_000
"""States of the breadth-first prefix the engines without a concrete search of their own audit."""


def audit_prefix(inst: Instance) -> str:
    """The determinism audit over a breadth-first prefix of ``inst`` (at most :data:`AUDIT_STATES` states).

    bmc and prove run spec code symbolically once per path (a helper's
    memo, counter or cache is frozen into the encoding as it was then),
    random runs and the free-parameter explorer sample: none of them would
    see an action that changes with what ran before.  This runs the
    explorer's audit (:class:`~ownership.lang.audit.SearchAudit`: every
    state expanded again later, the module-level data compared) over the
    first states, once per instance; OWN066 if it fails.  Returns the note
    for the verdict.
    """
    done = inst.__dict__.get("_prefix_audit")
    if isinstance(done, str):
        return done
    search = BreadthFirst(inst, symmetry=False, limits=Limits(max_states=AUDIT_STATES), catch_stops=False)
    outcome = search.run(Visitor())
    whole = "all" if outcome.complete else f"the first {outcome.states:,}"
    note = (f"{outcome.audit}: the spec's code run concretely on {whole} of the states at these parameter values, "
            "before the check")
    inst.__dict__["_prefix_audit"] = note
    return note
