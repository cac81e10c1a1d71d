"""Reference-counted KV blocks shared through per-sequence block tables.

The vocabulary for block managers that share blocks between sequences
(vLLM's ``BlockSpaceManager`` v1: beam search and parallel sampling fork a
sequence, and the child starts with the parent's blocks):

* a **block** has a reference count (``ref``) and a free-list count
  (``free``: 1 while it sits on the free list, 2 after a double free);
* each **sequence** has a **block table**: ``table[seq, i]`` is the block for
  logical block ``i``, and ``len[seq]`` entries are in use.  A table may name
  one block several times: with a sliding window of ``W`` blocks, logical
  block ``i >= W`` reuses the block of ``i % W``;
* the **live window** of a table is what attention reads: its last ``W``
  entries (vLLM's model runner passes ``block_table[-W:]``), or every entry
  without a window.  A block is *referenced* by a sequence when it appears in
  that sequence's live window; ``holders[b]`` is the set of those sequences,
  kept up to date by every operation that changes a table.

The operations are the allocator's (``allocate``, ``incref``, ``decref``) and
the table's (``append``, ``set_entry``, ``truncate``); ``incref`` and ``free``
take a ``per_block`` flag that says whether a table naming one block twice
counts it once (``set(block_table)``) or once per entry.

Every operation is written with spec primitives only (state variables,
``require``, ``s.choose``, ``s.emit``) and without a Python branch on a value
that may be symbolic inside a loop: counts are sums of comparisons, so the
same code runs concretely and over solver terms (the Z3 engines) without
forking once per block and entry.  Slot positions are plain ints: read a
table's length with :meth:`BlockTables.length`, which returns a concrete
length (under the solver, one path per possible length).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ownership.core.events import Alloc, Decref, Free
from ownership.core.schema import PageMark, PoolSchema
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.declarations import Domain, SizeSpec
from ownership.lang.elements import Member, ix
from ownership.lang.guard import Disabled, require
from ownership.lang.model import Spec
from ownership.lang.types import Int, Optional, SetOf
from ownership.vocab.operation import operation

BUILTINS = ("refcount_nonnegative", "free_list_once", "no_free_while_referenced", "refcount_matches_tables")


def all_of(*conds: Any) -> Any:
    """``c1 and c2 and ...`` without branching: a bool concretely, one term under the solver."""
    return sum(conds) == len(conds)


def any_of(*conds: Any) -> Any:
    """``c1 or c2 or ...`` without branching: a bool concretely, one term under the solver."""
    return sum(conds) > 0


def not_(cond: Any) -> Any:
    """``not cond`` without branching: a bool concretely, one term under the solver."""
    return cond == False  # noqa: E712 - also runs on solver terms


def none_of(*conds: Any) -> Any:
    """``not (c1 or c2 or ...)`` without branching: a bool concretely, one term under the solver."""
    return sum(conds) == 0


class BlockTables:
    """Reference-counted blocks and one block table per sequence; see the module docstring.

    ``BlockTables(spec, seqs=Seq, blocks="num_gpu_blocks", slots="max_blocks",
    window="block_sliding_window")`` declares the block domain (symmetric,
    named ``B0, B1, ...``), the slot domain (positions in a table, in order)
    and the variables ``{name}_ref``, ``{name}_free``, ``{name}_holders``,
    ``{name}_table`` and ``{name}_len``.  ``window`` is a parameter name, an
    int, or ``None`` for no sliding window.
    """

    def __init__(
        self,
        spec: Spec,
        seqs: Domain,
        blocks: SizeSpec,
        slots: SizeSpec,
        *,
        window: str | int | None = None,
        name: str = "block",
        prefix: str = "B",
    ) -> None:
        self.spec = spec
        self.seqs = seqs
        self.name = name
        self.window = window
        title = name[:1].upper() + name[1:]
        block_domain = title if name.lower().endswith("block") else f"{title}Block"
        self.Block: Domain = spec.domain(block_domain, blocks, symmetric=True, names=lambda i: f"{prefix}{i}",
                                         doc=f"physical {name} blocks")
        self.Slot: Domain = spec.domain(f"{title}Slot", slots, names=str, doc=f"positions in a {name} table")
        self.ref_var = f"{name}_ref"
        self.free_var = f"{name}_free"
        self.holders_var = f"{name}_holders"
        self.table_var = f"{name}_table"
        self.len_var = f"{name}_len"
        spec.var(self.ref_var, Int, per=self.Block, init=0, doc="reference count (ref_count)")
        spec.var(self.free_var, Int, per=self.Block, init=1, doc="times the block sits on the free list")
        spec.var(self.holders_var, SetOf(seqs), per=self.Block, init=0,
                 doc="sequences whose live window references the block")
        spec.var(self.table_var, Optional(self.Block), per=(seqs, self.Slot), init=None, doc="block table entries")
        spec.var(self.len_var, Int, per=seqs, init=0, doc="entries in use in the block table")
        # Registered so that a trace's schema draws the blocks as a pool (see ``drawn_pools``).
        spec.extensions[f"block_tables:{name}"] = self

    # -- how pictures draw the tables ----------------------------------------------
    @property
    def drawn_requests(self) -> Domain:
        """The domain whose elements hold blocks: a picture's lanes."""
        return self.seqs

    def drawn_pools(self, names: Mapping[str, Sequence[str]]) -> tuple[PoolSchema, ...]:
        """The blocks as a pool for the trace schema: holders are the live windows, the count is ``ref``.

        ``names`` maps each domain to its element names.  Blocks carry no
        content label, so the pool has no content variable.
        """
        return (PoolSchema(self.name, tuple(names[self.Block.name]), self.free_var, self.holders_var, None, None,
                           (PageMark(self.ref_var, "count", "rc"),)),)

    # -- queries -----------------------------------------------------------------
    def width(self, s: Any) -> int | None:
        """The sliding window in blocks (``None``: attention reads the whole table)."""
        w = self.window
        if w is None or isinstance(w, int):
            return w
        return int(getattr(s.params, w))

    def length(self, s: Any, r: Member) -> int:
        """Entries in use in ``r``'s table, as a plain int.

        Under the solver the length is a term; this returns each possible
        value on its own path, so callers can index slots with it.
        """
        n = getattr(s, self.len_var)[r]
        for k in range(s.size(self.Slot) + 1):
            if n == k:
                return k
        raise Disabled  # a length outside the table: not a reachable state

    def live(self, s: Any, n: int) -> range:
        """The slots of a table of length ``n`` that attention reads (its live window)."""
        w = self.width(s)
        return range(n if w is None else max(0, n - w), n)

    def entry(self, s: Any, r: Member, i: int) -> Any:
        """The block at slot ``i`` of ``r``'s table (a term under the solver)."""
        return getattr(s, self.table_var)[r, i]

    def refcount_is(self, s: Any, block: Any, k: int) -> Any:
        """Whether ``block`` (which may be a table entry) has reference count ``k``."""
        ref = getattr(s, self.ref_var)
        return any_of(*[all_of(block == b, ref[b] == k) for b in s.all(self.Block)])

    # -- the allocator ---------------------------------------------------------------
    def allocate(self, s: Any, r: Member) -> int:
        """``BlockAllocator.allocate``: take a free block for ``r`` with reference count 1.

        Not enabled when the free list is empty; which free block is taken is
        a nondeterministic choice.
        """
        free = getattr(s, self.free_var)
        b = self._take_free(s)
        free[b] -= 1
        getattr(s, self.ref_var)[b] = 1
        if s.recording:
            s.emit(Alloc(pool=self.name, req=s.name_of(self.seqs, r), pages=(s.name_of(self.Block, b),)))
        return b

    @operation
    def _take_free(self, s: Any) -> Any:
        """Which free block ``allocate`` takes (a nondeterministic choice; disabled when none is free)."""
        free = getattr(s, self.free_var)
        return s.choose([x for x in s.all(self.Block) if free[x] > 0], label=f"free {self.name}", domain=self.Block)

    def incref(self, s: Any, r: Member, slots: Iterable[int], *, per_block: bool = False) -> None:
        """One more reference to the blocks at ``slots`` of ``r``'s table.

        ``per_block=False`` counts every entry (``for block in table:
        block.ref_count += 1``); ``per_block=True`` counts each distinct block
        once (``for block in set(table)``).
        """
        ref = getattr(s, self.ref_var)
        entries = [self.entry(s, r, i) for i in slots]
        for b in s.all(self.Block):
            hits = sum(e == b for e in entries)
            ref[b] += (hits > 0) if per_block else hits

    def decref(self, s: Any, r: Member, block: Any) -> None:
        """``BlockAllocator.free(block)`` on behalf of ``r``: one reference fewer.

        A block whose count reaches 0 goes back on the free list.  Freeing a
        block whose count is already 0 is the double free vLLM's allocator
        refuses with ``ValueError("Double free!")``: here the count drops to
        -1, which ``refcount_nonnegative`` reports.
        """
        self._drop(s, r, [(b, block == b) for b in s.all(self.Block)])

    def free(self, s: Any, r: Member, slots: Iterable[int], *, per_block: bool = True) -> None:
        """``_free_block_table``: ``decref`` the blocks at ``slots`` of ``r``'s table.

        ``per_block=True`` frees each distinct block once (``for block in
        set(table)``); ``per_block=False`` once per entry.
        """
        entries = [self.entry(s, r, i) for i in slots]
        drops = []
        for b in s.all(self.Block):
            hits = sum(e == b for e in entries)
            drops.append((b, hits > 0 if per_block else hits))
        self._drop(s, r, drops)

    def _drop(self, s: Any, r: Member, drops: list[tuple[int, Any]]) -> None:
        ref = getattr(s, self.ref_var)
        free = getattr(s, self.free_var)
        before = [ref[b] for b in s.all(self.Block)] if s.recording else []
        for b, k in drops:
            # k references fewer; back on the free list if this call took the count to 0.
            ref[b] -= k
            free[b] += all_of(k > 0, ref[b] == 0)
        # Flagged outside the recording branch: a search does not record, and a block freed and
        # taken again within one action leaves no trace in the state.
        holders = getattr(s, self.holders_var)
        if s.checks("refcount_nonnegative"):
            for b, k in drops:
                s.flag("refcount_nonnegative", all_of(k > 0, ref[b] < 0))
        if s.checks("no_free_while_referenced"):
            others = [q for q in s.all(self.seqs) if q != r]
            for b, k in drops:
                used = any_of(*[(holders[b] >> ix(q) & 1) == 1 for q in others]) if others else False
                s.flag("no_free_while_referenced", all_of(k > 0, ref[b] == 0, used))
        if s.recording:
            self._emit_free(s, r, [(b, before[ix(b)]) for b, k in drops if k])

    def _emit_free(self, s: Any, r: Member, dropped: list[tuple[int, int]]) -> None:
        ref = getattr(s, self.ref_var)
        holders = getattr(s, self.holders_var)
        who = s.name_of(self.seqs, r)
        for b, old in dropped:
            page = s.name_of(self.Block, b)
            if ref[b] < 0:
                s.emit(Free(pool=self.name, req=who, pages=(page,), refcount=f"{old}->{ref[b]}",
                            error="Double free!",
                            violates="refcount_nonnegative" if s.checks("refcount_nonnegative") else None))
            elif ref[b] == 0:
                users = [s.name_of(self.seqs, q) for q in s.all(self.seqs) if holders[b] >> ix(q) & 1 and q != r]
                bad = bool(users) and s.checks("no_free_while_referenced")
                s.emit(Free(pool=self.name, req=who, pages=(page,), refcount=f"{old}->0",
                            still_used_by=tuple(users), violates="no_free_while_referenced" if bad else None))
            else:
                s.emit(Decref(pool=self.name, req=who, page=page, refcount=f"{old}->{ref[b]}"))

    # -- the table -------------------------------------------------------------------
    def append(self, s: Any, r: Member, block: Any) -> None:
        """``block_table.append(block)``: one more entry in ``r``'s table."""
        n = self.length(s, r)
        require(n < s.size(self.Slot))
        getattr(s, self.table_var)[r, n] = block
        getattr(s, self.len_var)[r] = n + 1
        self.refresh(s, r)

    def set_entry(self, s: Any, r: Member, i: int, block: Any) -> None:
        """``block_table[i] = block`` (copy-on-write replacing an entry)."""
        getattr(s, self.table_var)[r, i] = block
        self.refresh(s, r)

    def copy_table(self, s: Any, src: Member, dst: Member) -> int:
        """``block_tables[dst] = block_tables[src].copy()``; returns the length."""
        n = self.length(s, src)
        table = getattr(s, self.table_var)
        for i in s.all(self.Slot):
            table[dst, i] = table[src, i] if i < n else None
        getattr(s, self.len_var)[dst] = n
        self.refresh(s, dst)
        return n

    def truncate(self, s: Any, r: Member) -> None:
        """``del block_tables[r]``: ``r``'s table is empty again (references are not touched)."""
        table = getattr(s, self.table_var)
        for i in s.all(self.Slot):
            table[r, i] = None
        getattr(s, self.len_var)[r] = 0
        self.refresh(s, r)

    def refresh(self, s: Any, r: Member) -> None:
        """Recompute which blocks ``r``'s live window references (``holders``)."""
        n = self.length(s, r)
        holders = getattr(s, self.holders_var)
        entries = [self.entry(s, r, i) for i in self.live(s, n)]
        bit = 1 << ix(r)
        for b in s.all(self.Block):
            present = sum(e == b for e in entries) > 0
            holders[b] = (holders[b] & ~bit) | (present * bit)

    # -- built-in invariants -----------------------------------------------------------
    def invariants(self, *names: str, spec: Spec | None = None) -> None:
        """Register built-in invariants by name (all four when none are named).

        ``spec`` registers them on a spec derived from the one the tables were
        declared in (a fixed version checking a stronger property).
        """
        builtins = self._builtins()
        for n in names or BUILTINS:
            if n not in builtins:
                file, line = caller_location(2)
                raise OwnershipError(Code.UNKNOWN_INVARIANT, f"no built-in invariant {n!r} (known: {', '.join(BUILTINS)})",
                                     file, line)
            (spec or self.spec).invariant(builtins[n], name=n)

    def _builtins(self) -> dict[str, Callable[[Any], bool]]:
        Block, seqs = self.Block, self.seqs
        ref_var, free_var, holders_var = self.ref_var, self.free_var, self.holders_var

        def refcount_nonnegative(s: Any) -> bool:
            """No block's reference count drops below zero (vLLM: ValueError "Double free!")."""
            ref = getattr(s, ref_var)
            return all(ref[b] >= 0 for b in s.all(Block))

        def free_list_once(s: Any) -> bool:
            """A block sits on the free list at most once."""
            free = getattr(s, free_var)
            return all(free[b] <= 1 for b in s.all(Block))

        def no_free_while_referenced(s: Any) -> bool:
            """No block is on the free list while its count is positive or a live table references it."""
            ref, free, holders = getattr(s, ref_var), getattr(s, free_var), getattr(s, holders_var)
            return all(any_of(free[b] == 0, all_of(ref[b] <= 0, holders[b] == 0)) for b in s.all(Block))

        def refcount_matches_tables(s: Any) -> bool:
            """Every block's reference count is the number of sequences whose live window references it."""
            ref, holders = getattr(s, ref_var), getattr(s, holders_var)
            # (bit == 1) is a bool, so the sum is an ordinary int (not a narrow set-sized one) under the solver.
            return all(ref[b] == sum((holders[b] >> ix(q) & 1) == 1 for q in s.all(seqs)) for b in s.all(Block))

        return {
            "refcount_nonnegative": refcount_nonnegative,
            "free_list_once": free_list_once,
            "no_free_while_referenced": no_free_while_referenced,
            "refcount_matches_tables": refcount_matches_tables,
        }


__all__ = ["BUILTINS", "BlockTables", "all_of", "any_of", "none_of", "not_"]
