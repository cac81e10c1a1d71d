"""Adversarial: a guard reads a per-request table at the int 0 (``s.started[0]``)."""

from ownership import Spec, require

spec = Spec("sym_static_int_index", summary="request A must start before any other")
Req = spec.domain("Req", 3, symmetric=True, names="ABC")
spec.var("started", bool, per=Req, init=False)


@spec.action
def start(s, r: Req):
    require(not s.started[r])
    require(r == r and s.started[0] or not any(s.started[q] for q in s.all(Req)))
    s.started[r] = True


@spec.invariant
def at_most_two(s):
    return sum(s.started[q] for q in s.all(Req)) <= 3
