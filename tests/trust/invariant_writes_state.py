"""Adversarial: invariant ``resets`` writes the state it checks.

It sets the counter back to 0, so ``at_most_one``, evaluated after it, always
held: PROVED, although two requests finish and the counter reaches 2.
"""
from ownership import Spec, require, safe

spec = Spec("invariant_writes_state", summary="an invariant that writes state (resets a counter, hiding a bound violation)", expect=safe())
spec.param("n", 2)
Req = spec.domain("Req", "n", symmetric=True, names="AB")
spec.var("done", bool, per=Req, init=False)
spec.var("count", int, init=0)

@spec.action
def finish(s, r: Req):
    require(not s.done[r])
    s.done[r] = True
    s.count = s.count + 1

@spec.invariant
def resets(s) -> bool:
    s.count = 0
    return True

@spec.invariant
def at_most_one(s) -> bool:
    return s.count <= 1
