"""Adversarial: three pages; a double free only when the pages, in index order, have descending free stamps.

Explore said PROVED with the transposition and the cycle; --no-symmetry finds no_double_ownership violated.
"""
from ownership import Ownership, Spec, require, violates

spec = Spec("sym_review_pool_stamp_order", expect=violates("no_double_ownership"))
Req = spec.domain("Req", 1, symmetric=True, names="A")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", 3, prefix="K")
spec.var("stamp", int, per=pool.Page, init=-1)
spec.var("clock", int, init=0)
spec.var("ph", int, init=0)

@spec.action
def take(s, r: Req):
    require(s.ph == 0)
    pool.alloc(s, r, 3)
    s.ph = 1

@spec.action
def give_back(s, r: Req, p: pool.Page):
    require(s.ph == 1 and s.stamp[p] == -1)
    pool.free_pages(s, r, [p])
    s.stamp[p] = s.clock
    s.clock = s.clock + 1

@spec.action
def recycle(s, r: Req):
    xs = list(s.all(pool.Page))
    require(s.clock == 3 and s.ph == 1)
    if s.stamp[xs[0]] > s.stamp[xs[1]] > s.stamp[xs[2]]:
        pool.free_pages(s, r, [xs[0]])   # BUG: a page freed twice
    s.ph = 2

@spec.action
def reuse(s, r: Req):
    require(s.ph == 2)
    pool.alloc(s, r, 1)
    pool.alloc(s, r, 1, first_slot=1)
    s.ph = 3

own.invariants("no_double_ownership")
