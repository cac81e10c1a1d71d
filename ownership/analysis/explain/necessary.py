"""The cut analysis: which actions, and under which conditions, every path to a violation cannot avoid."""

from __future__ import annotations

import itertools
from typing import Any

from ownership.analysis.explain.conditions import Atom, candidate_conditions
from ownership.analysis.explain.diagnosis import DiagnoseOptions, Diagnosis
from ownership.analysis.explain.graph import Cutter, StateGraph, build_graph
from ownership.analysis.explain.trace import fields_read, trace_run
from ownership.analysis.explain.wording import Found, describe
from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Action
from ownership.lang.instance import Instance
from ownership.lang.invariants import select_invariants


def diagnose(inst: Instance, invariant: str, options: DiagnoseOptions = DiagnoseOptions()) -> Diagnosis:  # noqa: B008 - frozen
    """What every path from the initial state to a state violating ``invariant`` has in common."""
    select_invariants(inst, (invariant,))
    graph = build_graph(inst, invariant, options)
    base: dict[str, Any] = dict(
        spec=inst.spec.name,
        invariant=invariant,
        params=inst.describe_params(),
        states=len(graph.states),
        transitions=len(graph.trans),
        violating_states=len(graph.bad),
        complete=graph.complete,
        max_states=options.max_states,
        symmetry=options.symmetry,
    )
    if not graph.bad or 0 in graph.bad:
        return Diagnosis(**base, necessary=(), initial_violates=0 in graph.bad)
    cutter = Cutter(graph)
    by_name: dict[str, list[int]] = {}
    for i, t in enumerate(graph.trans):
        by_name.setdefault(t.ai.action.name, []).append(i)
    order = list(inst.spec.actions)
    necessary_names = [n for n, ts in by_name.items() if not cutter.reachable_without(set(ts))]
    found = [_necessary(graph, cutter, inst.spec.actions[n], by_name[n]) for n in necessary_names]
    found.sort(key=lambda f: (f.depth, order.index(f.act.name)))
    cuts: list[tuple[str, str]] = []
    if not found:
        relevant = sorted({graph.trans[i].ai.action.name for _u, _v, ts in cutter.edges for i in ts}, key=order.index)
        for a, b in itertools.combinations(relevant, 2):
            if not cutter.reachable_without(set(by_name[a]) | set(by_name[b])):
                cuts.append((a, b))
                if len(cuts) >= options.max_pairs:
                    break
    return Diagnosis(**base, necessary=describe(graph, found), cuts=tuple(cuts))


def _necessary(graph: StateGraph, cutter: Cutter, act: Action, ts: list[int]) -> Found:
    """The narrowest necessary conjunction of conditions for one necessary action."""
    trans = graph.trans
    relevant_ts = [i for i in ts if trans[i].dst in cutter.relevant]
    # Trace every transition of this action once: lines (guard outcomes) and cells read.
    lines_of: dict[int, frozenset[int]] = {}
    reads_of: dict[int, frozenset[int]] = {}
    with graph.inst.mode(recording=False):
        for i in ts:
            t = trans[i]
            lines_of[id(t)], reads_of[id(t)] = trace_run(graph.inst, t, graph.states[t.src])
    necessary: list[tuple[Atom, frozenset[int]]] = []
    for atom in candidate_conditions(graph, act, ts, lines_of):
        blocked = frozenset(i for i in ts if atom.test(trans[i]))
        if not cutter.reachable_without(set(blocked)):
            necessary.append((atom, blocked))
    # Narrowest first; a condition joins the conjunction if it narrows it and the
    # conjunction still cuts every path, or if it matches exactly the same steps as
    # one already in (a synonym).  Conditions merely implied by it are left out,
    # except comparisons, which say how two fields relate (a length check).
    necessary.sort(key=lambda ab: (len(ab[1]), ab[0].kind != "state", ab[0].key))
    chosen: list[tuple[Atom, frozenset[int]]] = []
    current = frozenset(ts)
    for atom, blocked in necessary:
        narrowed = current & blocked
        if any(blocked == b for _, b in chosen):
            chosen.append((atom, blocked))
        elif narrowed != current and not cutter.reachable_without(set(narrowed)):
            chosen.append((atom, blocked))
            current = narrowed
    # Implied but worth saying: which way the action's code went, and orderings.
    chosen += [(a, b) for a, b in necessary if (a.kind == "branch" or a.ordering) and (a, b) not in chosen]
    chosen = _drop_duplicate_comparisons(chosen)
    on_path = [i for i in relevant_ts if i in current] or relevant_ts
    depth = min((graph.depth[trans[i].src] for i in on_path), default=0)
    return Found(act, ts, len(relevant_ts), depth, chosen, fields_read(graph, [trans[i] for i in on_path], reads_of))


def _drop_duplicate_comparisons(chosen: list[tuple[Atom, frozenset[int]]]) -> list[tuple[Atom, frozenset[int]]]:
    """One comparison per pair of fields and set of steps (``a < b`` says all ``a != b`` would)."""
    out: list[tuple[Atom, frozenset[int]]] = []
    seen: set[tuple[frozenset[str], frozenset[int]]] = set()
    for a, b in sorted(chosen, key=lambda ab: not ab[0].ordering):
        if len(a.fields) == 2:
            k = (frozenset(a.fields), b)
            if k in seen:
                continue
            seen.add(k)
        out.append((a, b))
    return [ab for ab in chosen if ab in out]


def diagnose_result(spec: Any, result: Any, options: DiagnoseOptions = DiagnoseOptions()) -> Diagnosis:  # noqa: B008 - frozen
    """Diagnose the invariant a check found violated, at the parameter values of its trace.

    ``spec`` is the checked :class:`~ownership.lang.model.Spec`, ``result`` its
    :class:`~ownership.core.result.CheckResult`.  A deadlock, or a result
    without a violated invariant, is OWN013 (there is nothing to diagnose).
    """
    violated = getattr(result, "violated", None)
    if violated is None or violated not in spec.invariants:
        what = "a deadlock" if violated == "deadlock" else "no violated invariant"
        raise OwnershipError(Code.BAD_OPTION, f"nothing to diagnose: {spec.name} has {what}", spec.file)
    params = dict(result.trace.params) if result.trace is not None else {}
    return diagnose(Instance(spec, params), violated, options)
