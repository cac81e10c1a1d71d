"""A guard opened once by a memo inside a module-level object of another module of the project.

As impure_project_memo, but the memo is an attribute of the project's own
object (``project_registry.REGISTRY``), which reading the code cannot tell
from a constant.  Expected: refused at run time by the determinism audit
(OWN066: the expansion changed the module-level data it reads).
"""

from typing import Annotated

import project_registry

from ownership import Spec, require

spec = Spec("impure_project_registry", summary="a guard through a memo held by an imported object")
Req = spec.domain("Req", 2)
ReqId = Annotated[int, Req]
spec.var("running", bool, per=Req, init=False)
spec.var("retried", int, init=0)
spec.param("bound", 0, "a bound the invariant allows (--free bound)", min=0, max=2)


@spec.action
def retry(s, r: ReqId):
    require(project_registry.may_retry(r) and s.running[r])
    s.retried = s.retried + 1


@spec.action
def admit(s, r: ReqId):
    require(not s.running[r])
    s.running[r] = True


@spec.invariant
def never_retried(s):
    return s.retried <= s.params.bound
