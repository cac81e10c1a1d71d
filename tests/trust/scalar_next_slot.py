"""Adversarial: `p - 1` finds the neighbouring slot of a symmetric page (arithmetic on an element)."""

from ownership import Spec, require

spec = Spec("scalar_next_slot", summary="grows a run of pages by slot arithmetic")
Page = spec.domain("Page", 3, symmetric=True)
spec.var("used", bool, per=Page, init=False)


@spec.action
def start(s, p: Page):
    require(not any(s.used[q] for q in s.all(Page)))
    s.used[p] = True


@spec.action
def grow(s, p: Page):
    require(s.used[p])
    q = p - 1
    require(q >= 0 and not s.used[q])
    s.used[q] = True


@spec.invariant
def one_page(s):
    return sum(s.used[p] for p in s.all(Page)) <= 1
