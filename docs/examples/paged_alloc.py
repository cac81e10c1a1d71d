"""Client abort while a request is in the running batch: a small, complete spec.

A hypothetical scheduler.  Prefill allocates and writes a request's pages and
puts the request in the running batch, which keeps its own copy of the page
table; each decode step reads the pages in that copy; finish frees them.  A
client disconnect frees the pages at once, but the batch still holds the old
copy, so the next decode step reads whatever the next owner wrote there.
"""

from ownership import Enum, Ownership, Spec, ceil_div, require, violates

spec = Spec(
    "paged_alloc",
    summary="client abort frees pages the running batch still reads",
    expect=violates("no_foreign_read"),
)
spec.param("requests", 2, "concurrent requests", min=1, max=4)
spec.param("pages", 2, "KV pool size in pages", min=1)
spec.param("page_size", 2, "tokens per KV page", min=1)
spec.param("prompt_tokens", 2, "prompt length in tokens", min=1)

Req = spec.domain("Req", "requests", symmetric=True, names="ABCD")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages", prefix="K")
Phase = Enum("Phase", "WAITING RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.WAITING, doc="where the request is")
spec.var("batch_table", bool, per=(Req, pool.Page), init=False, doc="the running batch's copy of the page table")


@spec.action
def prefill(s, r: Req):
    """Allocate the prompt's pages, write its KV, join the running batch."""
    require(s.phase[r] == Phase.WAITING)
    pages = pool.alloc(s, r, ceil_div(s.params.prompt_tokens, s.params.page_size))
    pool.write(s, r, pages)
    for p in pages:
        s.batch_table[r, p] = True
    s.phase[r] = Phase.RUNNING


@spec.action
def decode(s, r: Req):
    """One decode step: attention reads the pages in the batch's copy."""
    require(s.phase[r] == Phase.RUNNING)
    pool.read(s, r, [p for p in s.all(pool.Page) if s.batch_table[r, p]])


@spec.action
def client_abort(s, r: Req):
    """The bug: the pages go back to the free list while r is still in the batch."""
    require(s.phase[r] == Phase.RUNNING)
    pool.free(s, r)


@spec.action
def finish(s, r: Req):
    """Leave the batch and free whatever r still holds."""
    require(s.phase[r] == Phase.RUNNING)
    pool.free(s, r)
    for p in s.all(pool.Page):
        s.batch_table[r, p] = False
    s.phase[r] = Phase.DONE


@spec.terminal
def idle(s) -> bool:
    """No request is in the running batch."""
    return all(s.phase[r] != Phase.RUNNING for r in s.all(Req))


own.invariants()
