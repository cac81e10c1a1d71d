"""In-flight writes, in-flight steps and deferred frees: the vocabulary of asynchronous page writers.

A page pool's ``write`` and ``transfer`` happen at once.  Real writers do not:
an RDMA write from a prefill node, a forward pass already dispatched to the
GPU, a connector's load are *posted* with a destination page list fixed at
that moment and *land* later, whatever happened to those pages in between.
Freeing a page while such a write is outstanding hands the late write to the
page's next owner.  Engines fix that with a *fence*: the release is deferred
until the writer has drained (an acknowledgement) or until every step that
could still write has been processed (a step counter).

Three declarations cover both halves, written against the same public API as
:mod:`ownership.vocab.pool` (``spec.var``, ``require``, ``s.emit``, plain
loops over domains), so the explorer and the Z3 engines run them unchanged:

* :class:`InflightWrites`: writes posted into a pool that land later;
  ``post``, ``land``, ``drained``, ``free`` (release now, flagging pages
  still being written) and the invariant ``no_free_with_write_in_flight``;
* :class:`InflightSteps`: steps dispatched to the device whose outputs the
  scheduler has not processed yet (async scheduling, overlap scheduling):
  ``dispatch``, ``include``, ``complete``, ``count``, ``scheduled_in_flight``;
* :class:`DeferredFrees`: releases waiting for a fence; ``defer`` (optionally
  with a number of step completions to wait for), ``release``, ``advance``.

Every counter is *relative* (steps still in flight, fence events still to
pass), never an absolute sequence number, so the state space stays finite.
"""

from __future__ import annotations

from typing import Any

from ownership.core.events import FreeDeferred, Write, WriteInFlight, WritePosted
from ownership.lang.declarations import Domain
from ownership.lang.elements import Member, ix
from ownership.lang.guard import require
from ownership.lang.model import Spec
from ownership.vocab.operation import operation
from ownership.vocab.pool import PagePool


def holds(s: Any, pool: PagePool, r: Member, p: int) -> Any:
    """Whether ``r``'s page table holds page ``p`` (a truth value, symbolic under Z3).

    For invariants and helper invariants that quantify over pages: unlike
    ``pool.pages_of`` it gives one page's answer, which every engine can use.

    Compared with 0 rather than combined with other values: under Z3 a set of
    one request is a one-bit vector, which arithmetic would sign-extend.
    """
    return (getattr(s, pool.holders_var)[p] >> ix(r) & 1) != 0


