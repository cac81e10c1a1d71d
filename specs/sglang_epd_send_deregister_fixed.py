"""SGLang EPD encoder: one shared memory region per request, released in cleanup (PR #32071).

Written as the patch on top of ``sglang_epd_send_deregister_buggy``;
compare with the upstream change (python/sglang/srt/disaggregation/encode_server.py):

* ``MMEncoder._send``: the first /send of a request lazily registers a
  request-level shared memory region; sibling /send calls find it
  (``mr_already_registered``) and neither register nor deregister;
  ``mm_data.embedding`` stays alive across the sibling sends;
* ``MMEncoder._cleanup_inflight_encode_state``: deregisters the shared region
  and only then releases the embedding, either as soon as every prefill TP
  rank's /send is done (the early release of PR #31591) or when
  ``send_timeout`` passes (``_schedule_inflight_encode_cleanup``, the
  backstop for a /send that never arrives).

The backstop is a :class:`~ownership.vocab.clock.Deadline` that may pass
only after every rank's /send has finished or will never come: the
timeout is meant for a rank that never sends, and is assumed to outlast
any transfer that did start.  When every rank gave up before the
embedding was ready, there is nothing to wait for and it may pass as soon
as it is scheduled (so no embedding is held for ever).  With
``--param send_timeout_outlasts_sends=0`` it may pass while a transfer is
running and the check finds the cleanup deregistering the region under a
live transfer (3 steps), the race that PR #36956 addresses for cancelled
sends.

Besides the base spec's invariants the fix is checked for what it
promises about the request-level state: the embedding's buffer stays held
until cleanup (``embedding_alive_until_cleanup``), the shared region stays
registered from the first /send until cleanup (``region_kept_while_held``),
the backstop is scheduled exactly while an embedding is held
(``backstop_scheduled_while_held``), and cleanup releases everything
(``pages_returned_when_idle``, an idle-state approximation kept for
comparison).  What is meant is the temporal property ``pages_return``: once
every rank's /send is over (done, failed or never coming) the embedding's
buffer goes back to the allocator, on every fair path.  The engine's own
steps are weakly fair (a running transfer completes, cleanup runs once it
may); the prefill ranks' /send and giving up stay unfair.

Expected: safe at every size the explorer can cover; ``ownership prove``
proves it for executions of any length.
"""

import sglang_epd_send_deregister_buggy as base
from sglang_epd_send_deregister_buggy import Emb, Req, ReqId, Send, embed, mr, rank0, rank1

from ownership import Source, require, safe
from ownership.vocab.clock import Deadline
from ownership.vocab.inflight import holds
from ownership.vocab.reads import InflightReads

spec = base.spec.derive(
    "sglang_epd_send_deregister_fixed",
    summary="SGLang EPD: a request-level shared memory region, deregistered after every rank's /send",
    models=Source(
        "SGLang",
        "PR #32071",
        where=(
            "disaggregation/encode_server.py MMEncoder._send (lazy shared MR, mr_already_registered)",
            "disaggregation/encode_server.py MMEncoder._cleanup_inflight_encode_state, "
            "_schedule_inflight_encode_cleanup (send_timeout)",
        ),
        links=("sglang PR #32071", "sglang PR #31591", "sglang PR #36956"),
    ),
    expect=safe(),
)
spec.param("send_timeout_outlasts_sends", 1,
           "1: send_timeout passes only once no /send is running or still to come; 0: at any time", min=0, max=1)
send_timeout = Deadline(spec, "send_timeout", per=Req, after="every rank's /send has finished or will never come",
                        assumed="send_timeout_outlasts_sends", doc="the backstop cleanup of the held embedding")


def finished(s, r) -> bool:
    """Every prefill rank's /send for ``r`` is done, failed or will never arrive."""
    return s.send0[r] >= Send.DONE and s.send1[r] >= Send.DONE  # DONE, FAILED, GONE


@spec.replace
def encode(s, r: ReqId):
    """batch_encode; FIX: the send_timeout cleanup is scheduled for the held embedding."""
    require(s.emb[r] == Emb.NONE)
    embed.write(s, r, embed.alloc(s, r, 1))
    send_timeout.arm(s, r)  # _schedule_inflight_encode_cleanup(req_id)
    if finished(s, r):  # every rank gave up before the embedding was ready: nothing to wait for
        send_timeout.allow(s, r)
    s.emb[r] = Emb.HELD


