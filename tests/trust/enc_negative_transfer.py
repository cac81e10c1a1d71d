"""transfer of -1 pages: copied nothing on either side, so no verdict was wrong, but the spec's count is.

A negative count is OWN113 for every engine, as for alloc.
"""

from ownership import Ownership, Spec, require, safe, transfer

spec = Spec("enc_negative_transfer", expect=safe())
spec.param("requests", 1, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
remote = own.pool("remote", "pages", prefix="R")
spec.var("sent", bool, per=Req, init=False)


@spec.action
def send(s, r: Req):
    require(not s.sent[r])
    transfer(s, r, pool, remote, -1)
    s.sent[r] = True


own.invariants("no_unowned_write")
