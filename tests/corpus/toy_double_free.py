"""A toy allocator whose release path frees a finished request's pages twice.

Expected: violates no_double_ownership (a page freed twice sits on the free
list twice, is handed to two requests, and both hold it).
"""

from ownership import Enum, Ownership, Spec, require, violates

spec = Spec("toy_double_free", summary="finish and abort both free the pages", expect=violates("no_double_ownership"))
spec.param("requests", 2, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "IDLE RUNNING FINISHED DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.write(s, r, pool.alloc(s, r, 1))
    s.phase[r] = Phase.RUNNING


@spec.action
def finish(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pages = pool.pages_of(s, r)
    pool.free_pages(s, r, pages)
    s.phase[r] = Phase.FINISHED


@spec.action
def abort_after_finish(s, r: Req):
    """The bug: the abort path frees the same pages again (the table was not cleared)."""
    require(s.phase[r] == Phase.FINISHED)
    for p in s.all(pool.Page):
        if s.kv_content[p] == r and s.kv_free[p] > 0:
            s.kv_free[p] += 1
    s.phase[r] = Phase.DONE


own.invariants("no_double_ownership", "no_foreign_read")
