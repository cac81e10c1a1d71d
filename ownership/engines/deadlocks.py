"""Deadlocks for every engine: a state where nothing can run though the spec does not call it finished.

The explorer finds them in its own search (``--deadlock``).  The other
engines ask here: on a graph their concrete search exhausted (bmc's prefix,
prove's reachable set, hypothesis' first phase) the answer is exact and the
shallowest deadlock is shown; bmc's symbolic search and hypothesis' walks
look further when it is not.  Every deadlock report says what is stuck: per
request, the actions that would move it and the guard line that blocks each
(:mod:`ownership.lang.deadlock`).
"""

from __future__ import annotations

from dataclasses import replace

from ownership.core.replay import build_trace
from ownership.core.result import CheckResult, StopReason, Verdict
from ownership.core.trace import Trace
from ownership.engines.liveness.graph import build_graph
from ownership.engines.search import Limits
from ownership.lang.deadlock import stuck
from ownership.lang.instance import Instance, State


def stuck_notes(inst: Instance, state: State) -> tuple[str, ...]:
    """The deadlock's stuck requests, one note each."""
    return tuple(s.describe() for s in stuck(inst, state))


def deadlock_result(inst: Instance, result: CheckResult, trace: Trace, found_by: str) -> CheckResult:
    """``result`` turned into the deadlock ``trace`` shows, with what is stuck."""
    final = inst.from_json(trace.states[-1])
    notes = (f"deadlock {found_by}: no action can run after step {len(trace)} and the spec's @spec.terminal "
             "predicate is false there", *stuck_notes(inst, final))
    return replace(result, verdict=Verdict.VIOLATED, stop_reason=StopReason.DEADLOCK, violated="deadlock",
                   trace=trace, notes=(*result.notes, *notes))


def exhaustive_deadlock(inst: Instance, limits: Limits, engine: str) -> tuple[Trace | None, bool, int]:
    """The shallowest deadlock of a graph searched to the end within ``limits``.

    Returns the trace (``None``: none), whether the search exhausted the
    states (only then does "none" mean none), and how many states it stored.
    A search stopped by ``limits`` reports nothing: the states it stored but
    never expanded have no edges, and would look like dead ends.
    """
    graph, outcome = build_graph(inst, limits)
    if not outcome.complete:  # a state the search stopped before expanding looks like a dead end: say nothing
        return None, False, len(graph)
    for node in range(len(graph)):  # breadth-first numbering: the first found is a shallowest one
        if graph.dead_end(node) and not inst.is_terminal(graph.states[node]):
            trace = build_trace(inst, graph.tree.path(node), engine=engine, violation=None, deadlock=True)
            return trace, True, len(graph)
    return None, outcome.complete, len(graph)


def with_deadlocks(inst: Instance, result: CheckResult, limits: Limits, engine: str, searched: str) -> CheckResult:
    """``result`` (safe) with deadlocks looked for on the graph a concrete search exhausts within ``limits``.

    ``searched`` names that search in the notes.  A search that does not
    finish leaves the result as it was and says deadlocks were not looked for
    past it (the caller may search further its own way).
    """
    trace, complete, states = exhaustive_deadlock(inst, limits, engine)
    if trace is not None:
        return deadlock_result(inst, result, trace, f"found by {searched} ({states:,} states)")
    if complete:
        return replace(result, notes=(*result.notes, f"no deadlock: {searched} exhausted the {states:,} reachable "
                                      "states and every state where nothing can run is terminal"))
    return result
