"""Idiom: loop over the pages ``alloc`` returns, and index them (``pages[0]``).

The bug: ``abort`` frees the pages while the batch keeps its copy of the
page table, so the next ``decode`` reads what another request wrote.
"""

from ownership import Enum, Ownership, Spec, require, violates

spec = Spec("idiom_pages_loop", summary="loop over allocated pages; first page kept apart",
            expect=violates("no_foreign_read"))
spec.param("requests", 2)
spec.param("pages", 3)
Req = spec.domain("Req", "requests", symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "WAITING RUNNING")
spec.var("phase", Phase, per=Req, init=Phase.WAITING)
spec.var("batch_table", bool, per=(Req, pool.Page), init=False)
spec.var("first_page", bool, per=(Req, pool.Page), init=False)


@spec.action
def prefill(s, r: Req):
    require(s.phase[r] == Phase.WAITING)
    pages = pool.alloc(s, r, 2)
    for p in pages:
        pool.write(s, r, [p])
        s.batch_table[r, p] = True
    s.first_page[r, pages[0]] = True
    s.phase[r] = Phase.RUNNING


@spec.action
def abort(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    for p in pool.pages_of(s, r):
        s.first_page[r, p] = False
    pool.free(s, r)


@spec.action
def decode(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pool.read(s, r, [p for p in s.all(pool.Page) if s.batch_table[r, p]])


own.invariants("no_foreign_read", "no_double_ownership")