def send_start(s, r, state: str, channel: InflightReads) -> None:
    """_send: FIX: the first /send registers the request-level shared MR; siblings reuse it."""
    st = getattr(s, state)
    require(st[r] == Send.IDLE and s.emb[r] != Emb.NONE)
    if s.emb[r] == Emb.RELEASED:  # cleaned up already: the late /send fails
        st[r] = Send.FAILED
        return
    if not mr.all_registered(s, r):
        mr.register(s, r)
    channel.post(s, r)
    st[r] = Send.SENDING


def send_done(s, r, state: str, channel: InflightReads) -> None:
    """transfer_sync returns; FIX: no deregister, the embedding stays alive for the siblings."""
    st = getattr(s, state)
    require(st[r] == Send.SENDING)
    channel.land(s, r)
    st[r] = Send.DONE
    if finished(s, r):
        send_timeout.allow(s, r)


@spec.replace
def rank0_send(s, r: ReqId):
    """Prefill TP rank 0 POSTs /send."""
    send_start(s, r, "send0", rank0)


@spec.replace
def rank1_send(s, r: ReqId):
    """Prefill TP rank 1 POSTs /send."""
    send_start(s, r, "send1", rank1)


@spec.replace
def rank0_send_done(s, r: ReqId):
    """Rank 0's transfer_sync completes."""
    send_done(s, r, "send0", rank0)


@spec.replace
def rank1_send_done(s, r: ReqId):
    """Rank 1's transfer_sync completes."""
    send_done(s, r, "send1", rank1)


@spec.replace
def rank0_gives_up(s, r: ReqId):
    """Prefill rank 0 drops the request: its /send never arrives."""
    require(s.send0[r] == Send.IDLE)
    s.send0[r] = Send.GONE
    if finished(s, r):
        send_timeout.allow(s, r)


@spec.replace
def rank1_gives_up(s, r: ReqId):
    """Prefill rank 1 drops the request: its /send never arrives."""
    require(s.send1[r] == Send.IDLE)
    s.send1[r] = Send.GONE
    if finished(s, r):
        send_timeout.allow(s, r)


@spec.action(fair="weak")
def cleanup_inflight_encode_state(s, r: ReqId):
    """FIX: deregister the shared MR, then release the embedding: every /send done, or send_timeout passed."""
    require(s.emb[r] == Emb.HELD)
    if s.send0[r] == Send.DONE and s.send1[r] == Send.DONE:
        send_timeout.disarm(s, r)  # early release: all ranks sent
    else:
        send_timeout.fire(s, r)  # the backstop
    mr.deregister(s, r)
    rank0.free(s, r)  # the embedding goes back to the allocator (rank 1's reads by the invariant)
    s.emb[r] = Emb.RELEASED


@spec.terminal
def nothing_held(s) -> bool:
    """No embedding is held for sending and no transfer is running."""
    return all(
        s.emb[r] != Emb.HELD and s.send0[r] != Send.SENDING and s.send1[r] != Send.SENDING for r in s.all(Req)
    )


base.own.invariants("pages_returned_when_idle", spec=spec)  # FIX: cleanup releases every embedding it held
spec.fair("rank0_send_done", "weak")  # transfer_sync returns
spec.fair("rank1_send_done", "weak")


def sends_over(s, r) -> bool:
    """The request was encoded and every prefill rank's /send is done, failed or will never arrive."""
    return s.emb[r] != Emb.NONE and finished(s, r)


base.own.properties("pages_return", ended=sends_over, spec=spec)


@spec.invariant
def released_only_after_deregister(s) -> bool:
    """A buffer back on the allocator is no longer registered: cleanup deregisters, then releases."""
    return all(s.embed_free[p] == 0 or s.mr_deregistered[p] for p in s.all(embed.Page))


@spec.invariant
def embedding_alive_until_cleanup(s) -> bool:
    """FIX: mm_data.embedding stays alive across the sibling sends: a held embedding occupies its buffer."""
    return all(
        s.emb[r] != Emb.HELD or sum(holds(s, embed, r, p) for p in s.all(embed.Page)) > 0 for r in s.all(Req)
    )


@spec.invariant
def region_kept_while_held(s) -> bool:
    """FIX: once a /send registered the shared region, it stays registered until cleanup releases the embedding."""
    return all(
        s.emb[r] != Emb.HELD or (s.send0[r] != Send.SENDING and s.send0[r] != Send.DONE
                                 and s.send1[r] != Send.SENDING and s.send1[r] != Send.DONE)
        or mr.all_registered(s, r)
        for r in s.all(Req)
    )


@spec.invariant
def backstop_scheduled_while_held(s) -> bool:
    """FIX: a held embedding always has its send_timeout cleanup scheduled, and a released one none left running."""
    return all((s.emb[r] == Emb.HELD) == send_timeout.running(s, r) for r in s.all(Req))
