"""Direct symbolic encodings of the ownership vocabulary's operations.

When a spec runs under the Z3 engines, each vocabulary operation marked
``@operation`` (:mod:`ownership.vocab.operation`) lands on the encoding
registered here with ``@encodes`` instead of running page by page (which
would fork once per page and per choice).  Each encoding must mean exactly
what its concrete body does: every counterexample the solver finds is
replayed through the concrete code and compared cell by cell, so a mismatch
here is reported loudly, never silently trusted.

Page sets are :class:`SymPages`: a membership term and a page-table position
term per page.  Imported on the first symbolic call of an operation (it
imports z3); it imports the symbolic layer (:mod:`ownership.symbolic`),
never the engines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import z3

from ownership.lang.guard import Disabled, require
from ownership.symbolic.terms import Sym, b2i, int_of, ival, to_z3
from ownership.symbolic.view import SymView
from ownership.vocab import pool as _pool
from ownership.vocab import prefix as _prefix
from ownership.vocab.inflight import InflightWrites
from ownership.vocab.operation import encodes
from ownership.vocab.pool import PagePool, check_count
from ownership.vocab.prefix import PrefixIndex
from ownership.vocab.refcount import BlockTables


@dataclass
class SymPages:
    """A symbolic set of pages of one pool, each with its page-table position.

    What ``alloc`` and ``pages_of`` return under the Z3 engines.  It behaves
    as the list the concrete operations return: ``for p in pages`` visits
    the pages in page-table order and ``pages[i]`` is the page at position
    ``i``; each such page is a solver term (an ``If`` chain over the pool's
    pages), usable as an index of the spec's tables and in the vocabulary's
    operations.  ``rank[p]`` is page ``p``'s position counted from 0 among
    the set's pages; ``length`` is the number of pages when it is fixed.
    """

    pool: str
    member: list[z3.BoolRef]
    position: list[z3.ExprRef]
    rank: list[z3.ExprRef] | None = None
    length: int | None = None
    ex: Any = None

    def _ranks(self) -> list[z3.ExprRef]:
        if self.rank is None:
            n = len(self.member)
            width = self.position[0].size() if n else 8
            self.rank = []
            for p in range(n):
                # Stable sort by position, as the concrete pages_of sorts (ties by page index).
                before = [z3.And(self.member[q], z3.Or(self.position[q] < self.position[p],
                                                        z3.And(self.position[q] == self.position[p], z3.BoolVal(q < p))))
                          for q in range(n) if q != p]
                self.rank.append(sum((z3.If(b, z3.BitVecVal(1, width), z3.BitVecVal(0, width)) for b in before),
                                     z3.BitVecVal(0, width)))
        return self.rank

    def count(self) -> Any:
        """The number of pages: an int when fixed, else a solver term."""
        if self.length is not None:
            return self.length
        width = self.position[0].size() if self.member else 8
        return Sym(sum((b2i(m, width) for m in self.member), z3.BitVecVal(0, width)), self.ex)

    def _at(self, i: int) -> Sym:
        """The page at position ``i`` (assumed to exist)."""
        n = len(self.member)
        ranks = self._ranks()
        sort = z3.BitVecSort(max(2, n.bit_length() + 1))
        term: z3.ExprRef = z3.BitVecVal(n - 1, sort)
        for p in reversed(range(n - 1)):
            term = z3.If(z3.And(self.member[p], ranks[p] == i), z3.BitVecVal(p, sort), term)
        return Sym(term, self.ex)

    def _has(self, i: int) -> bool:
        """Whether position ``i`` exists (forks when the number of pages is symbolic)."""
        if self.length is not None:
            return i < self.length
        if i >= len(self.member):
            return False
        return bool(self.count() > i)

    def __iter__(self) -> Any:
        i = 0
        while self._has(i):
            yield self._at(i)
            i += 1

    def __getitem__(self, i: Any) -> Sym:
        if not isinstance(i, int):
            raise TypeError("index a page set with an int position")
        if i < 0:
            raise IndexError("negative positions of a page set are not supported symbolically")
        if self.length is not None:
            if i >= self.length:
                raise IndexError(f"page set index {i} out of range (it has {self.length} pages)")
        else:
            # As an index held in state: refused unless the set has a page at i wherever this runs.
            count = self.count()
            self.ex.view.check_index(z3.Not(z3.ULE(count.e, z3.BitVecVal(i, count.e.size()))) if i < len(self.member)
                                     else z3.BoolVal(False), f"page set index {i} may be past the end of the set")
        return self._at(i)

    def __len__(self) -> int:
        if self.length is not None:
            return self.length
        count = self.count()
        for k in range(len(self.member)):  # one path per possible size, as a loop over the set forks
            if count == k:
                return k
        return len(self.member)

    def __bool__(self) -> bool:
        return self.length > 0 if self.length is not None else bool(self.count() > 0)

    def __add__(self, other: Any) -> list[Any]:
        """``pages + more``: a list, as the concrete page lists concatenate (a page in both is listed twice)."""
        return [*self, *other]

    def __radd__(self, other: Any) -> list[Any]:
        return [*other, *self]

    def __contains__(self, page: Any) -> bool:
        if isinstance(page, Sym):
            return bool(Sym(z3.Or(*[z3.And(m, _eq_page(page.e, p)) for p, m in enumerate(self.member)]), self.ex))
        return bool(Sym(self.member[int(page)], self.ex))


def _eq_page(e: z3.ExprRef, p: int) -> z3.BoolRef:
    """``e == p`` for a page term of any width."""
    bits = max(e.size(), p.bit_length() + 2)  # type: ignore[attr-defined]
    if bits > e.size():  # type: ignore[attr-defined]
        e = z3.SignExt(bits - e.size(), e)  # type: ignore[attr-defined]
    return e == z3.BitVecVal(p, bits)  # type: ignore[no-any-return]


def _int(s: SymView, x: Any) -> z3.ExprRef:
    if isinstance(x, Sym):
        return x.e if not z3.is_bool(x.e) else b2i(x.e, s.width)
    return ival(int(x), s.width)


def _count_term(s: SymView, n: Any, what: str) -> z3.ExprRef:
    """A count of pages as a term; a negative one is an error, as in the concrete body (see :func:`check_count`)."""
    check_count(n, what, s)
    return _int(s, n)


def _checked_sum(s: SymView, terms: Sequence[z3.ExprRef]) -> z3.ExprRef:
    """The sum of integer terms, each addition recorded as an overflow point (cells are unbounded)."""
    out: z3.ExprRef = ival(0, s.width)
    for t in terms:
        s.no_overflow(z3.And(z3.BVAddNoOverflow(out, t, True), z3.BVAddNoUnderflow(out, t)))
        out = out + t
    return out


def _cells(s: SymView, var: str) -> tuple[int, int]:
    lay = s.layout(var)
    return lay.offset, lay.length


def _terms(s: SymView, var: str) -> list[z3.ExprRef]:
    off, n = _cells(s, var)
    return [s.cell_term(off + i) for i in range(n)]


def _bit(h: z3.BitVecRef, r: int) -> z3.BoolRef:
    return z3.Extract(r, r, h) == 1


def as_pages(s: SymView, pool: PagePool, pages: Any) -> SymPages:
    """A concrete list of pages (in order) or a SymPages as SymPages."""
    if isinstance(pages, SymPages):
        return pages
    n = s.size(pool.Page)
    listed = list(pages)
    if any(isinstance(p, Sym) for p in listed):
        # Pages chosen by solver terms (elements of a returned page set): page q is in the
        # list where some entry equals it, at the position of the first such entry.
        member: list[z3.BoolRef] = []
        position: list[z3.ExprRef] = []
        for q in range(n):
            eqs = [_eq_page(p.e, q) if isinstance(p, Sym) else z3.BoolVal(int(p) == q) for p in listed]
            pos: z3.ExprRef = ival(-1, s.width)
            for i in reversed(range(len(listed))):
                pos = z3.If(eqs[i], ival(i, s.width), pos)
            member.append(z3.Or(*eqs) if eqs else z3.BoolVal(False))
            position.append(pos)
        return SymPages(pool.name, member, position, ex=s._enc.explorer)
    return SymPages(
        pool.name,
        [z3.BoolVal(p in listed) for p in range(n)],
        [ival(listed.index(p) if p in listed else -1, s.width) for p in range(n)],
        length=len(listed), ex=s._enc.explorer,
    )


@encodes(PagePool.available)
def available(s: SymView, pool: PagePool) -> Sym:
    return Sym(_checked_sum(s, _terms(s, pool.free_var)), s._enc.explorer)


@encodes(PagePool.pages_of)
def pages_of(s: SymView, pool: PagePool, r: int) -> SymPages:
    holders = _terms(s, pool.holders_var)
    slots = _terms(s, pool.slot_var)
    return SymPages(pool.name, [_bit(h, r) for h in holders], list(slots), ex=s._enc.explorer)


@encodes(PagePool.alloc)
def alloc(s: SymView, pool: PagePool, r: int, n: Any, first_slot: int = 0) -> SymPages:
    free_off, size = _cells(s, pool.free_var)
    hold_off, _ = _cells(s, pool.holders_var)
    slot_off, _ = _cells(s, pool.slot_var)
    check_count(first_slot, f"{pool.name}.alloc: the first slot (-1 marks a page no table holds)")
    n_term = _count_term(s, n, f"{pool.name}.alloc: the number of pages")
    free = [s.cell_term(free_off + p) for p in range(size)]
    s.require_term(_checked_sum(s, free) >= n_term)
    take = [s.fresh(f"{pool.name}_take{p}", z3.BoolSort()) for p in range(size)]
    pos = [s.fresh(f"{pool.name}_pos{p}", z3.BitVecSort(s.width)) for p in range(size)]
    for p in range(size):
        s.assume(z3.Implies(take[p], z3.And(free[p] > 0, pos[p] >= 0, pos[p] < n_term)))
        s.assume(z3.Implies(z3.Not(take[p]), pos[p] == -1))
        for q in range(p):
            s.assume(z3.Implies(z3.And(take[p], take[q]), pos[p] != pos[q]))
    # A negative count is an error point (above); stated so that it stays satisfiable there.
    taken = _count(s, take) == n_term
    s.assume(taken if z3.is_bv_value(n_term) else z3.Or(n_term < 0, taken))
    if pool.Page.name in s._enc.reduced:
        # Symmetry breaking: pages whose cells are all equal now are interchangeable, so
        # take them in index order (the explorer merges the same choices; see
        # Instance.distinct_elements).  Cuts the solver's n!-fold copies of each choice.
        rows = s._enc.inst.element_cells[pool.Page.name]
        for q in range(size):
            for p in range(q):
                same = z3.And(*[s.cell_term(a) == s.cell_term(b) for a, b in zip(rows[p], rows[q], strict=True)])
                s.assume(z3.Implies(z3.And(same, take[q]), z3.And(take[p], pos[p] < pos[q])))
    bit = 1 << r
    for p in range(size):
        h = s.cell_term(hold_off + p)
        s.set_term(free_off + p, free[p] - b2i(take[p], s.width))  # take needs free[p] > 0: no underflow
        s.set_term(hold_off + p, z3.If(take[p], h | z3.BitVecVal(bit, h.size()), h))
        s.set_term(slot_off + p, z3.If(take[p], pos[p] + ival(first_slot, s.width), s.cell_term(slot_off + p)))

    def picks(ev: Callable[[z3.ExprRef], Any]) -> list[Any]:
        chosen = [p for p in range(size) if z3.is_true(ev(take[p]))]
        chosen.sort(key=lambda p: int_of(ev(pos[p])))
        return chosen

    s.record_pick(picks)
    return SymPages(pool.name, take, [z3.If(take[p], pos[p] + ival(first_slot, s.width), ival(-1, s.width)) for p in range(size)],
                    rank=list(pos), length=n if isinstance(n, int) else None, ex=s._enc.explorer)


@encodes(PagePool.write)
def write(s: SymView, pool: PagePool, r: int, pages: Any) -> None:
    pages = as_pages(s, pool, pages)
    hold_off, size = _cells(s, pool.holders_var)
    content_off, _ = _cells(s, pool.content_var)
    bad = []
    for p in range(size):
        m = pages.member[p]
        bad.append(z3.And(m, z3.Not(_bit(s.cell_term(hold_off + p), r))))
        old = s.cell_term(content_off + p)
        s.set_term(content_off + p, z3.If(m, z3.BitVecVal(r, old.size()), old))
    _or_into(s, "wrote_unowned", r, bad)


@encodes(PagePool.read)
def read(s: SymView, pool: PagePool, r: int, pages: Any) -> None:
    pages = as_pages(s, pool, pages)
    content_off, size = _cells(s, pool.content_var)
    content = [s.cell_term(content_off + p) for p in range(size)]
    _or_into(s, "read_unwritten", r, [z3.And(pages.member[p], content[p] == -1) for p in range(size)])
    foreign = [z3.And(pages.member[p], content[p] != -1, content[p] != r) for p in range(size)]
    first: z3.ExprRef = z3.BitVecVal(-1, content[0].size()) if size else ival(-1, s.width)
    for p in range(size):
        # Read in page-table order, as the concrete pages_of sorts: ties by page index.
        earlier = [z3.And(foreign[q], z3.Or(pages.position[q] < pages.position[p],
                                            z3.And(pages.position[q] == pages.position[p], z3.BoolVal(q < p))))
                   for q in range(size) if q != p]
        is_first = z3.And(foreign[p], z3.Not(z3.Or(*earlier))) if earlier else foreign[p]
        first = z3.If(is_first, content[p], first)
    rf_off = s.layout("read_foreign").offset + r
    old = s.cell_term(rf_off)
    s.set_term(rf_off, z3.If(old != -1, old, z3.SignExt(old.size() - first.size(), first) if old.size() > first.size() else first))


def times_listed(s: SymView, pool: PagePool, pages: Any) -> list[z3.ExprRef]:
    """How many times each page of ``pool`` occurs in ``pages``, as integer terms.

    A page set (``alloc``, ``pages_of``) holds each page at most once; a list
    may name a page twice, and the concrete ``free_pages`` returns it to the
    free list once per occurrence.
    """
    n = s.size(pool.Page)
    if isinstance(pages, SymPages):
        return [b2i(m, s.width) for m in pages.member]
    listed = list(pages)
    out: list[z3.ExprRef] = []
    for q in range(n):
        eqs = [_eq_page(p.e, q) if isinstance(p, Sym) else z3.BoolVal(int(p) == q) for p in listed]
        out.append(_count(s, eqs))
    return out


@encodes(PagePool.free_pages)
def free_pages(s: SymView, pool: PagePool, r: int, pages: Any) -> None:
    times = times_listed(s, pool, pages)
    pages = as_pages(s, pool, pages)
    free_off, size = _cells(s, pool.free_var)
    hold_off, _ = _cells(s, pool.holders_var)
    slot_off, _ = _cells(s, pool.slot_var)
    for p in range(size):
        m = pages.member[p]
        h = s.cell_term(hold_off + p)
        s.set_term(hold_off + p, z3.If(m, h & z3.BitVecVal(~(1 << r) % (1 << h.size()), h.size()), h))
        s.set_term(slot_off + p, z3.If(m, ival(-1, s.width), s.cell_term(slot_off + p)))
        f = s.cell_term(free_off + p)
        # A page freed twice (listed twice, or freed again later) counts twice: unbounded, so the
        # increment is an overflow point.
        s.no_overflow(z3.Implies(m, z3.BVAddNoOverflow(f, times[p], True)))
        s.set_term(free_off + p, f + times[p])


def _count(s: SymView, conds: Sequence[z3.BoolRef]) -> z3.ExprRef:
    """How many of ``conds`` hold (at most the domain size, which the width always covers)."""
    out: z3.ExprRef = ival(0, s.width)
    for c in conds:
        out = out + b2i(c, s.width)
    return out


def _rank(s: SymView, pages: SymPages, p: int) -> z3.ExprRef:
    """Page ``p``'s position among the set's pages: as the concrete ``pages_of`` sorts, ties by page index."""
    return _count(s, [z3.And(pages.member[q], z3.Or(pages.position[q] < pages.position[p],
                                                    z3.And(pages.position[q] == pages.position[p], z3.BoolVal(q < p))))
                      for q in range(len(pages.member)) if q != p])


@encodes(_pool.transfer)
def transfer(s: SymView, r: int, src: PagePool, dst: PagePool, n: Any) -> None:
    n_term = _count_term(s, n, f"transfer from {src.name} to {dst.name}: the number of pages")
    src_pages = pages_of(s, src, r)
    dst_pages = pages_of(s, dst, r)
    src_count = _count(s, src_pages.member)
    dst_count = _count(s, dst_pages.member)
    s.require_term(n_term <= src_count)
    src_content = _terms(s, src.content_var)
    dst_off, dst_size = _cells(s, dst.content_var)
    src_rank = [_rank(s, src_pages, p) for p in range(len(src_pages.member))]
    for q in range(dst_size):
        rank_q = _rank(s, dst_pages, q)
        value: z3.ExprRef = s.cell_term(dst_off + q)
        for p in range(len(src_pages.member)):
            value = z3.If(z3.And(src_pages.member[p], src_rank[p] == rank_q), src_content[p], value)
        s.set_term(dst_off + q, z3.If(z3.And(dst_pages.member[q], rank_q < n_term), value, s.cell_term(dst_off + q)))
    _or_into(s, "wrote_unowned", r, [dst_count < n_term])


def _or_into(s: SymView, var: str, r: int, conds: Sequence[z3.BoolRef]) -> None:
    if not conds:
        return
    pos = s.layout(var).offset + r
    s.set_term(pos, z3.Or(s.cell_term(pos), *conds))


def pool_lemmas(pool: PagePool, inst: Any, cells: Sequence[z3.ExprRef]) -> list[tuple[str, z3.BoolRef]]:
    """Candidate facts about ``pool``'s bookkeeping, per page, over the state ``cells``.

    They hold in every protocol that allocates and frees correctly, and fail
    in the buggy ones (a double free puts a page on the free list twice).  The
    engine keeps only those it proves inductive (Houdini) and then assumes
    them at every step, which spares the solver re-deriving them per depth.
    """
    out: list[tuple[str, z3.BoolRef]] = []
    free = inst.layouts[pool.free_var]
    hold = inst.layouts[pool.holders_var]
    slot = inst.layouts[pool.slot_var]
    for p in range(free.length):
        f = cells[free.offset + p]
        h = cells[hold.offset + p]
        sl = cells[slot.offset + p]
        zero = z3.BitVecVal(0, h.size())
        single = z3.And(h != zero, h & (h - 1) == zero)
        out.append((f"{pool.free_var}[{p}] is 1 when unheld", z3.Implies(h == zero, f == 1)))
        out.append((f"{pool.free_var}[{p}] is 0 when held", z3.Implies(h != zero, f == 0)))
        out.append((f"{pool.holders_var}[{p}] has at most one holder", z3.Or(h == zero, single)))
        out.append((f"{pool.slot_var}[{p}] is -1 exactly when unheld", (h == zero) == (sl == -1)))
        out.append((f"{pool.slot_var}[{p}] is at least -1", sl >= -1))
    return out


@encodes(_pool.pages_exclusive)
def no_double_ownership(s: SymView, pools: Sequence[PagePool]) -> Sym:
    """No page has two holders, or a holder while on the free list: one term, no fork per page."""
    conds: list[z3.BoolRef] = []
    for pool in pools:
        for h, f in zip(_terms(s, pool.holders_var), _terms(s, pool.free_var), strict=True):
            zero = z3.BitVecVal(0, h.size())
            conds.append(z3.And((h & (h - 1)) == zero, z3.Or(h == zero, f == 0)))
    return Sym(z3.And(conds) if conds else z3.BoolVal(True), s._enc.explorer)


@encodes(_pool.pages_all_returned)
def all_pages_returned(s: SymView, pools: Sequence[PagePool]) -> Sym:
    """Every page unheld and on the free list exactly once: one term, no fork per page."""
    conds: list[z3.BoolRef] = []
    for pool in pools:
        for h, f in zip(_terms(s, pool.holders_var), _terms(s, pool.free_var), strict=True):
            conds.append(z3.And(h == z3.BitVecVal(0, h.size()), f == 1))
    return Sym(z3.And(conds) if conds else z3.BoolVal(True), s._enc.explorer)



# -- the other vocabulary modules -----------------------------------------------------


@encodes(InflightWrites.free)
def inflight_free(s: SymView, writes: InflightWrites, r: int) -> Any:
    pages = writes.pool.free(s, r)
    flag = writes.invariant_name if s.checks(writes.invariant_name) else None
    pending = getattr(s, writes.pending_var)
    Req = writes.pool.own.requests
    # The page may be allocated again before the action ends, so the state alone need not
    # show the hazard: the freeing step is the violation (one condition, no fork).
    if flag is not None:
        member = [Sym(m, s._enc.explorer) for m in as_pages(s, writes.pool, pages).member]
        s.flag(flag, sum(member[p] & pending[w, p] for p in s.all(writes.pool.Page) for w in s.all(Req)) > 0)
    return pages


@encodes(_prefix._set_if)
def set_if(s: SymView, field: Any, key: Any, cond: Any, value: Any) -> None:
    pos = field._pos(key)  # the cell a symbolic field index maps to
    old = s.cell_term(pos)
    s.set_term(pos, z3.If(to_z3(cond, z3.BoolSort()), to_z3(value, old.sort()), old))


@encodes(PrefixIndex._choose_node)
def choose_node(s: SymView, index: PrefixIndex, label: str) -> Sym:
    sort = s.cell_term(s.layout(index.node_var).offset).sort()
    m = s.fresh(f"{index.name}_node", sort)
    s.assume(z3.And(m >= 0, m < s.size(index.Node)))
    s.record_pick(lambda ev: [int_of(ev(m))])
    return Sym(m, s._enc.explorer)  # the path explorer this run forks on


@encodes(BlockTables._take_free)
def take_free_block(s: SymView, blocks: BlockTables) -> Any:
    # One path per block with a guard, instead of one per subset of free blocks.
    b = s.choose(list(s.all(blocks.Block)), label=f"free {blocks.name}", domain=blocks.Block)
    require(getattr(s, blocks.free_var)[b] > 0)
    return b

__all__ = ["Disabled", "all_pages_returned", "no_double_ownership", "SymPages", "alloc", "available", "free_pages", "pages_of", "pool_lemmas", "read", "transfer", "write"]
