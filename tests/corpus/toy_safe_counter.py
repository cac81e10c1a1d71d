"""A toy allocator that writes before it reads and frees once. Expected: safe."""

from ownership import Enum, Ownership, Spec, require, safe

spec = Spec("toy_safe_counter", summary="write, read, free", expect=safe())
spec.param("requests", 2, min=1)
spec.param("pages", 3, min=1)
spec.param("need", 1, min=0)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "IDLE WRITTEN DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def prefill(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.write(s, r, pool.alloc(s, r, s.params.need))
    s.phase[r] = Phase.WRITTEN


@spec.action
def decode_and_finish(s, r: Req):
    require(s.phase[r] == Phase.WRITTEN)
    pool.read(s, r, pool.pages_of(s, r))
    pool.free(s, r)
    s.phase[r] = Phase.DONE


@spec.terminal
def idle(s):
    return all(s.phase[r] != Phase.WRITTEN for r in s.all(Req))


own.invariants()
