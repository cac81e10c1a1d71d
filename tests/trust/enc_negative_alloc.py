"""alloc(s, r, -1): took no page concretely, was disabled symbolically.

The explorer went on and found the double ownership of `share`; bmc and
prove saw `start` disabled and answered PROVED.  A negative count is OWN113.
"""

from ownership import Ownership, Spec, require, violates

spec = Spec("enc_negative_alloc", expect=violates("no_double_ownership"))
spec.param("requests", 2, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
spec.var("step", int, per=Req, init=0)

@spec.action
def start(s, r: Req):
    require(s.step[r] == 0)
    pool.alloc(s, r, -1)
    s.step[r] = 1

@spec.action
def share(s, r: Req, p: pool.Page):
    require(s.step[r] == 1)
    s.kv_holders[p] = frozenset(s.all(Req))  # every request holds it

own.invariants("no_double_ownership")
