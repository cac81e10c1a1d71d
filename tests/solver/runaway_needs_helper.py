"""Safe (x stays 0), but not k-inductive for any k: from an unreachable state
with x > 0 the counter climbs to the bound.  The helper variant proves it."""

from ownership import Spec, require, safe

spec = Spec("runaway", summary="x only grows once positive; reachable x is 0", expect=safe())
spec.var("x", int, init=0)
spec.var("tick", bool, init=False)


@spec.action
def grow(s):
    require(s.x > 0)
    s.x = s.x + 1


@spec.action
def tock(s):
    s.tick = not s.tick


@spec.invariant
def bounded(s):
    return s.x < 1000
