"""Adversarial: `sorted(pages)[0]` picks "the lowest" of symmetric pages (ordering elements)."""

from ownership import Spec, require

spec = Spec("scalar_sorted_first", summary="grows into the lowest page")
Page = spec.domain("Page", 3, symmetric=True)
spec.var("used", bool, per=Page, init=False)


@spec.action
def start(s, p: Page):
    require(not any(s.used[q] for q in s.all(Page)))
    s.used[p] = True


@spec.action
def grow(s, p: Page):
    require(s.used[p])
    first = sorted(s.all(Page))[0]
    require(first != p)
    s.used[first] = True


@spec.invariant
def one_page(s):
    return sum(s.used[p] for p in s.all(Page)) <= 1
