from ownership import Spec, require, safe

spec = Spec("shift", summary="y := x; x := 0: safe, 2-inductive, not 1-inductive", expect=safe())
spec.var("x", int, init=0)
spec.var("y", int, init=0)
@spec.action
def shift(s):
    require(s.y == 0)
    s.y = s.x
    s.x = 0
@spec.invariant
def y_is_zero(s):
    return s.y == 0
