"""the doc's 'crash names element 1' example, with the index read through Element.__getstate__()"""
from ownership import Spec, require, violates

spec = Spec("sym_static_getstate", expect=violates("no_crash_of_running"))
Req = spec.domain("Req", 2, symmetric=True, names="AB")
spec.var("running", bool, per=Req, init=False)
spec.var("crashed", bool, init=False)

@spec.action
def start(s, r: Req):
    require(not s.running[r])
    s.running[r] = True

@spec.action
def crash(s, r: Req):
    require(s.running[r] and r.__getstate__()[1]["_Element__i"] == 1)
    s.crashed = True

@spec.invariant
def no_crash_of_running(s):
    return not s.crashed
