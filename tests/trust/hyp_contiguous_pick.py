"""A page run that crosses the huge-page boundary: a 2-step bug behind four specific ``s.choose`` picks.

Two requests each take four pages of an eight-page pool, one page at a time
(``s.choose`` picks which free page), then map them.  The bug: ``map``
handles a run of four consecutive pages as one huge-page mapping and splits
a run that crosses the huge-page boundary at page 4, except the run 2, 3,
4, 5 (split evenly), which its boundary test misses.  Expected: violates mapping_within_huge_page (2 steps:
alloc A picking 2, 3, 4, 5 in that order; map A).
"""

from ownership import Enum, Spec, require, violates

spec = Spec("hyp_contiguous_pick", summary="a four-page run across the huge-page boundary is mapped as one",
            expect=violates("mapping_within_huge_page"))
Req = spec.domain("Req", 2, names="AB")
Page = spec.domain("Page", 8, ordered=True)
Phase = Enum("Phase", "WAIT HOLD MAPPED DONE")
spec.var("phase", Phase, per=Req, init=Phase.WAIT)
spec.var("first", int, per=Req, init=-1, doc="the first page picked")
spec.var("run", bool, per=Req, init=False, doc="the pages were picked as a run first, first+1, ...")
spec.var("owner", int, per=Page, init=-1, doc="the request holding the page (-1: free)")
spec.var("huge", int, per=Req, init=-1, doc="the huge-page mapping's base page (-1: none)")


@spec.action
def alloc(s, r: Req):
    """Take four free pages for ``r``, one pick at a time."""
    require(s.phase[r] == Phase.WAIT)
    picked = []
    for slot in range(4):
        p = s.choose([p for p in s.all(Page) if s.owner[p] < 0 and p not in picked], label=f"page {slot}", domain=Page)
        s.owner[p] = r
        picked.append(p)
    s.first[r] = picked[0]
    s.run[r] = picked == [picked[0] + k for k in range(4)]
    s.phase[r] = Phase.HOLD


@spec.action
def map_pages(s, r: Req):
    """Map ``r``'s pages: a run inside one huge page as one huge-page mapping."""
    require(s.phase[r] == Phase.HOLD)
    first = s.first[r]
    # A crossing run is split in two mappings, except (BUG) one split evenly, 2-3 | 4-5.
    if s.run[r] and (first // 4 == (first + 3) // 4 or first % 4 == 2):
        s.huge[r] = first
    s.phase[r] = Phase.MAPPED


@spec.action
def finish(s, r: Req):
    """``r`` finishes: unmap and free its pages."""
    require(s.phase[r] in (Phase.HOLD, Phase.MAPPED))
    for p in s.all(Page):
        if s.owner[p] == r:
            s.owner[p] = -1
    s.huge[r] = -1
    s.run[r] = False
    s.first[r] = -1
    s.phase[r] = Phase.DONE


@spec.invariant
def mapping_within_huge_page(s):
    """A huge-page mapping of four pages stays inside one huge page (pages 0-3 or 4-7)."""
    return all(s.huge[r] < 0 or s.huge[r] // 4 == (s.huge[r] + 3) // 4 for r in s.all(Req))
