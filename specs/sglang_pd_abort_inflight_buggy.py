"""SGLang PD disaggregation: a decode abort frees KV pages a prefill RDMA write is still filling.

Models the decode side of one prefill->decode KV transfer per request, and the
prefill's KV sender, before SGLang PR #35049 (python/sglang/srt/disaggregation/):

* ``decode.py DecodePreallocQueue.pop_preallocated``: reserve the request's
  decode pages and publish them to prefill as ``dst_kv_indices``;
* ``mooncake/conn.py MooncakeKVManager`` transfer worker (``send_kvcache``,
  ``batch_transfer_sync``): the RDMA write into ``dst_kv_indices`` is posted,
  then completes; on completion the room's status goes to Success;
* ``managers/scheduler.py abort_request`` (decode) and the receiver's waiting
  timeout: ``kv_receiver.abort()`` sends ABORT to prefill (PR #27372: prefill
  then posts no new chunk for the room) and the receiver polls Failed;
* ``decode.py DecodeTransferQueue.pop_transferred``: on Failed,
  ``release_kv_cache(req, tree_cache, is_insert=False)`` returns the pages
  **at once**; on Success the request joins the running batch;
* the decode forward reads the request's pages, streams the reply, finishes.

Known bug (PR #35049, "Deferred decode-side KV release for aborts
mid-transfer"; the open bug of PR #32564): aborting a decode request (client
``/abort_request`` or transfer timeout) while its prefill->decode write is in
flight frees the pages and does not cancel the write.  The next request is
allocated the same pages and the late write lands in them: the new request
silently attends over the first request's KV.  The checked invariant
``no_free_with_write_in_flight`` fails at the free (the root cause, 4 steps);
``--invariant no_foreign_read`` shows the whole story (10 steps: B is given
the page, the late write of A's KV lands in it, B reads it).

Simplified: one chunk per request (the whole prompt in one posted write,
``prompt_pages`` pages); the ABORT message reaches prefill at once (a late
ABORT only widens the same window); the prefill's own pool and forward pass
are left out (the write carries the request's KV); a request that was aborted
does not come back; decode runs one forward pass and finishes.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.inflight import InflightWrites

spec = Spec(
    "sglang_pd_abort_inflight_buggy",
    summary="SGLang PD: a decode abort frees pages while prefill's RDMA write into them is in flight",
    models=Source(
        "SGLang",
        "before PR #35049",
        where=(
            "disaggregation/decode.py DecodePreallocQueue.pop_preallocated, DecodeTransferQueue.pop_transferred",
            "disaggregation/mooncake/conn.py MooncakeKVManager transfer worker (batch_transfer_sync)",
            "managers/scheduler.py abort_request (decode: kv_receiver.abort)",
        ),
        links=("sglang PR #35049", "sglang PR #32564", "sglang PR #27372"),
    ),
    expect=violates("no_free_with_write_in_flight"),
)

spec.param("requests", 2, "concurrent requests modelled", min=1, max=4)
spec.param("decode_pages", 2, "decode KV pool size in pages", min=1)
spec.param("prompt_pages", 1, "decode pages one request reserves (ceil(len(input) / page_size))", min=1)

Req = spec.domain("Req", "requests", symmetric=True, names="ABCD")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
own = Ownership(spec, requests=Req)
decode_pool = own.pool("decode", "decode_pages", prefix="D")
rdma = InflightWrites(decode_pool, "rdma", doc="prefill's RDMA write of the request's KV into the decode page is posted, not landed")

DecodeQ = Enum("DecodeQueue", "IDLE TRANSFER RUNNING DONE")
KV = Enum("KVPoll", "NONE WAITING_FOR_INPUT SUCCESS FAILED")
Sender = Enum("KVSender", "IDLE FORWARD SENDING DONE")
HTTP = Enum("HTTP", "NONE OK_200 ERROR")

spec.var("d_queue", DecodeQ, per=Req, init=DecodeQ.IDLE, doc="where the request is on decode")
spec.var("kv", KV, per=Req, init=KV.NONE, doc="KVPoll status the decode receiver sees")
spec.var("sender", Sender, per=Req, init=Sender.IDLE, doc="prefill's KV sender for the request's bootstrap room")
spec.var("abort_sent", bool, per=Req, init=False, doc="decode sent ABORT for the room: prefill posts no new write")
spec.var("http", HTTP, per=Req, init=HTTP.NONE, doc="what the client got")


# -- decode node -----------------------------------------------------------------
@spec.action
def decode_pop_preallocated(s, r: ReqId):
    """pop_preallocated: reserve the request's decode pages, publish them as dst_kv_indices."""
    require(s.d_queue[r] == DecodeQ.IDLE)
    decode_pool.alloc(s, r, s.params.prompt_pages)  # not enabled while the pool is short: stays queued
    s.kv[r] = KV.WAITING_FOR_INPUT
    s.d_queue[r] = DecodeQ.TRANSFER
    s.sender[r] = Sender.FORWARD  # prefill runs the forward, then sends to dst_kv_indices


