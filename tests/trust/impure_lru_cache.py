"""A guard through a helper cached with functools.lru_cache.

``gate_open(s)`` is cached on the view object, which is the same in every
state, so it answers what the first state said (closed) forever: ``enter``
never runs and the violation after the gate opens is missed (PROVED before).
Expected: refused (OWN067, the action calls a cached function).
"""

import functools

from ownership import Spec, require

spec = Spec("impure_lru_cache", summary="a guard through an lru_cache'd helper")
spec.var("inside", int, init=0)
spec.var("gate", bool, init=False)


@functools.cache
def gate_open(s) -> bool:
    return bool(s.gate)


@spec.action
def open_gate(s):
    require(not s.gate)
    s.gate = True


@spec.action
def enter(s):
    require(s.inside == 0 and gate_open(s))
    s.inside = 1


@spec.invariant
def nobody_inside(s):
    return s.inside == 0
