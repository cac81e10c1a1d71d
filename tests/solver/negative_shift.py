"""Halving a negative count with >> (Python's shift is arithmetic: -9 >> 1 == -5).

Expected: violates never_minus_five in one step.
"""

from ownership import Spec, require, violates

spec = Spec("negative_shift", summary="a debt halved by a shift", expect=violates("never_minus_five"))
spec.var("debt", int, init=-9)
spec.var("halved", bool, init=False)


@spec.action
def halve(s):
    require(not s.halved)
    s.debt = s.debt >> 1
    s.halved = True


@spec.invariant
def never_minus_five(s):
    return s.debt != -5
