"""An action whose outcome comes from a module-level iterator: each run takes the next number.

The static look does not see inside an ``itertools.count`` object, but run
twice in the same state the action gives different successors.  Expected:
refused by the explorer's determinism audit (OWN066) naming the action.
"""

import itertools

from ownership import Spec, require

spec = Spec("impure_counter", summary="an action reading a module-level iterator")
spec.var("x", int, init=0)
TICKS = itertools.count()


@spec.action
def step(s):
    require(s.x < 100)
    s.x = next(TICKS) % 3


@spec.invariant
def small(s):
    return s.x < 3
