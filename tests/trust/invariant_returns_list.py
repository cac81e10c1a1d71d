"""An invariant that returns a list: always true while non-empty, so it could never fail.

The counter passes 2, which the author meant to forbid; before invariants had
to return a bool every engine said PROVED.  Expected: refused with OWN065.
"""

from ownership import Spec, require

spec = Spec("invariant_returns_list", summary="an invariant returning a list of checks")
spec.var("x", int, init=0)


@spec.action
def step(s):
    require(s.x < 3)
    s.x = s.x + 1


@spec.invariant
def small(s):
    return [s.x < 2]  # meant: all([...])
