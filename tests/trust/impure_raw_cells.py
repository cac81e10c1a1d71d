"""A guard that reads the raw cell list ``s.cur``, bypassing the footprint log.

``enter``'s guard reads ``gate`` through ``s.cur`` (cell 1) and ``inside``
through the variable: the footprint cache records only ``inside``, so after
the gate opens ``enter`` is still skipped and the violation is missed
(PROVED before).  Expected: refused (OWN067) at the ``s.cur`` line.
"""

from ownership import Spec, require

spec = Spec("impure_raw_cells", summary="a guard reading s.cur")
spec.var("inside", int, init=0)
spec.var("gate", bool, init=False)


@spec.action
def open_gate(s):
    require(not s.gate)
    s.gate = True


@spec.action
def enter(s):
    require(s.inside == 0 and s.cur[1])
    s.inside = 1


@spec.invariant
def nobody_inside(s):
    return s.inside == 0
