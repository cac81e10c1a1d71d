"""Temporal properties, decided exhaustively on the reachable graph (the explorer's second pass).

Once the invariants hold on every reachable state, the explorer hands its
result here if the spec states temporal properties
(:mod:`ownership.lang.temporal`).  :func:`check_properties` builds the state
graph with every edge (:mod:`.graph`), looks for a fair lasso that breaks each
property (:mod:`.fair`, :mod:`.decide`), and replays and re-judges the one it
reports (:mod:`.lasso`).  A graph search that stops at a limit decides
nothing: the verdict is then not PROVED.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ownership.core.progress import ProgressFn
from ownership.core.result import CheckResult, StopReason, Verdict
from ownership.engines.liveness.decide import Decider
from ownership.engines.liveness.graph import build_graph
from ownership.engines.liveness.lasso import lasso_trace
from ownership.engines.liveness.quotient import build_quotient, check_symmetric
from ownership.engines.liveness.unfold import QuotientDecider
from ownership.engines.search import Limits
from ownership.engines.symmetry import plan_symmetry
from ownership.lang.instance import Instance
from ownership.lang.temporal import Fairness, Property


def select_properties(inst: Instance, names: Sequence[str] | None) -> tuple[Property, ...]:
    """The properties a check decides: all of them, or those ``names`` (``--invariant``) lists."""
    spec = inst.spec
    if names is None:
        return tuple(spec.properties.values())
    return tuple(spec.properties[n] for n in names if n in spec.properties)


def fairness_text(inst: Instance) -> str:
    """``weak: free_pages, sweep; strong: none`` (what the verdict assumed)."""
    fairness = inst.spec.fairness
    parts = []
    for kind in Fairness:
        names = [a for a, k in fairness.items() if k is kind]
        parts.append(f"{kind.value}: {', '.join(names) if names else 'none'}")
    return "; ".join(parts)


def check_properties(inst: Instance, result: CheckResult, props: Sequence[Property], limits: Limits,
                     progress: ProgressFn | None = None, symmetry: bool = True, engine: str = "explore") -> CheckResult:
    """``result`` (the invariants held on every state) with ``props`` decided too.

    With ``symmetry`` and a domain to reduce, on the annotated quotient
    (:mod:`.quotient`); otherwise on the full graph.
    """
    plan = plan_symmetry(inst)
    reduced = symmetry and bool(plan.permuted or plan.sorted)
    decider: Decider | QuotientDecider
    if reduced:
        quotient, outcome = build_quotient(inst, plan, limits, progress)
        graph = quotient.graph
    else:
        graph, outcome = build_graph(inst, limits, progress)
    names = ", ".join(p.name for p in props)
    if not outcome.complete:
        reason = outcome.stop.reason
        note = (f"temporal properties not decided ({names}): the state graph search {reason.value} after "
                f"{len(graph):,} states")
        return replace(result, verdict=Verdict.UNKNOWN, stop_reason=reason, notes=(*result.notes, note))
    if reduced:
        checked = check_symmetric(inst, quotient, props, (*plan.permuted, *plan.sorted))
        decider = QuotientDecider(inst, quotient)
        size = (f"the symmetry-reduced graph ({len(graph):,} states, {graph.edges:,} transitions; each edge's "
                f"renaming kept, fairness judged on each component's concrete preimage; the properties' symmetry "
                f"checked with {checked.split(' applied')[0]})")
    else:
        decider = Decider(inst, graph)
        size = f"the full state graph ({len(graph):,} states, {graph.edges:,} transitions)"
    fairness = fairness_text(inst)
    for prop in props:
        lasso = decider.decide(prop)
        if lasso is None:
            continue
        trace = lasso_trace(inst, lasso, engine)
        who = ""
        if prop.each is not None and lasso.element is not None:
            who = f" for {prop.each.name} {inst.names[prop.each.name][lasso.element]}"
        note = (f"temporal property {prop.name} ({prop.formula()}) is broken{who} on a fair path; decided on "
                f"{size}; fairness {fairness}")
        return replace(result, verdict=Verdict.VIOLATED, stop_reason=StopReason.VIOLATION, violated=prop.name,
                       trace=trace, notes=(*result.notes, note), properties=tuple(p.name for p in props))
    note = f"temporal properties decided on {size}; fairness {fairness}"
    return replace(result, notes=(*result.notes, note), properties=tuple(p.name for p in props))

