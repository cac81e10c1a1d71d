"""Which actions fire: per-action counts on every result, and the vacuity rules built on them.

A safe verdict is only as strong as the behaviour it covered.  A guard that
can never hold (a cleanup step whose condition is unreachable, an ``alloc``
of more pages than the pool has) leaves its action out of every state the
engine looked at, and the invariants then hold for a protocol without that
step.  Every engine therefore reports, per action, the states in which it was
enabled and the transitions it took (:class:`~ownership.core.result.ActionCoverage`):

* the explorer and prove's reachable set count exactly, in the breadth-first
  search they share (:class:`ActionTally`, kept by
  :class:`~ownership.engines.search.BreadthFirst`);
* the random engine counts along its runs (sampled);
* bmc and prove by induction or Spacer never enumerate states, so
  :func:`search_coverage` runs a small concrete breadth-first search (a
  state budget, bmc's depth bound) to see which actions fire.

:func:`with_coverage` attaches the counts and the spec's warnings to a result
and makes a run in which nothing can ever fire inconclusive: zero transitions
is never PROVED.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ownership.core.result import ActionCoverage, CheckResult, CoverageKind, Measure, StopReason, Verdict
from ownership.errors import Code, SpecWarning
from ownership.lang.instance import Instance
from ownership.lang.successors import ActionInstance, Successor

COVERAGE_STATES = 20_000
"""State budget of :func:`search_coverage` (deterministic: a count, not a time)."""


class ActionTally:
    """Per-action counters for a search fed one expanded state at a time.

    ``enabled[a]`` counts the states in which some instance of action ``a``
    had a successor, ``fired[a]`` its transitions.  ``act_of`` maps an action
    instance's index to its action's position, so the hot loop does list
    indexing only (no label formatting, no dict of names).
    """

    __slots__ = ("names", "act_of", "enabled", "fired", "last")

    def __init__(self, inst: Instance) -> None:
        self.names = list(inst.spec.actions)
        pos = {n: i for i, n in enumerate(self.names)}
        self.act_of = [pos[ai.action.name] for ai in inst.action_instances]
        self.enabled = [0] * len(self.names)
        self.fired = [0] * len(self.names)
        self.last = [-1] * len(self.names)

    def add(self, state_id: int, succs: Sequence[tuple[ActionInstance, Successor]]) -> None:
        """Count the successors of the state numbered ``state_id`` (each state added once)."""
        act_of, fired, last, enabled = self.act_of, self.fired, self.last, self.enabled
        for ai, _sc in succs:
            a = act_of[ai.index]
            fired[a] += 1
            if last[a] != state_id:
                last[a] = state_id
                enabled[a] += 1

    def coverage(self, inst: Instance, measured: Measure, states: int, depth: int, complete: bool) -> tuple[ActionCoverage, ...]:
        """The counts as one record per action, in declaration order."""
        return action_records(inst, self.enabled, self.fired, measured, states, depth, complete)


def action_records(
    inst: Instance,
    enabled: Sequence[int | None],
    fired: Sequence[int],
    measured: Measure,
    states: int,
    depth: int,
    complete: bool,
) -> tuple[ActionCoverage, ...]:
    """One :class:`ActionCoverage` per action of ``inst``'s spec (counts given in declaration order)."""
    out: list[ActionCoverage] = []
    for k, act in enumerate(inst.spec.actions.values()):
        out.append(ActionCoverage(
            act.name, enabled[k], fired[k], measured, states, depth, complete,
            act.may_be_dead, act.file, act.line,
        ))
    return tuple(out)


def search_coverage(
    inst: Instance, *, max_states: int = COVERAGE_STATES, max_depth: int | None = None, symmetry: bool = True
) -> tuple[ActionCoverage, ...]:
    """Which actions fire, by a concrete breadth-first search of at most ``max_states`` states.

    Used by the engines that never enumerate states (bmc, prove by induction
    or Spacer).  Invariants are not checked here: only firings are counted.
    With ``max_depth`` (bmc's bound) an action is looked for only as deep as
    the verdict it qualifies.  A search that runs out of new states counts
    exactly (``complete``); one cut by a budget reports "not seen to fire".
    """
    from ownership.engines.search import BreadthFirst, Limits, Visitor  # the search counts with ActionTally

    limits = Limits(max_depth=max_depth, max_expanded=max_states)
    search = BreadthFirst(inst, symmetry=symmetry, limits=limits, catch_stops=False)
    outcome = search.run(Visitor())
    cut = outcome.stop.reason is not StopReason.EXHAUSTED
    measured = Measure.BOUNDED if cut else Measure.EXACT
    return search.tally.coverage(inst, measured, outcome.expanded, outcome.depth, not cut)


def nothing_enabled_initially(inst: Instance) -> bool:
    """No instance of any action has an outcome in the initial state."""
    with inst.mode(recording=False):
        return all(inst.first_outcome(inst.init_state, ai) is None for ai in inst.action_instances)


def _never_runs(result: CheckResult, inst: Instance, actions: Sequence[ActionCoverage]) -> bool:
    if any(a.fired for a in actions):
        return False
    if result.coverage_kind in (CoverageKind.BOUNDED, CoverageKind.PROOF) and result.stop_reason is StopReason.EXHAUSTED \
            and result.stats.depth == 0:
        return True  # the solver found no execution of even one step, for every value of a free parameter
    if any(v == "free" for v in result.params.values()):
        # The concrete instance holds default values only: trust a complete count over every value.
        return bool(actions) and all(a.complete for a in actions)
    return nothing_enabled_initially(inst)


def with_coverage(result: CheckResult, inst: Instance, actions: tuple[ActionCoverage, ...]) -> CheckResult:
    """``result`` with its action counts and every warning; a run where nothing fires is never safe.

    The warnings are the spec's (the loader's: an unregistered action) and
    the instance's (raised while actions ran: an impossible allocation).  A
    safe verdict in which no action can fire from the initial state becomes
    UNKNOWN (exit 3): its invariants were checked on the initial state only.
    """
    warnings = tuple(dict.fromkeys([*inst.spec.warnings, *inst.warnings.values()]))
    out = dataclasses.replace(result, actions=actions, warnings=warnings)
    if out.safe and _never_runs(out, inst, actions):
        spec = inst.spec
        nothing = SpecWarning(
            Code.NOTHING_ENABLED,
            f"no action of spec {spec.name} is enabled in the initial state, so nothing ever runs and the "
            "invariants were checked on that one state only: a guard that can never hold, or an initial value "
            "no guard accepts? (see the actions line)",
            spec.file, spec.line, spec.name,
        )
        out = dataclasses.replace(out, verdict=Verdict.UNKNOWN, stop_reason=StopReason.NOTHING_ENABLED,
                                  warnings=(*out.warnings, nothing))
    return out
