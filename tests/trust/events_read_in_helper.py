"""Adversarial: an invariant whose helper reads the step's events.

Invariants see a state: the list was always empty and the invariant always
held, PROVED although both requests finish in two steps.
"""
from ownership import Spec, require, safe

spec = Spec("events_read_in_helper", summary="an invariant calling a helper that reads s.events", expect=safe())
spec.param("n", 2)
Req = spec.domain("Req", "n", symmetric=True, names="AB")
spec.var("done", bool, per=Req, init=False)

@spec.action
def finish(s, r: Req):
    require(not s.done[r])
    s.done[r] = True
    s.emit("finished", req=r)

def finishes(view) -> int:
    return len([e for e in view.events if e.kind == "finished"])

@spec.invariant
def no_second_finish(s) -> bool:
    return finishes(s) < 2
