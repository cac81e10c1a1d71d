"""Adversarial: an event marked ``violates=`` with a misspelt invariant name.

The spec declares ``no_opps``; the event names ``no_oops``, so it was never a
violation and the spec was PROVED.
"""
from ownership import Spec, require, safe

spec = Spec("event_names_unknown_invariant", summary="emits a violation of an invariant that does not exist", expect=safe())
spec.param("n", 2)
Req = spec.domain("Req", "n", symmetric=True, names="AB")
spec.var("done", bool, per=Req, init=False)

@spec.action
def finish(s, r: Req):
    require(not s.done[r])
    s.done[r] = True
    s.emit("oops", violates="no_oops")

@spec.invariant
def no_opps(s) -> bool:
    return True
