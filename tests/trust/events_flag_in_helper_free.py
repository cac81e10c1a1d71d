"""Adversarial: an invariant's helper flags a violation, checked with a free parameter.

``check --free limit`` said PROVED although the counter reaches 2 for
``limit >= 2``: the parametric explorer dropped the flag the helper raised.
"""
from ownership import Spec, require, safe

spec = Spec("events_flag_in_helper_free", summary="an invariant's helper calls s.flag, under --free",
            expect=safe())
spec.param("limit", 2, "how far the counter goes", min=1, max=3)
spec.var("c", int, init=0)

@spec.action
def step(s):
    require(s.c < s.params.limit)
    s.c = s.c + 1

def note(view) -> None:
    view.flag("small", view.c >= 2)

@spec.invariant
def small(s) -> bool:
    note(s)
    return True
