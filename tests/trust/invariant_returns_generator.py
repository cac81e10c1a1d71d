"""An invariant that returns a generator (``any``/``all`` forgotten): always truthy.

Expected: refused with OWN065 (PROVED before invariants had to return a bool).
"""

from ownership import Spec, require

spec = Spec("invariant_returns_generator", summary="an invariant returning a generator")
spec.param("n", 2, min=1)
Req = spec.domain("Req", "n", names="AB")
spec.var("done", bool, per=Req, init=False)


@spec.action
def finish(s, r: Req):
    require(not s.done[r])
    s.done[r] = True


@spec.invariant
def not_all_done(s):
    return (not s.done[r] for r in s.all(Req))
