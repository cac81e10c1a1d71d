"""A value that triples at every step: it outgrows every fixed integer width."""
from ownership import Spec

spec = Spec("tripling")
spec.var("x", int, init=1)

@spec.action
def triple(s):
    s.x = s.x * 3

@spec.invariant
def positive(s):
    return s.x > 0
