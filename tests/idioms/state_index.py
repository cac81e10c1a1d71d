"""Idiom: index a table with a value held in state (``s.inflight[s.rid[lane]]``).

Each lane runs one request, named by ``rid``; ``inflight[rid[lane]]`` counts
the steps in flight.  The bug: ``retire`` clears the lane before it clears
the request's in-flight count, and ``reassign`` reuses the lane for a
request whose count is still set.
"""

from ownership import Spec, require, violates
from ownership.lang.types import Optional

spec = Spec("idiom_state_index", summary="tables indexed by a request held in state",
            expect=violates("idle_lane_nothing_in_flight"))
spec.param("requests", 2)
spec.param("lanes", 2)
Req = spec.domain("Req", "requests", symmetric=True, names="AB")
Lane = spec.domain("Lane", "lanes", symmetric=True, names="XY")
spec.var("rid", Optional(Req), per=Lane, init=None)
spec.var("inflight", bool, per=Req, init=False)
spec.var("assigned", bool, per=Req, init=False)


@spec.action
def assign(s, lane: Lane, r: Req):
    require(s.rid[lane] == None)  # noqa: E711
    require(not s.assigned[r])
    s.rid[lane] = r
    s.assigned[r] = True


@spec.action
def launch(s, lane: Lane):
    require(s.rid[lane] != None)  # noqa: E711
    require(not s.inflight[s.rid[lane]])
    s.inflight[s.rid[lane]] = True


@spec.action
def retire(s, lane: Lane):  # bug: forgets to clear inflight
    require(s.rid[lane] != None)  # noqa: E711
    s.assigned[s.rid[lane]] = False
    s.rid[lane] = None


@spec.invariant
def idle_lane_nothing_in_flight(s):
    """A request not assigned to any lane has nothing in flight."""
    return all(s.assigned[r] or not s.inflight[r] for r in s.all(Req))
