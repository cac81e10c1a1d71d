"""Adversarial: a request's position in ``s.all(Req)`` picks its page (``.index(r)``)."""

from ownership import Spec, require

spec = Spec("sym_static_index_of", summary="request k writes slot k")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
spec.var("done", bool, per=Req, init=False)
spec.var("slot0", bool, init=False)


@spec.action
def write(s, r: Req):
    require(not s.done[r])
    k = s.all(Req).index(r)
    s.done[r] = True
    if k == 0:
        s.slot0 = True


@spec.invariant
def slot_written_once(s):
    return True
