"""Adversarial: an action that counts its calls in an attribute of the module-level spec object."""
from ownership import Spec, require, safe

spec = Spec("impure_spec_attribute", expect=safe())
spec.var("c", int, init=0)
spec.var("bad", bool, init=False)


@spec.action
def tick(s):
    require(s.c < 3)
    s.c = s.c + 1


@spec.action
def trip(s):
    spec.calls = getattr(spec, "calls", 0) + 1
    ok = spec.calls <= 2
    if s.c < 3:
        return
    require(ok)
    s.bad = True


@spec.invariant
def never_bad(s):
    return not s.bad
