"""Adversarial: three requests; an action fires only at one arrangement of their values in s.all(Req) order.

A transposition and a cycle applied to each expanded state miss it (3 of the 6 renamings are never applied):
explore said PROVED; --no-symmetry finds the violation at depth 4.
"""
from ownership import Spec, require, safe

spec = Spec("sym_review_three_arrangement", expect=safe())
Req = spec.domain("Req", 3, symmetric=True, names="ABC")
V = spec.values("V", lambda p: [0, 1, 2])
spec.var("v", int, per=Req, init=-1)
spec.var("bad", bool, init=False)

@spec.action
def setv(s, r: Req, k: V):
    require(s.v[r] == -1)
    require(all(s.v[q] != k for q in s.all(Req)))
    s.v[r] = k

@spec.action(may_be_dead="only at one arrangement")
def trip(s):
    xs = list(s.all(Req))
    require(s.v[xs[0]] == 0 and s.v[xs[1]] == 2 and s.v[xs[2]] == 1)
    s.bad = True

@spec.invariant
def never_bad(s):
    return not s.bad
