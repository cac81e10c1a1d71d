"""Adversarial: a flag whose condition reads a cell only another action writes.

``check`` flags ``no_late_check`` when ``x`` was set; ``set_x`` sets it.  Neither
reads nor writes a cell the other does, except through the flag's condition, so
bmc's partial-order reduction took them for independent and searched only one
order of the two (``check`` first, declared first): the violation, ``set_x`` then
``check``, was never asked for and bmc said BOUNDED_OK.
"""
from ownership import Spec, require, violates

spec = Spec("events_flag_reordered", summary="a flag that depends on another action's write",
            expect=violates("no_late_check"))
spec.var("x", bool, init=False)
spec.var("checked", bool, init=False)

@spec.action
def check(s):
    require(not s.checked)
    s.checked = True
    s.flag("no_late_check", s.x)

@spec.action
def set_x(s):
    require(not s.x)
    s.x = True

@spec.invariant
def no_late_check(s) -> bool:
    return True
