"""One worker's part of a sharded breadth-first search: the states whose key hashes to it.

A shard owns the states whose canonical key :func:`shard_of` maps to it: it
keeps their seen-set, their parent links and, level by level, the ones
waiting to be expanded.  It expands its own states, keeps the successors it
owns and batches the others for their owners (:meth:`Shard.expand`); after
the exchange it takes in the batches sent to it (:meth:`Shard.receive`).

Order keys make the parallel search the sequential one.  Every transition
of a level has the key ``rank << KEY_BITS | j``: the rank of its source
among the level's states (the sequential search's order) and its position
among that state's successors.  The sequential search meets a level's
events in key order, so a new state is the one its smallest key reaches,
the next level's order is the order of those keys, and the first violation
is the event with the smallest key; the coordinator
(:mod:`ownership.engines.parallel.levels`) compares them across shards at
the level's barrier.  What the sequential search had counted when it
stopped (states, transitions, actions fired) is recounted from each shard's
record of the level up to that key (:meth:`Shard.tally`).

A shard is built from picklable data (:class:`ShardConfig`) in its own
process (or Ray actor): it loads the spec from its file and builds its own
instance, canonical form, invariant checker, symmetry check and
determinism audit.
"""

from __future__ import annotations

import marshal
import pickle
import time
import zlib
from array import array
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ownership.core.memory import Meter, peak_resident
from ownership.core.result import StopReason
from ownership.engines.coverage import ActionTally
from ownership.engines.symevery import EveryState
from ownership.engines.symmetry import make_canonicalizer, plan_symmetry
from ownership.errors import Code, OwnershipError
from ownership.lang.audit import SearchAudit
from ownership.lang.description import InstanceDescription
from ownership.lang.instance import State
from ownership.lang.invariants import select_invariants

KEY_BITS = 20
"""Bits of an order key for the successor's position among its source's successors."""
SENT_SLOTS = 1 << 18
"""Slots of a shard's cache of the keys it sent (a power of two): revisits of those are not sent again."""
CHECK_EVERY = 256
"""Expansions between readings of the clock and the memory."""


def shard_of(key: Any, count: int) -> int:
    """The shard that owns a state with this canonical key: the same in every process and on every machine.

    ``hash()`` will not do: ``None`` hashes by address, strings by a per-process seed.
    marshal's version 2 writes no back-references, so equal keys give equal bytes.
    """
    return zlib.crc32(marshal.dumps(key, 2)) % count


@dataclass(frozen=True)
class ShardConfig:
    """What a worker needs to build its shard: picklable, so it travels to a process or a Ray actor."""

    description: InstanceDescription
    index: int
    count: int
    symmetry: bool
    invariants: tuple[str, ...]
    """The checked invariants, by name."""
    deadlock: bool
    deadline: float | None = None
    """The wall-clock time (``time.time()``) past which a level stops: the run's limit."""
    max_memory: int | None = None
    """This worker's share of the resident-memory budget, in bytes."""
    progress_every: float = 1.0
    forked: bool = False
    """Every worker is forked from the coordinator, so ``hash()`` is the same in each (the same string seed, the same
    address of ``None``): the shard is ``hash(key) % count``, several times cheaper than :func:`shard_of`."""


@dataclass(frozen=True)
class Candidate:
    """A reason to stop one shard found in a level: the coordinator keeps the one with the smallest key."""

    key: int
    reason: StopReason
    ref: int
    """The state it is about (a new state, a dead end), or a flagged step's source, as a global reference."""
    depth: int
    detail: Any
    step: tuple[int, tuple[Any, ...]] | None = None
    """A flagged step: (action instance, picks) from ``ref``."""


@dataclass(frozen=True)
class Expanded:
    """What a shard's expansion of its part of a level produced."""

    outboxes: tuple[bytes, ...]
    """Per shard, the pickled successors it owns (empty for this shard's own)."""
    candidate: Candidate | None
    stopped: StopReason | None
    """A limit reached inside the level (time, memory): the level is not complete."""
    transitions: int
    expanded: int
    fired: tuple[int, ...]
    enabled: tuple[int, ...]
    memory: int


