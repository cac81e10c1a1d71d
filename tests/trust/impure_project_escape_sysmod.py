"""Adversarial: a project helper (sysmod) that answers True twice, then False; the action acts on it after 3 steps.

PROVED by explore, bmc, prove and hypothesis before: the history hides from the audit.
"""
import project_escapes

from ownership import Spec, require, safe

spec = Spec("impure_project_escape_sysmod", expect=safe())
spec.var("c", int, init=0)
spec.var("bad", bool, init=False)


@spec.action
def tick(s):
    require(s.c < 3)
    s.c = s.c + 1


@spec.action
def trip(s):
    ok = project_escapes.sysmod_ok()
    if s.c < 3:
        return
    require(ok)
    s.bad = True


@spec.invariant
def never_bad(s):
    return not s.bad
