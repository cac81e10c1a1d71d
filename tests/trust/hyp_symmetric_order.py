"""A domain declared symmetric that the spec tells apart by order: every engine must refuse it (OWN061).

``admit`` lets the first request of ``s.all(Req)`` in without the slot check:
A and B are not interchangeable, so symmetry reduction would be unsound.
The explorer, bmc and prove refuse the spec with OWN061; the random engine
used to sample it and report VIOLATED (admit B, then A), an answer about a
spec the others call malformed.
"""

from ownership import Spec, require

spec = Spec("hyp_symmetric_order", summary="the first request of a symmetric domain skips the slot check")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
spec.var("held", bool, per=Req, init=False)
spec.var("slots", int, init=1)


@spec.action
def admit(s, r: Req):
    """Admit ``r`` into a slot (the first request in order is let in without the check)."""
    require(not s.held[r])
    first = next(iter(s.all(Req)))
    if r != first:
        require(s.slots > 0)
    s.slots -= 1
    s.held[r] = True


@spec.invariant
def slots_nonnegative(s):
    """Never more requests admitted than slots."""
    return s.slots >= 0
