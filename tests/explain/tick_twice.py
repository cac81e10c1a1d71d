"""An action without arguments that every path takes twice, once each way through its ``if``.

``tick()`` runs at ``x == 0`` (the ``if`` is false) and at ``x == 1`` (true);
both are necessary, and they never hold on one step, so the explanation must
not write them as one conjunction.
"""

from ownership import Spec, require

spec = Spec("tick_twice")
spec.var("x", int, init=0, doc="ticks so far")
spec.var("armed", bool, init=False, doc="the second tick armed the alarm")


@spec.action
def tick(s):
    require(s.x < 2)
    if s.x == 1:
        s.armed = True
    s.x = s.x + 1


@spec.action
def reset(s):
    require(s.x == 1 and not s.armed)
    s.x = 0


@spec.invariant
def never_armed_at_two(s) -> bool:
    return not (s.x == 2 and s.armed)
