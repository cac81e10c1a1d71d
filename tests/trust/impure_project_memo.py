"""A guard opened once by a memo dict of another module of the project, keyed by request.

``project_memo.may_retry(r)`` says yes only the first time it is asked about
``r``.  The explorer asks first in the initial state, where ``retry`` is
disabled anyway, so ``retry`` never fires and explore, bmc and prove said
PROVED; a random run that admits ``r`` before asking finds the 2-step
violation.  Expected: refused (OWN067) at the memo's line in project_memo.py.
"""

from typing import Annotated

import project_memo

from ownership import Spec, require

spec = Spec("impure_project_memo", summary="a guard through a memo dict in an imported module")
Req = spec.domain("Req", 2)
ReqId = Annotated[int, Req]
spec.var("running", bool, per=Req, init=False)
spec.var("retried", int, init=0)
spec.param("bound", 0, "a bound the invariant allows (--free bound)", min=0, max=2)


@spec.action
def retry(s, r: ReqId):
    require(project_memo.may_retry(r) and s.running[r])
    s.retried = s.retried + 1


@spec.action
def admit(s, r: ReqId):
    require(not s.running[r])
    s.running[r] = True


@spec.invariant
def never_retried(s):
    return s.retried <= s.params.bound
