"""A retract that is wrong only when the pool is full: the control of the seeds benchmark.

Requests are admitted (one page), grow (a second page), finish or time out
(both return every page).  ``retract`` hands a page back to the pool; the
bug is in its full-pool branch, which returns the page to the free count
but leaves it in the request's table.  Swarm walks that leave the releases
out fill the pool at once, so random walks find this one for every seed:
``bench/hypothesis_seeds.py`` shows it next to the bugs they miss.
Expected: violates pages_conserved (5 steps: admit A, admit B, admit C,
grow A, retract A).
"""

from ownership import Enum, Spec, require, violates

spec = Spec("hyp_retract_full", summary="a retract that forgets the page only when the pool is full",
            expect=violates("pages_conserved"))
spec.param("requests", 3, "requests", min=2, max=3)
spec.param("pages", 4, "pool size")
Req = spec.domain("Req", "requests", names="ABC")
Phase = Enum("Phase", "IDLE RUN")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)
spec.var("held", int, per=Req, init=0)
spec.var("free", int, init=4)


@spec.action
def admit(s, r: Req):
    """Admit ``r`` with its first page."""
    require(s.phase[r] == Phase.IDLE and s.free >= 1)
    s.free -= 1
    s.held[r] = 1
    s.phase[r] = Phase.RUN


@spec.action
def grow(s, r: Req):
    """Decode grows ``r`` by one page (two at most)."""
    require(s.phase[r] == Phase.RUN and s.held[r] < 2 and s.free >= 1)
    s.free -= 1
    s.held[r] += 1


@spec.action
def finish(s, r: Req):
    """``r`` finishes: every page goes back."""
    require(s.phase[r] == Phase.RUN)
    s.free += s.held[r]
    s.held[r] = 0
    s.phase[r] = Phase.IDLE


@spec.action
def timeout(s, r: Req):
    """``r`` times out: every page goes back."""
    require(s.phase[r] == Phase.RUN)
    s.free += s.held[r]
    s.held[r] = 0
    s.phase[r] = Phase.IDLE


@spec.action
def retract(s, r: Req):
    """``r`` gives its second page back under memory pressure."""
    require(s.phase[r] == Phase.RUN and s.held[r] == 2)
    if s.free == 0:
        s.free += 1  # BUG: the page stays in r's table
    else:
        s.free += 1
        s.held[r] -= 1


@spec.invariant
def pages_conserved(s):
    """Every page is free or held by exactly one request."""
    return s.free + sum(s.held[r] for r in s.all(Req)) == 4
