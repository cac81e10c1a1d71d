"""The cut analysis: which actions, and under which conditions, every path to a violation cannot avoid."""

from __future__ import annotations

import itertools
from typing import Any

from ownership.analysis.explain.conditions import Atom, candidate_conditions, offsets, pattern_cells, patterns
from ownership.analysis.explain.diagnosis import DiagnoseOptions, Diagnosis
from ownership.analysis.explain.graph import Cutter, StateGraph, Transition, build_graph
from ownership.analysis.explain.trace import trace_run
from ownership.analysis.explain.wording import Found, describe, rank
from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Action
from ownership.lang.instance import Instance
from ownership.lang.invariants import select_invariants

_MAX_CALLS = 3  # separate steps of one action described, when every path takes it more than once

Chosen = list[tuple[Atom, frozenset[int]]]


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
    found = [_necessary(graph, cutter, inst.spec.actions[n], by_name[n], options) for n in necessary_names]
    found.sort(key=lambda f: (f.depth, order.index(f.act.name)))
    cuts: list[tuple[str, str]] = []
    if not found:
        relevant = sorted({graph.trans[i].ai.action.name for _u, _v, ts in cutter.edges for i in ts}, key=order.index)
        for a, b in itertools.combinations(relevant, 2):
            if not cutter.reachable_without(set(by_name[a]) | set(by_name[b])):
                cuts.append((a, b))
                if len(cuts) >= options.max_pairs:
                    break
    necessary = describe(graph, found)
    return Diagnosis(**base, necessary=necessary, cuts=tuple(cuts), fix_order=rank(necessary))


def _conjunction(cutter: Cutter, ts: list[int], atoms: Chosen) -> tuple[Chosen, frozenset[int]]:
    """The narrowest conjunction of ``atoms`` that still cuts every path, and the steps it matches.

    Narrowest first; a condition joins if it narrows the conjunction and the
    conjunction still cuts every path, or if it matches exactly the same steps
    as one already in (a synonym).
    """
    chosen: Chosen = []
    current = frozenset(ts)
    for atom, blocked in atoms:
        narrowed = current & blocked
        if any(blocked == b for _, b in chosen):
            chosen.append((atom, blocked))
        elif narrowed and narrowed != current and not cutter.reachable_without(set(narrowed)):
            chosen.append((atom, blocked))
            current = narrowed
    # Implied but worth saying: which way the action's code went, and orderings, when
    # every step the conjunction matches satisfies them (so they hold on the same step).
    chosen += [(a, b) for a, b in atoms if (a.kind == "branch" or a.ordering) and current <= b and (a, b) not in chosen]
    return _drop_duplicate_comparisons(chosen), current


def _necessary(graph: StateGraph, cutter: Cutter, act: Action, ts: list[int], options: DiagnoseOptions) -> Found:
    """The narrowest necessary conjunction of conditions for one necessary action (one per step it must take)."""
    trans = graph.trans
    relevant_ts = [i for i in ts if trans[i].dst in cutter.relevant]
    # Trace every transition of this action once: lines (guard outcomes) and cells read.
    lines_of: dict[int, frozenset[int]] = {}
    reads_of: dict[int, frozenset[int]] = {}
    with graph.inst.mode(recording=False):
        for i in ts:
            t = trans[i]
            lines_of[id(t)], reads_of[id(t)] = trace_run(graph.inst, t, graph.states[t.src])
    necessary: Chosen = []
    for atom in candidate_conditions(graph, act, ts, lines_of, reads_of, options.symmetry):
        blocked = frozenset(i for i in ts if atom.test(trans[i]))
        if not cutter.reachable_without(set(blocked)):
            necessary.append((atom, blocked))
    necessary.sort(key=lambda ab: (len(ab[1]), ab[0].kind != "state", ab[0].key))
    # When every path takes the action more than once, conditions of different steps
    # (x = 1 on one, x = 2 on another) are each necessary but never hold together:
    # each step gets its own conjunction, and a condition that holds on some steps of a
    # conjunction and not others is left out rather than joined to it.
    calls: list[tuple[Chosen, frozenset[int]]] = []
    remaining = necessary
    while remaining and len(calls) < _MAX_CALLS:
        chosen, current = _conjunction(cutter, ts, remaining)
        if not chosen or current == frozenset(ts):
            break
        calls.append((chosen, current))
        remaining = [(a, b) for a, b in remaining if not b & current]
    current = calls[0][1] if calls else frozenset(ts)
    on_path = [i for i in relevant_ts if i in current] or relevant_ts
    depth = min((graph.depth[trans[i].src] for i in on_path), default=0)
    path_ts = [trans[i] for i in on_path]
    read_cells = frozenset().union(*(reads_of[id(t)] for t in path_ts)) if path_ts else frozenset()

    def unread(atoms: Chosen, steps: frozenset[int]) -> set[str]:
        # An atom is unread here when the action reads none of its cells on the steps it describes.
        steps_on_path = [trans[i] for i in relevant_ts if i in steps] or path_ts
        return {a.text for a, _ in atoms if a.cells is not None
                and not any(a.cells(t) & reads_of[id(t)] for t in steps_on_path)}

    # Fields of the acting elements (fully named cells) the action read on its violating-path steps.
    read = {p.var.name for p in patterns(graph.inst, act, options.symmetry, set()) if p.bound
            and any(pattern_cells(p, offsets(graph.inst, graph.states, p))(t) & read_cells for t in path_ts)}
    return Found(
        act, ts, len(relevant_ts), depth,
        calls[0][0] if calls else [],
        read,
        unread(calls[0][0], calls[0][1]) if calls else set(),
        [(c, unread(c, cur)) for c, cur in calls[1:]],
        current,
        _releases(graph, path_ts),
    )


_RELEASE = frozenset({"free", "decref", "demote", "publish", "evict"})
"""Event kinds by which a step gives pages up (to the free list, another tier, the index, eviction)."""


def _releases(graph: StateGraph, ts: list[Transition]) -> bool:
    """Whether any of ``ts`` gives pages up: a release event when re-run, or a page's free count going up.

    The count covers spec code that returns pages by writing the pool's
    cells itself, without the vocabulary's ``free`` (and so without events).
    """
    inst = graph.inst
    own = inst.spec.extensions.get("ownership")
    free_cells = [
        o
        for pool in getattr(own, "pools", ())
        if isinstance(getattr(pool, "free_var", None), str) and pool.free_var in inst.layouts
        for lay in (inst.layouts[pool.free_var],)
        for o in range(lay.offset, lay.offset + lay.length)
    ]
    with inst.mode(recording=True):
        for t in ts:
            before, after = graph.states[t.src], graph.states[t.dst]
            if any(isinstance(after[o], int) and isinstance(before[o], int) and after[o] > before[o] for o in free_cells):
                return True
            succ = inst.run_with_picks(before, t.ai, t.picks)
            if succ is not None and any(e.KIND in _RELEASE for e in succ.events):
                return True
    return False


def _drop_duplicate_comparisons(chosen: Chosen) -> Chosen:
    """One comparison per pair of fields and set of steps (``a < b`` says all ``a != b`` would)."""
    out: Chosen = []
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
