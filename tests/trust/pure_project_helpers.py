"""A spec using pure helpers of its project: constants, a function, a frozen dataclass, an Enum.

Expected: accepted by every engine (PROVED); nothing here is impure.
"""

from typing import Annotated

import project_helpers
from project_helpers import NAMES, Phase, below_limit, budget

from ownership import Spec, require

spec = Spec("pure_project_helpers", summary="a spec using pure helpers of its project")
Req = spec.domain("Req", 2, names=NAMES)
ReqId = Annotated[int, Req]
spec.var("used", int, per=Req, init=0)
spec.param("bound", 0, "a bound the invariant allows (--free bound)", min=0, max=2)


@spec.action
def use(s, r: ReqId):
    require(below_limit(s.used[r]) and Phase.RUNNING.value == 1)
    require(budget().left(s.used[r]) > 0 and s.used[r] < project_helpers.LIMIT)
    s.used[r] = s.used[r] + 1


@spec.invariant
def within_budget(s):
    return s.used[0] <= project_helpers.LIMIT + s.params.bound and s.used[1] <= project_helpers.LIMIT
