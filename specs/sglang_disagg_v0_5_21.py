"""SGLang v0.5.21 disaggregated prefill/decode: the rejected-prompt leak, fixed.

Written as the patch on top of ``sglang_disagg_v0_5_20``: every declaration
is shared, and only the code paths the fix changed are replaced (compare this
file with the upstream diffs line by line):

* SGLang PR #38704, decode side (``disaggregation/decode.py``
  ``DecodePreallocQueue.pop_preallocated``): a request whose ``to_finish``
  holds a pending rejection is retired with its original error before any
  page allocation or metadata publication.
* PR #38704, prefill side (``disaggregation/prefill.py``): a rejected
  request is kept out of execution (no forward, no ``send_kv_chunk``), decode
  is told the transfer failed, and the request retires with its original 400.
* PR #38704, decode commit (``DecodeTransferQueue.pop_transferred``): the
  logical KV length prefill published must equal the length decode reserved
  for; otherwise the transfer is failed instead of committed.
* PR #36988 (retire aborted prefill results once) is covered by the shared
  ``prefill_transfer_failed``.

Expected: safe at every size the explorer can cover, and provable by
induction (the Z3 engine).
"""


import sglang_disagg_v0_5_20 as v20
from sglang_disagg_v0_5_20 import HTTP, KV, DecodeQ, Finish, PrefillQ, Req, ReqId, decode_pool

from ownership import Source, ceil_div, require, safe

spec = v20.spec.derive(
    "sglang_disagg_v0_5_21",
    summary="SGLang 0.5.21 PD disaggregation: pending rejections retired at admission, transfer length checked",
    models=Source(
        "SGLang",
        "0.5.21",
        where=(
            "disaggregation/decode.py DecodePreallocQueue.pop_preallocated, DecodeTransferQueue.pop_transferred",
            "disaggregation/prefill.py PrefillBootstrapQueue.pop_bootstrapped",
        ),
        links=("sglang PR #38704", "sglang PR #36988", "sglang PR #38935"),
    ),
    expect=safe(),
)


@spec.replace
def decode_pop_preallocated(s, r: ReqId):
    """pop_preallocated: retire a pending rejection with its error; else reserve pages."""
    require(s.d_queue[r] == DecodeQ.PREALLOC)
    if s.d_finished[r] == Finish.ABORT or s.d_to_finish[r]:  # FIX: to_finish is a rejection too
        s.d_finished[r] = Finish.ABORT
        s.http[r] = HTTP.ERROR_400
        s.d_queue[r] = DecodeQ.DONE
        return
    need = ceil_div(s.d_input_len[r], s.params.page_size)
    require(decode_pool.available(s) >= need)
    decode_pool.alloc(s, r, need)
    s.kv[r] = KV.WAITING_FOR_INPUT
    s.d_queue[r] = DecodeQ.TRANSFER


@spec.replace
def prefill_pop_bootstrapped(s, r: ReqId):
    """pop_bootstrapped: a request with a pending rejection never reaches the forward."""
    require(s.p_queue[r] == PrefillQ.BOOTSTRAP and s.kv[r] == KV.WAITING_FOR_INPUT)
    require(not s.p_to_finish[r])  # FIX: rejected requests are retired below instead
    require(s.p_input_len[r] <= s.params.prefill_pool_tokens)
    s.p_queue[r] = PrefillQ.WAITING


@spec.action
def prefill_retire_rejected(s, r: ReqId):
    """FIX: retire a rejected prefill request with its original error and tell decode."""
    require(s.p_queue[r] == PrefillQ.BOOTSTRAP and s.p_to_finish[r])
    if s.kv[r] == KV.WAITING_FOR_INPUT:
        s.kv[r] = KV.FAILED  # decode's receiver sees Failed and frees its reservation
    s.p_finished[r] = Finish.ABORT
    s.p_queue[r] = PrefillQ.DONE


@spec.replace
def decode_pop_transferred(s, r: ReqId):
    """pop_transferred: commit only if the transferred length equals the reserved length."""
    require(s.d_queue[r] == DecodeQ.TRANSFER)
    require(s.kv[r] in (KV.SUCCESS, KV.FAILED))
    if s.kv[r] == KV.FAILED or s.kv_tokens[r] != s.d_input_len[r]:  # FIX: length check
        s.d_finished[r] = Finish.ABORT
        s.http[r] = HTTP.ERROR_400
        decode_pool.free(s, r)
        s.d_queue[r] = DecodeQ.DONE
        return
    s.d_queue[r] = DecodeQ.RUNNING


