"""Sets of elements written in spec code (as symmetric SetOf cells must be), in every engine: a page two requests hold."""

from ownership import SetOf, Spec, require, violates

spec = Spec("sym_static_sets_engines", summary="sets of elements in spec code, in every engine", expect=violates("one_holder"))
Req = spec.domain("Req", 2, symmetric=True, names="AB")
Page = spec.domain("Page", 2, symmetric=True, names="PQ")
spec.var("holders", SetOf(Req), per=Page, init=0)
spec.var("free", bool, per=Page, init=True)


@spec.action
def share(s, r: Req, p: Page):
    require(r not in s.holders[p])
    s.holders[p] = s.holders[p] | {r}
    s.free[p] = False


@spec.action
def leave(s, r: Req, p: Page):
    require(r in s.holders[p])
    s.holders[p] = s.holders[p] - {r}
    if not s.holders[p]:
        s.free[p] = True


@spec.invariant
def free_iff_unheld(s):
    return all(s.free[p] == (not s.holders[p]) for p in s.all(Page))


@spec.invariant
def one_holder(s):
    return all(sum(1 for r in s.all(Req) if r in s.holders[p]) <= 1 for p in s.all(Page))
