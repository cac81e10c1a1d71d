"""Adversarial: an invariant that emits a violating event and returns True.

``two_done`` emits an event marked ``violates="two_done"`` when both requests
finished and returns True: PROVED everywhere although both finish in two steps.
"""
from ownership import Spec, require, safe

spec = Spec("events_emit_in_invariant", summary="an invariant that calls s.emit", expect=safe())
spec.param("n", 2)
Req = spec.domain("Req", "n", symmetric=True, names="AB")
spec.var("done", bool, per=Req, init=False)

@spec.action
def finish(s, r: Req):
    require(not s.done[r])
    s.done[r] = True

@spec.invariant
def two_done(s) -> bool:
    if all(s.done[r] for r in s.all(Req)):
        s.emit("both done", violates="two_done")
    return True
