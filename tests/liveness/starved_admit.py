"""One page, two requests: a waiting request is admitted only if admission is strongly fair.

The page is free only between one request's finish and its next admission,
so the other's admission is enabled again and again but not continuously:
weak fairness lets it wait for ever, strong fairness does not.  The
parameter ``strong`` picks which fairness admission gets.
"""
from typing import Annotated

from ownership import Element, Enum, Ownership, Spec, require

spec = Spec("starved_admit", summary="admission competes for one page")
spec.param("requests", 2, "requests", min=1, max=3)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]
own = Ownership(spec, requests=Req)
kv = own.pool("kv", 1, prefix="P")
St = Enum("St", "IDLE WAIT RUN")
spec.var("st", St, per=Req, init=St.IDLE, doc="state")


@spec.action
def arrive(s, r: ReqId):
    """a request arrives (the environment: not fair)"""
    require(s.st[r] == St.IDLE)
    s.st[r] = St.WAIT


@spec.action
def admit(s, r: ReqId):
    """the scheduler admits a waiting request when the page is free"""
    require(s.st[r] == St.WAIT)
    kv.alloc(s, r, 1)
    s.st[r] = St.RUN


@spec.action(fair="weak")
def finish(s, r: ReqId):
    """the request finishes and frees its page"""
    require(s.st[r] == St.RUN)
    kv.free(s, r)
    s.st[r] = St.IDLE


own.invariants("no_double_ownership")


def waiting(s, r):
    return s.st[r] == St.WAIT


def running(s, r):
    return s.st[r] == St.RUN


spec.leads_to(waiting, running, each=Req, name="waiting_gets_admitted")
