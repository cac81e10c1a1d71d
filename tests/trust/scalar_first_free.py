"""Adversarial: an order dependency without arithmetic: take the first free page of `s.all(Page)`.

Only the permutation check can see this one: every operation is allowed on
elements, but which page is taken depends on the order of `s.all(Page)`.
"""

from ownership import Ownership, Spec, require

spec = Spec("scalar_first_free", summary="the allocator takes the first free page in index order")
spec.param("pages", 3, "pool size")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
spec.var("busy", bool, per=Req, init=False)


@spec.action
def take(s, r: Req):
    require(not s.busy[r])
    free = getattr(s, pool.free_var)
    for p in s.all(pool.Page):
        if free[p] > 0:
            pool_take = p
            break
    else:
        require(False)
    free[pool_take] -= 1
    s.busy[r] = True


own.invariants("no_double_ownership")
