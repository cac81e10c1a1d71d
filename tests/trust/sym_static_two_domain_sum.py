"""A table over two domains summed by iterating it: before, the loop saw no cell and held."""

from ownership import Spec, require

spec = Spec("sym_static_two_domain_sum", summary="each request maps at most one page")
Req = spec.domain("Req", 2, names="AB")
Page = spec.domain("Page", 2, names="PQ")
spec.var("mapped", bool, per=(Req, Page), init=False)


@spec.action
def map_page(s, r: Req, p: Page):
    require(not s.mapped[r, p])
    s.mapped[r, p] = True


@spec.invariant
def one_mapping(s):
    return sum(s.mapped) <= 1
