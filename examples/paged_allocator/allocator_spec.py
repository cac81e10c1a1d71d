"""The contract of ``allocator.PagedAllocator``: the reference model its tests run against.

Read it next to ``allocator.py``: one action per public method, the same
names, the same checks.  Pages are a symmetric domain: which free page the
allocator hands out is its own business (``s.choose``); the adapter tells the
spec which ones it picked.
"""

from ownership import Spec, require, safe

spec = Spec(
    "paged_allocator",
    summary="free list, page tables, refcounted prefix sharing, free-on-finish",
    expect=safe(),
)
spec.param("requests", 3, min=1)
spec.param("pages", 4, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABCDEFGH")
Page = spec.domain("Page", "pages", symmetric=True, names=lambda i: f"P{i}")
Count = spec.values("Count", lambda p: [1, 2])

spec.var("running", bool, per=Req, init=False, doc="the request has a page table")
spec.var("holds", bool, per=(Req, Page), init=False, doc="the page is in the request's page table")
spec.var("ref_cnt", int, per=Page, init=0, doc="how many page tables hold the page")
spec.var("free", bool, per=Page, init=True, doc="the page is on the free list")


def take(s, r):
    """_take: any free page (the allocator's free-list order is its own)."""
    p = s.choose([p for p in s.all(Page) if s.free[p]], "page", domain=Page)
    s.free[p] = False
    s.ref_cnt[p] = 1
    s.holds[r, p] = True


@spec.action
def allocate(s, r: Req, n: Count):
    """allocate(rid, n): start the request with n fresh pages; OutOfPages if fewer are free."""
    require(not s.running[r])
    require(sum(s.free[p] for p in s.all(Page)) >= n)
    for _ in range(n):
        take(s, r)
    s.running[r] = True


@spec.action
def append_page(s, r: Req):
    """append_page(rid): one more page for a running request."""
    require(s.running[r])
    require(any(s.free[p] for p in s.all(Page)))
    take(s, r)


@spec.action
def share_prefix(s, r: Req, src: Req):
    """share_prefix(rid, src): start from src's pages; each gains a reference."""
    require(r != src and not s.running[r] and s.running[src])
    for p in s.all(Page):
        if s.holds[src, p]:
            s.holds[r, p] = True
            s.ref_cnt[p] += 1
    s.running[r] = True


@spec.action
def finish(s, r: Req):
    """finish(rid): drop the request's references; a page nobody references is free again."""
    require(s.running[r])
    for p in s.all(Page):
        if s.holds[r, p]:
            s.holds[r, p] = False
            s.ref_cnt[p] -= 1
            if s.ref_cnt[p] == 0:
                s.free[p] = True
    s.running[r] = False


@spec.invariant
def refcount_counts_holders(s) -> bool:
    """A page's refcount is the number of page tables holding it."""
    return all(s.ref_cnt[p] == sum(s.holds[r, p] for r in s.all(Req)) for p in s.all(Page))


@spec.invariant
def free_iff_unreferenced(s) -> bool:
    """A page is on the free list exactly when no page table holds it."""
    return all(s.free[p] == (s.ref_cnt[p] == 0) for p in s.all(Page))
