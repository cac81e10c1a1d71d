"""The one breadth-first search over an :class:`~ownership.lang.instance.Instance`, with visitors.

Every engine that enumerates states (the explorer, the state graph export,
the ``--explain`` diagnosis, prove's reachable set, the coverage search, the
free-parameter explorer) runs this loop and adds its own work through a
:class:`Visitor`: a hook per new state, per transition, per step an event
marked as violating, per state without successors and per level.  A hook
returns ``None`` to go on, or a :class:`Stop` to end the search with a
reason.  The loop calls only the hooks a visitor overrides, so a visitor
that needs no per-transition work costs nothing per transition.

The search owns what every engine shares:

* the limits (:class:`Limits`: depth, states, expansions, wall-clock time,
  memory) and the progress reports (:class:`~ownership.core.progress.Progress`);
  Ctrl-C, SIGTERM, :func:`~ownership.core.limits.limited`'s time limit and
  running out of memory end it with their reason instead of a traceback;
* what it cost (:class:`Outcome`: the peak memory, bytes per stored state,
  how states are stored);
* optional symmetry reduction: states are stored by their exact canonical
  form (:mod:`ownership.engines.symmetry`), and choices among identical
  elements are merged while it runs (:meth:`Instance.mode`);
* parent links (:class:`Tree`): per state only its parent, the action and
  the choices that reached it, from which a path is rebuilt and replayed;
* per-action firing counts (:class:`~ownership.engines.coverage.ActionTally`).

Breadth-first order makes the first violation found a shortest one.  The
frontier and the seen-set are small protocols (:class:`Frontier`,
:class:`SeenSet`, in :mod:`ownership.engines.storage` and imported here)
with a list per level and a ``dict`` as the default implementations, so a
parallel or distributed search, or a disk-backed seen-set, replaces them
without touching the loop.

The module is about 400 lines because the loop itself
(:meth:`BreadthFirst._loop`) is kept in one frame: it is the explorer's hot
path, and every helper call per transition would cost on every state.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.core.limits import stop_in, stop_reason_of
from ownership.core.memory import Meter, peak_resident
from ownership.core.progress import Progress, ProgressFn
from ownership.core.result import StopReason
from ownership.engines.coverage import ActionTally
from ownership.engines.storage import Frontier, LevelLists, SeenSet, Tree
from ownership.engines.symmetry import SymmetryPlan, make_canonicalizer, plan_symmetry
from ownership.lang.audit import SearchAudit
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance, Successor


@dataclass(frozen=True)
class Stop:
    """Why a search ended, returned by a hook (or made by the search for a limit).

    ``node`` is the state the reason is about (a violation, a deadlock),
    ``depth`` its number of steps from the initial state; ``detail`` is the
    visitor's own (the violated invariant's name, say).
    """

    reason: StopReason
    node: int | None = None
    depth: int | None = None
    detail: Any = None


class Control(enum.Enum):
    """Answers of a hook other than "go on" (``None``) and "stop" (a :class:`Stop`)."""

    PRUNE = "keep the new state out of the frontier: it is recorded but never expanded"
    HANDLED = "the visitor took the flagged step over: the search skips it"


class Visitor:
    """What an engine adds to the search; override only the hooks it needs.

    The search looks up which hooks a subclass overrides once, before it
    starts, and never calls the others.
    """

    def on_state(self, node: int, state: State, depth: int) -> Stop | Control | None:
        """A state seen for the first time (the initial state is node 0, depth 0).

        ``Control.PRUNE`` records it (it has a node and edges) but does not
        expand it: a target of the diagnosis.
        """
        return None

    def on_edge(self, src: int, action: ActionInstance, succ: Successor, dst: int) -> Stop | None:
        """A transition from node ``src`` to node ``dst`` (new or seen before; called after ``on_state``)."""
        return None

    def on_flagged(self, src: int, action: ActionInstance, succ: Successor, depth: int) -> Stop | Control | None:
        """A step one of whose events is marked ``violates=`` (``succ.violations``), before its state is looked up.

        ``Control.HANDLED`` skips the step (the visitor made a node for it
        with :meth:`Tree.add` if it needs one); ``None`` treats it as any
        other step.
        """
        return None

    def on_dead_end(self, node: int, state: State, depth: int) -> Stop | None:
        """A state with no successors (a deadlock unless the spec calls it terminal)."""
        return None

    def on_level(self, depth: int, states: int) -> Stop | None:
        """The search is about to expand the ``states`` states at ``depth``."""
        return None


@dataclass(frozen=True)
class Limits:
    """When a search stops early; ``None`` means no limit.

    ``max_states`` counts stored states (the initial one included),
    ``max_expanded`` expanded ones.  When the state limit is reached the
    search stops, unless ``drop_when_full``: then it finishes expanding
    the states it has and drops new ones (the outcome is not complete).
    The clock and the memory are read, and progress reported, every
    ``check_every`` expansions (a power of two) and after any expansion
    wider than 64 successors.  ``max_memory`` is a budget of resident
    memory in bytes for the whole process (what the search stores and
    everything else): past it the search stops with
    ``StopReason.MEMORY_LIMIT``.  An address-space limit (``ulimit -v``)
    counts mappings, which grow faster than resident memory: a search that
    reaches it first gets a ``MemoryError``, which ends it with the same
    reason and the coverage reached (the seen-set is dropped first).
    """

    max_depth: int | None = None
    max_states: int | None = None
    max_expanded: int | None = None
    max_seconds: float | None = None
    drop_when_full: bool = False
    progress_every: float = 1.0
    check_every: int = 256
    max_memory: int | None = None


@dataclass(frozen=True)
class Outcome:
    """How a search ended and what it counted."""

    stop: Stop
    level: int
    """The level being expanded when it stopped (the last one when it ran out of states)."""
    states: int
    transitions: int
    expanded: int
    seconds: float
    complete: bool
    """It ran out of new states and dropped none: every reachable state was stored."""
    peak_memory: int | None = None
    """The process's peak resident memory during the search, in bytes (``None``: not measurable here)."""
    start_memory: int | None = None
    """The resident memory when the search started: what the interpreter, the spec and the instance took."""
    storage: str | None = None
    """How states were stored: ``exact (dict of states)`` for the default seen-set, a replacement's
    ``storage`` attribute, or what another driver says (``None``: not said)."""
    audit: str | None = None
    """Which expanded states the determinism audit ran on (``None``: the search's successor function was replaced)."""

    @property
    def bytes_per_state(self) -> float | None:
        """The memory the search grew by, per stored state: an upper bound (garbage and the interpreter's arenas count too)."""
        if self.peak_memory is None or self.start_memory is None or not self.states:
            return None
        return max(self.peak_memory - self.start_memory, 0) / self.states

    @property
    def depth(self) -> int:
        """Steps from the initial state to the state the stop is about (or to the deepest level)."""
        return self.level if self.stop.depth is None else self.stop.depth


