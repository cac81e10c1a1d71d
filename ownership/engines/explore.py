"""Explicit-state engine: breadth-first search over every reachable state.

Breadth-first order makes the first violation found a shortest one.  States
are deduplicated by a 64-bit fingerprint of their canonical form (see
:mod:`ownership.engines.symmetry`); the search stores, per state, only its
fingerprint, its parent and the step that reached it, and rebuilds the trace
by replaying that path through the concrete semantics.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import asdict, dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ownership.core.limits import stop_reason_of
from ownership.core.progress import Progress, ProgressFn
from ownership.core.replay import build_trace
from ownership.core.result import CheckResult, CoverageKind, Measure, Stats, StopReason, Verdict
from ownership.engines.coverage import ActionTally, with_coverage
from ownership.engines.symcheck import check_symmetry
from ownership.engines.symmetry import SymmetryPlan, make_canonicalizer, plan_symmetry
from ownership.errors import Code, OwnershipError
from ownership.spec.instance import Instance, State, invariant_value

if TYPE_CHECKING:
    from ownership.session.settings import Settings


@dataclass(frozen=True)
class ExploreOptions:
    """Options of the explicit-state engine; ``None`` means no limit."""

    max_depth: int | None = None
    max_states: int | None = None
    max_seconds: float | None = None
    symmetry: bool = True
    deadlock: bool = False
    invariants: tuple[str, ...] | None = None
    progress_every: float = 1.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ExploreOptions:
        """The explorer's options for a check (``--free``'s explorer is :class:`~ownership.engines.paramexplore.ParamOptions`)."""
        if settings.minimize or settings.maximize:
            raise OwnershipError(Code.BAD_OPTION, "--minimize/--maximize need --free for that parameter")
        options = cls(max_depth=settings.max_depth, max_states=settings.max_states, max_seconds=settings.max_seconds,
                      symmetry=settings.symmetry, deadlock=settings.deadlock, invariants=settings.invariants)
        options.validate()
        return options

    def validate(self) -> None:
        """Refuse limits out of range (OWN015), named by their flags."""
        from ownership import inputs

        inputs.check_count("--max-depth", self.max_depth, 0)
        inputs.check_count("--max-states", self.max_states, 1)
        inputs.check_seconds("--max-seconds", self.max_seconds)



def explore(inst: Instance, options: ExploreOptions = ExploreOptions(), progress: ProgressFn | None = None) -> CheckResult:
    """Check every invariant of ``inst`` on every reachable state, breadth-first."""
    plan = plan_symmetry(inst)
    sym_note = None
    if options.symmetry and (plan.permuted or plan.sorted):
        # The reduction is sound only if the spec really is symmetric: test that on a sample first.
        sym_note = check_symmetry(inst, (*plan.permuted, *plan.sorted), invariants=options.invariants).describe()
    # Choices among identical pages are merged only while pages are reduced by symmetry.
    inst.set_choice_reduction(plan.sorted if options.symmetry else ())
    inst.set_recording(False)  # events are rebuilt when the trace is replayed
    try:
        return _explore(inst, options, progress, plan, sym_note)
    finally:
        inst.set_choice_reduction(())
        inst.set_recording(True)


def _explore(inst: Instance, options: ExploreOptions, progress: ProgressFn | None, plan: SymmetryPlan,
             sym_note: str | None = None) -> CheckResult:
    spec = inst.spec
    if options.invariants is not None:
        unknown = [n for n in options.invariants if n not in spec.invariants]
        if unknown:
            raise OwnershipError(
                Code.UNKNOWN_INVARIANT,
                f"spec {spec.name} has no invariant {unknown[0]!r} (known: {', '.join(spec.invariants)})",
            )
        checked = [spec.invariants[n] for n in options.invariants]
    else:
        checked = list(spec.invariants.values())
    names = tuple(i.name for i in checked)
    checked_names = frozenset(names)
    canon = make_canonicalizer(inst, plan) if options.symmetry else (lambda st: st)
    opts = {k: v for k, v in asdict(options).items() if k != "progress_every"}
    notes = [plan.describe() if options.symmetry else "symmetry reduction off"]
    if sym_note is not None:
        notes.append(sym_note)
    opts["symmetry"] = bool(options.symmetry and (plan.permuted or plan.sorted))

    view = inst.view
    cur = view._cells

    reads = view._reads
    # An invariant that held is a function of the cells it read: in a later
    # state with the same values there it holds again (same footprint idea as
    # for guards in Instance.expand).
    inv_footprints: list[tuple[Any, Any] | None] = [None] * len(checked)

    def first_violation(st: State) -> str | None:
        cur[:] = st
        for k, inv in enumerate(checked):
            fp = inv_footprints[k]
            if fp is not None and fp[0](st) == fp[1]:
                continue
            reads.clear()
            ok = inv.fn(view)
            if ok is not True and (ok is False or not invariant_value(inv, ok)):
                inst.check_unchanged(st)
                return inv.name
            if reads:
                getter = itemgetter(*reads)
                inv_footprints[k] = (getter, getter(st))
        if tuple(cur) != st:  # an invariant wrote the state (one comparison per new state)
            inst.check_unchanged(st)
        return None

    expand = inst.expand
    start = time.perf_counter()
    last_report = start
    init = inst.init_state
    # Exact canonical states, not hashes: a 64-bit hash of a tuple can collide
    # (CPython's hash(-1) == hash(-2)), and a collision would silently drop states.
    seen: dict[Any, int] = {canon(init): 0}
    parent = array("q", [-1])
    via_action = array("i", [-1])
    via_picks: dict[int, tuple[Any, ...]] = {}
    transitions = 0
    # Per-action firings, counted by action position (no names or labels in the loop).
    tally = ActionTally(inst)
    act_of, fired, enabled_in, last_in = tally.act_of, tally.fired, tally.enabled, tally.last
    expanded = 0

    def finish(verdict: Verdict, reason: StopReason, depth: int, bad: str | None = None, at: int | None = None,
               deadlock: bool = False) -> CheckResult:
        elapsed = time.perf_counter() - start
        trace = None
        if reason in (StopReason.STATE_LIMIT, StopReason.TIME_LIMIT, StopReason.INTERRUPTED):
            # Breadth-first: every level before the one being expanded was finished.
            notes.append(
                f"inconclusive: every interleaving of up to {depth - 1} steps was checked, "
                f"then the search {reason.value} while exploring depth {depth}"
            )
        if at is not None:
            path: list[tuple[int, tuple[Any, ...]]] = []
            node = at
            while node > 0:
                path.append((via_action[node], via_picks.get(node, ())))
                node = parent[node]
            path.reverse()
            trace = build_trace(inst, path, engine="explore", violation=None if deadlock else bad, deadlock=deadlock)
        result = CheckResult(
            spec=spec.name,
            engine="explore",
            verdict=verdict,
            stop_reason=reason,
            stats=Stats(len(parent), transitions, depth, elapsed),
            params=dict(inst.param_values),
            invariants=names,
            violated=bad,
            trace=trace,
            options=opts,
            notes=tuple(notes),
            coverage_kind=CoverageKind.EXHAUSTIVE,
        )
        complete = reason is StopReason.EXHAUSTED
        actions = tally.coverage(inst, Measure.EXACT, expanded, depth, complete)
        return with_coverage(result, inst, actions)

    try:
        bad = first_violation(init)
    except Exception as exc:  # noqa: BLE001 - user code; re-run for the located error
        inst.violated(init)
        raise OwnershipError(Code.SPEC_RUNTIME, str(exc)) from None
    if bad:
        return finish(Verdict.VIOLATED, StopReason.VIOLATION, 0, bad, 0)

    frontier: list[tuple[int, State]] = [(0, init)]
    depth = 0
    max_states = options.max_states
    max_depth = options.max_depth
    deadline = start + options.max_seconds if options.max_seconds is not None else None
    check_deadlock = options.deadlock

    def search() -> CheckResult:
        nonlocal depth, transitions, last_report, frontier, expanded
        while frontier:
            if max_depth is not None and depth >= max_depth:
                return finish(Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT, depth)
            nxt: list[tuple[int, State]] = []
            for idx, st in frontier:
                succs = expand(st)
                transitions += len(succs)
                for ai, sc in succs:
                    a = act_of[ai.index]
                    fired[a] += 1
                    if last_in[a] != idx:
                        last_in[a] = idx
                        enabled_in[a] += 1
                    if sc.violations and not checked_names.isdisjoint(sc.violations):
                        # An event of this step is marked as violating a checked invariant: the
                        # step is a violation even if its state was seen (or satisfies them all).
                        nid = len(parent)
                        parent.append(idx)
                        via_action.append(ai.index)
                        if sc.picks:
                            via_picks[nid] = sc.picks
                        return finish(Verdict.VIOLATED, StopReason.VIOLATION, depth + 1,
                                      inst.step_violated(sc, names), nid)
                    h = canon(sc.state)
                    if h in seen:
                        continue
                    if max_states is not None and len(parent) >= max_states:
                        return finish(Verdict.UNKNOWN, StopReason.STATE_LIMIT, depth + 1)
                    nid = len(parent)
                    seen[h] = nid
                    parent.append(idx)
                    via_action.append(ai.index)
                    if sc.picks:
                        via_picks[nid] = sc.picks
                    try:
                        bad = first_violation(sc.state)
                    except Exception:  # noqa: BLE001 - re-run to get the located error
                        inst.violated(sc.state)
                        raise
                    if bad:
                        return finish(Verdict.VIOLATED, StopReason.VIOLATION, depth + 1, bad, nid)
                    nxt.append((nid, sc.state))
                if check_deadlock and not succs and not inst.is_terminal(st):
                    return finish(Verdict.VIOLATED, StopReason.DEADLOCK, depth, "deadlock", idx, deadlock=True)
                expanded += 1
                # Every 256 states, or after any wide expansion (one state with many
                # successors is as much work as many narrow ones).
                if not expanded & 0xFF or len(succs) > 64:
                    now = time.perf_counter()
                    if deadline is not None and now > deadline:
                        return finish(Verdict.UNKNOWN, StopReason.TIME_LIMIT, depth + 1)
                    if progress is not None and now - last_report >= options.progress_every:
                        last_report = now
                        progress(Progress(now - start, len(parent), transitions, depth, len(frontier)))
            frontier = nxt
            if frontier:
                depth += 1
        return finish(Verdict.PROVED, StopReason.EXHAUSTED, depth)

    try:
        return search()
    except KeyboardInterrupt as exc:
        # Ctrl-C, SIGTERM or the wall-clock limit firing inside one wide expansion:
        # report what was covered so far instead of a traceback.
        return finish(Verdict.UNKNOWN, stop_reason_of(exc), depth + 1)
