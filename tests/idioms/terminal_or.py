"""Idiom: ``and``/``or``/``not`` in a terminal predicate and an invariant.

The bug: a failed request keeps its pages, so when every request is done or
failed the pool is not back to full.
"""

from ownership import Enum, Ownership, Spec, require, violates

spec = Spec("idiom_terminal_or", summary="terminal predicate written with or",
            expect=violates("pages_returned_when_idle"))
spec.param("requests", 3)
spec.param("pages", 3)
Req = spec.domain("Req", "requests", symmetric=True, names="ABCDEFGH")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "WAITING RUNNING DONE FAILED")
spec.var("phase", Phase, per=Req, init=Phase.WAITING)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.WAITING)
    pool.alloc(s, r, 1)
    s.phase[r] = Phase.RUNNING


@spec.action
def finish(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pool.free(s, r)
    s.phase[r] = Phase.DONE


@spec.action
def fail(s, r: Req):  # bug: a failed request keeps its pages
    require(s.phase[r] == Phase.RUNNING)
    s.phase[r] = Phase.FAILED


@spec.invariant
def settled_requests_hold_nothing_or_failed(s):
    """A done request holds no page (a failed one may)."""
    return all(not (s.phase[r] == Phase.DONE and pool.held(s, r) > 0) or s.phase[r] == Phase.FAILED
               for r in s.all(Req))


@spec.terminal
def done(s):
    return all(s.phase[r] == Phase.DONE or s.phase[r] == Phase.FAILED or s.phase[r] == Phase.WAITING and False
               for r in s.all(Req))


own.invariants("pages_returned_when_idle", "no_double_ownership")
