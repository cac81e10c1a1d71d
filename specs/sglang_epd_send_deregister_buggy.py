"""SGLang EPD encoder: one TP rank's /send deregisters the embedding a sibling's transfer still reads.

Models the encode server of SGLang's encode-prefill-decode disaggregation
with the Mooncake transfer backend, before SGLang PR #32071
(python/sglang/srt/disaggregation/encode_server.py):

* ``MMEncoder.batch_encode``: the vision tower's output embedding is kept in
  ``embedding_to_send[req_id]`` (``mm_data.embedding``) until it is sent;
  unlike ``encode_with_mooncake``, this default path registers no shared
  memory region for it;
* each prefill TP rank POSTs its own ``/send`` for the same ``req_id``;
  ``MMEncoder._send`` then, per call: ``self.engine.register(ptr, nbytes)``
  (its return code unchecked: a sibling's registration of the same buffer
  makes it fail with "Transfer Engine does not support overlapped memory
  region" and the call goes on with the sibling's), ``await
  asyncio.to_thread(self.engine.transfer_sync, ...)`` (Mooncake reads the
  embedding and writes it into the prefill rank's buffer), then
  ``self.engine.deregister(ptr)`` and ``mm_data.embedding = None``;
* a /send that finds no embedding any more fails ("No embedding available
  for Mooncake GPU-direct transfer").

Known bug (PR #32071, "Fix Mooncake source-MR lifecycle for multi-TP
/send"): with prefill ``tp > 1`` the sibling /send calls race on the
per-call register/deregister and on the early ``mm_data.embedding = None``.
The first /send to finish deregisters the region the other's transfer is
reading and drops the embedding, whose memory the next request's embedding
may get.  The checked invariant ``no_transfer_on_deregistered`` fails at that
deregistration (4 steps); ``--invariant no_foreign_read`` shows the second
prefill rank receiving the next request's embedding (6 steps).

Simplified: two prefill TP ranks, each a reading channel of its own
(``rank0_send``, ``rank1_send``); one embedding buffer per request; the
register/deregister of a request's buffer is the region of its pages; a
prefill rank may give up on a request and never send (its /send never
arrives); the ZMQ metadata message after the transfer is left out.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.reads import InflightReads
from ownership.vocab.regions import Regions

spec = Spec(
    "sglang_epd_send_deregister_buggy",
    summary="SGLang EPD: a /send deregisters and drops the embedding while a sibling TP rank's transfer reads it",
    models=Source(
        "SGLang",
        "before PR #32071",
        where=(
            "disaggregation/encode_server.py MMEncoder.batch_encode, encode (embedding_to_send)",
            "disaggregation/encode_server.py MMEncoder._send (engine.register, transfer_sync, engine.deregister, "
            "mm_data.embedding = None)",
        ),
        links=("sglang PR #32071", "sglang PR #31591", "sglang PR #36956"),
    ),
    expect=violates("no_transfer_on_deregistered"),
)

spec.param("requests", 2, "concurrent multimodal requests modelled", min=1, max=3)
spec.param("embed_buffers", 1, "encoder buffers an embedding can occupy", min=1)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
own = Ownership(spec, requests=Req)
embed = own.pool("embed", "embed_buffers", prefix="E")
mr = Regions(embed, "mr", registered=False, doc="the embedding's buffer is not registered with the transfer engine")
rank0 = InflightReads(embed, "rank0_send", doc="prefill TP rank 0's transfer_sync reads the embedding")
rank1 = InflightReads(embed, "rank1_send", doc="prefill TP rank 1's transfer_sync reads the embedding")

Emb = Enum("Emb", "NONE HELD RELEASED")
Send = Enum("Send", "IDLE SENDING DONE FAILED GONE")

spec.var("emb", Emb, per=Req, init=Emb.NONE, doc="mm_data.embedding: not encoded yet, held for sending, released")
spec.var("send0", Send, per=Req, init=Send.IDLE, doc="prefill TP rank 0's /send for the request")
spec.var("send1", Send, per=Req, init=Send.IDLE, doc="prefill TP rank 1's /send for the request")


@spec.action
def encode(s, r: ReqId):
    """batch_encode: the vision tower writes the embedding; embedding_to_send[req_id] holds it."""
    require(s.emb[r] == Emb.NONE)
    embed.write(s, r, embed.alloc(s, r, 1))  # not enabled while the buffers are taken
    s.emb[r] = Emb.HELD


def send_start(s, r, state: str, channel: InflightReads) -> None:
    """_send: per-call engine.register, then transfer_sync starts in a thread."""
    st = getattr(s, state)
    require(st[r] == Send.IDLE and s.emb[r] != Emb.NONE)
    if s.emb[r] == Emb.RELEASED:  # mm_data.embedding is None: "No embedding available"
        st[r] = Send.FAILED
        return
    mr.register(s, r)  # engine.register: a sibling's region overlaps, the error is ignored
    channel.post(s, r)
    st[r] = Send.SENDING


def send_done(s, r, state: str, channel: InflightReads, sibling: InflightReads) -> None:
    """transfer_sync returns; per-call engine.deregister; mm_data.embedding = None."""
    st = getattr(s, state)
    require(st[r] == Send.SENDING)
    channel.land(s, r)  # the prefill rank receives what the buffer holds now
    mr.deregister(s, r)  # removes the registration the sibling's transfer uses too
    if s.emb[r] == Emb.HELD:
        sibling.free(s, r)  # the embedding tensor goes back to the allocator
        s.emb[r] = Emb.RELEASED
    st[r] = Send.DONE


@spec.action
def rank0_send(s, r: ReqId):
    """Prefill TP rank 0 POSTs /send."""
    send_start(s, r, "send0", rank0)


@spec.action
def rank1_send(s, r: ReqId):
    """Prefill TP rank 1 POSTs /send."""
    send_start(s, r, "send1", rank1)


@spec.action
def rank0_send_done(s, r: ReqId):
    """Rank 0's transfer_sync completes."""
    send_done(s, r, "send0", rank0, rank1)


@spec.action
def rank1_send_done(s, r: ReqId):
    """Rank 1's transfer_sync completes."""
    send_done(s, r, "send1", rank1, rank0)


@spec.action
def rank0_gives_up(s, r: ReqId):
    """Prefill rank 0 drops the request (abort, failure): its /send never arrives."""
    require(s.send0[r] == Send.IDLE)
    s.send0[r] = Send.GONE


@spec.action
def rank1_gives_up(s, r: ReqId):
    """Prefill rank 1 drops the request: its /send never arrives."""
    require(s.send1[r] == Send.IDLE)
    s.send1[r] = Send.GONE


mr.invariant(rank0, rank1)
rank0.invariant("no_free_during_rank0_send")
rank1.invariant("no_free_during_rank1_send")
own.invariants("no_foreign_read", "no_read_of_unwritten", "no_double_ownership")
