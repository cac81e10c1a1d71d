"""Adversarial: the step that violates ``no_poke`` leaves the state unchanged.

``advance`` counts up to ``depth - 1``; then ``poke`` flags ``no_poke`` and
writes nothing: the violation is a self-loop at depth ``depth``.  k-induction's
simple paths and a seen-set that only checks new states used to drop it.
"""
from ownership import Spec, require, violates

spec = Spec("events_flag_self_loop", summary="a flagged step that returns to the same state",
            expect=violates("no_poke"))
spec.param("depth", 3, "the depth of the flagged step", min=1, max=4)
spec.var("c", int, init=0)

@spec.action
def advance(s):
    require(s.c < s.params.depth - 1)
    s.c = s.c + 1

@spec.action
def poke(s):
    require(s.c == s.params.depth - 1)
    s.flag("no_poke")

@spec.invariant
def no_poke(s) -> bool:
    return s.c >= 0
