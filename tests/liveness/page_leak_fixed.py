"""The fix: a sweep frees an aborted request's page later (not at the abort), so the property must wait for it.

Standalone rather than derived from page_leak_buggy: the tests change the loaded specs (fairness, extra
properties), and a derived spec would share its base module's spec object across them.
"""
from typing import Annotated

from ownership import Element, Enum, Ownership, Spec, require, safe

spec = Spec("page_leak_fixed", summary="abort keeps the page until a fair sweep frees it", expect=safe())
spec.param("requests", 2, "requests", min=1, max=4)
spec.param("pages", 2, "pages", min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABCD")
ReqId = Annotated[Element, Req]
own = Ownership(spec, requests=Req)
kv = own.pool("kv", "pages", prefix="P")
St = Enum("St", "IDLE RUN DONE ABORTED")
spec.var("st", St, per=Req, init=St.IDLE, doc="state")

@spec.action
def admit(s, r: ReqId):
    """admit"""
    require(s.st[r] == St.IDLE)
    kv.alloc(s, r, 1)
    s.st[r] = St.RUN

@spec.action(fair="weak")
def finish(s, r: ReqId):
    """finish and free"""
    require(s.st[r] == St.RUN)
    kv.free(s, r)
    s.st[r] = St.DONE

@spec.action
def abort(s, r: ReqId):
    """abort: the pages stay until the sweep"""
    require(s.st[r] == St.RUN)
    s.st[r] = St.ABORTED

@spec.action(fair="weak")
def sweep(s, r: ReqId):
    """the engine's periodic sweep frees what an aborted request still holds"""
    require(s.st[r] == St.ABORTED and len(kv.pages_of(s, r)) > 0)
    kv.free(s, r)


@spec.action(fair="weak")
def recycle(s, r: ReqId):
    """slot reused"""
    require(s.st[r] == St.DONE)
    s.st[r] = St.IDLE

own.invariants("no_double_ownership")

def ended(s, r):
    return s.st[r] in (St.DONE, St.ABORTED)

def holds_nothing(s, r):
    return len(kv.pages_of(s, r)) == 0

spec.leads_to(ended, holds_nothing, each=Req, name="finished_pages_return")
