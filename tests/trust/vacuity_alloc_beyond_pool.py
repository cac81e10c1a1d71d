"""Adversarial: ``grow`` allocates more pages than the pool has.

``grow`` asks for three pages of a two-page pool: the allocation is never
enabled, so the state it would reach (two requests sharing a page, if the
spec's bookkeeping were wrong there) is never checked, and the checker used
to say PROVED.  The allocation is reported where the spec calls it.
"""

from ownership import Enum, Ownership, Spec, require, safe

spec = Spec("vacuity_alloc_beyond_pool", summary="an allocation larger than its pool", expect=safe())
spec.param("pages", 2, min=1)
Req = spec.domain("Req", 2, symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.write(s, r, pool.alloc(s, r, 1))
    s.phase[r] = Phase.RUNNING


@spec.action
def grow(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pool.write(s, r, pool.alloc(s, r, 3, first_slot=1))  # more than the pool holds


@spec.action
def finish(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    pool.free(s, r)
    s.phase[r] = Phase.DONE


own.invariants("no_foreign_read", "no_double_ownership")
