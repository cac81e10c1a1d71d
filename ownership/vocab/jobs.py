"""Jobs with their own page references, request ids reused by new lifecycles, and counters that stay non-negative.

An asynchronous job (a KV send the remote decode pulls, an offload store, a
save to host) often outlives the request that started it.  It then holds
its *own* reference to the pages it reads: the request may release its page
table, but the pages stay off the free list until the job is done.  Its
completion arrives later, addressed by request id; if the id has been reused
by a new request since (a client reusing an id, a retried request), a
completion keyed by the id alone lands on the *new* lifecycle: it frees the
new request's pages, or marks it finished.  Engines fix that with a
generation (an internal id per lifecycle): the completion of generation
``g`` must not touch generation ``g + 1``.

``Jobs(pool, "send")`` declares, with the public spec API so every engine
runs it unchanged:

* ``SendAge``: the ordered domain ``0 .. generations - 1`` of ages, how many
  lifecycles of an id began after a job's own (0: the current one).  Ages
  are relative and bounded, so the state stays finite however often an id
  is reused;
* ``send_running[r]``: the ages of request id ``r``'s running jobs (bits);
* ``send_refs[r, p]``: the ages of ``r``'s jobs holding their own reference
  to page ``p`` (bits);
* ``send_holders[p]``: the ids one of whose jobs references ``p`` (marked
  ``keeper``: such a page is neither free nor lost);
* the ghost ``send_stale[r]``: a completion of an older lifecycle was applied
  to ``r``'s current one.

Invariants: ``no_free_while_job_holds``, ``no_stale_completion`` and the
helper ``jobs_consistent``.  :func:`counters_nonnegative` registers, for any
integer variables a spec names, that they never go below zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ownership.core.events import Free, JobDone, JobHolds, JobKeeps, JobStarted, StaleCompletion
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.declarations import Domain
from ownership.lang.elements import Member, ix
from ownership.lang.guard import require
from ownership.lang.model import Spec
from ownership.lang.types import IntType, SetOf
from ownership.vocab.inflight import holds
from ownership.vocab.pool import PagePool


class Jobs:
    """Asynchronous jobs of ``pool``'s requests, at most one per lifecycle of a request id, with their own page references.

    ``generations`` bounds how many lifecycles back a running job may be:
    with the default 2 a job may see its id reused once before it completes
    (a further reuse waits for it).  ``jobs.Age`` is the domain of ages
    (ordered ints ``0 .. generations - 1``, 0 the current lifecycle), for
    action arguments such as the lifecycle a completion belongs to.
    """

    def __init__(self, pool: PagePool, name: str, *, generations: int = 2, spec: Spec | None = None,
                 doc: str = "") -> None:
        self.pool = pool
        self.name = name
        self.spec = spec or pool.own.spec
        if not name.isidentifier():
            file, line = caller_location(2)
            raise OwnershipError(Code.OPERATIONS_INVALID, f"Jobs name {name!r} is not an identifier", file, line)
        if not isinstance(generations, int) or isinstance(generations, bool) or generations < 1:
            file, line = caller_location(2)
            raise OwnershipError(Code.OPERATIONS_INVALID,
                                 f"Jobs {name!r}: generations must be an int >= 1 (1: an id is never reused "
                                 f"while its job runs), got {generations!r}", file, line)
        self.generations = generations
        Req = pool.own.requests
        title = name[:1].upper() + name[1:]
        self.Age: Domain = self.spec.domain(f"{title}Age", generations, ordered=True, names=lambda i: f"age{i}",
                                            doc=f"how many lifecycles of its id began after a {name} job's own")
        self.running_var = f"{name}_running"
        self.refs_var = f"{name}_refs"
        self.holders_var = f"{name}_holders"
        self.stale_var = f"{name}_stale"
        self.invariant_name = "no_free_while_job_holds"
        self.spec.var(self.running_var, int, per=Req, init=0,
                      doc=f"the ages (bit a: a lifecycles back, bit 0 the current one) of the id's running {name} jobs")
        self.spec.var(self.refs_var, int, per=(Req, pool.Page), init=0,
                      doc=f"the ages of the id's {name} jobs holding their own reference to the page (bits)")
        self.spec.var(self.holders_var, SetOf(Req), per=pool.Page, init=0,
                      doc=doc or f"request ids one of whose {name} jobs holds a reference to the page")
        self.spec.var(self.stale_var, bool, per=Req, init=False, ghost=True,
                      doc=f"history: a {name} completion of an older lifecycle was applied to the current one")
        pool.mark(self.holders_var, "keeper", f"{name} job")

    # -- queries ---------------------------------------------------------------
    def running(self, s: Any, r: Member, age: Any = 0) -> Any:
        """Request id ``r`` has a running job of the lifecycle ``age`` generations back (0: the current one)."""
        return ((getattr(s, self.running_var)[r] >> age) & 1) != 0

    def any_running(self, s: Any, r: Member) -> Any:
        """Request id ``r`` has a running job of any lifecycle."""
        return getattr(s, self.running_var)[r] != 0

    def idle(self, s: Any) -> Any:
        """No job is running (so no page is kept by one)."""
        running = getattr(s, self.running_var)
        return sum(running[r] != 0 for r in s.all(self.pool.own.requests)) == 0

    def refs_of(self, s: Any, r: Member, p: Member, age: Any = 0) -> Any:
        """The job of ``r``'s lifecycle ``age`` generations back references page ``p``."""
        return ((getattr(s, self.refs_var)[r, p] >> age) & 1) != 0

    def references(self, s: Any, r: Member, p: Member) -> Any:
        """Some job of request id ``r`` (of any lifecycle) references page ``p``."""
        return getattr(s, self.refs_var)[r, p] != 0

    def keeps(self, s: Any, p: Member) -> Any:
        """Some job references page ``p``."""
        return getattr(s, self.holders_var)[p] != 0

    def _req(self, s: Any, r: Member) -> str:
        return s.name_of(self.pool.own.requests, r)  # type: ignore[no-any-return]

    def _sync(self, s: Any, r: Member, p: Member) -> None:
        """Keep the per-page keeper set in step with ``r``'s references to ``p`` (without a branch)."""
        jobs = getattr(s, self.holders_var)
        bit = 1 << ix(r)
        has = getattr(s, self.refs_var)[r, p] != 0
        jobs[p] = (jobs[p] & ~bit) | (has * bit)

    # -- operations ------------------------------------------------------------
    def start(self, s: Any, r: Member, pages: Sequence[Member] | None = None) -> None:
        """Start the current lifecycle's job of ``r`` (not enabled while it has one).

        The job references every page ``r``'s table holds now, or only
        ``pages`` (a concrete list, such as the blocks of this lifecycle).
        """
        running = getattr(s, self.running_var)
        require((running[r] & 1) == 0)
        running[r] = running[r] | 1
        refs = getattr(s, self.refs_var)
        for p in s.all(self.pool.Page):
            cover = holds(s, self.pool, r, p) if pages is None else any(p == q for q in pages)
            refs[r, p] = refs[r, p] | cover  # bit 0 where covered, without a branch: one symbolic path
            self._sync(s, r, p)
        if s.recording:
            s.emit(JobStarted(channel=self.name, pool=self.pool.name, req=self._req(s, r),
                              pages=tuple(s.name_of(self.pool.Page, p) for p in s.all(self.pool.Page)
                                          if refs[r, p] & 1)))

    def release(self, s: Any, r: Member) -> None:
        """``r`` releases its page table: pages no job references return to the free list, the others stay out.

        This is the free of a request whose job still needs its pages (vLLM's
        ``request_finished`` returning ``delay_free_blocks``): they leave the
        request's table but not for the free list, until :meth:`complete`.
        """
        free = getattr(s, self.pool.free_var)
        holders = getattr(s, self.pool.holders_var)
        slot = getattr(s, self.pool.slot_var)
        jobs = getattr(s, self.holders_var)
        keep = ~(1 << ix(r))
        freed: list[str] = []
        kept: list[str] = []
        for p in s.all(self.pool.Page):
            mine = holds(s, self.pool, r, p)
            unkept = mine & (jobs[p] == 0)
            if s.recording and mine:
                (kept if jobs[p] else freed).append(s.name_of(self.pool.Page, p))
            holders[p] = holders[p] & keep
            slot[p] = slot[p] + mine * (-1 - slot[p])  # -1 where r held it, without a branch
            free[p] = free[p] + unkept
        if s.recording:
            if freed:
                s.emit(Free(pool=self.pool.name, req=self._req(s, r), pages=tuple(freed)))
            if kept:
                s.emit(JobKeeps(channel=self.name, pool=self.pool.name, req=self._req(s, r), pages=tuple(kept)))

    def complete(self, s: Any, r: Member, age: Any = 0, *, touches_current: bool = False) -> None:
        """The job of ``r``'s lifecycle ``age`` generations back completes and drops its references.

        Not enabled unless that job runs.  A page whose last reference this
        was, and which no request holds, returns to the free list (unless it
        is already there: freed under the job, which is flagged where it
        happened).
        ``touches_current=True`` says the caller applies the completion to
        request id ``r``'s *current* lifecycle (a completion addressed by the
        id alone: it frees the id's pages, or finishes it); for a job of an
        older lifecycle (``age > 0``) that is a stale completion, recorded in
        the ghost and flagged (``no_stale_completion``).
        """
        running = getattr(s, self.running_var)
        bit = 1 << age
        require((running[r] & bit) != 0)
        running[r] = running[r] & ~bit
        free = getattr(s, self.pool.free_var)
        holders = getattr(s, self.pool.holders_var)
        refs = getattr(s, self.refs_var)
        freed: list[str] = []
        for p in s.all(self.pool.Page):
            mine = (refs[r, p] & bit) != 0
            refs[r, p] = refs[r, p] & ~bit
            self._sync(s, r, p)
            # Back to the free list if nothing else holds it, and only once: a page already freed
            # under the job (a violation flagged where it happened) is not freed a second time.
            back = mine & (getattr(s, self.holders_var)[p] == 0) & (holders[p] == 0) & (free[p] == 0)
            if s.recording and back:
                freed.append(s.name_of(self.pool.Page, p))
            free[p] = free[p] + back
        if s.recording:
            s.emit(JobDone(channel=self.name, pool=self.pool.name, req=self._req(s, r), age=int(age),
                           pages=tuple(freed)))
        if touches_current and age > 0:
            getattr(s, self.stale_var)[r] = True
            flag = "no_stale_completion" if s.checks("no_stale_completion") else None
            s.emit(StaleCompletion(channel=self.name, req=self._req(s, r), age=int(age), violates=flag))

    def new_lifecycle(self, s: Any, r: Member) -> None:
        """Request id ``r`` begins a new lifecycle: every running job of the id is one generation older.

        Not enabled when a job would become ``generations`` lifecycles old
        (the bound that keeps the state finite).
        """
        running = getattr(s, self.running_var)
        top = 1 << (self.generations - 1)
        require((running[r] & top) == 0)
        running[r] = running[r] << 1
        refs = getattr(s, self.refs_var)
        for p in s.all(self.pool.Page):
            refs[r, p] = refs[r, p] << 1

    def free(self, s: Any, r: Member) -> list[Any]:
        """``pool.free(s, r)``, flagging pages a job still references (they go to the free list regardless).

        The release path of a spec that ignores the job's reference: the
        step violates the invariant registered by :meth:`invariant` (in every
        engine) and the trace gets a ``job still holds`` event per page.
        """
        flag = self.invariant_name if s.checks(self.invariant_name) else None
        Page, Req = self.pool.Page, self.pool.own.requests
        if flag is not None:
            s.flag(flag, sum(holds(s, self.pool, r, p) & self.keeps(s, p) for p in s.all(Page)) > 0)
        if s.recording:
            jobs = getattr(s, self.holders_var)
            for p in s.all(Page):
                if holds(s, self.pool, r, p):
                    for w in s.all(Req):
                        if (jobs[p] >> ix(w)) & 1:
                            s.emit(JobHolds(channel=self.name, pool=self.pool.name, req=self._req(s, w),
                                            page=s.name_of(Page, p), violates=flag))
        return self.pool.free(s, r)

    # -- invariants ------------------------------------------------------------
    def invariant(self, name: str = "no_free_while_job_holds", *, spec: Spec | None = None) -> None:
        """Register: no page is on the free list while a job references it."""
        self.invariant_name = name
        free_var, jobs_var, Page = self.pool.free_var, self.holders_var, self.pool.Page

        def no_free_while_job_holds(s: Any) -> bool:
            """No page sits on the free list while a job still holds its own reference to it.

            The job reads (or writes) the page until it completes: handing it
            to another request first mixes that request's KV with the job's.
            """
            free = getattr(s, free_var)
            jobs = getattr(s, jobs_var)
            return all(not (free[p] > 0 and jobs[p] != 0) for p in s.all(Page))

        (spec or self.spec).invariant(no_free_while_job_holds, name=name)

    def no_stale_completion(self, name: str = "no_stale_completion", *, spec: Spec | None = None) -> None:
        """Register: no completion of a job of an older lifecycle is applied to the id's current lifecycle."""
        stale_var, Req = self.stale_var, self.pool.own.requests

        def no_stale_completion(s: Any) -> bool:
            """A job's completion never acts on a newer lifecycle of its request id.

            When an id is reused, a completion addressed by the id alone lands
            on the new request: freeing its pages while it runs, or finishing it.
            """
            ghost = getattr(s, stale_var)
            return not any(ghost[r] for r in s.all(Req))

        (spec or self.spec).invariant(no_stale_completion, name=name)

    def consistency(self, name: str = "jobs_consistent", *, spec: Spec | None = None) -> None:
        """Register the helper invariant: ages and references stay within their bounds and agree.

        Only ages below ``generations`` run; a reference belongs to a running
        job; the keeper set of a page is exactly the ids with a reference.
        True by construction; ``ownership prove`` needs it, since induction
        starts from arbitrary values.
        """
        running_var, refs_var, jobs_var = self.running_var, self.refs_var, self.holders_var
        Req, Page, limit = self.pool.own.requests, self.pool.Page, 1 << self.generations

        def jobs_consistent(s: Any) -> bool:
            """Running ages are in range, references belong to running jobs, keeper sets match references."""
            running = getattr(s, running_var)
            refs = getattr(s, refs_var)
            jobs = getattr(s, jobs_var)
            for r in s.all(Req):
                if not 0 <= running[r] < limit:
                    return False
                for p in s.all(Page):
                    if refs[r, p] < 0 or (refs[r, p] & ~running[r]) != 0:
                        return False
                    if (refs[r, p] != 0) != (((jobs[p] >> ix(r)) & 1) != 0):
                        return False
            return True

        (spec or self.spec).invariant(jobs_consistent, name=name, helper=True)


