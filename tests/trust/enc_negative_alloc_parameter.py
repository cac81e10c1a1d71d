"""A count over a parameter, negative at some of its values (k < 2), checked with --free k.

The parametric explorer took no page where k - 2 < 0 and went on to the
double ownership (VIOLATED "for example k=1"); bmc and prove widened their
integers four times over the unreachable negative count and answered UNKNOWN
("integers exceed 256 bits").  Now each says OWN113 at the alloc line.
"""

from ownership import Ownership, Spec, require, violates

spec = Spec("enc_negative_alloc_parameter", expect=violates("no_double_ownership"))
spec.param("requests", 2, min=1)
spec.param("pages", 2, min=1)
spec.param("k", 3, min=0, max=4)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
spec.var("step", int, per=Req, init=0)

@spec.action
def start(s, r: Req):
    require(s.step[r] == 0)
    pool.alloc(s, r, s.params.k - 2)
    s.step[r] = 1

@spec.action
def share(s, r: Req, p: pool.Page):
    require(s.step[r] == 1)
    s.kv_holders[p] = frozenset(s.all(Req))  # every request holds it

own.invariants("no_double_ownership")