# -- what the fix must guarantee, beyond the shipped spec's invariants ------------------------
# Every page decode reads was written (by the transfer of this request's own prefill KV).
v20.own.invariants("no_read_of_unwritten", spec=spec)


@spec.invariant
def rejected_never_gets_200(s) -> bool:
    """A prompt either node rejected (``to_finish``) never streams HTTP 200: the incident's bug class."""
    return not any((s.p_to_finish[r] or s.d_to_finish[r]) and s.http[r] == HTTP.OK_200 for r in s.all(Req))


@spec.invariant
def rejected_prefill_never_runs(s) -> bool:
    """Prefill never queues or forwards a rejected request, and retires it with ABORT."""
    for r in s.all(Req):
        if s.p_to_finish[r]:
            if s.p_queue[r] in (PrefillQ.WAITING, PrefillQ.FORWARDED):
                return False
            if s.p_queue[r] == PrefillQ.DONE and s.p_finished[r] != Finish.ABORT:
                return False
    return True


@spec.invariant
def prefill_aborts_only_rejected_or_failed(s) -> bool:
    """Prefill aborts a request only if it rejected the prompt or the KV transfer failed."""
    return all(s.p_finished[r] != Finish.ABORT or s.p_to_finish[r] or s.kv[r] == KV.FAILED for r in s.all(Req))


@spec.invariant
def prefill_runs_for_a_reservation(s) -> bool:
    """Prefill queues or forwards a request only while decode has reserved pages for it (or gave up)."""
    return all(
        s.p_queue[r] not in (PrefillQ.WAITING, PrefillQ.FORWARDED) or s.kv[r] in (KV.WAITING_FOR_INPUT, KV.FAILED)
        for r in s.all(Req)
    )


@spec.invariant
def pages_match_queues(s) -> bool:
    """Decode holds a request's reserved pages from preallocation to finish, prefill from forward to send."""
    for r in s.all(Req):
        d_held, p_held = decode_pool.held(s, r), v20.prefill_pool.held(s, r)
        if s.d_queue[r] in (DecodeQ.TRANSFER, DecodeQ.RUNNING, DecodeQ.FINISHED):
            if d_held != ceil_div(s.d_input_len[r], s.params.page_size):
                return False
        elif d_held != 0:
            return False
        if s.p_queue[r] == PrefillQ.FORWARDED:
            if p_held != ceil_div(s.p_input_len[r], s.params.page_size):
                return False
        elif p_held != 0:
            return False
    return True


@spec.invariant
def response_matches_finish(s) -> bool:
    """The client hears once, when decode retires the request: 400 with ABORT, 200 before LENGTH."""
    for r in s.all(Req):
        q, h, f = s.d_queue[r], s.http[r], s.d_finished[r]
        if q == DecodeQ.DONE:
            if not ((h == HTTP.ERROR_400 and f == Finish.ABORT) or (h == HTTP.OK_200 and f == Finish.LENGTH)):
                return False
        elif q == DecodeQ.FINISHED:
            if h != HTTP.OK_200 or f != Finish.NONE:
                return False
        elif h != HTTP.NONE or f != Finish.NONE:
            return False
    return True


# The model has no clock: decode's bootstrap timeout can fail any transfer at any time.  So a
# rejected request that prefill does not retire, or retires without failing the transfer, still
# ends with the transfer failed by the timeout, decode's pages freed and its 400 sent: the same
# outcomes, only later.  How soon a rejection is answered is not a safety property.
_LATE_400 = "without the retire step, decode's bootstrap timeout still fails the transfer and sends the 400"
spec.accept_mutant(
    "prefill_retire_rejected flip-compare: require(s.p_queue[r] == PrefillQ.BOOTSTRAP and s.p_to_finish[r]) "
    "=> require(s.p_queue[r] != PrefillQ.BOOTSTRAP and s.p_to_finish[r])",
    reason=_LATE_400,
)
spec.accept_mutant(
    "prefill_retire_rejected negate-if: if s.kv[r] == KV.WAITING_FOR_INPUT: => if not (s.kv[r] == KV.WAITING_FOR_INPUT):",
    reason=_LATE_400,
)
spec.accept_mutant(
    "prefill_retire_rejected flip-compare: if s.kv[r] == KV.WAITING_FOR_INPUT: => if s.kv[r] != KV.WAITING_FOR_INPUT:",
    reason=_LATE_400,
)
