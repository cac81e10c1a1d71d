"""Adversarial: an order dependence that shows only 42 steps deep, below any small sample.

A counter runs to 40 before ``first`` may fire; ``first`` looks only at the first request of ``s.all(Req)``.
With that request marked it ends the run; with it unmarked and the other
marked, it flags it beside a marked request, which the invariant forbids.
A search reduced by symmetry that keeps only the first of two mirror states
(A marked, B not) never sees the violation; ``--no-symmetry`` finds it at
depth 42.  About 125 states.
"""

from ownership import Spec, require, safe

spec = Spec("sym_global_deep_first", summary="the first request of s.all(Req) is flagged 40 steps in",
            expect=safe())
Req = spec.domain("Req", 2, symmetric=True, names="AB")
spec.var("n", int, init=0)
spec.var("marked", bool, per=Req, init=False)
spec.var("flagged", bool, per=Req, init=False)


@spec.action
def tick(s):
    require(s.n < 40)
    s.n = s.n + 1


@spec.action
def mark(s, r: Req):
    require(not s.marked[r])
    s.marked[r] = True


@spec.action
def first(s):
    require(s.n == 40 and any(s.marked[q] for q in s.all(Req)))
    head = list(s.all(Req))[0]  # s.all(Req)[0] is refused where it is written (OWN060); a list keeps the order
    if s.marked[head]:
        s.n = 41
    else:
        s.flagged[head] = True


@spec.invariant
def never_flagged_beside_a_mark(s):
    return not (any(s.flagged[r] for r in s.all(Req)) and any(s.marked[r] for r in s.all(Req)))
