"""The page pool's encoded operations driven directly, for the property test of the encodings.

Not a protocol: each action calls one vocabulary operation on arguments
from its parameters or from the state, so that generated states reach the
inputs where an encoding may slip: page lists with duplicates, pages the
request does not hold, empty lists, counts 0, exactly what is free, one
more, the pool's size and past it, and counts held in the state that may be
negative.  Every returned value is stored in the state, so that the
comparison of successors compares it too.
"""

from ownership import Optional, Ownership, Spec, require, safe, transfer
from ownership.vocab.pool import pages_all_returned, pages_exclusive

spec = Spec("enc_inputs_pool", summary="each encoded pool operation on chosen arguments", expect=safe())
spec.param("requests", 2, min=1)
spec.param("pages", 3, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
remote = own.pool("remote", "pages", prefix="R")
Page = pool.Page
Count = spec.values("Count", lambda p: range(p.pages + 2))
spec.var("seen", int, per=Req, init=0, doc="what the last query returned, or a count the next call uses")
spec.var("first", Optional(Req), per=Req, init=None, doc="whose KV the first page of the table holds")
spec.var("quiet", bool, init=False, doc="whether pages_returned_when_idle judges the state")


@spec.action
def alloc(s, r: Req, n: Count):
    pages = pool.alloc(s, r, n)
    s.seen[r] = len(pages) * 10 + sum(s.kv_slot[p] for p in pages)


@spec.action
def alloc_after(s, r: Req, n: Count):
    pool.alloc(s, r, n, first_slot=2)


@spec.action
def alloc_held_count(s, r: Req):
    """A count from the state: negative in some states (an error on both sides)."""
    pool.alloc(s, r, s.seen[r])


@spec.action
def take_exactly_free(s, r: Req):
    pool.alloc(s, r, pool.available(s))


@spec.action
def available(s, r: Req):
    s.seen[r] = pool.available(s)


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
def free_held_added(s, r: Req, p: Page):
    """The page table concatenated with itself and with a list, as Python lists concatenate."""
    pages = pool.pages_of(s, r)
    pool.free_pages(s, r, pages + pages + [p])


@spec.action
def free_held_and_listed(s, r: Req, p: Page):
    pool.free_pages(s, r, [*pool.pages_of(s, r), p])


@spec.action
def alloc_then_free(s, r: Req, n: Count):
    """A page set the allocation returned, freed in the same step (and listed twice: freed twice)."""
    pages = pool.alloc(s, r, n)
    pool.free_pages(s, r, list(pages) + list(pages)[:1])


@spec.action
def alloc_then_read(s, r: Req, n: Count):
    pool.read(s, r, pool.alloc(s, r, n))


@spec.action
def write_mixed(s, r: Req, p: Page):
    """A list of a page-set element and a parameter page, the element twice."""
    pages = pool.pages_of(s, r)
    require(len(pages) > 0)
    pool.write(s, r, [pages[0], p, pages[0]])


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


@spec.action
def send_back(s, r: Req, n: Count):
    transfer(s, r, remote, pool, n)


@spec.action
def send_held_count(s, r: Req):
    """A count from the state: negative in some states (an error on both sides)."""
    transfer(s, r, pool, remote, s.seen[r])


@spec.action
def exclusive(s, r: Req):
    s.seen[r] = 1 if pages_exclusive(s, [pool, remote]) else 0


@spec.action
def all_returned(s, r: Req):
    s.seen[r] = 1 if pages_all_returned(s, [pool]) else 0


own.invariants(idle=lambda s: s.quiet)
