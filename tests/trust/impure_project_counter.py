"""A guard through a module-level counter of another module of the project.

``project_counter.first_grant()`` is true on its first call only.  The
explorer makes that call in the initial state, where ``boost`` is disabled
anyway, so ``boost`` never fires (PROVED before).  Expected: refused (OWN067:
the helper assigns the module global GRANTS) at project_counter.py's line.
"""

from project_counter import first_grant

from ownership import Spec, require

spec = Spec("impure_project_counter", summary="a guard through a counter in an imported module")
spec.var("ready", bool, init=False)
spec.var("boosted", bool, init=False)
spec.param("bound", 0, "a bound the invariant allows (--free bound)", min=0, max=2)


@spec.action
def boost(s):
    require(first_grant() and s.ready)
    s.boosted = True


@spec.action
def get_ready(s):
    require(not s.ready)
    s.ready = True


@spec.invariant
def never_boosted(s):
    return not s.boosted or s.params.bound > 2
