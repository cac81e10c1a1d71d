"""The compiled explorer's driver: the breadth-first levels, the calls back into Python, limits, progress.

:func:`search` runs the same breadth-first search as
:class:`~ownership.engines.search.BreadthFirst` with the explorer's checks
(invariants on each new state, steps whose events flag a checked invariant,
deadlocks), on packed states (:mod:`ownership.kernel.codec`) stored in flat
arrays, with the successor function memoised from the Python semantics
(:mod:`ownership.kernel.memo`) and run in compiled code
(:mod:`ownership.kernel.loop`).  States are numbered in the same order as
the Python search numbers them, so the counts, the first violation and its
path are the same.

Storage: :mod:`ownership.kernel.store` (exact by default, or 64-bit
fingerprints with the links on disk).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ownership.core.limits import stop_reason_of
from ownership.core.memory import Meter
from ownership.core.progress import Progress, ProgressFn
from ownership.core.result import StopReason
from ownership.errors import Code, OwnershipError
from ownership.kernel import loop
from ownership.kernel.codec import Codec, TooWide
from ownership.kernel.memo import Memo
from ownership.kernel.store import ExactStore, FingerprintStore
from ownership.lang.audit import EVERY_STATE, data_changed

if TYPE_CHECKING:
    from ownership.lang.instance import Instance, State

AUDIT_FIRST = 32
"""Memo misses whose Python run is repeated and compared (the determinism audit)..."""
AUDIT_EVERY = 64
"""... and after those, one miss in this many."""
CROSS_CHECK_EVERY = 8192
"""After the first :data:`~ownership.lang.audit.EVERY_STATE` states (every one of them), one expanded state in
this many is also expanded by the Python semantics and compared with the memo."""
RECHECK_AT_END = 64
"""The first states cross-checked again when the search ends: an action that remembers what ran since answers
differently now."""
CHUNK = 4096
"""States expanded per compiled call between clock checks and progress reports."""


@dataclass(frozen=True)
class KernelLimits:
    """When the compiled search stops early (``None``: no limit); the explorer's flags."""

    max_depth: int | None = None
    max_states: int | None = None
    max_seconds: float | None = None
    max_memory: int | None = None
    progress_every: float = 1.0
    fingerprints: bool = False
    """Store 64-bit fingerprints instead of states (:class:`~ownership.kernel.store.FingerprintStore`)."""
    spill_bytes: int | None = None
    """With fingerprints, the frontier's rows beyond this many bytes go to disk (default: a quarter of
    ``max_memory``)."""


@dataclass
class KernelRun:
    """How a compiled search ended, with what the explorer's result needs."""

    reason: StopReason
    node: int | None
    depth: int
    detail: Any
    level: int
    states: int
    transitions: int
    expanded: int
    seconds: float
    complete: bool
    fired: list[int]
    enabled: list[int]
    steps: list[tuple[int, tuple[Any, ...]]] | None
    """The path (action instance, picks) to the state the stop is about."""
    words: int = 0
    """64-bit words per packed state."""
    bits: int = 0
    """Bits of a packed state's cells."""
    misses: int = 0
    memo_bytes: int = 0
    store_bytes: int = 0
    restarts: int = 0
    storage: str = ""
    """What the store kept, for the verdict (exact, or fingerprints with the collision estimate)."""
    peak_memory: int | None = None
    """The largest resident memory measured during the search, in bytes."""
    start_memory: int | None = None
    """The resident memory when the search started."""
    notes: list[str] = field(default_factory=list)

    @property
    def bytes_per_state(self) -> float:
        """The search's storage per stored state (packed words, parent, outcome, table slot)."""
        return self.store_bytes / self.states if self.states else 0.0


