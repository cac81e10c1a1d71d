"""Adversarial: the step that violates ``no_rewind`` returns to an earlier state.

``advance`` counts up to ``depth - 1``; then ``rewind`` flags ``no_rewind``
and sets the counter back to 0, the initial state: the violation is a
back-edge at depth ``depth``.  k-induction's simple paths used to drop it.
"""
from ownership import Spec, require, violates

spec = Spec("events_flag_back_edge", summary="a flagged step that returns to an earlier state",
            expect=violates("no_rewind"))
spec.param("depth", 3, "the depth of the flagged step", min=1, max=4)
spec.var("c", int, init=0)

@spec.action
def advance(s):
    require(s.c < s.params.depth - 1)
    s.c = s.c + 1

@spec.action
def rewind(s):
    require(s.c == s.params.depth - 1)
    s.c = 0
    s.flag("no_rewind")

@spec.invariant
def no_rewind(s) -> bool:
    return s.c >= 0
