"""Adversarial: a symmetric ``SetOf`` read back as an int mask (``holders & 1``)."""

from ownership import SetOf, Spec, require

spec = Spec("sym_static_mask", summary="request A's bit decides who may share a page")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
Page = spec.domain("Page", 2, symmetric=True, names="PQ")
spec.var("holders", SetOf(Req), per=Page, init=0)


@spec.action
def share(s, r: Req, p: Page):
    require(r not in s.holders[p])
    require(s.holders[p] & 1 == 0)
    s.holders[p] = s.holders[p] | {r}


@spec.invariant
def few_holders(s):
    return all(len(s.holders[p]) <= 2 for p in s.all(Page))
