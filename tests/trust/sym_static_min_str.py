"""Adversarial: the victim is ``min(..., key=str)``, the request with the smallest name."""

from ownership import Spec, require

spec = Spec("sym_static_min_str", summary="evict the alphabetically first request")
Req = spec.domain("Req", 3, symmetric=True, names="ABC")
spec.var("resident", bool, per=Req, init=True)


@spec.action
def evict(s):
    victims = [r for r in s.all(Req) if s.resident[r]]
    require(len(victims) > 0)
    s.resident[min(victims, key=str)] = False


@spec.invariant
def fine(s):
    return True
