"""In-flight reads: a remote peer reads a request's pages, and the read lands later.

A pool's ``read`` happens at once: the request's own attention reads its
pages.  Many readers are elsewhere and asynchronous: a decode node's RDMA
READ of a prefill node's KV blocks (NIXL), a store client's ``Get`` reading a
replica, an offload job copying pages to host memory.  Such a read is
*posted* with its source page list fixed at that moment (the descriptor's
``remote_block_ids``) and *lands* later, seeing whatever those pages hold
by then.  Freeing a page while a read of it is outstanding lets the
allocator hand it to another request, whose KV the late read then returns:
the reader receives another tenant's KV.

:class:`InflightReads` is the counterpart of
:class:`ownership.vocab.inflight.InflightWrites`, written with the same
public primitives (``spec.var``, ``s.flag``, plain loops over domains,
conditional writes without branches where possible), so the explorer and
the Z3 engines run it unchanged:

* ``post(s, r)``: post a read of every page ``r``'s page table holds now;
* ``land(s, r)``: every outstanding read of ``r`` sees the pages' content
  *now*, through ``pool.read``, so a page that holds another request's KV
  by then sets the ghost ``read_foreign[r]`` (``no_foreign_read``) and a
  never-written one ``read_unwritten[r]``;
* ``discard(s, r)``: the reads complete but their data is dropped (a store
  client that answers ``LEASE_EXPIRED`` instead of returning what it read);
* ``drained``, ``pending_of``; ``free(s, r)``: ``pool.free`` that flags the
  pages still being read;
* the invariant ``no_free_with_read_in_flight``: no page with a read
  outstanding is on the free list or in another request's page table.

Where the data goes is not modelled here: a read into pages of another pool
that may themselves be freed is, on that side, an
:class:`~ownership.vocab.inflight.InflightWrites` posted and landed with it.
"""

from __future__ import annotations

from typing import Any

from ownership.core.events import ReadInFlight, ReadPosted
from ownership.lang.elements import Member
from ownership.lang.model import Spec
from ownership.vocab.inflight import holds
from ownership.vocab.pool import PagePool