class InflightWrites:
    """Writes into ``pool`` that are posted now and land later.

    ``writes = InflightWrites(pool, "rdma")`` declares ``rdma_pending[r, p]``:
    a write carrying ``r``'s KV into page ``p`` has been posted and has not
    landed.  The destination is fixed when the write is posted (an RDMA
    descriptor's ``dst_kv_indices``, a dispatched step's slot mapping); when it
    lands, it overwrites the page whoever holds it by then.
    """

    def __init__(self, pool: PagePool, name: str, *, spec: Spec | None = None, doc: str = "") -> None:
        self.pool = pool
        self.name = name
        self.spec = spec or pool.own.spec
        self.pending_var = f"{name}_pending"
        self.invariant_name = "no_free_with_write_in_flight"
        self.spec.var(self.pending_var, bool, per=(pool.own.requests, pool.Page), init=False,
                      doc=doc or f"a {name} write of the request's KV into the page is posted and has not landed")
        if self.spec is pool.own.spec:  # a mark names a variable of the pool's own spec
            pool.mark(self.pending_var, "pending", f"{name} write in flight")

    # -- queries ---------------------------------------------------------------
    def drained(self, s: Any, r: Member) -> bool:
        """No write of ``r`` is outstanding (every posted write has landed)."""
        pending = getattr(s, self.pending_var)
        # A count, not any(): under the Z3 engines this is one condition instead of a fork per page.
        return sum(pending[r, p] for p in s.all(self.pool.Page)) == 0  # type: ignore[no-any-return]

    def pending_into(self, s: Any, p: int) -> bool:
        """Some write into page ``p`` is outstanding."""
        pending = getattr(s, self.pending_var)
        return any(pending[w, p] for w in s.all(self.pool.own.requests))

    # -- operations ------------------------------------------------------------
    def post(self, s: Any, r: Member) -> None:
        """Post a write of ``r``'s KV into every page ``r``'s page table holds now."""
        pending = getattr(s, self.pending_var)
        for p in s.all(self.pool.Page):
            # pending |= holds, written without a branch (one symbolic path instead of two per page)
            pending[r, p] = (holds(s, self.pool, r, p) | pending[r, p]) == 1
        if s.recording:
            posted = self.pool.pages_of(s, r)
            s.emit(WritePosted(channel=self.name, pool=self.pool.name, req=s.name_of(self.pool.own.requests, r),
                               pages=tuple(s.name_of(self.pool.Page, p) for p in posted)))

    def land(self, s: Any, r: Member) -> None:
        """Every outstanding write of ``r`` lands: each target page now holds ``r``'s KV.

        A page ``r`` no longer holds is written all the same (that is the
        hazard) and sets the ghost ``wrote_unowned[r]`` (``no_unowned_write``).
        Lands nothing if nothing is outstanding; guard with :meth:`drained`.
        """
        pending = getattr(s, self.pending_var)
        content = getattr(s, self.pool.content_var)
        Req = self.pool.own.requests
        for p in s.all(self.pool.Page):
            if pending[r, p]:
                pending[r, p] = False
                content[p] = r
                unowned = not holds(s, self.pool, r, p)
                if unowned:
                    s.wrote_unowned[r] = True
                if s.recording:
                    flag = "no_unowned_write" if unowned and s.checks("no_unowned_write") else None
                    s.emit(Write(pool=self.pool.name, req=s.name_of(Req, r),
                                 page=s.name_of(self.pool.Page, p), violates=flag))

    @operation
    def free(self, s: Any, r: Member) -> Any:
        """``pool.free(s, r)``: release ``r``'s pages now; flag those with a write in flight.

        The state change is exactly the pool's ``free``.  For the trace, a
        page that still has a write outstanding gets a ``write still in
        flight`` event (naming the writer and the page) marked with the
        invariant registered by :meth:`invariant` when the spec checks it.
        """
        pages = self.pool.free(s, r)
        flag = self.invariant_name if s.checks(self.invariant_name) else None
        pending = getattr(s, self.pending_var)
        Req = self.pool.own.requests
        if s.recording or flag is not None:
            # Checked outside the recording branch: a search does not record, and the violation
            # must be seen there too.
            for p in pages:
                for w in s.all(Req):
                    if pending[w, p]:
                        s.emit(WriteInFlight(pool=self.pool.name, req=s.name_of(Req, w),
                                             page=s.name_of(self.pool.Page, p), violates=flag))
        return pages

    # -- invariant -------------------------------------------------------------
    def invariant(self, name: str = "no_free_with_write_in_flight", *, spec: Spec | None = None) -> None:
        """Register: no page returns to the free list while a write into it is outstanding.

        On this object's spec, or on ``spec`` (a spec derived from it).  With
        several writers on one spec, give each its own ``name``.
        """
        self.invariant_name = name
        free_var, pending_var, Page, Req = self.pool.free_var, self.pending_var, self.pool.Page, self.pool.own.requests

        def no_free_with_write_in_flight(s: Any) -> bool:
            """No page returns to the free list while a write into it is still in flight.

            A posted write lands in its destination page whoever holds it by
            then: freeing the page first hands the late write to its next owner.
            """
            free = getattr(s, free_var)
            pending = getattr(s, pending_var)
            for p in s.all(Page):
                if free[p] > 0 and any(pending[w, p] for w in s.all(Req)):
                    return False
            return True

        (spec or self.spec).invariant(no_free_with_write_in_flight, name=name)


class InflightSteps:
    """Steps dispatched to the device whose outputs the scheduler has not processed.

    With async scheduling the scheduler dispatches step N+1 before it has
    processed step N's output.  ``steps = InflightSteps(spec, Req, "max_concurrent_batches")``
    declares

    * ``steps_in_flight``: dispatched and not yet processed
      (``sched_step_seq - processed_step_seq``), at most ``depth``;
    * ``steps_last[r]``: how many of those steps must still be processed
      before ``r``'s most recent step is (``last_sched_seq - processed_step_seq``,
      0 when ``r`` is in no step in flight).
    """

    def __init__(self, spec: Spec, requests: Domain, depth: str | int, *, name: str = "steps") -> None:
        self.spec = spec
        self.requests = requests
        self.depth = depth
        self.count_var = f"{name}_in_flight"
        self.last_var = f"{name}_last"
        spec.var(self.count_var, int, init=0, doc="steps dispatched whose output is not processed yet")
        spec.var(self.last_var, int, per=requests, init=0,
                 doc="steps still to process until the request's most recent step is (0: none in flight)")

    def _depth(self, s: Any) -> int:
        return getattr(s.params, self.depth) if isinstance(self.depth, str) else self.depth

    def count(self, s: Any) -> int:
        """Steps in flight; deferring until they are all processed fences on the newest one."""
        return getattr(s, self.count_var)  # type: ignore[no-any-return]

    def scheduled_in_flight(self, s: Any, r: Member) -> bool:
        """``r`` is in a step whose output is not processed (``last_sched_seq > processed_step_seq``)."""
        return getattr(s, self.last_var)[r] > 0  # type: ignore[no-any-return]

    def in_oldest_only(self, s: Any, r: Member) -> bool:
        """``r``'s most recent step is the oldest one in flight."""
        return getattr(s, self.last_var)[r] == 1  # type: ignore[no-any-return]

    def invariant(self, name: str = "steps_in_range", *, spec: Spec | None = None) -> None:
        """Register the counters' range as a helper invariant (true by construction; helps induction).

        ``0 <= steps_in_flight <= depth`` and ``0 <= steps_last[r] <= steps_in_flight``:
        facts the explorer never needs but a proof by induction does, since it
        starts from arbitrary values.
        """
        count_var, last_var, Req, depth = self.count_var, self.last_var, self.requests, self._depth

        def steps_in_range(s: Any) -> bool:
            """Steps in flight stay within the depth, and each request's latest step among them."""
            n = getattr(s, count_var)
            last = getattr(s, last_var)
            return 0 <= n <= depth(s) and all(0 <= last[r] <= n for r in s.all(Req))

        (spec or self.spec).invariant(steps_in_range, name=name, helper=True)

    def dispatch(self, s: Any) -> None:
        """Dispatch a new step; not enabled when ``depth`` steps are already in flight."""
        require(getattr(s, self.count_var) < self._depth(s))
        setattr(s, self.count_var, getattr(s, self.count_var) + 1)

    def include(self, s: Any, r: Member) -> None:
        """``r`` is scheduled in the step just dispatched (``request.last_sched_seq = sched_step_seq``)."""
        getattr(s, self.last_var)[r] = getattr(s, self.count_var)

    def complete(self, s: Any) -> None:
        """The oldest step's output is processed (``processed_step_seq += 1``)."""
        require(getattr(s, self.count_var) > 0)
        setattr(s, self.count_var, getattr(s, self.count_var) - 1)
        last = getattr(s, self.last_var)
        for r in s.all(self.requests):
            last[r] = last[r] - (last[r] > 0)  # down to 0, without a branch


