"""Adversarial: the only action's guard can never hold, so nothing ever runs.

``start`` requires a request to be idle *and* done at once.  No transition
exists, the one initial state satisfies every invariant, and the checker used
to answer "PROVED ... 1 distinct states, 0 transitions".  Zero transitions is
never PROVED: the verdict is UNKNOWN (exit 3).
"""

from ownership import Enum, Ownership, Spec, require, safe

spec = Spec("vacuity_never_true_guard", summary="a guard that can never hold", expect=safe())
Req = spec.domain("Req", 2, symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", 2)
Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE and s.phase[r] == Phase.DONE)  # BUG: never both
    pool.write(s, r, pool.alloc(s, r, 1))
    s.phase[r] = Phase.RUNNING


own.invariants("no_foreign_read", "no_double_ownership")
