"""Adversarial: ``enumerate`` over a per-request table turns a row into a position."""

from ownership import Spec, require

spec = Spec("sym_static_enumerate_table", summary="the lowest-numbered waiting request is served")
Req = spec.domain("Req", 3, symmetric=True, names="ABC")
spec.var("waiting", bool, per=Req, init=True)
spec.var("served", int, init=-1)


@spec.action
def serve(s):
    require(s.served == -1)
    for k, w in enumerate(s.waiting):
        if w:
            s.served = k
            return


@spec.invariant
def served_is_first(s):
    return s.served <= 0