Expand = Callable[[Any], Sequence[tuple[ActionInstance, Successor]]]


def _overrides(visitor: Visitor, name: str) -> Any:
    """The visitor's bound hook ``name`` if its class overrides it, else ``None``."""
    return getattr(visitor, name) if getattr(type(visitor), name) is not getattr(Visitor, name) else None


class BreadthFirst:
    """One breadth-first search of ``inst``'s reachable states.

    ``symmetry`` stores one state per orbit (``plan`` says how each domain
    is reduced) and merges choices among identical elements; ``key``,
    ``reduce``, ``expand`` and ``init`` replace the canonical form, the
    domains whose choices are merged, the successor function and the
    initial state (the free-parameter explorer's states
    carry a parameter condition).  With ``catch_stops`` a stop from outside
    (Ctrl-C, SIGTERM, the time limit) ends the search with its reason, for an
    engine that reports what it covered; without, it propagates (a graph or
    a state set that is all or nothing).  :meth:`run` may be called once.
    """

    def __init__(self, inst: Instance, *, symmetry: bool = True, limits: Limits = Limits(),
                 progress: ProgressFn | None = None, frontier: Frontier | None = None,
                 seen: SeenSet | None = None, key: Callable[[Any], Any] | None = None,
                 reduce: Sequence[str] | None = None,
                 expand: Expand | None = None, init: Any = None, catch_stops: bool = True) -> None:
        self.inst = inst
        self.plan: SymmetryPlan = plan_symmetry(inst)
        self.symmetry = symmetry
        self.key = key if key is not None else make_canonicalizer(inst, self.plan) if symmetry else None
        self.reduce = tuple(reduce) if reduce is not None else self.plan.sorted if symmetry else ()
        self.limits = limits
        self.progress = progress
        self.frontier: Frontier = frontier if frontier is not None else LevelLists()
        self.seen: SeenSet = seen if seen is not None else {}
        # The spec's own successor function is audited for determinism (a replacement audits its own).
        self.audit = SearchAudit(inst) if expand is None else None
        self.expand: Expand = expand if expand is not None else self._audited(inst.expand, self.audit)
        self.init = init if init is not None else inst.init_state
        self.catch_stops = catch_stops
        self.tree = Tree()
        self.tally = ActionTally(inst)
        self.transitions = 0
        self.expanded = 0
        self.level = 0
        self.dropped = False
        self.high_memory = 0
        """The highest resident memory the loop read (it reads only with a budget or progress reports)."""
        self.start_memory = 0
        """The resident memory when :meth:`run` started (0: not read yet)."""

    @staticmethod
    def _audited(expand: Expand, audit: Any) -> Expand:
        def audited(state: Any) -> Sequence[tuple[ActionInstance, Successor]]:
            out = expand(state)
            audit(state, out)
            return out
        return audited

    @property
    def reduced(self) -> bool:
        """Whether symmetry reduction is on and has a domain to reduce."""
        return bool(self.symmetry and (self.plan.permuted or self.plan.sorted))

    def run(self, visitor: Visitor) -> Outcome:
        """Search until the states run out, a limit is reached or a hook stops it.

        Events are not recorded while it runs (traces are replayed to rebuild
        them) and the view's modes are restored afterwards, also on an error.
        """
        start = time.perf_counter()
        peak_before = peak_resident()
        out_of_memory = False
        with Meter() as meter, self.inst.mode(recording=False, choice_reduction=self.reduce):
            start_memory = self.start_memory = meter()
            try:
                stop = self._loop(visitor, start, meter)
            except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, the wall-clock limit
                if not self.catch_stops:
                    raise
                stop = Stop(stop_reason_of(exc), depth=self.level + 1)
            except MemoryError:  # a ulimit below the budget, or one allocation larger than what was left
                if not self.catch_stops:
                    raise
                out_of_memory = True  # freed below, once the loop's frame (and its level list) is gone
            except Exception as exc:  # a stop that came out of a Z3 call; anything else is re-raised
                halt = stop_in(exc)
                if halt is None or not self.catch_stops:
                    raise
                stop = Stop(stop_reason_of(halt), depth=self.level + 1)
            if out_of_memory:
                self._free()
                stop = Stop(StopReason.MEMORY_LIMIT, depth=self.level + 1)
            elif self.audit is not None and stop.reason not in (StopReason.TIME_LIMIT, StopReason.INTERRUPTED):
                self.audit.rerun()  # the audited states, expanded again now that the search has run
            end_memory = meter()
        complete = stop.reason is StopReason.EXHAUSTED and not self.dropped
        # The process's own peak is this search's if it rose while it ran; else the highest reading.
        peak_after = peak_resident()
        peak = peak_after if peak_after > peak_before else max(self.high_memory, end_memory)
        return Outcome(stop, self.level, len(self.tree), self.transitions, self.expanded,
                       time.perf_counter() - start, complete, peak_memory=peak or None,
                       start_memory=start_memory or None, storage=self.storage,
                       audit=None if self.audit is None else self.audit.note())

    @property
    def storage(self) -> str | None:
        """How the seen-set stores states: its ``storage`` attribute, the default dict's exact keys, or ``None``."""
        named = getattr(self.seen, "storage", None)
        if isinstance(named, str):
            return named
        return "exact (dict of states)" if isinstance(self.seen, dict) else None

    def _free(self) -> None:
        """Drop the seen-set and the frontier after a ``MemoryError``, so the result can be built.

        The parent links stay (a few bytes per state): they count the
        states and rebuild any path.
        """
        clear = getattr(self.seen, "clear", None)
        if callable(clear):
            clear()
        self.frontier = LevelLists()

    def _loop(self, visitor: Visitor, start: float, meter: Meter) -> Stop:  # noqa: C901 - the hot loop, kept in one frame
        on_state = _overrides(visitor, "on_state")
        on_edge = _overrides(visitor, "on_edge")
        on_flagged = _overrides(visitor, "on_flagged")
        on_dead_end = _overrides(visitor, "on_dead_end")
        on_level = _overrides(visitor, "on_level")
        limits = self.limits
        max_depth, max_states, max_expanded = limits.max_depth, limits.max_states, limits.max_expanded
        drop = limits.drop_when_full
        deadline = start + limits.max_seconds if limits.max_seconds is not None else None
        mask = limits.check_every - 1
        max_memory = limits.max_memory
        progress, every = self.progress, limits.progress_every
        last_report = start
        high = 0
        key, seen, expand, frontier = self.key, self.seen, self.expand, self.frontier
        sized = hasattr(frontier, "__len__")
        tree = self.tree
        parent, via_action, via_picks = tree.parent, tree.action, tree.picks
        tally = self.tally
        act_of, fired, enabled_in, last_in = tally.act_of, tally.fired, tally.enabled, tally.last
        PRUNE = Control.PRUNE  # noqa: N806 - a constant, bound locally for the loop
        HANDLED = Control.HANDLED  # noqa: N806
        transitions = expanded = level = 0
        try:
            init = self.init
            seen[init if key is None else key(init)] = 0
            verdict = on_state(0, init, 0) if on_state is not None else None
            if verdict is not None and verdict is not PRUNE:
                return verdict  # type: ignore[return-value]
            if verdict is None:
                frontier.push((0, init))
            current = frontier.next_level()
            while current:
                if max_depth is not None and level >= max_depth:
                    return Stop(StopReason.DEPTH_LIMIT, depth=level)
                if on_level is not None:
                    halt = on_level(level, len(current))
                    if halt is not None:
                        return halt
                push = frontier.push
                below = level + 1
                level_nodes, level_expanded, level_start = len(parent), expanded, time.perf_counter()
                for idx, st in current:
                    if max_expanded is not None and expanded >= max_expanded:
                        return Stop(StopReason.STATE_LIMIT, depth=level)
                    succs = expand(st)
                    transitions += len(succs)
                    for ai, sc in succs:
                        a = act_of[ai.index]
                        fired[a] += 1
                        if last_in[a] != idx:
                            last_in[a] = idx
                            enabled_in[a] += 1
                        if sc.violations and on_flagged is not None:
                            verdict = on_flagged(idx, ai, sc, below)
                            if verdict is HANDLED:
                                continue
                            if verdict is not None:
                                return verdict  # type: ignore[return-value]
                        h = sc.state if key is None else key(sc.state)
                        if h in seen:
                            if on_edge is not None:
                                halt = on_edge(idx, ai, sc, seen[h])
                                if halt is not None:
                                    return halt
                            continue
                        nid = len(parent)
                        if max_states is not None and nid >= max_states:
                            if drop:
                                self.dropped = True
                                continue
                            return Stop(StopReason.STATE_LIMIT, depth=below)
                        seen[h] = nid
                        parent.append(idx)
                        via_action.append(ai.index)
                        if sc.picks:
                            via_picks[nid] = sc.picks
                        if on_state is not None:
                            verdict = on_state(nid, sc.state, below)
                            if verdict is not None and verdict is not PRUNE:
                                return verdict  # type: ignore[return-value]
                        else:
                            verdict = None
                        if on_edge is not None:
                            halt = on_edge(idx, ai, sc, nid)
                            if halt is not None:
                                return halt
                        if verdict is None:
                            push((nid, sc.state))
                    if not succs and on_dead_end is not None:
                        halt = on_dead_end(idx, st, level)
                        if halt is not None:
                            return halt
                    expanded += 1
                    # Every few states, or after any wide expansion (one state with many
                    # successors is as much work as many narrow ones).
                    if not expanded & mask or len(succs) > 64:
                        now = time.perf_counter()
                        if deadline is not None and now > deadline:
                            return Stop(StopReason.TIME_LIMIT, depth=below)
                        if max_memory is not None:
                            used = meter()
                            high = max(high, used)
                            if used > max_memory:
                                return Stop(StopReason.MEMORY_LIMIT, depth=below)
                        if progress is not None and now - last_report >= every:
                            last_report = now
                            progress(self._report(now - start, now - level_start, meter, transitions, level,
                                                  len(current), expanded - level_expanded,
                                                  len(frontier) if sized else len(parent) - level_nodes))  # type: ignore[arg-type]
                current = frontier.next_level()
                if current:
                    level += 1
            return Stop(StopReason.EXHAUSTED, depth=level)
        finally:
            self.transitions, self.expanded, self.level = transitions, expanded, level
            self.high_memory = max(self.high_memory, high)

    def _report(self, seconds: float, level_seconds: float, meter: Meter, transitions: int, level: int,
                level_size: int, level_done: int, queued: int) -> Progress:
        """A progress report; its memory reading counts towards the peak.

        The frontier is every state waiting: the rest of this level and those
        queued for the next.  What is left is said only for this level, with
        its rate so far: the size of the levels to come is not known.
        """
        used = meter()
        self.high_memory = max(self.high_memory, used)
        states = len(self.tree)
        left = level_size - level_done
        rate = level_done / level_seconds if level_seconds > 0 else 0.0
        grown = used - self.start_memory if self.start_memory and states else None
        return Progress(seconds, states, transitions, level, left + queued, memory=used,
                        bytes_per_state=max(grown, 0) / states if grown is not None else None,
                        level_states=level_size, level_left=left,
                        level_seconds_left=left / rate if rate > 0 else None)
