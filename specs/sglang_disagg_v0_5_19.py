"""SGLang 0.5.4.post2-0.5.19 disaggregated prefill/decode: the rejected-prompt KV leak.

Models the request lifecycle across a prefill node and a decode node, each
with its own KV page pool, as shipped from 0.5.4.post2 through 0.5.19 (line
numbers: the 0.5.19 wheel, python/sglang/srt/):

* ``managers/utils.py:206 validate_input_length`` (called at
  ``managers/scheduler.py:2850``) and ``managers/schedule_batch.py:1927
  Req.set_finish_with_abort``: a prompt at or over ``max_req_input_len`` is
  swapped for a one-token placeholder and the 400 is parked in ``to_finish``
  (line 1946); ``finished()`` (``finished_reason is not None``) stays false.
  0.5.4.post1 and earlier set ``finished_reason`` there (0.5.4
  ``schedule_batch.py:923``, ``sglang_disagg_v0_5_4``); 0.5.4.post2 (sglang PR
  #12312; ``schedule_batch.py:953``) parks it in ``to_finish``.
* Decode's own rejection (its limit is the lower one): decode reserves the
  placeholder's one page; Mooncake's transfer worker cuts prefill's page list
  to decode's (``disaggregation/mooncake/conn.py:1764-1774``), and the
  prebuilt step promotes decode's ``to_finish`` to the 400 before any decode
  step (``managers/scheduler_components/batch_result_processor.py:99-114``;
  0.5.4.post2-0.5.5.post3 have no prebuilt step and abort after one decode
  step over the request's own page, which reads nothing foreign either).
* ``--allow-auto-truncate`` (``prefill_auto_truncate``/``decode_auto_truncate``):
  ``validate_input_length`` keeps the first ``max_req_input_len`` tokens
  instead of rejecting (``managers/utils.py``), each node to its own limit;
  prefill sends its length, decode reserves and reads its own.
* ``disaggregation/prefill.py``: ``PrefillBootstrapQueue.add`` (385: only
  ``create_sender``'s guard, input length fits the pool), ``pop_bootstrapped``
  (410) -> ``finalize_bootstrap`` (363: ``num_pages`` from the
  *placeholder's* length), forward, ``process_batch_result_disagg_prefill``
  (684) sends every finished result (797 ``send_kv_chunk``:
  ``req_to_token[0:len(input)]``) with no abort check, the inflight queue on
  Success (876; 931 ``finished_reason = FINISH_LENGTH``: the parked 400 is lost).
* ``disaggregation/decode.py``: ``DecodePreallocQueue.add`` (617: no
  rejection check), ``pop_preallocated`` (1080; 1141 skips only
  ``finished_reason`` ``FINISH_ABORT``, ``to_finish`` is never read),
  ``_pre_alloc`` (1755: ``ceil(L / page_size)`` pages for the *full* prompt,
  not zeroed), ``DecodeTransferQueue.pop_transferred`` (2245) ->
  ``_commit_transfer_to_req`` (2059: checks only the bootstrap room, 2106; no
  length check), the decode forward (attention over ``req_to_token[0:seq_len]``),
  the receiver's waiting timeout (``disaggregation/common/conn.py:1595``).

Simplified: queues are sets (any queued request may be popped next: every
FIFO order is one of the interleavings), one request per batch, the bootstrap
handshake and metadata slots are folded into the transfer status, and the
router forwards each request to both nodes at once.  Decode runs one forward
pass (reads every reserved page, streams HTTP 200) and then finishes.  The
limit is ``min(context_len - 1, pool_tokens - 1)``; SGLang's is 5 tokens lower
(``managers/tp_worker.py:556 max_req_len - 5``), which only moves the
threshold.

Known bug (SGLang issue #30233, the 2026 Workers AI incident on 0.5.11): a
too-long prompt is admitted by decode, which reserves pages for the whole
prompt; prefill writes and sends one page; decode reads the rest, still
holding an earlier request's KV; the client gets HTTP 200.  0.5.20 stops the
send (``sglang_disagg_v0_5_20``).
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, ceil_div, require, transfer, violates

spec = Spec(
    "sglang_disagg_v0_5_19",
    summary="SGLang 0.5.4.post2-0.5.19 PD disaggregation: rejected prompt admitted by decode reads stale KV",
    models=Source(
        "SGLang",
        "0.5.19",
        where=(
            "managers/schedule_batch.py Req.set_finish_with_abort",
            "disaggregation/prefill.py PrefillBootstrapQueue.add/pop_bootstrapped, send_kv_chunk",
            "disaggregation/decode.py DecodePreallocQueue.pop_preallocated, _pre_alloc, pop_transferred",
        ),
        links=("sglang issue #30233", "sglang PR #12312"),
    ),
    expect=violates("no_foreign_read"),
)

# -- deployment (server_args) ------------------------------------------------
spec.param("requests", 2, "concurrent requests modelled", min=1, max=16)
spec.param("page_size", 2, "tokens per KV page (--page-size)", min=1)
spec.param("context_len", 16, "model context length (--context-length)", min=1)
spec.param("prefill_pool_tokens", 6, "prefill KV pool size in tokens (max_total_num_tokens)", min=1)
spec.param("decode_pool_tokens", 8, "decode KV pool size in tokens", min=1)
spec.param("short_prompt_tokens", 2, "length of an ordinary prompt", min=1)
spec.param("prompt_tokens", 6, "length of a long prompt", min=1)
spec.param("prefill_auto_truncate", 0, "1: prefill runs with --allow-auto-truncate", min=0, max=1)
spec.param("decode_auto_truncate", 0, "1: decode runs with --allow-auto-truncate", min=0, max=1)

Req = spec.domain("Req", "requests", symmetric=True, names="ABCDEFGHIJKLMNOP")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
PromptLen = spec.values("PromptLen", lambda p: [p.short_prompt_tokens, p.prompt_tokens])
PromptLenId = Annotated[int, PromptLen]  # the type of an action argument drawn from PromptLen

own = Ownership(spec, requests=Req)
prefill_pool = own.pool("prefill", lambda p: ceil_div(p.prefill_pool_tokens, p.page_size), prefix="P")
decode_pool = own.pool("decode", lambda p: ceil_div(p.decode_pool_tokens, p.page_size), prefix="D")

Finish = Enum("FinishReason", "NONE ABORT LENGTH")
PrefillQ = Enum("PrefillQueue", "IDLE BOOTSTRAP WAITING FORWARDED DONE")
DecodeQ = Enum("DecodeQueue", "IDLE PREALLOC TRANSFER RUNNING FINISHED DONE")
KV = Enum("KVPoll", "NONE WAITING_FOR_INPUT SUCCESS FAILED")
HTTP = Enum("HTTP", "NONE OK_200 ERROR_400 ERROR_500")

# Prefill node's Req
spec.var("p_queue", PrefillQ, per=Req, init=PrefillQ.IDLE, doc="where the request is on prefill")
spec.var("p_input_len", int, per=Req, init=0, doc="len(origin_input_ids) on prefill")
spec.var("p_to_finish", bool, per=Req, init=False, doc="prefill Req.to_finish holds a FINISH_ABORT(400)")
spec.var("p_finished", Finish, per=Req, init=Finish.NONE, doc="prefill Req.finished_reason")
# Decode node's Req
spec.var("d_queue", DecodeQ, per=Req, init=DecodeQ.IDLE, doc="where the request is on decode")
spec.var("d_input_len", int, per=Req, init=0, doc="len(origin_input_ids) on decode")
spec.var("d_to_finish", bool, per=Req, init=False, doc="decode Req.to_finish holds a FINISH_ABORT(400)")
spec.var("d_finished", Finish, per=Req, init=Finish.NONE, doc="decode Req.finished_reason")
# The KV transfer between them (Mooncake sender/receiver poll status)
spec.var("kv", KV, per=Req, init=KV.NONE, doc="KVPoll status shared by sender and receiver")
spec.var("kv_tokens", int, per=Req, init=0, doc="logical KV length prefill sent")
spec.var("http", HTTP, per=Req, init=HTTP.NONE, doc="what the client got")


# managers/utils.py validate_input_length: a prompt of at least max_req_input_len tokens is rejected.
prefill_max_input = spec.derived(
    "prefill_max_req_input_len", "min(context_len - 1, prefill_pool_tokens - 1)", "prefill rejects prompts this long"
)
decode_max_input = spec.derived(
    "decode_max_req_input_len", "min(context_len - 1, decode_pool_tokens - 1)", "decode rejects prompts this long"
)


# With --allow-auto-truncate a node keeps the first max_req_input_len tokens instead of rejecting
# (validate_input_length); a prompt longer than both limits then reaches decode as decode's limit.
prefill_truncated_pages_end = spec.derived(
    "prefill_truncated_pages_end",
    "ceil_div(min(context_len - 1, prefill_pool_tokens - 1), page_size) * page_size + 1",
    "the shortest decode length that needs more pages than a prompt truncated by prefill fills",
)


# -- arrival ---------------------------------------------------------------------
@spec.action
def arrive(s, r: ReqId, prompt_len: PromptLenId):
    """The router sends the request to both nodes; each runs validate_input_length."""
    require(s.p_queue[r] == PrefillQ.IDLE and s.d_queue[r] == DecodeQ.IDLE)
    # prefill: Req.set_finish_with_abort swaps in a one-token placeholder
    if prompt_len >= prefill_max_input(s) and s.params.prefill_auto_truncate == 0:
        s.p_to_finish[r] = True
        s.p_input_len[r] = 1
    else:
        s.p_input_len[r] = min(prompt_len, prefill_max_input(s))  # truncated to the limit, or whole
    s.p_queue[r] = PrefillQ.BOOTSTRAP
    # decode: validated against decode's own limit
    if prompt_len >= decode_max_input(s) and s.params.decode_auto_truncate == 0:
        s.d_to_finish[r] = True
        s.d_input_len[r] = 1
    else:
        s.d_input_len[r] = min(prompt_len, decode_max_input(s))
    s.d_queue[r] = DecodeQ.PREALLOC


# -- decode node -------------------------------------------------------------------
@spec.action
def decode_pop_preallocated(s, r: ReqId):
    """DecodePreallocQueue.pop_preallocated + _pre_alloc: reserve pages, send metadata."""
    require(s.d_queue[r] == DecodeQ.PREALLOC)
    if s.d_finished[r] == Finish.ABORT:  # the only rejection it looks at
        s.d_queue[r] = DecodeQ.DONE
        return
    need = ceil_div(s.d_input_len[r], s.params.page_size)
    require(decode_pool.available(s) >= need)  # page budget; else stays queued
    decode_pool.alloc(s, r, need)
    s.kv[r] = KV.WAITING_FOR_INPUT  # send_metadata: prefill learns dst_kv_indices
    s.d_queue[r] = DecodeQ.TRANSFER


@spec.action
def decode_pop_transferred(s, r: ReqId):
    """DecodeTransferQueue.pop_transferred: on Success commit (room checked only)."""
    require(s.d_queue[r] == DecodeQ.TRANSFER)
    require(s.kv[r] in (KV.SUCCESS, KV.FAILED))
    if s.kv[r] == KV.FAILED:
        s.d_finished[r] = Finish.ABORT
        s.http[r] = HTTP.ERROR_400
        decode_pool.free(s, r)
        s.d_queue[r] = DecodeQ.DONE
        return
    s.d_queue[r] = DecodeQ.RUNNING


@spec.action
def decode_forward(s, r: ReqId):
    """The prebuilt step, then decode forward: attention reads req_to_token[0:seq_len]; tokens stream, HTTP 200."""
    require(s.d_queue[r] == DecodeQ.RUNNING)
    decode_forward_checked(s, r)


def decode_forward_checked(s, r):
    """process_batch_result_prebuilt, then the first decode step (what follows any check before it)."""
    if s.d_to_finish[r]:
        # process_batch_result_prebuilt: check_finished promotes decode's own parked 400 before
        # any decode step, so a prompt decode rejected is answered 400 and its pages never read.
        s.d_finished[r] = Finish.ABORT
        s.http[r] = HTTP.ERROR_400
        decode_pool.free(s, r)
        s.d_queue[r] = DecodeQ.DONE
        return
    decode_pool.read(s, r, decode_pool.pages_of(s, r))
    s.http[r] = HTTP.OK_200
    s.emit("reply", req=r, status=200)
    s.d_queue[r] = DecodeQ.FINISHED


@spec.action
def decode_finish(s, r: ReqId):
    """Request finishes on decode: release its pages (content stays in them)."""
    require(s.d_queue[r] == DecodeQ.FINISHED)
    s.d_finished[r] = Finish.LENGTH
    decode_pool.free(s, r)
    s.d_queue[r] = DecodeQ.DONE


@spec.action
def decode_transfer_timeout(s, r: ReqId):
    """Receiver poll: WaitingForInput turns Failed after the bootstrap timeout."""
    require(s.d_queue[r] == DecodeQ.TRANSFER and s.kv[r] == KV.WAITING_FOR_INPUT)
    s.kv[r] = KV.FAILED


# -- prefill node --------------------------------------------------------------------
@spec.action
def prefill_pop_bootstrapped(s, r: ReqId):
    """PrefillBootstrapQueue.add/pop_bootstrapped: handshake done, length fits the pool."""
    require(s.p_queue[r] == PrefillQ.BOOTSTRAP and s.kv[r] == KV.WAITING_FOR_INPUT)
    require(s.p_input_len[r] <= s.params.prefill_pool_tokens)  # only guard: no to_finish check
    s.p_queue[r] = PrefillQ.WAITING


@spec.action
def prefill_forward(s, r: ReqId):
    """Prefill forward: allocate ceil(len(input)/page_size) pages and write the KV."""
    require(s.p_queue[r] == PrefillQ.WAITING)
    num_pages = ceil_div(s.p_input_len[r], s.params.page_size)
    pages = prefill_pool.alloc(s, r, num_pages)
    prefill_pool.write(s, r, pages)
    s.p_queue[r] = PrefillQ.FORWARDED


@spec.helper
def send_kv_chunk(s, r):
    """send_kv_chunk(last_chunk=True): req_to_token[0:len(input)] -> dst_kv_indices; the room turns Success.

    Mooncake's transfer worker cuts prefill's page list to decode's when decode
    reserved fewer pages (``disaggregation/mooncake/conn.py``; decode's own
    placeholder when decode rejected the prompt and prefill did not); decode
    having *more* pages than prefill sends goes unnoticed.
    """
    num_pages = ceil_div(s.p_input_len[r], s.params.page_size)
    transfer(s, r, prefill_pool, decode_pool, min(num_pages, len(decode_pool.pages_of(s, r))))
    s.kv_tokens[r] = s.p_input_len[r]
    s.kv[r] = KV.SUCCESS


@spec.action
def prefill_send(s, r: ReqId):
    """process_batch_result_disagg_prefill: every finished result is sent, then released on Success."""
    require(s.p_queue[r] == PrefillQ.FORWARDED and s.kv[r] == KV.WAITING_FOR_INPUT)
    send_kv_chunk(s, r)
    # inflight queue on Success: release pages; the parked 400 is lost
    prefill_pool.free(s, r)
    s.p_finished[r] = Finish.LENGTH
    s.p_queue[r] = PrefillQ.DONE


@spec.action
def prefill_transfer_failed(s, r: ReqId):
    """Inflight/bootstrap queue on Failed: release pages and abort."""
    require(s.p_queue[r] in (PrefillQ.BOOTSTRAP, PrefillQ.WAITING, PrefillQ.FORWARDED) and s.kv[r] == KV.FAILED)
    prefill_pool.free(s, r)
    s.p_finished[r] = Finish.ABORT
    s.p_queue[r] = PrefillQ.DONE


@spec.terminal
def nothing_in_flight(s) -> bool:
    """Every request has either not arrived or left both nodes."""
    return all(
        s.p_queue[r] in (PrefillQ.IDLE, PrefillQ.DONE) and s.d_queue[r] in (DecodeQ.IDLE, DecodeQ.DONE)
        for r in s.all(Req)
    )


own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership", "pages_returned_when_idle")
