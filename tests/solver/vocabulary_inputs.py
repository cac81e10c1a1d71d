"""The page pool's operations driven directly, on the inputs where an encoding may slip.

Not a protocol: each action calls one vocabulary operation with arguments
straight from the action's parameters, so a conformance check over arbitrary
states exercises page lists with duplicates (``free_listed(A, K0, K0)``),
pages the request does not hold, empty lists, and counts at the boundaries
(0, exactly what is free, one more, more than the pool has).
"""

from ownership import Optional, Ownership, Spec, require, safe, transfer

spec = Spec("vocabulary_inputs", summary="each pool operation on chosen arguments", expect=safe())
spec.param("requests", 2, min=1)
spec.param("pages", 3, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
remote = own.pool("remote", "pages", prefix="R")
Page = pool.Page
Count = spec.values("Count", lambda p: range(p.pages + 2))
spec.var("seen", int, per=Req, init=0, doc="what the last page-set query returned")
spec.var("first", Optional(Req), per=Req, init=None, doc="whose KV the first page of the table holds")


@spec.action
def alloc(s, r: Req, n: Count):
    pool.alloc(s, r, n)


@spec.action
def alloc_after(s, r: Req, n: Count):
    """Slots counted from the request's current table length."""
    pool.alloc(s, r, n, first_slot=1)


@spec.action
def take_exactly_free(s, r: Req):
    """All of the free list at once: the count is the state's own."""
    if pool.available(s) <= s.size(Page):
        pool.alloc(s, r, pool.available(s))


@spec.action
def free_listed(s, r: Req, p: Page, q: Page):
    pool.free_pages(s, r, [p, q])


@spec.action
def free_nothing(s, r: Req):
    pool.free_pages(s, r, [])


@spec.action
def free_held(s, r: Req):
    pool.free(s, r)


@spec.action
def free_held_twice(s, r: Req):
    pages = list(pool.pages_of(s, r))
    pool.free_pages(s, r, pages + pages)


@spec.action
def write_listed(s, r: Req, p: Page, q: Page):
    pool.write(s, r, [p, q])


@spec.action
def write_held(s, r: Req):
    pool.write(s, r, pool.pages_of(s, r))


@spec.action
def read_listed(s, r: Req, p: Page, q: Page):
    pool.read(s, r, [p, q])


@spec.action
def read_held(s, r: Req):
    pool.read(s, r, pool.pages_of(s, r))


@spec.action
def alloc_and_write(s, r: Req, n: Count):
    """A returned page set used by the spec: written, counted, its pages' slots summed."""
    pages = pool.alloc(s, r, n)
    pool.write(s, r, pages)
    s.seen[r] = len(pages) * 10 + sum(s.kv_slot[p] for p in pages)


@spec.action
def count_held(s, r: Req):
    s.seen[r] = len(pool.pages_of(s, r))


@spec.action
def first_held(s, r: Req):
    pages = pool.pages_of(s, r)
    require(len(pages) > 0)
    s.first[r] = s.kv_content[pages[0]]


@spec.action
def holds(s, r: Req, p: Page):
    s.seen[r] = 1 if p in pool.pages_of(s, r) else 0


@spec.action
def send(s, r: Req, n: Count):
    transfer(s, r, pool, remote, n)


own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership", "no_read_of_unwritten")
