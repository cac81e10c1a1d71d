"""A spec whose helper loops: the mutant `while n != 0` -> `while n == 0` never returns. Expected: safe."""

from ownership import Spec, require, safe

spec = Spec("endless", expect=safe())
spec.var("count", int, init=0)


@spec.helper
def bump(s) -> None:
    """Add one after counting down from 0 (no steps)."""
    n = 0
    while n != 0:
        n = 0
    s.count = s.count + 1


@spec.action
def step(s):
    """Count to two."""
    require(s.count < 2)
    bump(s)


@spec.invariant
def bounded(s) -> bool:
    """The count stays at most two."""
    return s.count <= 2
