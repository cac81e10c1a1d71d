"""What a symmetric spec may do: sets of elements, ``.items()`` of a per-request table, emitted elements."""

from ownership import SetOf, Spec, require

spec = Spec("sym_static_sets_ok", summary="requests share pages; a page is freed when its last holder leaves")
Req = spec.domain("Req", 2, symmetric=True, names="AB")
Page = spec.domain("Page", 2, symmetric=True, names="PQ")
spec.var("holders", SetOf(Req), per=Page, init=0)
spec.var("free", bool, per=Page, init=True)
spec.var("pages", int, per=Req, init=0)


@spec.action
def share(s, r: Req, p: Page):
    require(r not in s.holders[p] and s.pages[r] < 1)
    s.holders[p] = s.holders[p] | {r}
    s.free[p] = False
    s.pages[r] = s.pages[r] + 1
    s.emit("share", req=r, page=p)


@spec.action
def leave(s, r: Req, p: Page):
    require(r in s.holders[p])
    s.holders[p] = s.holders[p] - {r}
    s.pages[r] = s.pages[r] - 1
    if not s.holders[p]:
        s.free[p] = True


@spec.invariant
def free_iff_unheld(s):
    return all(s.free[p] == (not s.holders[p]) for p in s.all(Page))


@spec.invariant
def pages_counted(s):
    held = sum(len(s.holders[p]) for p in s.all(Page))
    return held == sum(n for _, n in s.pages.items()) == sum(s.pages.values())
