"""Adversarial: a terminal predicate that flags a violation and answers True.

``all_finished`` calls ``s.flag`` when a request finished without a reply: the
predicate judges a state, where a flag marks no step, so the flag was dropped
and the deadlock check passed.
"""
from ownership import Spec, require, safe

spec = Spec("events_flag_in_terminal", summary="a terminal predicate that calls s.flag", expect=safe())
spec.param("n", 2)
Req = spec.domain("Req", "n", symmetric=True, names="AB")
spec.var("done", bool, per=Req, init=False)
spec.var("replied", bool, per=Req, init=False)


@spec.action
def finish(s, r: Req):
    require(not s.done[r])
    s.done[r] = True


@spec.terminal
def all_finished(s) -> bool:
    s.flag("replies", any(s.done[r] and not s.replied[r] for r in s.all(Req)))
    return all(s.done[r] for r in s.all(Req))


@spec.invariant
def replies(s) -> bool:
    return True
