"""A guard that reads a module global which an action changes.

``open_gate`` sets the global instead of a state variable, so the explorer's
footprint cache (which knows only the cells the guard read) keeps skipping
``enter`` and the violation after the gate opens is never seen: PROVED
before.  Expected: refused (OWN067, the action assigns a module global).
"""

from ownership import Spec, require

spec = Spec("impure_global_guard", summary="a guard reading a module global")
spec.var("inside", int, init=0)
spec.var("opened", bool, init=False)
GATE = 0


@spec.action
def enter(s):
    require(s.inside == 0 and GATE == 1)
    s.inside = 1


@spec.action
def open_gate(s):
    global GATE
    require(not s.opened)
    s.opened = True
    GATE = 1


@spec.invariant
def nobody_inside(s):
    return s.inside == 0
