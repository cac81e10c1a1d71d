"""A completion handle lands into the page it names: a condition through a reference field of the argument.

``land(h)`` writes into ``h_page[h]``, which ``evict(p)`` may have dropped;
the condition every path meets at ``land`` is on ``cached[h_page[h]]``, named
as the code names it.
"""

from typing import Annotated

from ownership import Element, Optional, Spec, require

spec = Spec("land_handle")
Page = spec.domain("Page", 2, symmetric=True, names=["P0", "P1"])
Handle = spec.domain("Handle", 1, symmetric=True, names=["H0"])
PageId = Annotated[Element, Page]
HandleId = Annotated[Element, Handle]

spec.var("cached", bool, per=Page, init=False, doc="the page holds cached KV")
spec.var("h_page", Optional(Page), per=Handle, init=None, doc="the page the handle's write goes to")
spec.var("corrupt", bool, per=Page, init=False, doc="a write landed in an evicted page")


@spec.action
def post(s, h: HandleId, p: PageId):
    require(s.h_page[h] is None and not s.cached[p])
    s.h_page[h] = p
    s.cached[p] = True


@spec.action
def land(s, h: HandleId):
    require(s.h_page[h] is not None)
    p = s.h_page[h]
    s.h_page[h] = None
    if not s.cached[p]:
        s.corrupt[p] = True


@spec.action
def evict(s, p: PageId):
    require(s.cached[p])
    s.cached[p] = False


@spec.invariant
def no_corrupt_page(s) -> bool:
    return not any(s.corrupt[p] for p in s.all(Page))
