"""Adversarial: the scheduler's leader is the int 0, a symmetric request named by index."""

from ownership import Optional, Spec, require

spec = Spec("sym_static_int_leader", summary="the first request admitted leads the batch")
Req = spec.domain("Req", 3, symmetric=True, names="ABC")
spec.var("running", bool, per=Req, init=False)
spec.var("leader", Optional(Req), init=None)


@spec.action
def admit(s, r: Req):
    require(not s.running[r])
    s.running[r] = True
    if s.leader is None:
        s.leader = 0  # names request A: an int written into a symmetric reference


@spec.invariant
def leader_runs(s):
    return s.leader is None or s.running[s.leader]
