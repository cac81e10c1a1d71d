"""Two invariants: one holds, one fails."""
from ownership import Spec, require

spec = Spec("b2")
spec.var("x", int, init=0)

@spec.action
def step(s):
    require(s.x < 3)
    s.x = s.x + 1

@spec.invariant
def nonneg(s):
    return s.x >= 0

@spec.invariant
def below_two(s):
    return s.x < 2
