"""A count computed from the state goes negative (1 - 2) before alloc.

The explorer took no page and went on to the double ownership; the encoding
found no way to take -1 pages, so bmc and prove answered PROVED.  Now every
engine stops at the negative count (OWN113).
"""

from ownership import Ownership, Spec, require, violates

spec = Spec("enc_negative_alloc_computed", expect=violates("no_double_ownership"))
spec.param("requests", 2, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
spec.var("need", int, per=Req, init=1)
spec.var("step", int, per=Req, init=0)

@spec.action
def shrink(s, r: Req):
    require(s.step[r] == 0)
    s.need[r] = s.need[r] - 2
    s.step[r] = 1

@spec.action
def start(s, r: Req):
    require(s.step[r] == 1)
    pool.alloc(s, r, s.need[r])
    s.step[r] = 2

@spec.action
def share(s, r: Req, p: pool.Page):
    require(s.step[r] == 2)
    s.kv_holders[p] = frozenset(s.all(Req))  # every request holds it

own.invariants("no_double_ownership")
