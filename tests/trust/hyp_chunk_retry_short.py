"""Two chunked transfers that must both reach their last chunk at once: a 6-step bug in a tiny spec.

Each request's KV goes over in three chunks; a chunk lands, is retried from
the start, fails over, is NACKed, times out or is reset (the last five restart the
transfer), one of six outcomes chosen by ``s.choose``.  The bug: the completion handler
shares one staging buffer, so two requests at their last chunk at the same
time overwrite each other.  Random walks reach three landed chunks in a row
for one request often enough, for both at once rarely.
Expected: violates staging_not_shared (6 steps).
"""

from ownership import Spec, require, violates

spec = Spec("hyp_chunk_retry_short", summary="two transfers at their last chunk share a staging buffer",
            expect=violates("staging_not_shared"))
spec.param("chunks", 3, "chunks per transfer")
Req = spec.domain("Req", 2, names="AB")
spec.var("landed", int, per=Req, init=0, doc="chunks of the transfer that landed")
spec.var("done", bool, per=Req, init=False)


@spec.action
def send_chunk(s, r: Req):
    """Send ``r``'s next chunk: it lands, or the attempt restarts (retry, failover, NACK, timeout, reset)."""
    require(not s.done[r] and s.landed[r] < s.params.chunks)
    outcome = s.choose(["lands", "retry", "failover", "nack", "timeout", "reset"], label="chunk outcome")
    s.landed[r] = s.landed[r] + 1 if outcome == "lands" else 0


@spec.action
def complete(s, r: Req):
    """Every chunk landed: the request is done."""
    require(not s.done[r] and s.landed[r] == s.params.chunks)
    s.done[r] = True
    s.landed[r] = 0


@spec.invariant
def staging_not_shared(s):
    """At most one transfer is at its last chunk (they share the staging buffer)."""
    return not all(s.landed[r] == s.params.chunks for r in s.all(Req))
