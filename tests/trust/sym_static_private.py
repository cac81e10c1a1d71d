"""Adversarial: ``r._i``, the index behind a request, picks a priority."""

from ownership import Spec, require

spec = Spec("sym_static_private", summary="request with the lowest index preempts")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
spec.var("running", bool, per=Req, init=False)


@spec.action
def run(s, r: Req):
    require(not s.running[r])
    require(r._i == 0 or any(s.running[q] for q in s.all(Req)))
    s.running[r] = True


@spec.invariant
def fine(s):
    return True