@dataclass(frozen=True)
class Received:
    """The new states a shard took in: their order keys, ascending, and the first that violates an invariant."""

    keys: bytes
    """``array('q')`` of the order keys."""
    candidate: Candidate | None


class Shard:
    """The states one worker owns and the work on them (see the module docstring)."""

    def __init__(self, config: ShardConfig, report: Callable[[tuple[Any, ...]], None] | None = None) -> None:
        self.config = config
        self.me, self.count = config.index, config.count
        self.report = report
        inst = self.inst = config.description.instantiate()
        plan = plan_symmetry(inst)
        self.key = make_canonicalizer(inst, plan) if config.symmetry else None
        self.reduced = bool(config.symmetry and (plan.permuted or plan.sorted))
        self.names = tuple(i.name for i in select_invariants(inst, config.invariants))
        self.checked = frozenset(self.names)
        from ownership.engines.explore import invariant_checker

        self.first_violation = invariant_checker(inst, self.names)
        audit = self.audit = SearchAudit(inst)
        inner = inst.expand

        def audited(state: State) -> Any:  # as the sequential search: the symmetry check's expansions are audited too
            out = inner(state)
            audit(state, out)
            return out

        self.every: EveryState | None = None
        expand: Callable[[State], Any] = audited
        if self.reduced:
            self.every = EveryState(inst, make_canonicalizer(inst, plan, exact=True), (*plan.permuted, *plan.sorted),
                                    self.names, self.first_violation, expand)
            expand = self.every
        self.expand_state = expand
        self.modes = ExitStack()
        self.modes.enter_context(inst.mode(recording=False, choice_reduction=plan.sorted if config.symmetry else ()))
        self.act_of = ActionTally(inst).act_of
        self.n_actions = len(inst.spec.actions)
        self.seen: dict[Any, int] = {}
        # A key's value in `seen` is ~n for the n-th state ever queued (pending) here; the ones queued this level
        # are those with n >= pending_base.  A pending entry sits at pending[n - pending_base] until the level's
        # sort; after it every entry is stored, so raising the base marks them all stored without touching `seen`
        # again (each dict operation hashes the whole key, the costliest step of a shard's bookkeeping).
        self.pending_base = 0
        self.parent = array("q")
        self.action = array("i")
        self.picks: dict[int, tuple[Any, ...]] = {}
        self.next_states: list[tuple[int, State]] = []
        self.level = 0
        # Keys sent lately, one per slot by hash: a later successor with the same key is known to its owner already.
        self.sent: list[Any] = [None] * SENT_SLOTS
        # The level's new states, by order key; ``seen`` maps each to ``~index`` here until it is stored.
        self.pending: list[tuple[int, Any, State, int, int, tuple[Any, ...]]] = []
        # This level's record, for a count up to a key: per source its rank and where its actions start.
        self.rec_rank = array("q")
        self.rec_start = array("q")
        self.rec_acts = array("i")
        self.meter = Meter()
        self.meter.__enter__()
        self.start_memory = self.meter()

    # -- the level's steps ---------------------------------------------------------------------------

    def ready(self) -> bool:
        """Built (a pool asks once, so a failure to build is raised before the search starts)."""
        return True

    def begin(self) -> tuple[bool, Candidate | None]:
        """Store the initial state if this shard owns it; whether it does, and a violation there."""
        init = self.inst.init_state
        h = init if self.key is None else self.key(init)
        if (hash(h) % self.count if self.config.forked else shard_of(h, self.count)) != self.me:
            return False, None
        self.seen[h] = 0
        self.parent.append(-1)
        self.action.append(-1)
        self.next_states.append((0, init))
        bad = self._violation(init, True)
        return True, (None if bad is None else Candidate(-1, StopReason.VIOLATION, self.me, 0, bad))

    def expand(self, ranks: bytes) -> Expanded:
        """Expand this shard's states of the level (ranked by ``ranks``, ascending) in rank order."""
        level_ranks = array("q")
        level_ranks.frombytes(ranks)
        current, self.next_states = self.next_states, []
        me, count, key, seen, pending = self.me, self.count, self.key, self.seen, self.pending
        add_pending, queue = pending.append, seen.setdefault
        base = self.pending_base
        checked, act_of, expand = self.checked, self.act_of, self.expand_state
        outboxes: list[list[tuple[Any, ...]]] = [[] for _ in range(count)]
        sent, mask = self.sent, SENT_SLOTS - 1
        rec_rank, rec_start, rec_acts = array("q"), array("q"), array("i")
        self.rec_rank, self.rec_start, self.rec_acts = rec_rank, rec_start, rec_acts
        depth = self.level + 1
        candidate: Candidate | None = None
        stopped: StopReason | None = None
        transitions = expanded = 0
        deadline, budget = self.config.deadline, self.config.max_memory
        forked = self.config.forked
        last_report = started = time.time()
        for (lid, st), rank in zip(current, level_ranks, strict=True):
            succs = expand(st)
            ref = lid * count + me
            rec_rank.append(rank)
            rec_start.append(len(rec_acts))
            transitions += len(succs)
            rec_acts.extend([act_of[ai.index] for ai, _ in succs])
            okey_base = rank << KEY_BITS
            for j, (ai, sc) in enumerate(succs):
                if sc.violations and not checked.isdisjoint(sc.violations):
                    candidate = Candidate(okey_base | j, StopReason.VIOLATION, ref, depth,
                                          self.inst.step_violated(sc, self.names), (ai.index, sc.picks))
                    break
                h = sc.state if key is None else key(sc.state)
                hh = hash(h)
                dest = hh % count if forked else shard_of(h, count)
                if dest == me:
                    known = len(seen)
                    queue(h, ~(base + len(pending)))
                    if len(seen) != known:  # new; sources come in key order: the first is the smallest
                        add_pending((okey_base | j, h, sc.state, ref, ai.index, sc.picks))
                else:
                    slot = hh & mask
                    if sent[slot] == h:
                        continue
                    sent[slot] = h
                    outboxes[dest].append((h, None if key is None else sc.state, okey_base | j, ref, ai.index, sc.picks))
            if candidate is not None:
                break
            if not succs and self.config.deadlock and not self.inst.is_terminal(st):
                candidate = Candidate(okey_base, StopReason.DEADLOCK, ref, self.level, "deadlock")
                break
            expanded += 1
            if not expanded % CHECK_EVERY:
                now = time.time()
                if deadline is not None and now > deadline:
                    stopped = StopReason.TIME_LIMIT
                    break
                if budget is not None and self.meter() > budget:
                    stopped = StopReason.MEMORY_LIMIT
                    break
                if self.report is not None and now - last_report >= self.config.progress_every:
                    last_report = now
                    self.report(("progress", self.me, expanded, len(current), now - started, self.meter()))
        rec_start.append(len(rec_acts))
        fired, enabled = self._counts(None)
        blobs = tuple(pickle.dumps(box, pickle.HIGHEST_PROTOCOL) if box else b"" for box in outboxes)
        return Expanded(blobs, candidate, stopped, transitions, expanded, fired, enabled, self.meter())

    def receive(self, batches: list[bytes]) -> Received:
        """Take in the successors the other shards sent; store the new ones in key order and check them."""
        seen, pending, base = self.seen, self.pending, self.pending_base
        queue = seen.setdefault
        for blob in batches:
            if not blob:
                continue
            for h, st, okey, ref, act, picks in pickle.loads(blob):
                known = len(seen)
                at = queue(h, ~(base + len(pending)))
                if len(seen) != known:
                    pending.append((okey, h, h if st is None else st, ref, act, picks))
                elif at < 0 and ~at >= base and okey < pending[~at - base][0]:
                    # queued at this level: the smallest key reaches it first
                    pending[~at - base] = (okey, h, h if st is None else st, ref, act, picks)
        pending.sort(key=itemgetter(0))
        found, self.pending = pending, []
        keys = array("q")
        candidate: Candidate | None = None
        parent, action, picks_of, nxt = self.parent, self.action, self.picks, self.next_states
        self.pending_base = base + len(found)  # every queued state is stored now (see __init__)
        for okey, _h, st, ref, act, picks in found:
            lid = len(parent)
            parent.append(ref)
            action.append(act)
            if picks:
                picks_of[lid] = picks
            nxt.append((lid, st))
            keys.append(okey)
            if candidate is None:
                bad = self._violation(st, False)
                if bad is not None:
                    candidate = Candidate(okey, StopReason.VIOLATION, lid * self.count + self.me, self.level + 1, bad)
        self.level += 1
        return Received(keys.tobytes(), candidate)

    def tally(self, upto: int) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
        """This level's transitions, expansions and per-action counts up to the order key ``upto``.

        As the sequential search counts when it stops at ``upto``: every
        successor of a source before it, the source's successors up to it,
        the sources before it as expanded.
        """
        rank = upto >> KEY_BITS
        transitions = expanded = 0
        starts = self.rec_start
        for k, r in enumerate(self.rec_rank):
            if r > rank:
                break
            transitions += starts[k + 1] - starts[k]
            expanded += r < rank
        fired, enabled = self._counts(upto)
        return transitions, expanded, fired, enabled

    def _counts(self, upto: int | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
        fired = [0] * self.n_actions
        enabled = [0] * self.n_actions
        starts, acts = self.rec_start, self.rec_acts
        if upto is None:  # the whole level: the common case, counted in C where it can be
            for a, n in Counter(acts).items():
                fired[a] = n
            for k in range(len(self.rec_rank)):
                for a in set(acts[starts[k]:starts[k + 1]]):
                    enabled[a] += 1
            return tuple(fired), tuple(enabled)
        last_rank, last_j = (upto >> KEY_BITS, upto & ((1 << KEY_BITS) - 1)) if upto is not None else (None, 0)
        for k, r in enumerate(self.rec_rank):
            if last_rank is not None and r > last_rank:
                break
            end = starts[k + 1]
            if last_rank is not None and r == last_rank:
                end = min(end, starts[k] + last_j + 1)
            seen_here: set[int] = set()
            for a in acts[starts[k]:end]:
                fired[a] += 1
                seen_here.add(a)
            for a in seen_here:
                enabled[a] += 1
        return tuple(fired), tuple(enabled)

    # -- after the search ----------------------------------------------------------------------------

    def link(self, lid: int) -> tuple[int, int, tuple[Any, ...]]:
        """The parent (a global reference, -1 for the initial state), action instance and picks of a stored state."""
        return self.parent[lid], self.action[lid], self.picks.get(lid, ())

    def finish(self, audit: bool) -> dict[str, Any]:
        """Run the audit's last comparison (``audit``) and say what was checked, for the verdict's notes."""
        if audit:
            self.audit.rerun()
        every = self.every
        out: dict[str, Any] = {
            "audit": (self.audit.expanded, self.audit.audited),
            "warnings": list(self.inst.warnings.values()),
            "memory": (self.start_memory, max(peak_resident(), self.meter())),
        }
        if every is not None:
            out["symmetry"] = every.summary()
        self.modes.close()
        self.meter.close()
        return out

    def _violation(self, state: State, initial: bool) -> str | None:
        try:
            return self.first_violation(state)
        except OwnershipError:
            raise
        except Exception as exc:  # noqa: BLE001 - user code; re-run for the located error
            self.inst.violated(state)
            if initial:
                raise OwnershipError(Code.SPEC_RUNTIME, str(exc)) from None
            raise
