"""An abort of one request between another's allocation and its free, of one specific page.

Five requests share a pool of six pages; ``alloc`` takes any free page
(``s.choose``), ``free`` returns it, ``abort`` cancels a request that has not
been allocated yet.  The bug: ``abort`` of the last request (E) also clears
the page table entry of page 5, whoever holds it.  So it takes an allocation
of exactly page 5 by another request, then E's abort before that request
frees it.  Expected: violates held_pages_allocated (2 steps: alloc A page 5,
abort E).
"""

from ownership import Enum, Spec, require, violates

spec = Spec("hyp_abort_window", summary="an abort that clears page 5 of whoever holds it",
            expect=violates("held_pages_allocated"))
Req = spec.domain("Req", 5, names="ABCDE")
Page = spec.domain("Page", 6, ordered=True)
Phase = Enum("Phase", "WAIT HOLD DONE ABORTED")
spec.var("phase", Phase, per=Req, init=Phase.WAIT)
spec.var("page", int, per=Req, init=-1, doc="the page the request holds (-1: none)")
spec.var("allocated", bool, per=Page, init=False)


@spec.action
def alloc(s, r: Req):
    """Give ``r`` any free page."""
    require(s.phase[r] == Phase.WAIT)
    p = s.choose([p for p in s.all(Page) if not s.allocated[p]], label="page", domain=Page)
    s.allocated[p] = True
    s.page[r] = p
    s.phase[r] = Phase.HOLD


@spec.action
def free(s, r: Req):
    """``r`` finishes and returns its page."""
    require(s.phase[r] == Phase.HOLD)
    s.allocated[s.page[r]] = False
    s.page[r] = -1
    s.phase[r] = Phase.DONE


@spec.action
def abort(s, r: Req):
    """Cancel ``r`` before it got a page."""
    require(s.phase[r] == Phase.WAIT)
    s.phase[r] = Phase.ABORTED
    if r == 4:
        s.allocated[5] = False  # BUG: the last request's abort clears page 5's entry


@spec.invariant
def held_pages_allocated(s):
    """A page a request holds is marked allocated."""
    return all(s.page[r] < 0 or s.allocated[s.page[r]] for r in s.all(Req))
