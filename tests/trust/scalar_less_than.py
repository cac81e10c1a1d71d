"""Adversarial: `q < p` orders two symmetric pages."""

from ownership import Spec, require

spec = Spec("scalar_less_than", summary="grows only downwards")
Page = spec.domain("Page", 3, symmetric=True)
spec.var("used", bool, per=Page, init=False)


@spec.action
def start(s, p: Page):
    require(not any(s.used[q] for q in s.all(Page)))
    s.used[p] = True


@spec.action
def grow(s, p: Page, q: Page):
    require(s.used[p])
    require(q < p)
    require(not s.used[q])
    s.used[q] = True


@spec.invariant
def one_page(s):
    return sum(s.used[p] for p in s.all(Page)) <= 1
