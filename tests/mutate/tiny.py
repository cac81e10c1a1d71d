"""A one-request allocator for mutation tests. Expected: safe."""

from ownership import Enum, Ownership, Spec, require, safe

spec = Spec("tiny", summary="take a page, give it back", expect=safe())
spec.param("requests", 1, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True)
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "IDLE HELD DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def take(s, r: Req):
    """Allocate one page and write it."""
    require(s.phase[r] == Phase.IDLE)
    pool.write(s, r, pool.alloc(s, r, 1))
    s.phase[r] = Phase.HELD


@spec.action
def give_back(s, r: Req):
    """Read the page, then free it."""
    require(s.phase[r] == Phase.HELD)
    pool.read(s, r, pool.pages_of(s, r))
    pool.free(s, r)
    s.phase[r] = Phase.DONE


@spec.terminal
def idle(s):
    return all(s.phase[r] != Phase.HELD for r in s.all(Req))


own.invariants()
