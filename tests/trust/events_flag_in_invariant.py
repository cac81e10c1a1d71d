"""Adversarial: an invariant that flags a violation and returns True.

``two_done`` calls ``s.flag`` when both requests finished: the invariant
always returns True, so every engine said PROVED although both finish in two
steps.  The check belongs in the action (``s.flag`` at the step) or in the
invariant's return value.
"""
from ownership import Spec, require, safe

spec = Spec("events_flag_in_invariant", summary="an invariant that calls s.flag", expect=safe())
spec.param("n", 2)
Req = spec.domain("Req", "n", symmetric=True, names="AB")
spec.var("done", bool, per=Req, init=False)

@spec.action
def finish(s, r: Req):
    require(not s.done[r])
    s.done[r] = True

@spec.invariant
def two_done(s) -> bool:
    s.flag("two_done", all(s.done[r] for r in s.all(Req)))
    return True
