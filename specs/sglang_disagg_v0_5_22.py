"""SGLang v0.5.22 disaggregated prefill/decode: the rejected-prompt leak, fixed.

Written as the patch on top of ``sglang_disagg_v0_5_21``: every declaration
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

import sglang_disagg_v0_5_21 as v21
from sglang_disagg_v0_5_21 import HTTP, KV, DecodeQ, Finish, PrefillQ, Req, decode_pool

from ownership import Source, ceil_div, require, safe

spec = v21.spec.derive(
    "sglang_disagg_v0_5_22",
    summary="SGLang 0.5.22 PD disaggregation: pending rejections retired at admission, transfer length checked",
    models=Source(
        "SGLang",
        "0.5.22",
        where=(
            "disaggregation/decode.py DecodePreallocQueue.pop_preallocated, DecodeTransferQueue.pop_transferred",
            "disaggregation/prefill.py PrefillBootstrapQueue.pop_bootstrapped",
        ),
        links=("sglang PR #38704", "sglang PR #36988", "sglang PR #38935"),
    ),
    expect=safe(),
)


@spec.replace
def decode_pop_preallocated(s, r: Req):
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
def prefill_pop_bootstrapped(s, r: Req):
    """pop_bootstrapped: a request with a pending rejection never reaches the forward."""
    require(s.p_queue[r] == PrefillQ.BOOTSTRAP and s.kv[r] == KV.WAITING_FOR_INPUT)
    require(not s.p_to_finish[r])  # FIX: rejected requests are retired below instead
    require(s.p_input_len[r] <= s.params.prefill_pool_tokens)
    s.p_queue[r] = PrefillQ.WAITING


@spec.action
def prefill_retire_rejected(s, r: Req):
    """FIX: retire a rejected prefill request with its original error and tell decode."""
    require(s.p_queue[r] == PrefillQ.BOOTSTRAP and s.p_to_finish[r])
    if s.kv[r] == KV.WAITING_FOR_INPUT:
        s.kv[r] = KV.FAILED  # decode's receiver sees Failed and frees its reservation
    s.p_finished[r] = Finish.ABORT
    s.p_queue[r] = PrefillQ.DONE


@spec.replace
def decode_pop_transferred(s, r: Req):
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
