"""Build traces from engine paths and replay traces through the concrete semantics.

Every engine reports a path as a list of ``(action instance, picks)``;
:func:`build_trace` re-executes it on the :class:`~ownership.lang.instance.Instance`
and fails loudly if the path is not executable or does not end in the
claimed violation.  :func:`replay` does the same for a saved trace file and
says at which step and field it diverges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ownership.core.schema import ActionInfo, PoolSchema, TraceSchema
from ownership.core.trace import Choice, Step, Trace, TraceKind, changed_fields
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance


def build_trace(
    inst: Instance,
    path: Sequence[tuple[int, Sequence[Any]]],
    *,
    engine: str,
    violation: str | None,
    deadlock: bool = False,
    start: State | None = None,
) -> Trace:
    """Execute ``path`` from the initial state and package it as a :class:`Trace`.

    ``start`` replaces the initial state for a counterexample to induction,
    which begins in a state that need not be reachable.

    Raises OWN041 (internal) if a step is disabled, or if the last state does
    not violate ``violation``: an engine must never show an unreplayed trace.
    """
    with inst.mode(recording=True):
        return _build_trace(inst, path, engine=engine, violation=violation, deadlock=deadlock, start=start)


def _build_trace(
    inst: Instance,
    path: Sequence[tuple[int, Sequence[Any]]],
    *,
    engine: str,
    violation: str | None,
    deadlock: bool,
    start: State | None,
) -> Trace:
    state = inst.init_state if start is None else start
    steps: list[Step] = []
    flagged: tuple[str, ...] = ()
    for i, (ai_index, picks) in enumerate(path, start=1):
        ai = inst.action_instances[ai_index]
        succ = inst.run_with_picks(state, ai, picks)
        if succ is None:
            raise OwnershipError(
                Code.INTERNAL_REPLAY, f"{engine}: step {i} {ai.label} picks {list(picks)} is not enabled on replay"
            )
        state = succ.state
        flagged = succ.violations
        steps.append(
            Step(ai.action.name, _display_args(inst, ai), tuple(picks), succ.events, inst.to_json(state),
                 tuple(Choice(label, value) for label, value in succ.choices))
        )
    # A trace ends in its violation: the final state violates it, or the last step emitted
    # an event marked as violating it (``s.emit(..., violates=X)``).
    if violation is not None and violation not in flagged and inst.holds(state, violation):
        raise OwnershipError(
            Code.INTERNAL_REPLAY, f"{engine}: the final state of its trace satisfies {violation} on replay"
        )
    return Trace(
        spec=inst.spec.name,
        spec_path=_portable_path(inst.spec.file),
        params=dict(inst.param_values),
        initial=inst.to_json(inst.init_state if start is None else start),
        steps=tuple(steps),
        violation=violation,
        engine=engine,
        kind=TraceKind.CTI if start is not None else (TraceKind.DEADLOCK if deadlock else TraceKind.COUNTEREXAMPLE),
        schema=trace_schema(inst),
    )


def _portable_path(path: str | None) -> str | None:
    """The spec path relative to the working directory when it lies inside it.

    Traces are committed and replayed from other checkouts, so an absolute
    path would only work on the machine that wrote it.
    """
    if path is None:
        return None
    p = Path(path).resolve()
    try:
        return p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(p)


def trace_schema(inst: Instance) -> TraceSchema:
    """What a renderer needs to know about the spec's shape, stored in the trace.

    Names the request domain, each page pool's variables and pages, the
    per-request variables, and each action's source line and summary, so a
    saved trace can be drawn without loading the spec.  The pools are those
    of the ``ownership`` extension (:class:`~ownership.vocab.pool.Ownership`)
    and those of every other extension that draws as pools: one with
    ``drawn_pools(names)`` (its :class:`~ownership.core.schema.PoolSchema`
    records, given every domain's element names) and ``drawn_requests`` (the
    domain that holds its pages), such as refcounted block tables.
    """
    spec = inst.spec
    actions = {a.name: ActionInfo(a.line, (a.doc.splitlines() or [""])[0]) for a in spec.actions.values()}
    own = spec.extensions.get("ownership")
    drawn = [ext for ext in spec.extensions.values() if ext is not own and hasattr(ext, "drawn_pools")]
    if own is None and not drawn:
        return TraceSchema(actions=actions, summary=spec.summary)
    req = own.requests.name if own is not None else drawn[0].drawn_requests.name
    pools: list[PoolSchema] = []
    if own is not None:
        pools += [
            PoolSchema(p.name, tuple(inst.names[p.Page.name]), p.free_var, p.holders_var, p.slot_var, p.content_var,
                       tuple(p.marks))
            for p in own.pools
        ]
    for ext in drawn:
        if ext.drawn_requests.name == req:  # lanes are one domain's: structures held by another are not drawn
            pools += list(ext.drawn_pools(inst.names))
    return TraceSchema(
        actions=actions,
        summary=spec.summary,
        requests=tuple(inst.names[req]),
        request_domain=req,
        pools=tuple(pools),
        per_request=tuple(
            v.name for v in spec.vars.values() if len(v.index) == 1 and v.index[0].name == req and not v.ghost
        ),
        ghosts=tuple(v.name for v in spec.vars.values() if v.ghost),
    )


def _display_args(inst: Instance, ai: ActionInstance) -> tuple[object, ...]:
    out: list[object] = []
    for d, a in zip(ai.action.arg_domains, ai.args, strict=True):
        text = inst.format_arg(d, a)
        out.append(a if text == str(a) else text)
    return tuple(out)


@dataclass(frozen=True)
class ReplayOutcome:
    """What replaying a saved trace found."""

    ok: bool
    message: str
    step: int | None = None
    final_violation: str | None = None


def replay(inst: Instance, trace: Trace) -> ReplayOutcome:
    """Re-execute ``trace`` on ``inst`` and compare every state field by field.

    A trace that does not fit the spec at all (an action, argument, invariant
    or state field the spec does not have) raises OWN019 without a file: the
    caller knows the trace's file.  A trace that fits but is not what the spec
    does is a :class:`ReplayOutcome` that is not ``ok``.
    """

    def mismatch(msg: str) -> OwnershipError:
        return OwnershipError(Code.TRACE_MISMATCH, msg)

    lasso = trace.kind is TraceKind.LASSO
    if lasso and trace.violation not in inst.spec.properties:
        known = ", ".join(inst.spec.properties) or "none"
        raise mismatch(f"trace is a lasso breaking {trace.violation!r}, but spec {inst.spec.name} has no such "
                       f"temporal property (known: {known})")
    if trace.violation is not None and not lasso and trace.violation not in inst.spec.invariants:
        known = ", ".join(inst.spec.invariants) or "none"
        raise mismatch(f"trace says {trace.violation!r} is violated, but spec {inst.spec.name} has no such invariant (known: {known})")
    try:
        state: State = inst.from_json(trace.initial)
    except (ValueError, TypeError, KeyError) as exc:
        raise mismatch(f"initial state does not fit spec {inst.spec.name}: {exc}") from None
    if state != inst.init_state and trace.kind is not TraceKind.CTI:
        diff = changed_fields(inst.to_json(inst.init_state), trace.initial)
        where = ", ".join(f"{k}: spec has {a!r}, trace has {b!r}" for k, a, b in diff[:3])
        return ReplayOutcome(False, f"initial state differs: {where}", 0)
    flagged: tuple[str, ...] = ()
    states, taken = [state], []
    for i, step in enumerate(trace.steps, start=1):
        action = inst.spec.actions.get(step.action)
        if action is None:
            known = ", ".join(inst.spec.actions)
            raise mismatch(f"step {i}: spec {inst.spec.name} has no action {step.action!r} (known: {known})")
        if len(step.args) != len(action.arg_domains):
            raise mismatch(
                f"step {i}: {step.action} takes {len(action.arg_domains)} argument(s), the trace gives {len(step.args)}"
            )
        try:
            args = tuple(inst.parse_arg(d, a) for d, a in zip(action.arg_domains, step.args, strict=True))
        except (ValueError, TypeError) as exc:
            raise mismatch(f"step {i}: {step.action}: {exc}") from None
        ai = inst.find_instance(step.action, args)
        succ = inst.run_with_picks(state, ai, step.picks)
        if succ is None:
            return ReplayOutcome(False, f"step {i}: {ai.label} is not enabled here (or picks {list(step.picks)} are impossible)", i)
        got = inst.to_json(succ.state)
        diff = changed_fields(got, dict(step.state))
        if diff:
            k, a, b = diff[0]
            more = f" (and {len(diff) - 1} more fields)" if len(diff) > 1 else ""
            return ReplayOutcome(False, f"step {i}: {ai.label}: field {k} is {a!r} on replay but {b!r} in the trace{more}", i)
        state = succ.state
        flagged = succ.violations
        states.append(state)
        taken.append(ai.index)
    if lasso:
        return _judge_lasso(inst, trace, states, taken)
    violated = inst.violated(state) or next((n for n in inst.spec.invariants if n in flagged), None)
    if trace.violation is not None:
        # The state's own violation is the stronger evidence, so it is named first; an event-only
        # violation (the state shows nothing) is confirmed by the event.
        if trace.violation in flagged and inst.holds(state, trace.violation):
            return ReplayOutcome(True, f"replayed {len(trace.steps)} steps: the last step emits an event that "
                                 f"violates {trace.violation}, as the trace says", None, trace.violation)
        if inst.holds(state, trace.violation):
            return ReplayOutcome(False, f"replayed all {len(trace.steps)} steps but {trace.violation} holds at the end", len(trace.steps))
        return ReplayOutcome(True, f"replayed {len(trace.steps)} steps: {trace.violation} is violated, as the trace says", None, trace.violation)
    return ReplayOutcome(True, f"replayed {len(trace.steps)} steps" + (f"; final state violates {violated}" if violated else ""), None, violated)


def _judge_lasso(inst: Instance, trace: Trace, states: list[State], taken: list[int]) -> ReplayOutcome:
    """Whether the replayed lasso breaks its property on a fair path (:func:`ownership.lang.lasso.confirm`)."""
    from ownership.lang.lasso import confirm

    prop = inst.spec.properties[str(trace.violation)]
    elements: list[int | None] = [None]
    if prop.each is not None:
        names = list(inst.names[prop.each.name])
        if trace.subject is not None and trace.subject not in names:
            raise OwnershipError(Code.TRACE_MISMATCH, f"lasso is for {trace.subject!r}, which is not an element of "
                                 f"{prop.each.name} ({', '.join(names)})")
        elements = [names.index(trace.subject)] if trace.subject is not None else list(range(len(names)))
    loop = trace.loop if trace.loop is not None else len(trace.steps)
    since = trace.since if trace.since is not None else 0
    problem = None
    for element in elements:
        problem = confirm(inst, prop, element, states, taken, loop, since)
        if problem is None:
            n = len(trace.steps)
            goes = "stays in its last state" if loop == n else f"returns to state {loop}"
            return ReplayOutcome(True, f"replayed {n} steps: the path {goes} for ever and breaks "
                                 f"{prop.name} on a fair path, as the trace says", None, prop.name)
    return ReplayOutcome(False, f"replayed all {len(trace.steps)} steps but the lasso {problem}", len(trace.steps))