def search(inst: Instance, names: Sequence[str], deadlock: bool, limits: KernelLimits,
           progress: ProgressFn | None = None) -> KernelRun:
    """Explore ``inst`` breadth-first on the compiled kernel (see the module docstring).

    Raises :class:`~ownership.kernel.codec.Unrepresentable` before
    searching if a value cannot be packed (the caller uses the Python path).
    """
    start = time.perf_counter()
    widths: dict[int, int] = {}
    restarts = 0
    with inst.mode(recording=False, choice_reduction=()):
        while True:
            codec = Codec(inst, widths)
            # Fingerprints keep a quarter of the memory budget for the frontier's rows; past it they go to disk.
            spill = limits.spill_bytes if limits.spill_bytes is not None else \
                limits.max_memory // 4 if limits.max_memory is not None else None
            store: ExactStore | FingerprintStore = FingerprintStore(codec.words, spill_bytes=spill) \
                if limits.fingerprints else ExactStore(codec.words)
            try:
                run = _Search(inst, codec, store, names, deadlock, limits, progress, start).run()
            except TooWide as wide:
                # An int outgrew its cell: start again with the cell twice as wide.
                widths = codec.int_cells
                widths[wide.cell] = max(2 * widths[wide.cell], wide.bits + 1)
                restarts += 1
                continue
            finally:
                store.close()
            run.restarts = restarts
            if restarts:
                run.notes.append(f"the search started again {restarts} time(s) with wider int cells")
            return run


