"""A page is both an action argument and allocated: breaking its symmetry twice hid this violation."""
from ownership import Ownership, Spec, require

spec = Spec("b1")
spec.param("requests", 1, min=1, max=2)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages", prefix="K")
spec.var("started", bool, per=Req, init=False)
spec.var("scribbled", bool, init=False)
spec.var("bad", bool, init=False)

@spec.action
def take(s, r: Req):
    require(not s.started[r])
    s.started[r] = True
    pages = pool.alloc(s, r, 1)
    pool.write(s, r, pages)

@spec.action
def scribble(s, p: pool.Page):
    """Touch a page on the free list, once; bad if some page is held meanwhile."""
    require(not s.scribbled)
    require(s.kv_free[p] == 1)
    s.scribbled = True
    if any(s.kv_holders[q] != 0 for q in s.all(pool.Page)):
        s.bad = True

@spec.invariant
def never_bad(s):
    return not s.bad
