"""Adversarial: `p + 1` on a pool page finds the next slot."""

from ownership import Ownership, Spec, require

spec = Spec("scalar_pool_next_slot", summary="a request also claims the page after its own")
spec.param("pages", 3, "pool size")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
spec.var("claimed", bool, per=pool.Page, init=False)


@spec.action
def admit(s, r: Req):
    require(not pool.pages_of(s, r))
    pool.alloc(s, r, 1)


@spec.action
def claim_next(s, r: Req):
    pages = pool.pages_of(s, r)
    require(len(pages) == 1)
    nxt = pages[0] + 1
    require(nxt < s.params.pages)
    s.claimed[nxt] = True


@spec.invariant
def one_page(s):
    return not s.claimed[s.params.pages - 1]  # names the last page: fine once the pool is ordered
