"""A counter that reaches 10: the violation at step 10 needs integers of at least 5 bits."""
from ownership import Spec, require

spec = Spec("count_to_ten")
spec.var("x", int, init=0)

@spec.action
def step(s):
    require(s.x < 12)
    s.x = s.x + 1

@spec.invariant
def below_ten(s):
    return s.x < 10
