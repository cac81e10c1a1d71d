"""What ``--explain`` answers: its options and the diagnosis (necessary actions, their conditions, cuts)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DiagnoseOptions:
    """Bounds of the state graph the diagnosis is computed over."""

    max_states: int = 200_000
    symmetry: bool = True
    max_pairs: int = 10
    """Most two-action cuts reported (only when no single action is necessary)."""


@dataclass(frozen=True)
class Condition:
    """A predicate on an action's transitions that every violating path satisfies at that action."""

    key: str
    """The condition without the action's argument names (``p_to_finish = yes``): same key, same fact."""
    text: str
    """As written for the action: ``p_to_finish[r] = yes``."""
    kind: str
    """``state`` (a field of the acting request), ``argument`` (a value argument) or ``branch`` (a guard outcome)."""
    fields: tuple[str, ...] = ()
    doc: str = ""
    """The first field's ``spec.var`` doc."""
    line: int | None = None
    """For a branch: the line of the ``if``."""
    source: str = ""
    """For a branch: the ``if`` line's text."""
    unchecked: bool = False
    """The action never reads any of ``fields`` on the violating paths' steps."""
    matching: int = 0
    """How many of the action's transitions in the graph satisfy it."""


@dataclass(frozen=True)
class NecessaryAction:
    """An action every path to the violation takes, with the narrowest description of that step."""

    action: str
    signature: str
    """``decode_pop_preallocated(r)``."""
    doc: str
    file: str | None
    line: int | None
    source: str
    """The ``def`` line."""
    depth: int
    """Fewest steps from the initial state to one of its steps on a violating path (orders the list)."""
    transitions: int
    """Its transitions in the graph."""
    on_violating_paths: int
    """Of those, how many lead on to a violating state."""
    conditions: tuple[Condition, ...]
    """The narrowest conjunction of necessary conditions (may be empty)."""
    first_unchecked: tuple[Condition, ...] = ()
    """Conditions unchecked here and not already necessary and unchecked at an earlier necessary action."""
    other_calls: tuple[tuple[Condition, ...], ...] = ()
    """When every path takes the action more than once: the conjunction of each further step it must take.

    Each is necessary on its own, and none holds together with ``conditions``
    (``x = 1`` on one step, ``x = 2`` on another), so they are never one conjunction.
    """
    releases: bool = False
    """Its steps on the violating paths give pages up (free, decref, demote, publish, evict)."""
    collateral: int = 0
    """States that are not violating and become unreachable when a check blocks the steps ``conditions`` match."""


@dataclass(frozen=True)
class Diagnosis:
    """The diagnosis of one invariant over one bounded state graph."""

    spec: str
    invariant: str
    params: str
    states: int
    transitions: int
    violating_states: int
    complete: bool
    """False when the state limit cut the graph off: everything holds within the explored bound only."""
    max_states: int
    symmetry: bool
    necessary: tuple[NecessaryAction, ...]
    """In path order (earliest first)."""
    fix_order: tuple[str, ...] = ()
    """The necessary actions' names, most likely fix point first (see :attr:`fix_points`)."""
    cuts: tuple[tuple[str, str], ...] = ()
    """Minimal pairs of action names, when no single action is necessary."""
    initial_violates: bool = False

    @property
    def missing_checks(self) -> tuple[NecessaryAction, ...]:
        """The necessary actions that are the first to run under an unchecked condition (path order)."""
        return tuple(a for a in self.necessary if a.first_unchecked)

    @property
    def fix_points(self) -> tuple[NecessaryAction, ...]:
        """The necessary actions, the step most likely to be the place to fix first.

        Every necessary action's conditions, made a guard, remove every
        violation of the graph; they differ in what else they remove and in
        where the mistake is made (see :func:`~.wording.rank`): a step that
        gives pages up although it reads the hazard, then missing checks, then
        steps that give pages up, then the fewest other states lost.
        """
        by_name = {a.action: a for a in self.necessary}
        ranked = [by_name[n] for n in self.fix_order if n in by_name]
        return tuple(ranked + [a for a in self.necessary if a not in ranked])

    def coverage(self) -> str:
        """What the diagnosis was computed over, in one clause."""
        bound = (
            "the complete reachable state graph"
            if self.complete
            else f"the first {self.states:,} states only (state limit {self.max_states:,} reached: "
            "the diagnosis holds within this explored bound only)"
        )
        sym = " (up to symmetry)" if self.symmetry else ""
        return (
            f"over {bound}: {self.states:,} states{sym}, {self.transitions:,} transitions, "
            f"{self.violating_states:,} violating {self.invariant}"
        )
