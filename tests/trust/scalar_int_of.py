"""Adversarial: `int(p)` turns a symmetric page into a number."""

from ownership import Spec, require

spec = Spec("scalar_int_of", summary="page 0 may not grow")
Page = spec.domain("Page", 3, symmetric=True)
spec.var("used", bool, per=Page, init=False)


@spec.action
def start(s, p: Page):
    require(not any(s.used[q] for q in s.all(Page)))
    s.used[p] = True


@spec.action
def grow(s, p: Page, q: Page):
    require(s.used[p])
    require(int(p) > 0)
    require(not s.used[q])
    s.used[q] = True


@spec.invariant
def one_page(s):
    return sum(s.used[p] for p in s.all(Page)) <= 1