class DeferredFrees:
    """Releases of page tables deferred until a fence has passed.

    ``deferred = DeferredFrees(pool)`` declares ``deferred_held[r]`` (``r``'s
    pages are out of service but not yet back on the free list) and
    ``deferred_fence[r]`` (how many fence events must still pass).  The pages
    stay in ``r``'s page table while held, so the allocator cannot hand them
    out and a late write into them is still a write into ``r``'s own pages.
    With ``writes=``, releases go through :meth:`InflightWrites.free`, so a
    release that races a write is flagged in the trace.
    """

    def __init__(
        self, pool: PagePool, name: str = "deferred", *, spec: Spec | None = None, writes: InflightWrites | None = None
    ) -> None:
        self.pool = pool
        self.spec = spec or pool.own.spec
        self.writes = writes
        Req = pool.own.requests
        self.held_var = f"{name}_held"
        self.fence_var = f"{name}_fence"
        self.spec.var(self.held_var, bool, per=Req, init=False,
                      doc=f"the request's {pool.name} pages wait in the deferred-free queue")
        self.spec.var(self.fence_var, int, per=Req, init=0,
                      doc="fence events still to pass before the held pages return (0: until released)")

    def holding(self, s: Any, r: Member) -> bool:
        """``r``'s pages are held in the queue."""
        return getattr(s, self.held_var)[r]  # type: ignore[no-any-return]

    def empty(self, s: Any) -> bool:
        """Nothing is held."""
        held = getattr(s, self.held_var)
        return not any(held[r] for r in s.all(self.pool.own.requests))

    def defer(self, s: Any, r: Member, fence: Any = 0) -> None:
        """Hold ``r``'s pages instead of freeing them.

        With ``fence > 0`` they return by themselves after that many calls of
        :meth:`advance` (a step-sequence fence: pass ``steps.count(s)`` to wait
        for the newest step in flight); with ``fence == 0`` only :meth:`release`
        returns them (an acknowledgement).
        """
        getattr(s, self.held_var)[r] = True
        getattr(s, self.fence_var)[r] = fence
        if s.recording:
            s.emit(FreeDeferred(pool=self.pool.name, req=s.name_of(self.pool.own.requests, r),
                                pages=tuple(s.name_of(self.pool.Page, p) for p in self.pool.pages_of(s, r))))

    def release(self, s: Any, r: Member) -> None:
        """Return the pages held for ``r`` to the free list (content stays, as with ``free``)."""
        held = getattr(s, self.held_var)
        require(held[r])
        held[r] = False
        getattr(s, self.fence_var)[r] = 0
        if self.writes is not None:
            self.writes.free(s, r)
        else:
            self.pool.free(s, r)

    def advance(self, s: Any) -> None:
        """One fence event passes: holds whose count reaches zero return to the free list."""
        held = getattr(s, self.held_var)
        fence = getattr(s, self.fence_var)
        for r in s.all(self.pool.own.requests):
            if held[r] and fence[r] == 1:  # the last fence event this hold waits for
                self.release(s, r)
            else:
                fence[r] = fence[r] - (fence[r] > 0)  # 0 (not held, or held until released) stays 0


__all__ = ["DeferredFrees", "InflightSteps", "InflightWrites", "holds"]
