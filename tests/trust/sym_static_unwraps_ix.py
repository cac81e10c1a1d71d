"""Adversarial: spec code that imports the checker's own unwrapping of elements.

``ix(r) == 0`` names request A by its index: the first request to arrive may
take the fast path, an order dependence symmetry reduction cannot see.
"""
from ownership import Spec, require, safe
from ownership.lang.elements import ix

spec = Spec("sym_static_unwraps_ix", summary="an index taken with ix", expect=safe())
spec.param("n", 2)
Req = spec.domain("Req", "n", symmetric=True, names="AB")
spec.var("fast", bool, per=Req, init=False)


@spec.action
def arrive(s, r: Req):
    require(not s.fast[r])
    s.fast[r] = ix(r) == 0


@spec.invariant
def nobody_fast(s) -> bool:
    return not any(s.fast[r] for r in s.all(Req))
