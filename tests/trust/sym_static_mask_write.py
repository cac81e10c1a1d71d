"""Adversarial: an int mask written into a symmetric ``SetOf`` (bit 0 is request A)."""

from ownership import SetOf, Spec, require

spec = Spec("sym_static_mask_write", summary="a page starts held by request A")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
Page = spec.domain("Page", 2, symmetric=True, names="PQ")
spec.var("holders", SetOf(Req), per=Page, init=0)


@spec.action
def pin(s, p: Page):
    require(not s.holders[p])
    s.holders[p] = 1


@spec.invariant
def fine(s):
    return True