def counters_nonnegative(spec: Spec, *names: str, name: str = "counters_nonnegative", helper: bool = False) -> None:
    """Register on ``spec``: every cell of the integer variables ``names`` is at least zero.

    For reference counts, lock counts, outstanding-operation counts: a
    negative value is a double release.  ``helper=True`` registers it as a
    helper invariant (a fact for proofs rather than a property).  A name that
    is not a declared integer variable is OWN096 at the calling line.
    """
    if not names:
        file, line = caller_location(2)
        raise OwnershipError(Code.COUNTER_NOT_INT, "counters_nonnegative needs at least one variable name", file, line)
    for n in names:
        var = spec.vars.get(n)
        if var is None or not isinstance(var.type, IntType):
            file, line = caller_location(2)
            what = "is not a declared variable" if var is None else "is not an integer variable"
            raise OwnershipError(Code.COUNTER_NOT_INT, f"counters_nonnegative: {n!r} {what}", file, line)
    chosen: Sequence[str] = tuple(names)
    doms = {n: [d for d in spec.vars[n].index] for n in chosen}

    def counters_nonnegative(s: Any) -> bool:
        """The named counters never go below zero (a negative count is a release too many)."""
        for n in chosen:
            field = getattr(s, n)
            index = doms[n]
            if not index:
                if field < 0:
                    return False
                continue
            for key in _cells(s, index):
                if field[key] < 0:
                    return False
        return True

    counters_nonnegative.__doc__ = f"The counters {', '.join(chosen)} never go below zero (a negative count is a " \
        "release too many)."
    spec.invariant(counters_nonnegative, name=name, helper=helper)


def _cells(s: Any, index: Sequence[Any]) -> list[Any]:
    """Every key of a variable indexed by ``index``: an element for one domain, a tuple for several."""
    keys: list[tuple[Any, ...]] = [()]
    for d in index:
        keys = [k + (e,) for k in keys for e in s.all(d)]
    return [k[0] for k in keys] if len(index) == 1 else keys


__all__ = ["Jobs", "counters_nonnegative"]
