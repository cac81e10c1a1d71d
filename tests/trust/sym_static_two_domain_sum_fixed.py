"""The same invariant written over ``.values()``: the search finds the second mapping."""

from ownership import Spec, require

spec = Spec("sym_static_two_domain_sum_fixed", summary="each request maps at most one page")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
Page = spec.domain("Page", 2, symmetric=True, names="PQ")
spec.var("mapped", bool, per=(Req, Page), init=False)


@spec.action
def map_page(s, r: Req, p: Page):
    require(not s.mapped[r, p])
    s.mapped[r, p] = True


@spec.invariant
def one_mapping(s):
    return sum(s.mapped.values()) <= 1
