"""An eviction that ignores writes still in flight into the page: conditions on a page argument and a (Req, Page) table.

``post(r, p)`` starts a write of request ``r`` into page ``p``; ``land(r, p)``
completes it, corrupting the page when it was evicted meanwhile;
``evict(p)`` drops a cached page without looking at ``pending``.  The fix
is a guard on ``evict``: no ``pending[x, p]`` for any request ``x``.
"""

from typing import Annotated

from ownership import Element, Spec, require

spec = Spec("evict_pending")
spec.param("requests", 2, "requests that write", min=1, max=3)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
Page = spec.domain("Page", 2, symmetric=True, names=["P0", "P1"])
ReqId = Annotated[Element, Req]
PageId = Annotated[Element, Page]

spec.var("cached", bool, per=Page, init=False, doc="the page holds cached KV")
spec.var("pending", bool, per=(Req, Page), init=False, doc="a write of the request into the page has not landed")
spec.var("corrupt", bool, per=Page, init=False, doc="a write landed in an evicted page")


@spec.action
def post(s, r: ReqId, p: PageId):
    require(not s.cached[p] and not s.corrupt[p])
    s.pending[r, p] = True
    s.cached[p] = True


@spec.action
def land(s, r: ReqId, p: PageId):
    require(s.pending[r, p])
    s.pending[r, p] = False
    if not s.cached[p]:
        s.corrupt[p] = True


@spec.action
def evict(s, p: PageId):
    require(s.cached[p])
    s.cached[p] = False


@spec.invariant
def no_corrupt_page(s) -> bool:
    return not any(s.corrupt[p] for p in s.all(Page))
