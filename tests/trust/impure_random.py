"""An action that draws a random number: a jump to 2 happens in about one run in a hundred.

Expected: refused (OWN067, the action uses the module random); before, explore
said PROVED in most runs.
"""

import random

from ownership import Spec, require

spec = Spec("impure_random", summary="an action that flips a coin")
spec.var("x", int, init=0)


@spec.action
def step(s):
    require(s.x < 3)
    s.x = s.x + (2 if random.random() < 0.01 else 1)


@spec.invariant
def never_two_at_once(s):
    return s.x != 2