class _Search:
    """One attempt at the compiled search with a fixed layout."""

    def __init__(self, inst: Instance, codec: Codec, store: ExactStore | FingerprintStore, names: Sequence[str],
                 deadlock: bool, limits: KernelLimits, progress: ProgressFn | None, start: float) -> None:
        self.inst = inst
        self.codec = codec
        self.names = list(names)
        self.checked = frozenset(names)
        self.deadlock = deadlock
        self.limits = limits
        self.progress = progress
        self.start = start
        self.ais = inst.action_instances
        self.memo = Memo(len(self.ais) + len(self.names), codec)
        self.store = store
        action_names = list(inst.spec.actions)
        pos = {n: i for i, n in enumerate(action_names)}
        self.act_of = np.array([pos[ai.action.name] for ai in self.ais], dtype=np.int32)
        self.fired = np.zeros(len(action_names), dtype=np.int64)
        self.enabled = np.zeros(len(action_names), dtype=np.int64)
        self.last = np.full(len(action_names), -1, dtype=np.int64)
        self.scratch = np.zeros((64, codec.words), dtype=np.uint64)
        self.scratch_out = np.zeros(64, dtype=np.int32)
        self.scratch_bad = np.zeros(64, dtype=np.int32)
        self.io = np.zeros(loop.IO_SIZE, dtype=np.int64)
        self.audits = 0
        self.cross_checks = 0
        self.data_before = inst.module_data().snapshot()
        self.meter = Meter()
        self.start_memory = self.meter()
        self.peak_memory = self.start_memory

    # -- the Python side of a miss ---------------------------------------------------
    def _record_action(self, state: State, a: int) -> None:
        ai = self.ais[a]
        rec = self.inst.record(state, ai)
        self.audits += 1
        if self.audits <= AUDIT_FIRST or not self.audits % AUDIT_EVERY:
            again = self.inst.record(state, ai)
            if again != rec:
                raise OwnershipError(
                    Code.SPEC_NONDETERMINISTIC,
                    f"action {ai.label} is not a deterministic function of the state: run twice in the same state "
                    "it read or did different things; actions must not use random numbers, the clock, or "
                    "module-level data that changes",
                    ai.action.file, ai.action.line,
                )
        outcomes = [(o.writes, o.picks, o.violations, not self.checked.isdisjoint(o.violations)) for o in rec.outcomes]
        self.memo.add_action(a, a, state, rec.reads, outcomes, f"action {ai.label}")

    def _record_invariant(self, state: State, j: int) -> bool:
        holds, reads = self.inst.record_invariant(state, self.names[j])
        self.memo.add_invariant(len(self.ais) + j, state, reads, holds, f"invariant {self.names[j]}")
        return holds

    def _cross_check(self, node: int) -> None:
        """Expand stored state ``node`` through the Python semantics and compare with the memo (OWN067 if they differ)."""
        row = [int(w) for w in self.store.row(node)]
        state = self.codec.unpack(row)
        memo = self.memo
        self.cross_checks += 1
        changed = data_changed(self.inst, self.data_before, "the search")
        if changed is not None:
            raise changed
        for a, ai in enumerate(self.ais):
            python = [(sc.state, sc.picks) for sc in self.inst.successors_of(state, ai)]
            leaf = _leaf_of(memo, a, row, self.codec)
            if leaf < 0:
                continue  # not memoised yet for these values: the next miss records it
            mine = []
            for o in range(int(memo.node_a[leaf]), int(memo.node_a[leaf]) + int(memo.node_b[leaf])):
                words = list(row)
                for w in range(int(memo.out_w0[o]), int(memo.out_w0[o]) + int(memo.out_wn[o])):
                    wd = int(memo.w_word[w])
                    words[wd] = (words[wd] & int(memo.w_clear[w])) | int(memo.w_set[w])
                mine.append((self.codec.unpack(words), memo.out_picks[o]))
            if mine != python:
                raise OwnershipError(
                    Code.SPEC_IMPURE,
                    f"action {ai.label} did something different in a state that agrees on every cell it read "
                    "where it ran before: it depends on something other than the state variables it reads "
                    "(a module global, a cached helper); read every input through the state variables",
                    ai.action.file, ai.action.line,
                )
        for j, name in enumerate(self.names):
            leaf = _leaf_of(memo, len(self.ais) + j, row, self.codec)
            if leaf >= 0 and bool(memo.node_a[leaf]) != self.inst.holds(state, name):
                inv = self.inst.spec.invariants[name]
                raise OwnershipError(
                    Code.SPEC_NONDETERMINISTIC,
                    f"invariant {name} is not a deterministic function of the state: evaluated again in a state that "
                    "agrees on every cell it read where it was evaluated before, it gave the opposite value; read "
                    "every input through the state variables", inv.file, inv.line,
                )

    # -- the search ------------------------------------------------------------------
    def run(self) -> KernelRun:
        """Search to the end or a stop; the memory meter is closed either way."""
        try:
            return self._levels()
        finally:
            self.meter.close()

    def _levels(self) -> KernelRun:
        inst, codec, store, io = self.inst, self.codec, self.store, self.io
        limits = self.limits
        init = inst.init_state
        store.add_initial(codec.pack(init))
        io[loop.IO_NODES] = 1
        io[loop.IO_FINGERPRINTS] = 1 if store.fingerprints else 0
        for j in range(len(self.names)):
            if not self._record_invariant(init, j):
                return self._finish(StopReason.VIOLATION, 0, 0, self.names[j], 0)
        io[loop.IO_MAX_STATES] = -1 if limits.max_states is None else limits.max_states
        io[loop.IO_DEADLOCK] = 1 if self.deadlock else 0
        io[loop.IO_SKIP_DEAD] = -1
        deadline = self.start + limits.max_seconds if limits.max_seconds is not None else None
        last_report = time.perf_counter()
        next_check = 0
        level, lo, hi = 0, 0, 1
        level_start = time.perf_counter()
        try:
            while lo < hi:
                if limits.max_depth is not None and level >= limits.max_depth:
                    return self._finish(StopReason.DEPTH_LIMIT, None, level, None, level)
                cursor = lo
                while cursor < hi:
                    if cursor >= next_check:
                        # The first states one at a time, then one in CROSS_CHECK_EVERY.
                        self._cross_check(cursor)
                        next_check = cursor + 1 if cursor < EVERY_STATE else cursor + CROSS_CHECK_EVERY
                    io[loop.IO_CURSOR] = cursor
                    io[loop.IO_END] = min(hi, cursor + CHUNK, max(next_check, cursor + 1))
                    status = self._call()
                    cursor = int(io[loop.IO_CURSOR])
                    stop = self._handle(status, cursor, level)
                    if stop is not None:
                        return stop
                    now = time.perf_counter()
                    if deadline is not None and now > deadline:
                        return self._finish(StopReason.TIME_LIMIT, None, level + 1, None, level)
                    used = self.meter()
                    self.peak_memory = max(self.peak_memory, used)
                    if limits.max_memory is not None and used > limits.max_memory:
                        return self._finish(StopReason.MEMORY_LIMIT, None, level + 1, None, level)
                    if self.progress is not None and now - last_report >= limits.progress_every:
                        last_report = now
                        self.progress(self._progress(now, level, lo, hi, cursor, level_start, used))
                level_start = time.perf_counter()
                lo, hi = hi, int(io[loop.IO_NODES])
                store.next_level(lo, hi)
                if lo < hi:
                    level += 1
            return self._finish(StopReason.EXHAUSTED, None, level, None, level)
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, the wall-clock limit
            return self._finish(stop_reason_of(exc), None, level + 1, None, level)
        except MemoryError:  # a ulimit below the budget: what was covered still stands
            self.scratch = np.zeros((0, self.codec.words), dtype=np.uint64)  # room to build the result
            return self._finish(StopReason.MEMORY_LIMIT, None, level + 1, None, level)

    def _progress(self, now: float, level: int, lo: int, hi: int, cursor: int, level_start: float,
                  used: int) -> Progress:
        n = int(self.io[loop.IO_NODES])
        done = cursor - lo
        rate = done / (now - level_start) if now > level_start and done else 0.0
        left = hi - cursor
        return Progress(now - self.start, n, int(self.io[loop.IO_TRANSITIONS]), level, n - cursor, memory=used,
                        bytes_per_state=max(used - self.start_memory, 0) / n if n else None,
                        level_states=hi - lo, level_left=left, level_seconds_left=left / rate if rate else None)

    def _call(self) -> int:
        m, s, io = self.memo, self.store, self.io
        io[loop.IO_ROW_BASE] = s.row_base
        io[loop.IO_LINK_BASE] = s.link_base
        status = int(loop.expand(
            io, s.states, s.parent, s.via, s.table, s.fps, self.scratch, self.scratch_out, self.scratch_bad,
            m.roots, len(self.ais), len(self.names), self.codec.cell_word, self.codec.cell_shift, self.codec.cell_mask,
            m.node_cell, m.node_a, m.node_b, m.child, m.h_node, m.h_code, m.h_child,
            m.out_ai, m.out_w0, m.out_wn, m.out_flag, m.w_word, m.w_clear, m.w_set,
            self.act_of, self.fired, self.enabled, self.last,
        ))
        s.after_call(int(io[loop.IO_NODES]))
        return status

    def _handle(self, status: int, cursor: int, level: int) -> KernelRun | None:
        """Act on a status of the compiled loop; a result if the search ends."""
        io, codec, store = self.io, self.codec, self.store
        if status == loop.DONE:
            return None
        if status == loop.MISS_ACTION:
            self._record_action(codec.unpack(store.row(cursor)), int(io[loop.IO_A]))
        elif status == loop.MISS_INVARIANT:
            self._record_invariant(codec.unpack(self.scratch[int(io[loop.IO_A])]), int(io[loop.IO_B]))
        elif status == loop.VIOLATION:
            return self._finish(StopReason.VIOLATION, int(io[loop.IO_A]), level + 1, self.names[int(io[loop.IO_B])], level)
        elif status == loop.FLAGGED:
            return self._flagged(cursor, int(io[loop.IO_A]), level)
        elif status == loop.DEAD_END:
            if self.inst.is_terminal(codec.unpack(store.row(cursor))):
                io[loop.IO_SKIP_DEAD] = cursor
            else:
                return self._finish(StopReason.DEADLOCK, cursor, level, "deadlock", level)
        elif status == loop.STATE_LIMIT:
            return self._finish(StopReason.STATE_LIMIT, None, level + 1, None, level)
        elif status == loop.GROW_SCRATCH:
            n = 2 * len(self.scratch_out)
            self.scratch = np.zeros((n, codec.words), dtype=np.uint64)
            self.scratch_out = np.zeros(n, dtype=np.int32)
            self.scratch_bad = np.zeros(n, dtype=np.int32)
        elif status == loop.GROW_STORE:
            store.grow(int(io[loop.IO_A]), int(io[loop.IO_NODES]))
        return None

    def _flagged(self, src: int, outcome: int, level: int) -> KernelRun:
        """A step whose event flags a checked invariant: a violation, one step past state ``src``."""
        memo = self.memo
        ai = self.ais[int(memo.out_ai[outcome])]
        picks = memo.out_picks[outcome]
        state = self.codec.unpack(self.store.row(src))
        succ = self.inst.run_with_picks(state, ai, picks)
        if succ is None:  # the memo and the Python semantics disagree: never silently
            raise OwnershipError(Code.SPEC_NONDETERMINISTIC,
                                 f"action {ai.label} no longer takes the step the search recorded for it")
        detail = self.inst.step_violated(succ, self.names)
        steps = self._path(src) + [(ai.index, picks)]
        run = self._finish(StopReason.VIOLATION, int(self.io[loop.IO_NODES]), level + 1, detail, level, steps)
        run.states += 1  # the step's state is numbered, as the Python search numbers it, even if seen before
        return run

    def _path(self, node: int) -> list[tuple[int, tuple[Any, ...]]]:
        out: list[tuple[int, tuple[Any, ...]]] = []
        memo = self.memo
        while node > 0:
            node, o = self.store.links(node)
            out.append((int(memo.out_ai[o]), memo.out_picks[o]))
        out.reverse()
        return out

    def _finish(self, reason: StopReason, node: int | None, depth: int, detail: Any, level: int,
                steps: list[tuple[int, tuple[Any, ...]]] | None = None) -> KernelRun:
        io = self.io
        n = int(io[loop.IO_NODES])
        if steps is None and node is not None:
            steps = self._path(node)
        if reason not in (StopReason.TIME_LIMIT, StopReason.INTERRUPTED, StopReason.MEMORY_LIMIT):
            self._recheck(n)
        return KernelRun(
            reason=reason, node=node, depth=depth, detail=detail, level=level, states=n,
            transitions=int(io[loop.IO_TRANSITIONS]), expanded=int(io[loop.IO_EXPANDED]),
            seconds=time.perf_counter() - self.start, complete=reason is StopReason.EXHAUSTED,
            fired=[int(x) for x in self.fired], enabled=[int(x) for x in self.enabled], steps=steps,
            words=self.codec.words, bits=self.codec.bits,
            storage=self.store.describe(n, int(io[loop.IO_TRANSITIONS])),
            misses=self.memo.misses, memo_bytes=self.memo.nbytes, store_bytes=self.store.nbytes(n),
            peak_memory=max(self.peak_memory, self.meter()), start_memory=self.start_memory,
            notes=[self._audit_note(int(io[loop.IO_EXPANDED]))],
        )

    def _recheck(self, n: int) -> None:
        """The first states cross-checked again at the end (exact storage keeps their rows), and the module data."""
        if not self.store.fingerprints:
            for node in range(min(n, RECHECK_AT_END)):
                self._cross_check(node)
        changed = data_changed(self.inst, self.data_before, "the search")
        if changed is not None:
            raise changed

    def _audit_note(self, expanded: int) -> str:
        """Which states the determinism audit compared with a fresh Python expansion, for the verdict."""
        if expanded <= EVERY_STATE:
            return (f"determinism audited on every one of {expanded:,} expanded states (each expanded again by "
                    "the Python semantics and compared with the memo)")
        return (f"determinism audited on the first {EVERY_STATE:,} expanded states and 1 in {CROSS_CHECK_EVERY:,} "
                f"after ({self.cross_checks:,} Python expansions compared with the memo)")


def _leaf_of(memo: Memo, root: int, row: list[int], codec: Codec) -> int:
    """The leaf ``row`` leads to under ``root`` (the compiled walk, in Python), or -1."""
    node = int(memo.roots[root])
    while node >= 0:
        c = int(memo.node_cell[node])
        if c < 0:
            return node
        code = (row[int(codec.cell_word[c])] >> int(codec.cell_shift[c])) & int(codec.cell_mask[c])
        node = memo._get(node, code)
    return -1