@spec.action
def decode_abort(s, r: ReqId):
    """Client /abort_request or receiver timeout: kv_receiver.abort() sends ABORT; the poll turns Failed."""
    require(s.d_queue[r] == DecodeQ.TRANSFER and s.kv[r] == KV.WAITING_FOR_INPUT)
    s.abort_sent[r] = True
    s.kv[r] = KV.FAILED


@spec.action
def decode_pop_transferred(s, r: ReqId):
    """pop_transferred: on Failed release the pages at once; on Success join the running batch."""
    require(s.d_queue[r] == DecodeQ.TRANSFER and s.kv[r] in (KV.SUCCESS, KV.FAILED))
    if s.kv[r] == KV.FAILED:
        rdma.free(s, r)  # release_kv_cache(req): the RDMA write into these pages may still be in flight
        s.http[r] = HTTP.ERROR
        s.d_queue[r] = DecodeQ.DONE
        return
    s.d_queue[r] = DecodeQ.RUNNING


@spec.action
def decode_forward(s, r: ReqId):
    """Decode forward reads req_to_token's pages, streams HTTP 200, finishes and frees them."""
    require(s.d_queue[r] == DecodeQ.RUNNING)
    decode_pool.read(s, r, decode_pool.pages_of(s, r))
    s.http[r] = HTTP.OK_200
    s.emit("reply", req=r, status=200)
    decode_pool.free(s, r)
    s.d_queue[r] = DecodeQ.DONE


# -- prefill node's KV sender ------------------------------------------------------------
@spec.action
def prefill_send(s, r: ReqId):
    """send_kv_chunk: the transfer worker posts the RDMA write to dst_kv_indices (none once aborted)."""
    require(s.sender[r] == Sender.FORWARD)
    if s.abort_sent[r]:  # the room is Failed: nothing is sent
        s.sender[r] = Sender.DONE
        return
    rdma.post(s, r)
    s.sender[r] = Sender.SENDING


@spec.action
def prefill_transfer_done(s, r: ReqId):
    """batch_transfer_sync returns: the write has landed; Success unless the room was aborted."""
    require(s.sender[r] == Sender.SENDING)
    rdma.land(s, r)
    if not s.abort_sent[r]:
        s.kv[r] = KV.SUCCESS
    s.sender[r] = Sender.DONE


@spec.terminal
def nothing_in_flight(s) -> bool:
    """Every request has either not arrived or left decode, and its sender is done."""
    return all(
        s.d_queue[r] in (DecodeQ.IDLE, DecodeQ.DONE) and s.sender[r] in (Sender.IDLE, Sender.DONE)
        for r in s.all(Req)
    )


rdma.invariant()
own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership", "pages_returned_when_idle")
