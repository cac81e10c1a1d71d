"""Adversarial: a guard compares a request's display name (``s.name_of(Req, r) == "A"``)."""

from ownership import Spec, require

spec = Spec("sym_static_name", summary="only request A may be aborted")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
spec.var("aborted", bool, per=Req, init=False)


@spec.action
def abort(s, r: Req):
    require(not s.aborted[r])
    require(s.name_of(Req, r) == "A")
    s.aborted[r] = True


@spec.invariant
def fine(s):
    return True