class InflightReads:
    """Reads of pages of ``pool`` that are posted now and land later.

    ``reads = InflightReads(pool, "nixl")`` declares ``nixl_pending[r, p]``:
    a read of page ``p`` on behalf of ``r`` (whose KV it is meant to return)
    has been posted and has not landed.  The variable is marked for the
    pictures with role ``"pending"``.  Declared on a derived spec
    (``spec=fixed``), it is not marked: the pool's marks belong to the spec
    the pool was declared in.
    """

    def __init__(self, pool: PagePool, name: str, *, spec: Spec | None = None, doc: str = "") -> None:
        self.pool = pool
        self.name = name
        self.spec = spec or pool.own.spec
        self.pending_var = f"{name}_pending"
        self.invariant_name = "no_free_with_read_in_flight"
        self.spec.var(self.pending_var, bool, per=(pool.own.requests, pool.Page), init=False,
                      doc=doc or f"a {name} read of the page on behalf of the request is posted and has not landed")
        if self.spec is pool.own.spec:
            pool.mark(self.pending_var, "pending", f"{name} read")

    # -- queries ---------------------------------------------------------------
    def drained(self, s: Any, r: Member) -> bool:
        """No read of ``r`` is outstanding (every posted read has landed or been discarded)."""
        pending = getattr(s, self.pending_var)
        # A count, not any(): under the Z3 engines this is one condition instead of a fork per page.
        return sum(pending[r, p] for p in s.all(self.pool.Page)) == 0  # type: ignore[no-any-return]

    def pending_of(self, s: Any, p: int) -> bool:
        """Some read of page ``p`` is outstanding."""
        pending = getattr(s, self.pending_var)
        return sum(pending[w, p] for w in s.all(self.pool.own.requests)) > 0  # type: ignore[no-any-return]

    # -- operations ------------------------------------------------------------
    def post(self, s: Any, r: Member) -> None:
        """Post a read of every page ``r``'s page table holds now (the source list is fixed here)."""
        pending = getattr(s, self.pending_var)
        for p in s.all(self.pool.Page):
            # pending |= holds, written without a branch (one symbolic path instead of two per page)
            pending[r, p] = (holds(s, self.pool, r, p) | pending[r, p]) == 1
        if s.recording:
            posted = self.pool.pages_of(s, r)
            s.emit(ReadPosted(channel=self.name, pool=self.pool.name, req=s.name_of(self.pool.own.requests, r),
                              pages=tuple(s.name_of(self.pool.Page, p) for p in posted)))

    def land(self, s: Any, r: Member) -> None:
        """Every outstanding read of ``r`` lands: ``r`` receives what each page holds *now*.

        Each page is read with ``pool.read``: content written by another
        request is a foreign read by ``r`` (``no_foreign_read``), content
        nobody wrote a read of garbage (``no_read_of_unwritten``).  Lands
        nothing if nothing is outstanding; guard with :meth:`drained`.
        """
        pending = getattr(s, self.pending_var)
        for p in s.all(self.pool.Page):
            if pending[r, p]:
                pending[r, p] = False
                self.pool.read(s, r, [p])

    def discard(self, s: Any, r: Member) -> None:
        """Every outstanding read of ``r`` completes and its data is dropped (nothing is received)."""
        pending = getattr(s, self.pending_var)
        for p in s.all(self.pool.Page):
            pending[r, p] = False

    def free(self, s: Any, r: Member) -> list[int]:
        """``pool.free(s, r)``: release ``r``'s pages now; flag those with a read in flight.

        The state change is exactly the pool's ``free``.  The step is a
        violation of the invariant registered by :meth:`invariant` (when the
        spec checks it) if a page ``r`` releases has a read outstanding, by
        any reader: flagged outside recording, since the page may be
        allocated again before the action ends and a search does not record.
        For the trace, each such page gets a ``read still in flight`` event.
        """
        Req, Page = self.pool.own.requests, self.pool.Page
        pending = getattr(s, self.pending_var)
        flag = self.invariant_name if s.checks(self.invariant_name) else None
        if flag is not None:
            # Taken before the free: the pages r holds now are the ones it releases.
            racing = sum(holds(s, self.pool, r, p) & pending[w, p] for p in s.all(Page) for w in s.all(Req))
            s.flag(flag, racing > 0)
        pages = self.pool.free(s, r)
        if s.recording:
            for p in pages:
                for w in s.all(Req):
                    if pending[w, p]:
                        s.emit(ReadInFlight(pool=self.pool.name, req=s.name_of(Req, w),
                                            page=s.name_of(Page, p), violates=flag))
        return pages

    # -- invariant -------------------------------------------------------------
    def invariant(self, name: str = "no_free_with_read_in_flight", *, spec: Spec | None = None) -> None:
        """Register: no page with a read outstanding is free, or held by a request other than the reader.

        On this object's spec, or on ``spec`` (a spec derived from it).  With
        several reading channels on one spec, give each its own ``name``.
        """
        self.invariant_name = name
        free_var, pending_var, pool = self.pool.free_var, self.pending_var, self.pool
        Page, Req = self.pool.Page, self.pool.own.requests

        def no_free_with_read_in_flight(s: Any) -> bool:
            """No page is freed, or handed to another request, while a read of it is still in flight.

            A posted read returns what the page holds when it lands: once the
            page is back on the free list (or reused) the reader may receive
            another request's KV.
            """
            free = getattr(s, free_var)
            pending = getattr(s, pending_var)
            for p in s.all(Page):
                for w in s.all(Req):
                    if pending[w, p]:
                        reused = sum(holds(s, pool, v, p) for v in s.all(Req) if v != w) > 0
                        if free[p] > 0 or reused:
                            return False
            return True

        (spec or self.spec).invariant(no_free_with_read_in_flight, name=name)


__all__ = ["InflightReads"]
