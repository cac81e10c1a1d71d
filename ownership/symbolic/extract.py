"""A Z3 model of an unrolling, turned into a replayed, cross-checked :class:`~ownership.core.trace.Trace`.

Every model the solver returns is turned into a trace by *replaying* its
actions and choices through the concrete semantics, and the solver's state
at every step is compared with the replayed state cell by cell: a difference
is an internal error naming the step and field (OWN041), never a trace shown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import z3

from ownership.core.replay import build_trace
from ownership.core.trace import Trace
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.types import BoolType, Ref, RefSet
from ownership.symbolic.terms import WidthError, int_of
from ownership.symbolic.unroll import Unroller


def _cell_value(model: z3.ModelRef, term: z3.ExprRef, vtype: Any) -> Any:
    val = model.eval(term, model_completion=True)
    if isinstance(vtype, BoolType):
        return z3.is_true(val)
    if isinstance(vtype, RefSet):
        return val.as_long()  # a bit mask, not a signed number
    n = int_of(val)
    if isinstance(vtype, Ref) and vtype.optional and n == -1:
        return None
    return n


def _cell_types(inst: Instance) -> list[Any]:
    out: list[Any] = []
    for v in inst.spec.vars.values():
        out.extend([v.type] * inst.layouts[v.name].length)
    return out


def _cell_names(inst: Instance) -> list[str]:
    return list(inst.cells(inst.init_state))


def extract(
    un: Unroller, model: z3.ModelRef, depth: int, inst_for: Any, engine: str, violation: str | None, *, cti: bool = False
) -> tuple[Trace, Instance]:
    """Turn a model of ``depth`` steps into a replayed, cross-checked trace."""
    sym = un.sym
    params = dict(sym.inst.param_values)
    for name, term in sym.param_terms.items():
        params[name] = int_of(model.eval(term, model_completion=True))
    inst: Instance = inst_for(params)
    types = _cell_types(inst)
    states: list[State] = [
        tuple(_cell_value(model, t, types[i]) for i, t in enumerate(un.state(k))) for k in range(depth + 1)
    ]
    path: list[tuple[int, list[Any]]] = []
    solver_states: list[State] = [states[0]]
    for k, step in enumerate(model_steps(un, model, depth, inst, engine)):
        if step is None:  # stutter step (padding used by --minimize/--maximize)
            continue
        path.append(step)
        solver_states.append(states[k + 1])
    # Replay first without judging the end, so a mismatch is reported at its step and field.
    trace = build_trace(inst, path, engine=engine, violation=None, start=states[0] if cti else None)
    names = _cell_names(inst)
    replayed = [inst.from_json(s) for s in trace.states]
    for k, (a, b) in enumerate(zip(solver_states, replayed, strict=True)):
        if a != b:
            i = next(i for i in range(len(a)) if a[i] != b[i])
            raise OwnershipError(
                Code.INTERNAL_REPLAY,
                f"{engine}: the solver's trace does not replay: after step {k}, field {names[i]} is {a[i]!r} "
                f"according to the solver but {b[i]!r} according to the spec's concrete semantics",
            )
    # The last step's flags, not its events: s.flag(...) marks a violation without recording an event.
    last = inst.run_with_picks(replayed[-2], inst.action_instances[path[-1][0]], path[-1][1]) if path else None
    flagged = set(last.violations) if last is not None else set()
    if violation is not None and violation not in flagged and inst.holds(replayed[-1], violation):
        raise OwnershipError(Code.INTERNAL_REPLAY, f"{engine}: the trace's final state satisfies {violation} on replay")
    return dataclasses.replace(trace, violation=violation), inst



def model_steps(un: Unroller, model: z3.ModelRef, depth: int, inst: Instance,
                engine: str) -> list[tuple[int, list[Any]] | None]:
    """The step the model takes from each of its first ``depth`` states: (action instance, picks), ``None`` to stutter."""
    sym = un.sym
    out: list[tuple[int, list[Any]] | None] = []
    for k in range(depth):
        j = model.eval(un.selector(k), model_completion=True).as_signed_long()
        if j < 0:
            out.append(None)
            continue
        pr = un.paths[j]
        ap = sym.actions[pr.action]
        args = []
        for a in ap.arg_values:
            args.append(int_of(model.eval(un.at(a, k), model_completion=True)) if isinstance(a, z3.ExprRef) else a)
        try:
            ai = inst.find_instance(ap.action, args)
        except KeyError:
            raise OwnershipError(Code.INTERNAL_REPLAY, f"{engine}: step {k + 1}: no action instance {ap.action}{tuple(args)}") from None
        picks: list[Any] = []
        for entry in pr.path.picks:
            if callable(entry):
                picks.extend(entry(lambda e, k=k, j=j: model.eval(un.at(e, k, j), model_completion=True)))
            else:
                picks.append(entry)
        out.append((ai.index, picks))
    return out


def first_failing(un: Unroller, model: z3.ModelRef, names: Sequence[str], k: int) -> str:
    """The first of ``names`` state ``k`` violates, or that an event of the step into it violates."""
    for n in names:
        if z3.is_false(model.eval(un.invariant(n, k), model_completion=True)):
            return n
        if z3.is_true(model.eval(un.event_step([n], k), model_completion=True)):
            return n
    return names[0]


def declared_first(solver: z3.Solver, assumptions: Sequence[z3.BoolRef], un: Unroller, model: z3.ModelRef,
                   overflow: z3.BoolRef, names: Sequence[str], k: int) -> z3.ModelRef:
    """A model violating, at step ``k``, the first of ``names`` in declaration order that any model can.

    Two invariants violated at the same depth would otherwise be reported by
    whichever the solver's model happens to break (it changes from run to
    run); asking for each earlier invariant in turn makes the answer the
    declared order's, as the explorer and the random engine check them.
    One query per earlier invariant, asked only once a violation is found.
    """
    if z3.is_true(model.eval(overflow, model_completion=True)):
        return model  # a wider encoding is needed first: the caller widens and asks again
    found = first_failing(un, model, names, k)
    for n in names:
        if n == found:
            return model
        solver.push()
        solver.add(un.violation([n], k))
        answer = solver.check(*assumptions)
        better = solver.model() if answer == z3.sat else None
        solver.pop()
        if better is not None:
            return better
    return model


def instance_factory(inst: Instance) -> Callable[[dict[str, int]], Instance]:
    """Make the instance a model's parameter values name (``inst`` itself when they are its own)."""

    def make(params: dict[str, int]) -> Instance:
        if params == inst.param_values:
            return inst
        return Instance(inst.spec, params)

    return make


def violation_in(un: Unroller, model: z3.ModelRef, overflow: z3.BoolRef, names: Sequence[str], k: int,
                 inst: Instance, engine: str) -> tuple[str, Trace]:
    """The first violated invariant and the replayed trace of a model that violates at step ``k``.

    A model in which step ``k`` overflows the integers instead is not a
    counterexample: :class:`~ownership.symbolic.terms.WidthError`, so the
    spec is encoded again at twice the width.
    """
    if z3.is_true(model.eval(overflow, model_completion=True)):
        raise WidthError(f"a step after {k} steps overflows them")
    bad = first_failing(un, model, names, k)
    trace, _ = extract(un, model, k, instance_factory(inst), engine, bad)
    return bad, trace
