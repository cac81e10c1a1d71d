"""Two symmetric domains index one table: pages P and handles H, cover[H, P]."""

from ownership import Spec, require, safe

spec = Spec("two_index_domains", expect=safe())
P = spec.domain("P", 2, symmetric=True, names="pq")
H = spec.domain("H", 2, symmetric=True, names="gh")
spec.var("free", bool, per=P, init=False)
spec.var("cover", bool, per=(H, P), init=False)
spec.var("bad", bool, init=False)


@spec.action
def mark_free(s, p: P):
    """Once a page is covered, free one page (once)."""
    require(any(s.cover[g, x] for g in s.all(H) for x in s.all(P)))
    require(not any(s.free[x] for x in s.all(P)))
    s.free[p] = True


@spec.action
def cover(s, h: H, p: P):
    """A handle covers one page (once)."""
    require(not any(s.cover[g, x] for g in s.all(H) for x in s.all(P)))
    s.cover[h, p] = True


@spec.action
def check(s, h: H):
    """Later, the handle notices it covers a page other than the free one."""
    require(not s.bad)
    for p in s.all(P):
        if s.cover[h, p] and not s.free[p] and any(s.free[x] for x in s.all(P)):
            s.bad = True


@spec.invariant
def never_bad(s):
    """No handle ever covers a page other than the free one."""
    return not s.bad
