"""A release path that passes one page to free_pages twice (the page table listed twice).

Expected: violates no_double_ownership.  ``free_pages`` returns each listed
page to the free list, so a page listed twice sits there twice and the next
two allocations hand it out twice: after A starts and finishes, B's start
takes the page while it is still on the free list (3 steps).
"""

from ownership import Enum, Ownership, Spec, require, violates

spec = Spec("free_pages_listed_twice", summary="finish frees the page table's pages twice over",
            expect=violates("no_double_ownership"))
spec.param("requests", 2, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.alloc(s, r, 1)
    s.phase[r] = Phase.RUNNING


@spec.action
def finish(s, r: Req):
    """The bug: the list handed to free_pages names every page twice."""
    require(s.phase[r] == Phase.RUNNING)
    pages = list(pool.pages_of(s, r))
    pool.free_pages(s, r, pages + pages)
    s.phase[r] = Phase.DONE


own.invariants("no_double_ownership")
