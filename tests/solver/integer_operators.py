"""Python's integer operators (and truth values used as integers), one per action, on two state variables.

Not a protocol: a conformance check over states with negative, zero and
positive values compares each operator's Z3 encoding with Python's.
"""

from ownership import Spec, require, safe

spec = Spec("integer_operators", summary="each integer operator on x and y", expect=safe())
spec.var("x", int, init=0)
spec.var("y", int, init=0)
spec.var("z", int, init=0)


@spec.action
def shift_right(s):
    s.z = s.x >> 1


@spec.action
def shift_right_by(s):
    require(s.y >= 0)
    s.z = s.x >> s.y


@spec.action
def shift_left_by(s):
    require(s.y >= 0)
    s.z = s.x << s.y


@spec.action
def floor_divide(s):
    require(s.y != 0)
    s.z = s.x // s.y


@spec.action
def divide_constant(s):
    require(s.x != 0)
    s.z = 7 // s.x


@spec.action
def modulo(s):
    require(s.y != 0)
    s.z = s.x % s.y


@spec.action
def negate_and_invert(s):
    s.z = -s.x + ~s.y


@spec.action
def bits(s):
    s.z = (s.x & s.y) + (s.x | s.y) * 2 + (s.x ^ s.y) * 4


@spec.action
def multiply(s):
    s.z = s.x * s.y


@spec.action
def compare(s):
    s.z = (s.x < s.y) + (s.x == s.y) * 2 + max(s.x, s.y) - min(s.x, s.y)


@spec.action
def truth_values(s):
    """Comparisons used as integers: ~True is -2, and True equals 1 but not 2."""
    s.z = ~(s.x < s.y) * 10 + ((s.x < s.y) == 2) + ((s.x < s.y) != 2) * 2 + ((s.x <= s.y) == 1) * 4


@spec.invariant
def bounded(s):
    return s.z < 1000
