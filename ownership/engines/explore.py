"""Explicit-state engine: breadth-first search over every reachable state.

Breadth-first order makes the first violation found a shortest one.  The
search is :class:`~ownership.engines.search.BreadthFirst` (exact canonical
states under symmetry, parent links, limits, progress); this module is its
visitor: it checks the invariants on every new state, a step marked as
violating by an event, and deadlocks, and rebuilds the trace by replaying
the path to the state it stopped at through the concrete semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from ownership.core.progress import ProgressFn
from ownership.core.replay import build_trace
from ownership.core.result import CheckResult, CoverageKind, Measure, Stats, StopReason, Verdict
from ownership.engines.coverage import ActionTally, with_coverage
from ownership.engines.search import BreadthFirst, Limits, Outcome, Stop, Visitor
from ownership.engines.symevery import EveryState
from ownership.engines.symmetry import make_canonicalizer
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.invariants import invariant_value, judged, select_invariants
from ownership.lang.successors import ActionInstance, Footprint, Successor, remember_footprint
from ownership.lang.symbolic_rules import symbolic_obstacles

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
    kernel: str = "auto"
    """``compiled`` (the compiled kernel, :mod:`ownership.kernel`), ``python`` (the interpreted search) or
    ``auto``: the Python search first, restarted on the compiled kernel once it passes
    :data:`~ownership.engines.compiled.AUTO_SWITCH` states (the kernel's start-up costs a second)."""
    storage: str = "exact"
    """``exact`` (every state kept) or ``fingerprint`` (64-bit fingerprints, compiled kernel only: the
    verdict states the probability of a collision)."""
    max_memory: int | None = None
    """Resident-memory budget in bytes (``None``: none; a check's default is a share of the machine)."""
    workers: int | None = 1
    """Worker processes of the search (:mod:`ownership.engines.parallel`): ``1`` is one process; ``None``
    (``--workers auto``) starts in one and, on the Python path past
    :data:`~ownership.engines.parallel.AUTO_SWITCH` states, searches again on every core."""
    ray: str | None = None
    """Run the workers as Ray actors on this cluster (``auto``: the one this machine is in, or a local one);
    ``None``: processes on this machine."""

    @classmethod
    def from_settings(cls, settings: Settings) -> ExploreOptions:
        """The explorer's options for a check (``--free``'s explorer is :class:`~ownership.engines.paramexplore.ParamOptions`)."""
        if settings.option("minimize") or settings.option("maximize"):
            raise OwnershipError(Code.BAD_OPTION, "--minimize/--maximize need --free for that parameter")
        from ownership import inputs

        options = cls(max_depth=settings.max_depth, max_states=settings.max_states, max_seconds=settings.max_seconds,
                      symmetry=settings.symmetry, deadlock=settings.option("deadlock"), invariants=settings.invariants,
                      max_memory=inputs.memory_budget(settings.max_memory), kernel=settings.option("kernel"),
                      storage=settings.option("storage"), workers=settings.option("workers"), ray=settings.option("ray"))
        options.validate()
        return options

    def validate(self) -> None:
        """Refuse limits out of range (OWN015), named by their flags."""
        from ownership import inputs

        inputs.check_search_limits(self.max_depth, self.max_states, self.max_seconds)
        if self.sharded and (self.kernel == "compiled" or self.storage == "fingerprint"):
            asked = f"--ray {self.ray}" if self.ray is not None else f"--workers {self.workers}"
            raise OwnershipError(Code.BAD_OPTION, f"{asked} runs the Python search on every worker, and the compiled "
                                 "kernel runs in one process: drop --kernel compiled and --storage fingerprint, or use "
                                 "--workers 1")

    @property
    def sharded(self) -> bool:
        """Whether the search runs on several workers (or on Ray) from the start."""
        return self.ray is not None or (self.workers is not None and self.workers > 1)


class _Checker(Visitor):
    """The explorer's hooks: invariants on each new state, violating events, deadlocks."""

    def __init__(self, inst: Instance, search: BreadthFirst, names: tuple[str, ...], deadlock: bool) -> None:
        self.inst = inst
        self.search = search
        self.names = names
        self.checked_names = frozenset(names)
        self.deadlock = deadlock
        self.first_violation = invariant_checker(inst, names)

    def on_state(self, node: int, state: State, depth: int) -> Stop | None:
        try:
            bad = self.first_violation(state)
        except Exception as exc:  # noqa: BLE001 - user code; re-run for the located error
            self.inst.violated(state)
            if node == 0:
                raise OwnershipError(Code.SPEC_RUNTIME, str(exc)) from None
            raise
        return Stop(StopReason.VIOLATION, node, depth, bad) if bad else None

    def on_flagged(self, src: int, action: ActionInstance, succ: Successor, depth: int) -> Stop | None:
        if self.checked_names.isdisjoint(succ.violations):
            return None
        # An event of this step is marked as violating a checked invariant: the step
        # is a violation even if its state was seen (or satisfies them all).
        node = self.search.tree.add(src, action.index, succ.picks)
        return Stop(StopReason.VIOLATION, node, depth, self.inst.step_violated(succ, self.names))

    def on_dead_end(self, node: int, state: State, depth: int) -> Stop | None:
        if self.deadlock and not self.inst.is_terminal(state):
            return Stop(StopReason.DEADLOCK, node, depth, "deadlock")
        return None


def invariant_checker(inst: Instance, names: tuple[str, ...]) -> Any:
    """``state -> name of the first violated checked invariant, or None``."""
    checked = [inst.spec.invariants[n] for n in names]
    view = inst.view
    cur = view._cells
    reads = view._reads
    # An invariant that held is a function of the cells it read: in a later
    # state with the same values there it holds again (same footprint idea as
    # for guards in Instance.expand).
    inv_footprints: list[Footprint | None] = [None] * len(checked)

    def first_violation(st: State) -> str | None:
        cur[:] = st
        for k, inv in enumerate(checked):
            fp = inv_footprints[k]
            if fp is not None and fp[1](st) in fp[2]:
                continue
            reads.clear()
            ok = inv.fn(view)
            if ok is not True and (ok is False or not invariant_value(inv, ok)):
                inst.check_unchanged(st)
                return inv.name
            if reads:
                remember_footprint(inv_footprints, k, reads, st)
        if tuple(cur) != st:  # an invariant wrote the state (one comparison per new state)
            inst.check_unchanged(st)
        return None

    return judged(view, first_violation)  # the view refuses s.flag/s.emit/s.events in invariants (OWN064)


def explore(inst: Instance, options: ExploreOptions = ExploreOptions(), progress: ProgressFn | None = None) -> CheckResult:
    """Check every invariant of ``inst`` on every reachable state, breadth-first, then its temporal properties.

    The properties (:mod:`ownership.engines.liveness`) are decided only once
    the invariants held on every reachable state: a violation of an
    invariant is reported first, and a search stopped at a limit decides
    no property.
    """
    from ownership.engines import liveness

    props = liveness.select_properties(inst, options.invariants)
    result = _safety(inst, options, progress)
    if not props or result.verdict is not Verdict.PROVED:
        if props and result.verdict is not Verdict.VIOLATED:
            names = ", ".join(p.name for p in props)
            result = replace(result, notes=(*result.notes, f"temporal properties not decided ({names}): the "
                                            "search of the invariants did not finish"))
        return result
    left = None if options.max_seconds is None else max(options.max_seconds - result.stats.seconds, 0.001)
    limits = Limits(max_states=options.max_states, max_seconds=left,
                    progress_every=options.progress_every, max_memory=options.max_memory)
    return liveness.check_properties(inst, result, props, limits, progress, symmetry=options.symmetry)


def _safety(inst: Instance, options: ExploreOptions, progress: ProgressFn | None) -> CheckResult:
    """Every invariant on every reachable state (the explorer without temporal properties)."""
    from ownership.engines import compiled, parallel

    names = tuple(i.name for i in select_invariants(inst, options.invariants))
    limits = Limits(max_depth=options.max_depth, max_states=options.max_states, max_seconds=options.max_seconds,
                    progress_every=options.progress_every, max_memory=options.max_memory)
    sharded = options.sharded
    kernel = "python" if sharded else compiled.choose_kernel(options.kernel, options.symmetry, inst, options.max_states,
                                                              options.storage)
    switch = kernel == "auto"
    if switch:
        limits = replace(limits, max_states=compiled.AUTO_SWITCH)
    # --workers auto: one process first; a search on the Python path that outgrows it goes to every core.
    spread = (options.workers is None and kernel == "python" and parallel.machine_workers() > 1
              and (options.max_states is None or options.max_states > parallel.AUTO_SWITCH))
    if spread:
        limits = replace(limits, max_states=parallel.AUTO_SWITCH)
    search = BreadthFirst(inst, symmetry=options.symmetry, limits=limits, progress=progress)
    plan = search.plan
    notes = [plan.describe() if options.symmetry else "symmetry reduction off"]
    notes += symbolic_notes(inst.spec)
    if sharded:
        return parallel.explore_sharded(inst, options, names, notes, progress)
    every: EveryState | None = None
    if search.reduced:
        # The reduction is sound only if the spec really is symmetric: every state the search
        # expands is checked under generators of each reduced domain (OWN061 on a mismatch).
        # Successors are compared by orbit: the exact key, not the search's (which may miss renamings).
        every = EveryState(inst, make_canonicalizer(inst, plan, exact=True), (*plan.permuted, *plan.sorted), names,
                           invariant_checker(inst, names), search.expand)
        search.expand = every
    if kernel == "compiled":
        return compiled.explore_compiled(inst, options, names, notes, progress)
    outcome = search.run(_Checker(inst, search, names, options.deadlock))
    if spread and outcome.stop.reason is StopReason.STATE_LIMIT:
        from ownership.engines.parallel.transport import WorkersNotStartedError

        try:
            return parallel.explore_sharded(inst, replace(options, workers=parallel.machine_workers()), names, notes,
                                            progress, elapsed=outcome.seconds)
        except WorkersNotStartedError as exc:  # e.g. under a low address-space limit: one process, as asked of auto
            result = _safety(inst, replace(options, workers=1), progress)
            return replace(result, notes=(*result.notes, f"the workers could not start ({exc}): searched in one "
                                          "process"))
    if every is not None:
        notes.insert(1, every.describe())
    if switch and outcome.stop.reason is StopReason.STATE_LIMIT:
        # Past the switch point: the compiled kernel searches again from the start, faster.
        return compiled.explore_compiled(inst, options, names, notes, progress, elapsed=outcome.seconds)
    if kernel == "python" and options.kernel != "python":
        notes.append(compiled.python_note(inst, options.symmetry, search.reduced))
    return _result(inst, options, search.tree.path, search.tally, search.reduced, outcome, names, notes)


def symbolic_notes(spec: Any) -> list[str]:
    """What bmc and prove would refuse in this spec, said at load time (the first place and a count)."""
    found = symbolic_obstacles(spec)
    if not found:
        return []
    first = found[0]
    more = f" (and {len(found) - 1} more such line{'s' if len(found) > 2 else ''})" if len(found) > 1 else ""
    return [f"bmc and prove cannot run this spec: {first.file}:{first.line}: {first.message}{more}"]


_VERDICTS = {
    StopReason.VIOLATION: Verdict.VIOLATED,
    StopReason.DEADLOCK: Verdict.VIOLATED,
    StopReason.EXHAUSTED: Verdict.PROVED,
    StopReason.DEPTH_LIMIT: Verdict.BOUNDED_OK,
}


def _result(inst: Instance, options: ExploreOptions, path_to: Callable[[int], list[tuple[int, tuple[Any, ...]]]],
            tally: ActionTally, reduced: bool, outcome: Outcome, names: tuple[str, ...], notes: list[str],
            steps: list[tuple[int, tuple[Any, ...]]] | None = None) -> CheckResult:
    """The explorer's CheckResult (``steps``: the path to the stop, if not ``path_to(stop.node)``)."""
    stop = outcome.stop
    reason = stop.reason
    depth = outcome.depth
    if reason in (StopReason.STATE_LIMIT, StopReason.TIME_LIMIT, StopReason.MEMORY_LIMIT, StopReason.INTERRUPTED):
        # Breadth-first: every level before the one being expanded was finished.
        notes.append(
            f"inconclusive: every interleaving of up to {depth - 1} steps was checked, "
            f"then the search {reason.value} while exploring depth {depth}"
        )
    if outcome.audit:
        notes.append(outcome.audit)
    trace = None
    bad = stop.detail if reason in (StopReason.VIOLATION, StopReason.DEADLOCK) else None
    if stop.node is not None:
        deadlock = reason is StopReason.DEADLOCK
        trace = build_trace(inst, steps if steps is not None else path_to(stop.node), engine="explore",
                            violation=None if deadlock else bad, deadlock=deadlock)
        if deadlock:
            from ownership.engines.deadlocks import stuck_notes

            notes.extend(stuck_notes(inst, inst.from_json(trace.states[-1])))
    opts = {k: v for k, v in asdict(options).items() if k not in ("progress_every", "kernel", "storage", "workers", "ray")}
    opts["symmetry"] = reduced
    result = CheckResult(
        spec=inst.spec.name,
        engine="explore",
        verdict=_VERDICTS.get(reason, Verdict.UNKNOWN),
        stop_reason=reason,
        stats=Stats(outcome.states, outcome.transitions, depth, outcome.seconds, peak_memory=outcome.peak_memory,
                    bytes_per_state=outcome.bytes_per_state, storage=outcome.storage),
        params=dict(inst.param_values),
        invariants=names,
        violated=bad,
        trace=trace,
        options=opts,
        notes=tuple(notes),
        coverage_kind=CoverageKind.EXHAUSTIVE,
    )
    actions = tally.coverage(inst, Measure.EXACT, outcome.expanded, depth, reason is StopReason.EXHAUSTED)
    return with_coverage(result, inst, actions)
