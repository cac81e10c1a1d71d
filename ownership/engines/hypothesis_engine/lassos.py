"""Random walks that look for lassos: the random engine's evidence against a temporal property.

A walk that comes back to a state it passed (or stops where nothing can
run) has drawn a lasso: the steps since that state can repeat for ever.  It
breaks a property if the property is broken from some position on (see
:mod:`ownership.lang.temporal`) and the loop is fair; both are judged by
:func:`ownership.lang.lasso.confirm`, the explorer's own check.  A lasso
found is a counterexample; walks that find none prove nothing.

A walk that finds no lasso can still be suspicious: a request that met a
property's ``when`` and then did not meet its ``then`` for the rest of a
long walk.  That is reported as *suspected*, with the walk's length, never
as a violation: the walk may simply have been too short.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ownership.engines.liveness.decide import Lasso
from ownership.lang.instance import Instance, State
from ownership.lang.lasso import argument, confirm, evaluator
from ownership.lang.temporal import Form, Property

SUSPECT_AFTER = 20
"""Steps a request may wait for a property's ``then`` before a lassoless walk calls it suspected."""


@dataclass
class LassoSearch:
    """What the lasso walks did: the first lasso found, the suspicions, how much was walked."""

    found: Lasso | None = None
    walks: int = 0
    steps: int = 0
    loops: int = 0
    """Walks that came back to a state (or stopped where nothing runs): candidate lassos judged."""
    waited: dict[str, int] = field(default_factory=dict)
    """Per property (and element), the longest wait for its then-condition in a walk that found no lasso."""

    def suspected(self) -> list[str]:
        """The suspicions, in words: never a verdict."""
        return [f"suspected, not a verdict: {who} waited {n} steps of a random walk for its then-condition, and "
                "no walk found a lasso (the walks may have been too short)" for who, n in self.waited.items()]


def lasso_walks(inst: Instance, props: Sequence[Property], walks: int, steps: int, rng: random.Random,
                deadline: float | None = None) -> LassoSearch:
    """Up to ``walks`` random walks of up to ``steps`` steps, each judged as a lasso when it closes one."""
    out = LassoSearch()
    value = evaluator(inst)
    targets = [(p, e) for p in props for e in ([None] if p.each is None else range(inst.sizes[p.each.name]))]
    with inst.mode(recording=False, choice_reduction=()):
        for _ in range(walks):
            if deadline is not None and time.monotonic() > deadline:
                break
            out.walks += 1
            found = _walk(inst, targets, steps, rng, value, out)
            if found is not None:
                out.found = found
                break
    return out


def _walk(inst: Instance, targets: list[tuple[Property, int | None]], steps: int, rng: random.Random,
          value: Any, out: LassoSearch) -> Lasso | None:
    state = inst.init_state
    states: list[State] = [state]
    path: list[tuple[int, tuple[Any, ...]]] = []
    where: dict[State, int] = {state: 0}
    for _ in range(steps):
        succs = inst.expand(state)
        if not succs:
            out.loops += 1
            return _judge(inst, targets, states, path, len(path), value)
        ai, sc = succs[rng.randrange(len(succs))]
        path.append((ai.index, tuple(sc.picks)))
        state = sc.state
        states.append(state)
        out.steps += 1
        back = where.get(state)
        if back is not None:
            out.loops += 1
            found = _judge(inst, targets, states, path, back, value)
            if found is not None:
                return found
        where[state] = len(states) - 1
    _suspect(inst, targets, states, value, out)
    return None


def _judge(inst: Instance, targets: list[tuple[Property, int | None]], states: list[State],
           path: list[tuple[int, tuple[Any, ...]]], loop: int, value: Any) -> Lasso | None:
    taken = [index for index, _ in path]
    for prop, element in targets:
        args = argument(inst, prop, element)
        since = _since(prop, states, loop, args, value)
        if since is None:
            continue
        if confirm(inst, prop, element, states, taken, loop, since) is None:
            return Lasso(prop, element, tuple(path), loop, since)
    return None


def _since(prop: Property, states: list[State], loop: int, args: tuple[Any, ...], value: Any) -> int | None:
    """The first position from which the walk's lasso breaks ``prop`` (``None``: it does not)."""
    if prop.form is Form.EVENTUALLY_ALWAYS:
        cycle = states[loop:-1] if loop < len(states) - 1 else states[-1:]
        return loop if any(not value(prop, "then", st, args) for st in cycle) else None
    then = [value(prop, "then", st, args) for st in states]
    for i in range(len(states)):
        if prop.when is not None and not value(prop, "when", states[i], args):
            continue
        if not any(then[min(i, loop):]):
            return i
    return None


