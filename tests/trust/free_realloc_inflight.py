"""A page freed while a write into it is in flight, and allocated again in the same action.

The state after ``abort_and_admit`` shows no free page with a write pending
(the page went straight to the next request), so an invariant that looks only
at states holds; the ``write still in flight`` event of the free is the only
witness.  Before events marked ``violates=`` counted as violations, explore,
bmc and prove said PROVED with ``-i no_free_with_write_in_flight`` while the
trace showed the event.  Expected: violates no_free_with_write_in_flight
(2 steps: post A's write, then abort A and admit B onto its page).
"""

from ownership import Ownership, Spec, require, violates
from ownership.vocab.inflight import InflightWrites

spec = Spec("free_realloc_inflight", summary="free and re-allocate a page inside one action while a write is in flight",
            expect=violates("no_free_with_write_in_flight"))
spec.param("requests", 2, min=2, max=2)
spec.param("pages", 1, min=1, max=1)
Req = spec.domain("Req", "requests", names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
rdma = InflightWrites(pool, "rdma")
spec.var("started", bool, per=Req, init=False)


@spec.action
def admit_and_post(s, r: Req):
    """Allocate ``r``'s page and post the write of its KV into it."""
    require(not s.started[r])
    pool.alloc(s, r, 1)
    rdma.post(s, r)
    s.started[r] = True


@spec.action
def abort_and_admit(s, r: Req, q: Req):
    """Abort ``r`` (its pages go back, its write still in flight) and admit ``q`` onto them at once."""
    require(r != q and s.started[r] and not s.started[q])
    rdma.free(s, r)
    pool.alloc(s, q, 1)
    s.started[q] = True


rdma.invariant()
own.invariants("no_double_ownership")
