"""Two requests that each need every page: one can starve the other forever.

Safe for every invariant, but with deadlock checking on, a state where a
request waits and nothing can run is reported.
"""

from ownership import Enum, Ownership, Spec, require, safe

spec = Spec("toy_deadlock", summary="holds pages and never releases them", expect=safe())
spec.param("requests", 2, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "WAITING HOLDING")
spec.var("phase", Phase, per=Req, init=Phase.WAITING)


@spec.action
def admit(s, r: Req):
    require(s.phase[r] == Phase.WAITING)
    pool.alloc(s, r, s.params.pages)
    s.phase[r] = Phase.HOLDING


@spec.terminal
def nobody_waiting(s):
    return all(s.phase[r] == Phase.HOLDING for r in s.all(Req))


own.invariants("no_double_ownership")
