"""A counter that counts to a million: safe, and far slower to check than a test should wait for.

The time limit of the Python API must stop it (UNKNOWN, which does not meet
``expect=safe()``), and the failure must name the knob that raises it.
"""

from ownership import Spec, require, safe

spec = Spec("left_slow_counter", summary="a counter up to n (a million states by default)", expect=safe())
spec.param("n", 1_000_000, min=1)
spec.var("count", int, init=0)


@spec.action
def tick(s):
    """Count one more."""
    require(s.count < s.params.n)
    s.count = s.count + 1


@spec.invariant
def within(s) -> bool:
    """The counter never passes n."""
    return s.count <= s.params.n
