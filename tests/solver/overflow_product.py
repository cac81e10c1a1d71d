"""Multiplication by a free parameter: x = 4 * P exceeds 2**31 - 1 for large P (a 32-bit encoding wrapped)."""
from ownership import Spec, require

spec = Spec("a5")
spec.param("P", 1, min=0)
spec.var("x", int, init=0)
spec.var("done", bool, init=False)

@spec.action
def grow(s):
    require(not s.done)
    s.x = s.params.P * 4
    s.done = True

@spec.invariant
def fits(s):
    return s.x <= 2147483647
