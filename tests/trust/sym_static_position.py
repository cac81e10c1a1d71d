"""Adversarial: the scheduler always runs the first request of ``s.all(Req)``."""

from ownership import Spec, require

spec = Spec("sym_static_position", summary="FCFS by position")
Req = spec.domain("Req", 3, symmetric=True, names="ABC")
spec.var("waiting", bool, per=Req, init=True)
spec.var("running", bool, per=Req, init=False)


@spec.action
def schedule(s):
    first = s.all(Req)[0]
    require(s.waiting[first])
    s.waiting[first] = False
    s.running[first] = True


@spec.invariant
def one_running(s):
    return sum(s.running[r] for r in s.all(Req)) <= 1
