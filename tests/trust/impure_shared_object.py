"""A guard reading an attribute of a module-level object that another action sets.

Assigning ``GATE.open`` is not a module-global assignment, so the static look
lets it through; the explorer then skips ``enter`` by its footprint (it read
only ``inside``) and said PROVED.  Expected: refused at run time (OWN066 or
OWN067) naming the action.
"""

from ownership import Spec, require


class _Gate:
    open = False


spec = Spec("impure_shared_object", summary="a guard reading a shared object")
spec.var("inside", int, init=0)
spec.var("opened", bool, init=False)
GATE = _Gate()


@spec.action
def enter(s):
    require(s.inside == 0 and GATE.open)
    s.inside = 1


@spec.action
def open_gate(s):
    require(not s.opened)
    s.opened = True
    GATE.open = True


@spec.invariant
def nobody_inside(s):
    return s.inside == 0