def _suspect(inst: Instance, targets: list[tuple[Property, int | None]], states: list[State], value: Any,
             out: LassoSearch) -> None:
    """Note a request that met ``when`` and then went without ``then`` for :data:`SUSPECT_AFTER` steps or more."""
    for prop, element in targets:
        if prop.form is not Form.LEADS_TO:
            continue
        args = argument(inst, prop, element)
        then = [value(prop, "then", st, args) for st in states]
        for i, st in enumerate(states):
            waited = next((j for j in range(i, len(states)) if then[j]), len(states)) - i
            if waited >= SUSPECT_AFTER and value(prop, "when", st, args):
                who = prop.name if prop.each is None or element is None else \
                    f"{prop.name} for {inst.names[prop.each.name][element]}"
                out.waited[who] = max(out.waited.get(who, 0), waited)
                break


def with_properties(inst: Instance, result: Any, options: Any, seed: int | None) -> Any:
    """``result`` (the invariants' check) with the temporal properties judged too.

    A space the breadth-first phase exhausts is decided exactly (the
    explorer's graph search, up to the phase's cap); otherwise lasso walks,
    as many as the run's walk budget, each of up to ``--steps`` steps.
    """
    from dataclasses import replace

    from ownership.core.result import StopReason, Verdict
    from ownership.engines.liveness import check_properties, select_properties
    from ownership.engines.liveness.lasso import lasso_trace
    from ownership.engines.search import Limits

    props = select_properties(inst, options.invariants)
    if not props or result.verdict not in (Verdict.PROVED, Verdict.BOUNDED_OK):
        return result
    if result.verdict is Verdict.PROVED and options.exhaustive_states:
        exact = check_properties(inst, result, props, Limits(max_states=options.exhaustive_states),
                                 symmetry=options.symmetry, engine="hypothesis")
        if exact.verdict is not Verdict.UNKNOWN:
            return exact
    budget = max(options.walk_budget, 1)
    search = lasso_walks(inst, props, budget, options.steps, random.Random(seed or 0))
    names = ", ".join(p.name for p in props)
    if search.found is not None:
        trace = lasso_trace(inst, search.found, "hypothesis")
        note = (f"found by a random walk that came back to a state: a fair lasso breaking {search.found.prop.name} "
                f"({search.walks:,} lasso walks, {search.loops:,} candidate loops judged); a lasso is evidence, "
                "never a proof")
        return replace(result, verdict=Verdict.VIOLATED, stop_reason=StopReason.VIOLATION,
                       violated=search.found.prop.name, trace=trace, notes=(note, *result.notes),
                       properties=tuple(p.name for p in props), reproduction=None)
    note = (f"temporal properties {names}: {search.walks:,} lasso walks of up to {options.steps} steps "
            f"({search.steps:,} steps, {search.loops:,} candidate loops judged) found no fair lasso breaking them "
            "(sampled: not a proof)")
    return replace(result, notes=(*result.notes, note, *search.suspected()),
                   properties=tuple(p.name for p in props))


def with_deadlocks(inst: Instance, result: Any, options: Any, seed: int | None) -> Any:
    """``result`` with deadlocks looked for (``--deadlock``): exactly on a space the first phase exhausts,
    else by random walks (a walk that stops where nothing can run and the spec does not call it finished)."""
    from ownership.core.replay import build_trace
    from ownership.core.result import Verdict
    from ownership.engines import deadlocks
    from ownership.engines.search import Limits

    if not options.deadlock or result.verdict not in (Verdict.PROVED, Verdict.BOUNDED_OK):
        return result
    if options.exhaustive_states:
        exact = deadlocks.with_deadlocks(inst, result, Limits(max_states=options.exhaustive_states), "hypothesis",
                                         "the breadth-first phase")
        if exact is not result:
            return exact
    rng = random.Random(seed or 0)
    walks = max(options.walk_budget, 1)
    with inst.mode(recording=False, choice_reduction=()):
        for walk in range(1, walks + 1):
            state = inst.init_state
            path: list[tuple[int, tuple[Any, ...]]] = []
            for _ in range(options.steps):
                succs = inst.expand(state)
                if not succs:
                    if not inst.is_terminal(state):
                        trace = build_trace(inst, path, engine="hypothesis", violation=None, deadlock=True)
                        return deadlocks.deadlock_result(inst, result, trace, f"found by random walk {walk:,} "
                                                         "(sampled: not a shortest one)")
                    break
                ai, sc = succs[rng.randrange(len(succs))]
                path.append((ai.index, tuple(sc.picks)))
                state = sc.state
    from dataclasses import replace

    return replace(result, notes=(*result.notes, f"no deadlock met by {walks:,} random walks of up to "
                                  f"{options.steps} steps (sampled: not a proof)"))
