"""An abort of B after A's mapping and before A's launch: a 4-step bug behind a specific page run.

Two requests each take four pages of an eight-page pool, one pick at a time
(``s.choose``).  ``map`` maps a run of four consecutive pages that crosses
the huge-page boundary at page 4 as two mappings, the tail one through the
pool's shared boundary descriptor.  The bug: ``abort`` of a request that
never got pages still releases the boundary descriptor, whoever uses it.
It takes A picking 2, 3, 4, 5 (or 1-4, 3-6) in that order, A's mapping, then
B's abort, then A's launch.  Expected: violates launched_mappings_valid
(4 steps: alloc A, map A, abort B, launch A).
"""

from ownership import Enum, Spec, require, violates

spec = Spec("hyp_abort_between", summary="an abort releases the boundary descriptor a crossing mapping uses",
            expect=violates("launched_mappings_valid"))
Req = spec.domain("Req", 2, names="AB")
Page = spec.domain("Page", 8, ordered=True)
Phase = Enum("Phase", "WAIT HOLD MAPPED RUN DONE ABORTED")
spec.var("phase", Phase, per=Req, init=Phase.WAIT)
spec.var("crossing", bool, per=Req, init=False, doc="the pages were picked as a run crossing page 4")
spec.var("owner", int, per=Page, init=-1, doc="the request holding the page (-1: free)")
spec.var("descriptor", int, init=-1, doc="the request whose tail mapping uses the boundary descriptor (-1: none)")


@spec.action
def alloc(s, r: Req):
    """Take four free pages for ``r``, one pick at a time."""
    require(s.phase[r] == Phase.WAIT)
    picked = []
    for slot in range(4):
        p = s.choose([p for p in s.all(Page) if s.owner[p] < 0 and p not in picked], label=f"page {slot}", domain=Page)
        s.owner[p] = r
        picked.append(p)
    first = picked[0]
    s.crossing[r] = picked == [first + k for k in range(4)] and first // 4 != (first + 3) // 4
    s.phase[r] = Phase.HOLD


@spec.action
def map_pages(s, r: Req):
    """Map ``r``'s pages; a run crossing the boundary maps its tail through the boundary descriptor."""
    require(s.phase[r] == Phase.HOLD and (not s.crossing[r] or s.descriptor < 0))
    if s.crossing[r]:
        s.descriptor = r
    s.phase[r] = Phase.MAPPED


@spec.action
def launch(s, r: Req):
    """Run the kernel over ``r``'s mappings."""
    require(s.phase[r] == Phase.MAPPED)
    s.phase[r] = Phase.RUN


@spec.action
def finish(s, r: Req):
    """``r`` finishes: its pages and its descriptor go back."""
    require(s.phase[r] in (Phase.HOLD, Phase.MAPPED, Phase.RUN))
    for p in s.all(Page):
        if s.owner[p] == r:
            s.owner[p] = -1
    if s.descriptor == r:
        s.descriptor = -1
    s.crossing[r] = False
    s.phase[r] = Phase.DONE


@spec.action
def abort(s, r: Req):
    """Cancel ``r`` before it got pages (BUG: its cleanup releases the boundary descriptor too)."""
    require(s.phase[r] == Phase.WAIT)
    s.descriptor = -1
    s.phase[r] = Phase.ABORTED


@spec.invariant
def launched_mappings_valid(s):
    """A running request whose run crosses the boundary still has the boundary descriptor."""
    return all(not (s.phase[r] == Phase.RUN and s.crossing[r]) or s.descriptor == r for r in s.all(Req))
