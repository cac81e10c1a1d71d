"""Adversarial: an invariant that reads ``s.events``.

``no_second_finish`` looks for a ``finished`` event in the step's events;
invariants see a state, not a step, so the list is always empty and the
invariant always held: PROVED although both requests finish in two steps.
"""
from ownership import Spec, require, safe

spec = Spec("events_read_in_invariant", summary="an invariant that reads s.events", expect=safe())
spec.param("n", 2)
Req = spec.domain("Req", "n", symmetric=True, names="AB")
spec.var("done", bool, per=Req, init=False)

@spec.action
def finish(s, r: Req):
    require(not s.done[r])
    s.done[r] = True
    s.emit("finished", req=r)

@spec.invariant
def no_second_finish(s) -> bool:
    return len([e for e in s.events if e.kind == "finished"]) < 2
