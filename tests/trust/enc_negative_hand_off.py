"""A cache hand-off of -1 pages: moved nothing, silently; now OWN113 for every engine."""

from ownership import Ownership, Spec, require, safe
from ownership.vocab.cache import Cache

spec = Spec("enc_negative_hand_off", expect=safe())
spec.param("requests", 1, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
tree = Cache(pool, "tree", ["x"])
spec.var("step", int, per=Req, init=0)


@spec.action
def prefill(s, r: Req):
    require(s.step[r] == 0)
    pool.alloc(s, r, 1)
    s.step[r] = 1


@spec.action
def cache(s, r: Req):
    require(s.step[r] == 1)
    tree.hand_off(s, r, 0, count=s.step[r] - 2)
    s.step[r] = 2


own.invariants("no_double_ownership")
