"""Idiom: an ``if`` around ``pool.free`` inside a loop over requests (merged, not forked, by the Z3 engines)."""

from ownership import Enum, Ownership, Spec, require, violates

spec = Spec("idiom_if_free", summary="an if around free inside a loop", expect=violates("running_holds_pages"))
spec.param("requests", 4)
spec.param("pages", 4)
Req = spec.domain("Req", "requests", symmetric=True, names="ABCDEFGH")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "WAITING RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.WAITING)

@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.WAITING)
    pool.alloc(s, r, 1)
    s.phase[r] = Phase.RUNNING

@spec.action
def finish(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    s.phase[r] = Phase.DONE

@spec.action
def sweep(s):
    for r in s.all(Req):
        if s.phase[r] != Phase.WAITING:   # bug: also frees running requests
            pool.free(s, r)

@spec.invariant
def running_holds_pages(s):
    return all(pool.held(s, r) > 0 for r in s.all(Req) if s.phase[r] == Phase.RUNNING)

@spec.terminal
def idle(s):
    return all(s.phase[r] != Phase.RUNNING for r in s.all(Req))

own.invariants("no_double_ownership", "no_unowned_write")
