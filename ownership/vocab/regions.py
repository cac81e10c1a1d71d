"""Memory registration: which pages a transfer engine may touch.

An RDMA transfer engine (NIXL, Mooncake's transfer engine, UCX) only reads
or writes memory that is *registered* with it (``register_memory`` /
``registerLocalMemory``: the NIC holds a memory region and its keys).
Deregistering a region (``deregister_memory``) while a transfer of it is
still posted leaves the NIC working on memory it no longer owns: the
transfer fails, or reads memory that has meanwhile been released and reused.

The smallest model that captures it is one truth value per page: the page
is registered or not.  A region (a KV pool tensor registered at start-up, a
request's embedding registered for one send) is the set of pages it covers:

* ``Regions(pool, "mr")`` declares ``mr_deregistered[p]`` (true: the page is
  not registered), marked for the pictures with role ``"flag"`` and label
  ``"deregistered"``; ``registered=True`` (default) starts with every page
  registered, as after ``register_kv_caches``;
* ``register(s, r)`` / ``deregister(s, r)``: the pages ``r``'s page table
  holds (a per-request region); ``register_page``/``deregister_page`` one
  page; ``register_all``/``deregister_all`` the whole pool;
* ``invariant(*transfers)``: ``no_transfer_on_deregistered``, no posted
  transfer (an :class:`~ownership.vocab.reads.InflightReads` or
  :class:`~ownership.vocab.inflight.InflightWrites`) outstanding on a
  deregistered page: posting onto deregistered memory and deregistering
  under a posted transfer both break it, and a deregistration that races a
  transfer is flagged at that step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ownership.core.events import Deregistered, Registered, TransferOnDeregistered
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.elements import Member
from ownership.lang.model import Spec
from ownership.vocab.inflight import holds
from ownership.vocab.pool import PagePool


class Regions:
    """Registration of the pages of ``pool`` with a transfer engine; see the module docstring."""

    def __init__(self, pool: PagePool, name: str = "mr", *, registered: bool = True, spec: Spec | None = None,
                 doc: str = "") -> None:
        self.pool = pool
        self.name = name
        self.spec = spec or pool.own.spec
        self.var = f"{name}_deregistered"
        self.invariant_name = "no_transfer_on_deregistered"
        self.transfers: tuple[Any, ...] = ()
        self.spec.var(self.var, bool, per=pool.Page, init=not registered,
                      doc=doc or f"the page is not registered with the transfer engine ({name})")
        if self.spec is pool.own.spec:
            pool.mark(self.var, "flag", "deregistered")

    # -- queries ---------------------------------------------------------------
    def registered(self, s: Any, p: int) -> bool:
        """Page ``p`` is registered."""
        return not getattr(s, self.var)[p]

    def all_registered(self, s: Any, r: Member) -> bool:
        """Every page ``r``'s page table holds is registered (true when it holds none)."""
        dereg = getattr(s, self.var)
        # A count, not all(): one condition under the Z3 engines.
        return sum(holds(s, self.pool, r, p) & dereg[p] for p in s.all(self.pool.Page)) == 0  # type: ignore[no-any-return]

    # -- operations ------------------------------------------------------------
    def register(self, s: Any, r: Member) -> None:
        """Register the pages ``r``'s page table holds (``register_memory`` of the request's buffer)."""
        dereg = getattr(s, self.var)
        for p in s.all(self.pool.Page):
            # dereg &= not holds, without a branch: (1, 0) is the only pair that stays deregistered
            dereg[p] = dereg[p] > holds(s, self.pool, r, p)
        if s.recording:
            s.emit(Registered(pool=self.pool.name,
                              pages=tuple(s.name_of(self.pool.Page, p) for p in self.pool.pages_of(s, r))))

    def deregister(self, s: Any, r: Member) -> None:
        """Deregister the pages ``r``'s page table holds (``deregister_memory``); flags racing transfers."""
        Page = self.pool.Page
        self._check(s, [holds(s, self.pool, r, p) for p in s.all(Page)])
        dereg = getattr(s, self.var)
        for p in s.all(Page):
            dereg[p] = (dereg[p] | holds(s, self.pool, r, p)) == 1
        if s.recording:
            s.emit(Deregistered(pool=self.pool.name,
                                pages=tuple(s.name_of(Page, p) for p in self.pool.pages_of(s, r))))

    def register_page(self, s: Any, p: int) -> None:
        """Register page ``p``."""
        getattr(s, self.var)[p] = False
        if s.recording:
            s.emit(Registered(pool=self.pool.name, pages=(s.name_of(self.pool.Page, p),)))

    def deregister_page(self, s: Any, p: int) -> None:
        """Deregister page ``p``; flags a transfer of it still outstanding."""
        self._check(s, [q == p for q in s.all(self.pool.Page)])
        getattr(s, self.var)[p] = True
        if s.recording:
            s.emit(Deregistered(pool=self.pool.name, pages=(s.name_of(self.pool.Page, p),)))

    def register_all(self, s: Any) -> None:
        """Register every page of the pool (``register_kv_caches``)."""
        dereg = getattr(s, self.var)
        for p in s.all(self.pool.Page):
            dereg[p] = False
        if s.recording:
            s.emit(Registered(pool=self.pool.name, pages=tuple(s.name_of(self.pool.Page, p) for p in s.all(self.pool.Page))))

    def deregister_all(self, s: Any) -> None:
        """Deregister every page of the pool (shutdown, ``release_memory_occupation``); flags racing transfers."""
        every = s.all(self.pool.Page)
        self._check(s, [True for _ in every])
        dereg = getattr(s, self.var)
        for p in every:
            dereg[p] = True
        if s.recording:
            s.emit(Deregistered(pool=self.pool.name, pages=tuple(s.name_of(self.pool.Page, p) for p in every)))

    def _check(self, s: Any, covered: Sequence[Any]) -> None:
        """Flag (outside recording) a deregistration of pages ``covered`` that a watched transfer still uses."""
        if not self.transfers:
            return
        flag = self.invariant_name if s.checks(self.invariant_name) else None
        Req, Page = self.pool.own.requests, self.pool.Page
        pages = list(s.all(Page))
        if flag is not None:
            racing = sum(covered[i] & getattr(s, t.pending_var)[w, p]
                         for t in self.transfers for i, p in enumerate(pages) for w in s.all(Req))
            s.flag(flag, racing > 0)
        if s.recording:
            for t in self.transfers:
                pending = getattr(s, t.pending_var)
                for i, p in enumerate(pages):
                    for w in s.all(Req):
                        if covered[i] and pending[w, p]:
                            s.emit(TransferOnDeregistered(channel=t.name, pool=self.pool.name, req=s.name_of(Req, w),
                                                          page=s.name_of(Page, p), violates=flag))

    # -- invariant -------------------------------------------------------------
    def invariant(self, *transfers: Any, name: str = "no_transfer_on_deregistered", spec: Spec | None = None) -> None:
        """Register: no transfer of ``transfers`` is outstanding on a deregistered page.

        ``transfers`` are the posted operations on this pool (objects with a
        ``pending_var`` indexed by request and page, such as
        :class:`~ownership.vocab.reads.InflightReads` and
        :class:`~ownership.vocab.inflight.InflightWrites`); a deregistration
        that races one of them is flagged at that step.
        """
        if not transfers or not all(isinstance(getattr(t, "pending_var", None), str) for t in transfers):
            file, line = caller_location(2)
            raise OwnershipError(
                Code.REGIONS_NO_TRANSFERS,
                f"{self.name}.invariant() needs the posted transfers it watches (InflightReads or InflightWrites "
                f"of pool {self.pool.name}), got {', '.join(type(t).__name__ for t in transfers) or 'none'}",
                file, line,
            )
        self.transfers = tuple(transfers)
        self.invariant_name = name
        var, Page, Req = self.var, self.pool.Page, self.pool.own.requests
        pending_vars = tuple(t.pending_var for t in transfers)

        def no_transfer_on_deregistered(s: Any) -> bool:
            """No posted read or write is outstanding on a page that is not registered.

            The NIC works on registered memory only: a transfer posted onto a
            deregistered page, or a page deregistered under a posted
            transfer, fails or touches memory that is no longer the buffer's.
            """
            dereg = getattr(s, var)
            for pv in pending_vars:
                pending = getattr(s, pv)
                for p in s.all(Page):
                    for w in s.all(Req):
                        if dereg[p] and pending[w, p]:
                            return False
            return True

        (spec or self.spec).invariant(no_transfer_on_deregistered, name=name)


__all__ = ["Regions"]
