"""Adversarial: an invariant whose helper flags a violation; the invariant returns True.

The flag is not in the invariant's own code, so only running it shows it:
every engine said PROVED although both requests finish in two steps.
"""
from ownership import Spec, require, safe

spec = Spec("events_flag_in_helper", summary="an invariant calling a helper that calls s.flag", expect=safe())
spec.param("n", 2)
Req = spec.domain("Req", "n", symmetric=True, names="AB")
spec.var("done", bool, per=Req, init=False)

@spec.action
def finish(s, r: Req):
    require(not s.done[r])
    s.done[r] = True

def note_both(view) -> None:
    view.flag("two_done", all(view.done[r] for r in view.all(Req)))

@spec.invariant
def two_done(s) -> bool:
    note_both(s)
    return True
