"""Adversarial: ``finish`` lost its ``@spec.action``, so no engine ever runs it.

Without ``finish`` nobody frees a page, the invariants checked hold, and the
checker used to say PROVED.  The loader reports the function, with its line.
"""

from ownership import Enum, Ownership, Spec, require, safe

spec = Spec("vacuity_missing_action", summary="an action missing its decorator", expect=safe())
Req = spec.domain("Req", 2, symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", 2)
Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.write(s, r, pool.alloc(s, r, 1))
    s.phase[r] = Phase.RUNNING


def finish(s, r: Req):  # BUG: no @spec.action
    require(s.phase[r] == Phase.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    pool.free(s, r)
    s.phase[r] = Phase.DONE


own.invariants("no_foreign_read", "no_double_ownership")
