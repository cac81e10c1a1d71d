"""The ownership vocabulary: page pools, who holds a page, what it contains.

Specs reuse these instead of re-inventing page bookkeeping.  The model:

* a **pool** is a set of pages (a symmetric domain: pages are interchangeable);
* per page: how many times it sits on the free list (``free``, normally 0 or
  1; 2 means a double free put it there twice), the set of requests whose page
  table holds it (``holders``), its position in that page table (``slot``) and
  its **content label**: which request's KV it holds.  Freeing a page does not
  clear its content: KV pages are not zeroed, the next writer overwrites them;
* per request, ghost history: the first foreign content it read, whether it
  read a never-written page, whether it wrote a page it does not hold.

Allocation picks *any* free page for each slot (``s.choose``), which covers
every free-list order a real allocator may have; with page symmetry the
explorer merges the resulting states.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ownership.core.events import Alloc, Free, Read, Transfer, Write
from ownership.core.schema import MARK_ROLES, PageMark
from ownership.errors import Code, OwnershipError, SpecWarning, caller_location
from ownership.lang.declarations import Domain, SizeSpec
from ownership.lang.elements import Member, ix
from ownership.lang.guard import Disabled, require
from ownership.lang.model import Spec
from ownership.lang.types import Int, Optional, SetOf
from ownership.vocab.operation import operation

_VOCAB_DIR = os.path.dirname(os.path.abspath(__file__))


def spec_location() -> tuple[str | None, int | None]:
    """File and line of the innermost caller outside this vocabulary (the spec line that called it)."""
    frame = sys._getframe(1)
    while frame is not None:
        if os.path.dirname(os.path.abspath(frame.f_code.co_filename)) != _VOCAB_DIR:
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None, None


def check_count(n: Any, what: str, s: Any = None) -> None:
    """OWN113 at the spec line that called the vocabulary when ``n``, a count of pages or a slot, is negative.

    A negative count used to take no page at all (``range(-1)`` is empty)
    while the Z3 encoding found no way to take -1 pages: the explorer went on
    and bmc saw the action disabled.  It is a bug in the spec's arithmetic,
    so every engine refuses it.  Under the Z3 engines (``s.symbolic``) a
    solver term is an error point they look for as for an overflow, and a
    term over free parameters alone is refused at once where it may be
    negative; the parametric explorer's terms fork here.
    """
    if isinstance(n, int):
        if n >= 0:
            return
        got = str(n)
    elif s is not None and s.symbolic:
        if not s.nonnegative(n):
            return
        got = NEGATIVE_OVER_PARAMETERS
    elif not (n < 0):
        return
    else:
        got = NEGATIVE_OVER_PARAMETERS
    raise negative_count(what, got)


NEGATIVE_OVER_PARAMETERS = "a negative value at some values of the free parameters"
"""What a count over free parameters is said to be when some of their values make it negative."""


def negative_count(what: str, got: str) -> OwnershipError:
    """OWN113 located at the spec line that called the vocabulary: ``what`` (a count, a slot) is ``got``."""
    file, line = spec_location()
    return OwnershipError(Code.NEGATIVE_COUNT, f"{what} cannot be negative, got {got}: guard the call "
                          "(require(n >= 0)) or fix the arithmetic that computes it", file, line)


class Ownership:
    """Ghost history and built-in invariants for the requests of a spec.

    ``own = Ownership(spec, requests=Req)`` declares the history variables;
    ``own.pool(...)`` declares page pools; ``own.invariants(...)`` registers
    the built-in invariants the spec wants checked.
    """

    def __init__(self, spec: Spec, requests: Domain) -> None:
        self.spec = spec
        self.requests = requests
        self.pools: list[PagePool] = []
        spec.var("read_foreign", Optional(requests), per=requests, init=None, ghost=True,
                 doc="history: the first other request whose KV this request read")
        spec.var("read_unwritten", bool, per=requests, init=False, ghost=True,
                 doc="history: this request read a page nobody ever wrote")
        spec.var("wrote_unowned", bool, per=requests, init=False, ghost=True,
                 doc="history: this request wrote a page its page table does not hold")
        spec.extensions["ownership"] = self

    def pool(self, name: str, pages: SizeSpec, *, prefix: str | None = None, doc: str = "",
             ordered: bool = False) -> PagePool:
        """Declare a page pool named ``name`` with ``pages`` pages.

        Pages are a symmetric domain (opaque, interchangeable, reduced by
        symmetry) unless ``ordered=True``: then pages are ints and spec code
        may use slot order, adjacency and contiguous ranges, at the cost of
        no symmetry reduction over pages.
        """
        p = PagePool(self, name, pages, prefix or name[0].upper(), doc, ordered)
        self.pools.append(p)
        return p

    # -- built-in invariants ---------------------------------------------------
    def invariants(self, *names: str, idle: Callable[[Any], bool] | None = None, spec: Spec | None = None) -> None:
        """Register built-in invariants by name (all of them when none are named).

        ``pages_returned_when_idle`` needs ``idle(s)``: true when no request is
        in flight (defaults to the spec's ``@spec.terminal`` predicate).
        ``spec`` registers them on a spec derived from the one the pools were
        declared in (a fixed version checking a stronger property), leaving
        that one as it was.
        """
        builtins = self._builtins(idle)
        if idle is None:
            # Resolved against the spec being checked (a derived spec may declare its own).
            builtins["pages_returned_when_idle"].needs_terminal = True  # type: ignore[attr-defined]
        chosen = names or tuple(builtins)
        for n in chosen:
            if n not in builtins:
                file, line = caller_location(2)
                raise OwnershipError(Code.UNKNOWN_INVARIANT, f"no built-in invariant {n!r} (known: {', '.join(builtins)})", file, line)
            (spec or self.spec).invariant(builtins[n], name=n)

    def properties(self, *names: str, ended: Callable[[Any, Any], Any] | None = None,
                   started: Callable[[Any, Any], Any] | None = None, spec: Spec | None = None) -> None:
        """Register built-in temporal properties per request (:mod:`ownership.vocab.liveness`).

        ``pages_return`` (needs ``ended(s, r)``: the request finished or was
        aborted) says its pages are eventually all freed; ``requests_finish``
        (needs ``started(s, r)`` too) says an admitted request eventually
        ends.  With no names, every one whose predicates are given.
        ``spec`` registers them on a derived spec, leaving this one as it was.
        """
        from ownership.vocab.liveness import register

        register(self, names, ended, started, spec)

    def _builtins(self, idle: Callable[[Any], bool] | None) -> dict[str, Callable[[Any], bool]]:
        Req = self.requests
        pools = self.pools

        def no_foreign_read(s: Any) -> bool:
            """No request ever reads a page whose content another request wrote.

            This is the tenant-isolation property: KV pages are not zeroed, so
            reading a page holding another request's KV leaks that request's
            prompt into this request's output.  It covers reads made with
            ``pool.read`` (and the prefix index's ``read``, which calls it);
            reads through the storage tiers (``Tiers.read``, the source of
            ``Tiers.copy``) are judged by ``tier_read_matches_index`` instead.
            """
            return all(s.read_foreign[r] == None for r in s.all(Req))  # noqa: E711 - also runs on solver terms

        def no_read_of_unwritten(s: Any) -> bool:
            """No request reads a page that no request has written (garbage input).

            Covers reads made with ``pool.read`` only; a tier read finding no
            copy is a ``tier_read_matches_index`` violation instead.
            """
            return not any(s.read_unwritten[r] for r in s.all(Req))

        def no_unowned_write(s: Any) -> bool:
            """No request (or transfer on its behalf) writes a page its page table does not hold."""
            return not any(s.wrote_unowned[r] for r in s.all(Req))

        def no_double_ownership(s: Any) -> bool:
            """No page is held by two requests, or held while it sits on the free list."""
            return pages_exclusive(s, pools)

        def pages_returned_when_idle(s: Any) -> bool:
            """When no request is in flight, every page is back on the free list exactly once."""
            if not (idle(s) if idle is not None else s.terminal()):
                return True
            return pages_all_returned(s, pools)

        return {
            "no_foreign_read": no_foreign_read,
            "no_unowned_write": no_unowned_write,
            "no_double_ownership": no_double_ownership,
            "no_read_of_unwritten": no_read_of_unwritten,
            "pages_returned_when_idle": pages_returned_when_idle,
        }

    def symbolic_lemmas(self, inst: Any, cells: Sequence[Any]) -> list[tuple[str, Any]]:
        """Candidate facts about every pool's bookkeeping, as Z3 terms over ``cells`` (see ``ownership.symbolic.lemmas``)."""
        from ownership.vocab.encodings import pool_lemmas  # imports z3: only the Z3 engines ask

        return [lemma for pool in self.pools for lemma in pool_lemmas(pool, inst, cells)]


@operation
def pages_exclusive(s: Any, pools: Sequence[PagePool]) -> bool:
    """No page of ``pools`` has two holders, or a holder while on the free list."""
    for pool in pools:
        for h, f in zip(getattr(s, pool.holders_var), getattr(s, pool.free_var), strict=True):
            if h & (h - 1) or (h and f):
                return False
    return True


@operation
def pages_all_returned(s: Any, pools: Sequence[PagePool]) -> bool:
    """Every page of ``pools`` is unheld and on its free list exactly once."""
    for pool in pools:
        for h, f in zip(getattr(s, pool.holders_var), getattr(s, pool.free_var), strict=True):
            if h or f != 1:
                return False
    return True


class PagePool:
    """A pool of KV pages with a free list; see the module docstring."""

    def __init__(self, own: Ownership, name: str, pages: SizeSpec, prefix: str, doc: str, ordered: bool = False) -> None:
        self.own = own
        self.name = name
        spec = own.spec
        Req = own.requests
        title = name[:1].upper() + name[1:]
        self.Page: Domain = spec.domain(
            f"{title}Page", pages, symmetric=not ordered, ordered=ordered, names=lambda i: f"{prefix}{i}",
            doc=doc or f"pages of the {name} pool"
        )
        self.free_var = f"{name}_free"
        self.holders_var = f"{name}_holders"
        self.slot_var = f"{name}_slot"
        self.content_var = f"{name}_content"
        spec.var(self.free_var, Int, per=self.Page, init=1, doc=f"times the page sits on the {name} free list")
        spec.var(self.holders_var, SetOf(Req), per=self.Page, init=0, doc="requests whose page table holds the page")
        spec.var(self.slot_var, Int, per=self.Page, init=-1, doc="position of the page in its holder's page table")
        spec.var(self.content_var, Optional(Req), per=self.Page, init=None,
                 doc="whose KV the page holds (not cleared on free: pages are not zeroed)")
        self.marks: list[PageMark] = []

    def mark(self, var: str, role: str, label: str) -> None:
        """Ask the pictures and tables to draw state variable ``var`` on this pool's pages.

        ``role`` says what the variable means for a page (see
        :data:`ownership.core.schema.MARK_ROLES`): ``"keeper"`` (something
        other than a request holds the page: a cache, a tree, a job's
        reference; such a page is never drawn as lost), ``"count"`` (a
        number such as a reference count), ``"pending"`` (indexed by some
        domain and the page: an outstanding operation) or ``"flag"`` (a
        per-page truth value such as published or deregistered).  Vocabulary
        declarations call this for the variables they declare; a spec may
        call it for its own.
        """
        if role not in MARK_ROLES:
            file, line = caller_location(2)
            raise OwnershipError(Code.SPEC_INVALID, f"mark role {role!r} is not one of {', '.join(MARK_ROLES)}",
                                 file, line)
        if var not in self.own.spec.vars:
            file, line = caller_location(2)
            raise OwnershipError(Code.SPEC_INVALID, f"mark names {var!r}, which is not a declared variable",
                                 file, line)
        self.marks.append(PageMark(var, role, label))

    # -- queries ---------------------------------------------------------------
    @operation
    def available(self, s: Any) -> int:
        """Length of the free list (a page freed twice counts twice, as in a real free list)."""
        return sum(getattr(s, self.free_var))

    @operation
    def pages_of(self, s: Any, r: Member) -> list[int]:
        """The pages in ``r``'s page table, in slot order (``req_to_token`` order)."""
        bit = 1 << ix(r)
        slots = list(getattr(s, self.slot_var))
        mine = [p for p, h in enumerate(getattr(s, self.holders_var)) if h & bit]
        mine.sort(key=slots.__getitem__)
        every = s.all(self.Page)  # elements of a symmetric pool, ints of an ordered one
        return [every[p] for p in mine]

    def held(self, s: Any, r: Member) -> Any:
        """How many pages ``r``'s page table holds (a solver term under the symbolic engines)."""
        # (bit == 1) is a bool, so the sum stays an ordinary int under the solver (as in refcount).
        return sum((h >> ix(r) & 1) == 1 for h in getattr(s, self.holders_var))

    # -- operations ------------------------------------------------------------
    @operation
    def alloc(self, s: Any, r: Member, n: int, first_slot: int = 0) -> list[int]:
        """Take ``n`` pages off the free list into ``r``'s page table (slots from ``first_slot``).

        Not enabled when the free list is shorter than ``n`` (callers that
        must fail instead check :meth:`available` first).  Which free page
        lands in which slot is a nondeterministic choice.
        """
        check_count(n, f"{self.name}.alloc: the number of pages")
        check_count(first_slot, f"{self.name}.alloc: the first slot (-1 marks a page no table holds)")
        free = getattr(s, self.free_var)
        holders = getattr(s, self.holders_var)
        slot = getattr(s, self.slot_var)
        if not self.available(s) >= n:  # exactly require()'s test: --free forks on the same condition
            # Only on the disabled path, so the hot loop pays nothing: more pages than the
            # pool holds can never be free at once, and the action can never run.
            if type(n) is int and n > s.size(self.Page):  # a symbolic count (--free) must not fork here
                self._warn_too_many(s, n)
            raise Disabled
        taken: list[int] = []
        for i in range(n):
            options = [p for p in s.all(self.Page) if free[p] > 0 and p not in taken]
            p = s.choose(options, label=f"{self.name} page for slot {first_slot + i}", domain=self.Page)
            free[p] -= 1
            holders[p] |= 1 << ix(r)
            slot[p] = first_slot + i
            taken.append(p)
        if s.recording:
            s.emit(Alloc(pool=self.name, req=s.name_of(self.own.requests, r),
                         pages=tuple(s.name_of(self.Page, p) for p in taken)))
        return taken

    def _warn_too_many(self, s: Any, n: int) -> None:
        """Warn (located at the spec line that asked) that ``alloc`` of ``n`` pages can never succeed here."""
        file, line = spec_location()
        size = s.size(self.Page)
        s._inst.add_warning(SpecWarning(
            Code.ALLOC_EXCEEDS_POOL,
            f"alloc of {n} {self.name} pages, but the pool has only {size} "
            f"at this instance ({s._inst.describe_params() or 'no parameters'}): this allocation can never "
            "succeed, so the action calling it never runs here; enlarge the pool or shrink the request",
            file, line, f"{self.name}.alloc",
        ))

    @operation
    def write(self, s: Any, r: Member, pages: Sequence[int]) -> None:
        """``r`` writes its KV into ``pages`` (content label becomes ``r``)."""
        holders = getattr(s, self.holders_var)
        content = getattr(s, self.content_var)
        Req = self.own.requests
        for p in pages:
            bad = not holders[p] >> ix(r) & 1
            if bad:
                s.wrote_unowned[r] = True
            bad = bad and s.checks("no_unowned_write")
            content[p] = r
            if bad:
                s.flag("no_unowned_write")
            if s.recording:
                s.emit(Write(pool=self.name, req=s.name_of(Req, r), page=s.name_of(self.Page, p),
                             violates="no_unowned_write" if bad else None))

    @operation
    def read(self, s: Any, r: Member, pages: Sequence[int]) -> None:
        """``r``'s attention reads ``pages``; foreign or unwritten content is recorded."""
        content = getattr(s, self.content_var)
        Req = self.own.requests
        for p in pages:
            c = content[p]
            violation = None
            if c is None:
                s.read_unwritten[r] = True
                violation = "no_read_of_unwritten" if s.checks("no_read_of_unwritten") else None
            elif ix(c) != ix(r):
                if s.read_foreign[r] is None:
                    s.read_foreign[r] = c
                violation = "no_foreign_read" if s.checks("no_foreign_read") else None
            if violation is not None:
                s.flag(violation)
            if s.recording:
                s.emit(Read(pool=self.name, req=s.name_of(Req, r), page=s.name_of(self.Page, p),
                            content=s.name_of(Req, c) if c is not None else None, violates=violation))

    @operation
    def free_pages(self, s: Any, r: Member, pages: Sequence[int]) -> None:
        """Return ``pages`` from ``r``'s page table to the free list (content stays)."""
        free = getattr(s, self.free_var)
        holders = getattr(s, self.holders_var)
        slot = getattr(s, self.slot_var)
        for p in pages:
            holders[p] &= ~(1 << ix(r))
            slot[p] = -1
            free[p] += 1
        if pages and s.recording:
            s.emit(Free(pool=self.name, req=s.name_of(self.own.requests, r),
                        pages=tuple(s.name_of(self.Page, p) for p in pages)))

    def free(self, s: Any, r: Member) -> list[int]:
        """Release every page ``r`` holds (``free-on-finish``); returns them."""
        pages = self.pages_of(s, r)
        self.free_pages(s, r, pages)
        return pages


@operation
def transfer(s: Any, r: Member, src: PagePool, dst: PagePool, n: int) -> None:
    """Copy the first ``n`` pages of ``r``'s ``src`` page table onto its ``dst`` page table.

    This is the KV transfer (RDMA write) from one node's pool to another's:
    page ``i`` of the source table lands in page ``i`` of the destination
    table.  The destination pages take the *source* content label; a write
    into a destination page ``r`` does not hold is an unowned write.
    """
    check_count(n, f"transfer from {src.name} to {dst.name}: the number of pages")
    src_pages = src.pages_of(s, r)
    dst_pages = dst.pages_of(s, r)
    require(n <= len(src_pages))
    src_content = getattr(s, src.content_var)
    dst_content = getattr(s, dst.content_var)
    Req = src.own.requests
    for i in range(n):
        if i >= len(dst_pages):
            # The sender has more pages than the receiver reserved: the write
            # lands outside r's table, which the transfer engine must refuse.
            s.wrote_unowned[r] = True
            s.emit(Write(pool=dst.name, req=s.name_of(Req, r), page="(beyond table)", violates="no_unowned_write"))
            continue
        dst_content[dst_pages[i]] = src_content[src_pages[i]]
    if s.recording:
        s.emit(Transfer(req=s.name_of(Req, r), src=src.name, dst=dst.name,
                        pages=tuple(f"{s.name_of(src.Page, src_pages[i])}->{s.name_of(dst.Page, dst_pages[i])}"
                                    for i in range(min(n, len(dst_pages))))))
