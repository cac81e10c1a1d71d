"""A guard through a helper of another module of the project cached with functools.cache.

``project_cache.is_running(s, r)`` is cached on the view, the same object in
every state: it answers what the initial state said (not running) forever,
so ``finish`` never fires (PROVED before).  Expected: refused (OWN067, a
cached function) at the call's line.
"""

from typing import Annotated

import project_cache

from ownership import Spec, require

spec = Spec("impure_project_lru", summary="a guard through an lru_cache'd helper in an imported module")
Req = spec.domain("Req", 2)
ReqId = Annotated[int, Req]
spec.var("running", bool, per=Req, init=False)
spec.var("finished", int, init=0)
spec.param("bound", 0, "a bound the invariant allows (--free bound)", min=0, max=2)


@spec.action
def finish(s, r: ReqId):
    require(project_cache.is_running(s, r))
    s.running[r] = False
    s.finished = s.finished + 1


@spec.action
def admit(s, r: ReqId):
    require(not s.running[r] and s.finished == 0)
    s.running[r] = True


@spec.invariant
def nothing_finished(s):
    return s.finished <= s.params.bound
