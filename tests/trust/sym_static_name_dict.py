"""Adversarial: a dict keyed by request names (``f"{r}"``) decides a priority."""

from ownership import Spec, require

PRIORITY = ("A",)

spec = Spec("sym_static_name_dict", summary="named requests are preferred")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
spec.var("served", bool, per=Req, init=False)


@spec.action
def serve(s, r: Req):
    require(not s.served[r])
    require(f"{r}" in PRIORITY)
    s.served[r] = True


@spec.invariant
def fine(s):
    return True
