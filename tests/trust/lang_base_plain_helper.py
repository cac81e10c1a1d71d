"""The base of ``lang_derived_redefines_helper``: ``finish`` calls a plain helper, ``release``."""

from ownership import Enum, Ownership, Spec, require, safe

spec = Spec("lang_base_plain_helper", summary="finish frees through a plain helper", expect=safe())
Req = spec.domain("Req", 2, symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", 2)
Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


def release(s, r):
    """Give the request's pages back: a plain function, not a @spec.helper."""
    pool.free(s, r)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.write(s, r, pool.alloc(s, r, 1))
    s.phase[r] = Phase.RUNNING


@spec.action
def finish(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    release(s, r)
    s.phase[r] = Phase.DONE


@spec.invariant
def done_holds_nothing(s) -> bool:
    """A finished request holds no page."""
    return all(not pool.pages_of(s, r) for r in s.all(Req) if s.phase[r] == Phase.DONE)


own.invariants("no_foreign_read", "no_double_ownership")
