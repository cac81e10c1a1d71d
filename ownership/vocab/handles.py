"""Several operations per request: transfer handles or jobs that each end on their own.

A request rarely waits on one operation.  With heterogeneous tensor
parallelism a decode worker reads a request's KV from several prefill ranks,
one NIXL transfer handle each; an offloading connector runs several store
jobs per request.  Each operation is *posted* with the pages it covers fixed
at that moment and ends in its own time: it *completes*, *fails* or is
*cancelled*.  A posted operation can seldom be aborted: cancelling is only
sure before it is posted, and a cancel request to a posted one may be
ignored.  So a page may be released only when *every* operation on it is
terminal; releasing it when the first one fails or finishes hands the
stragglers' writes to the page's next owner.

``Handles(pool, "xfer", "tp_ratio")`` declares, written with the public spec
API (``spec.var``, ``require``, loops over domains, writes without branches
where the condition is the state's) so that every engine runs it unchanged:

* a symmetric domain ``XferHandle`` of ``tp_ratio`` handles per request
  (handle ``h`` of request ``r`` is one operation slot of ``r``);
* ``xfer_state[r, h]``: :data:`HandleState` (``IDLE``: no operation in the
  slot; ``PREPARED``: created, covering its pages, not posted; ``POSTED``;
  then one of the terminal ``DONE``, ``FAILED``, ``CANCELLED``);
* ``xfer_pending[r, p]``: the handles of ``r`` that cover page ``p`` and are
  not terminal (a set of handles, empty once all of them ended).  The pool
  marks it ``pending`` for the pictures.

The invariants: ``no_release_with_operation_pending`` (no page on the free
list while an operation on it is outstanding), ``handles_terminal_when_idle``
(nothing outstanding when the spec is idle) and the helper
``handles_consistent`` (a pending bit only for a handle that is prepared or
posted), which lets ``ownership prove`` close its induction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ownership.core.events import HandlePosted, HandleSettled, OperationPending, Write
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.declarations import Domain, SizeSpec
from ownership.lang.elements import Member, ix
from ownership.lang.guard import require
from ownership.lang.model import Spec
from ownership.lang.types import Enum, SetOf
from ownership.vocab.inflight import holds
from ownership.vocab.pool import PagePool

HandleState = Enum("HandleState", "IDLE PREPARED POSTED DONE FAILED CANCELLED")
"""Where one operation slot of a request is: unused, prepared, posted, or terminal (the last three)."""

OUTSTANDING = (HandleState.PREPARED, HandleState.POSTED)
"""The states in which an operation may still touch its pages."""


class Handles:
    """Operations of the requests of ``pool``'s spec, ``count`` per request, each covering some of its pages.

    ``count`` is a size (an int, or the name of a spec parameter such as the
    number of remote ranks one request reads from).  See the module docstring.
    """

    def __init__(self, pool: PagePool, name: str, count: SizeSpec, *, spec: Spec | None = None,
                 prefix: str = "H", doc: str = "") -> None:
        self.pool = pool
        self.name = name
        self.spec = spec or pool.own.spec
        if not name.isidentifier():
            file, line = caller_location(2)
            raise OwnershipError(Code.OPERATIONS_INVALID, f"Handles name {name!r} is not an identifier", file, line)
        if isinstance(count, int) and count < 1:
            file, line = caller_location(2)
            raise OwnershipError(Code.OPERATIONS_INVALID,
                                 f"Handles {name!r}: a request needs at least one operation slot, got {count}",
                                 file, line)
        Req = pool.own.requests
        title = name[:1].upper() + name[1:]
        self.Handle: Domain = self.spec.domain(
            f"{title}Handle", count, symmetric=True, names=lambda i: f"{prefix}{i}",
            doc=doc or f"{name} operations of one request (interchangeable slots)",
        )
        self.state_var = f"{name}_state"
        self.pending_var = f"{name}_pending"
        self.invariant_name = "no_release_with_operation_pending"
        self.spec.var(self.state_var, HandleState, per=(Req, self.Handle), init=HandleState.IDLE,
                      doc=f"where the request's {name} operation in this slot is")
        self.spec.var(self.pending_var, SetOf(self.Handle), per=(Req, pool.Page), init=0,
                      doc=f"the request's {name} operations on the page that are not terminal")
        pool.mark(self.pending_var, "pending", f"{name} pending")

    # -- queries ---------------------------------------------------------------
    def state(self, s: Any, r: Member, h: Member) -> Any:
        """The :data:`HandleState` of ``r``'s operation ``h``."""
        return getattr(s, self.state_var)[r, h]

    def _count(self, s: Any, r: Member, states: Sequence[int]) -> Any:
        st = getattr(s, self.state_var)
        # A count, not any(): under the Z3 engines one condition instead of a fork per handle.
        return sum(sum(st[r, h] == v for v in states) for h in s.all(self.Handle))

    def outstanding(self, s: Any, r: Member) -> Any:
        """How many of ``r``'s operations are prepared or posted (not terminal)."""
        return self._count(s, r, OUTSTANDING)

    def settled(self, s: Any, r: Member) -> Any:
        """No operation of ``r`` is outstanding: each slot is unused or terminal."""
        return self.outstanding(s, r) == 0

    def failed(self, s: Any, r: Member) -> Any:
        """Some operation of ``r`` failed."""
        return self._count(s, r, (HandleState.FAILED,)) > 0

    def all_done(self, s: Any, r: Member) -> Any:
        """Every operation slot of ``r`` completed (``DONE``)."""
        return self._count(s, r, (HandleState.DONE,)) == s.size(self.Handle)

    def pending_on(self, s: Any, p: Member) -> Any:
        """How many operations (of any request) on page ``p`` are not terminal."""
        pending = getattr(s, self.pending_var)
        return sum(((pending[w, p] >> ix(h)) & 1) != 0
                   for w in s.all(self.pool.own.requests) for h in s.all(self.Handle))

    def _covers(self, s: Any, r: Member, h: Member, p: Member) -> Any:
        return ((getattr(s, self.pending_var)[r, p] >> ix(h)) & 1) != 0

    def _pages(self, s: Any, r: Member, h: Member) -> tuple[str, ...]:
        return tuple(s.name_of(self.pool.Page, p) for p in s.all(self.pool.Page) if self._covers(s, r, h, p))

    # -- operations ------------------------------------------------------------
    def prepare(self, s: Any, r: Member, h: Member, pages: Sequence[Member] | None = None) -> None:
        """Create ``r``'s operation ``h`` (not enabled unless the slot is ``IDLE``), covering its pages.

        It covers every page ``r``'s table holds now, or only ``pages``: a
        concrete list of pages built by spec code (under the Z3 engines the
        pages an ``alloc`` returns are symbolic and cannot be listed; build
        the list from ``s.all(pool.Page)`` instead).  Until it is posted it
        may still be cancelled for sure.
        """
        st = getattr(s, self.state_var)
        require(st[r, h] == HandleState.IDLE)
        st[r, h] = HandleState.PREPARED
        pending = getattr(s, self.pending_var)
        bit = 1 << ix(h)
        for p in s.all(self.pool.Page):
            cover = holds(s, self.pool, r, p) if pages is None else any(p == q for q in pages)
            # pending |= bit where covered, without a branch (one symbolic path, not one per page)
            pending[r, p] = pending[r, p] | (cover * bit)

    def post(self, s: Any, r: Member, h: Member) -> None:
        """Post the prepared operation ``h`` of ``r``: from now on it cannot surely be called back."""
        st = getattr(s, self.state_var)
        require(st[r, h] == HandleState.PREPARED)
        st[r, h] = HandleState.POSTED
        if s.recording:
            s.emit(HandlePosted(pool=self.pool.name, req=s.name_of(self.pool.own.requests, r),
                                handle=s.name_of(self.Handle, h), pages=self._pages(s, r, h)))

    def start(self, s: Any, r: Member, h: Member, pages: Sequence[Member] | None = None) -> None:
        """:meth:`prepare` and :meth:`post` at once (an operation created and posted in one call)."""
        self.prepare(s, r, h, pages)
        self.post(s, r, h)

    def _settle(self, s: Any, r: Member, h: Member, outcome: int) -> None:
        st = getattr(s, self.state_var)
        st[r, h] = outcome
        pending = getattr(s, self.pending_var)
        keep = ~(1 << ix(h))
        if s.recording:
            s.emit(HandleSettled(pool=self.pool.name, req=s.name_of(self.pool.own.requests, r),
                                 handle=s.name_of(self.Handle, h), outcome=HandleState.members[outcome]))
        for p in s.all(self.pool.Page):
            pending[r, p] = pending[r, p] & keep

    def complete(self, s: Any, r: Member, h: Member, *, lands: bool = True) -> None:
        """``r``'s posted operation ``h`` completes (not enabled unless it is posted).

        With ``lands`` (a write: an RDMA read into local blocks, a load) each
        covered page now holds ``r``'s KV, whoever holds it by then: a page
        ``r`` no longer holds is written all the same and sets the ghost
        ``wrote_unowned[r]``.  ``lands=False`` for an operation that only
        reads its pages (a store or save job).
        """
        require(self.state(s, r, h) == HandleState.POSTED)
        if lands:
            content = getattr(s, self.pool.content_var)
            Req = self.pool.own.requests
            for p in s.all(self.pool.Page):
                if self._covers(s, r, h, p):
                    content[p] = r
                    unowned = not holds(s, self.pool, r, p)
                    if unowned:
                        s.wrote_unowned[r] = True
                    if s.recording:
                        flag = "no_unowned_write" if unowned and s.checks("no_unowned_write") else None
                        s.emit(Write(pool=self.pool.name, req=s.name_of(Req, r),
                                     page=s.name_of(self.pool.Page, p), violates=flag))
        self._settle(s, r, h, HandleState.DONE)

    def fail(self, s: Any, r: Member, h: Member) -> None:
        """``r``'s posted operation ``h`` fails (not enabled unless it is posted); it writes nothing more."""
        require(self.state(s, r, h) == HandleState.POSTED)
        self._settle(s, r, h, HandleState.FAILED)

    def cancel(self, s: Any, r: Member, h: Member) -> None:
        """Cancel ``r``'s operation ``h`` before it is posted (not enabled once posted): always honoured."""
        require(self.state(s, r, h) == HandleState.PREPARED)
        self._settle(s, r, h, HandleState.CANCELLED)

    def request_cancel(self, s: Any, r: Member, h: Member) -> Any:
        """Ask ``r``'s posted operation ``h`` to stop; the transport may honour or ignore it.

        Returns whether it was honoured (a nondeterministic choice: both
        outcomes are explored).  An ignored request leaves the operation
        posted, still able to complete or fail later; code that frees the
        pages right after asking is exactly the race this vocabulary exposes.
        """
        require(self.state(s, r, h) == HandleState.POSTED)
        honoured = s.choose([True, False], label=f"{self.name} cancel honoured")
        if honoured:
            self._settle(s, r, h, HandleState.CANCELLED)
        return honoured

    def reset(self, s: Any, r: Member) -> None:
        """Empty every slot of ``r`` for its next use (not enabled while one is outstanding)."""
        require(self.settled(s, r))
        st = getattr(s, self.state_var)
        for h in s.all(self.Handle):
            st[r, h] = HandleState.IDLE

    def free(self, s: Any, r: Member) -> list[Any]:
        """``pool.free(s, r)``: release ``r``'s pages now, flagging those an operation is still pending on.

        The state change is exactly the pool's ``free``.  The step is marked
        as violating the invariant registered by :meth:`invariant` when a page
        freed has an operation that is not terminal, in every engine (the
        page may be allocated again in the same action, so the state after
        it need not show the hazard); the trace gets an
        ``operation still pending`` event per page and handle.
        """
        flag = self.invariant_name if s.checks(self.invariant_name) else None
        Page, Req = self.pool.Page, self.pool.own.requests
        if flag is not None:
            hit = sum(holds(s, self.pool, r, p) & (self.pending_on(s, p) > 0) for p in s.all(Page))
            s.flag(flag, hit > 0)
        if s.recording:
            pending = getattr(s, self.pending_var)
            for p in s.all(Page):
                if not holds(s, self.pool, r, p):
                    continue
                for w in s.all(Req):
                    for h in s.all(self.Handle):
                        if (pending[w, p] >> ix(h)) & 1:
                            s.emit(OperationPending(pool=self.pool.name, req=s.name_of(Req, w),
                                                    handle=s.name_of(self.Handle, h),
                                                    page=s.name_of(Page, p), violates=flag))
        return self.pool.free(s, r)

    # -- invariants ------------------------------------------------------------
    def invariant(self, name: str = "no_release_with_operation_pending", *, spec: Spec | None = None) -> None:
        """Register: no page is on the free list while an operation covering it is not terminal.

        On this object's spec, or on ``spec`` (a spec derived from it).  With
        several kinds of operations on one spec, give each its own ``name``.
        """
        self.invariant_name = name
        free_var, pending_var, Page, Req = self.pool.free_var, self.pending_var, self.pool.Page, self.pool.own.requests

        def no_release_with_operation_pending(s: Any) -> bool:
            """No page returns to the free list while an operation on it is not terminal.

            A posted transfer cannot be called back: releasing the page when a
            sibling operation fails or finishes hands the stragglers' writes
            to whoever is given the page next.
            """
            free = getattr(s, free_var)
            pending = getattr(s, pending_var)
            for p in s.all(Page):
                if free[p] > 0 and sum(pending[w, p] != 0 for w in s.all(Req)) > 0:
                    return False
            return True

        (spec or self.spec).invariant(no_release_with_operation_pending, name=name)

    def terminal_when_idle(self, name: str = "handles_terminal_when_idle", *,
                           idle: Callable[[Any], Any] | None = None, spec: Spec | None = None) -> None:
        """Register: when the spec is idle, no operation is outstanding.

        ``idle(s)`` defaults to the spec's ``@spec.terminal`` predicate.  An
        operation left posted when every request is done is a leak of the
        transport's resources and of the pages it covers.
        """
        state_var, Req, Handle = self.state_var, self.pool.own.requests, self.Handle

        def handles_terminal_when_idle(s: Any) -> bool:
            """When no request is in flight, every operation slot is unused or terminal."""
            if not (idle(s) if idle is not None else s.terminal()):
                return True
            st = getattr(s, state_var)
            return sum(sum(st[r, h] == v for v in OUTSTANDING) for r in s.all(Req) for h in s.all(Handle)) == 0

        (spec or self.spec).invariant(handles_terminal_when_idle, name=name)

    def consistency(self, name: str = "handles_consistent", *, spec: Spec | None = None) -> None:
        """Register the helper invariant: a page's pending bit belongs to a prepared or posted operation.

        True by construction; a proof by induction starts from arbitrary
        states and needs it to rule out pending bits of terminal handles.
        """
        state_var, pending_var = self.state_var, self.pending_var
        Req, Handle, Page = self.pool.own.requests, self.Handle, self.pool.Page

        def handles_consistent(s: Any) -> bool:
            """A handle is pending on a page only while it is prepared or posted."""
            st = getattr(s, state_var)
            pending = getattr(s, pending_var)
            for r in s.all(Req):
                for h in s.all(Handle):
                    live = (st[r, h] == HandleState.PREPARED) | (st[r, h] == HandleState.POSTED)
                    if live:
                        continue
                    for p in s.all(Page):
                        if ((pending[r, p] >> ix(h)) & 1) != 0:
                            return False
            return True

        (spec or self.spec).invariant(handles_consistent, name=name, helper=True)


__all__ = ["OUTSTANDING", "HandleState", "Handles"]
