"""SGLang 0.4.7-0.5.4.post1 disaggregated prefill/decode: the rejection sets ``finished_reason``.

Written as the patch on top of ``sglang_disagg_v0_5_19`` (the release line
that parks the rejection in ``to_finish``), replacing only the arrival; line
numbers are the 0.5.4 wheel's, python/sglang/srt/ (0.4.7 through 0.5.4.post1
take the same path: the rejection sets ``finished_reason``, prefill's ``add``
checks capacity only, decode drops its own ``FINISH_ABORT`` before reserving;
0.4.6 sent no abort at all and its Mooncake transfer did not cut prefill's
pages to decode's, so it is not modelled here):

* ``managers/scheduler.py:1268-1276``: ``validate_input_length``
  (``managers/utils.py:93``, ``len(origin_input_ids) >= max_req_input_len``,
  106) fails, ``req.set_finish_with_abort`` and ``_add_request_to_queue``
  (1371) all the same; ``schedule_batch.py:916-925 set_finish_with_abort``
  swaps in the one-token placeholder (``origin_input_ids = [0]``, 921) and
  sets ``finished_reason = FINISH_ABORT(..., 400)`` (923) at once: there is no
  ``to_finish`` yet (it first appears in 0.5.4.post2, sglang PR #12312).
* Prefill: ``PrefillBootstrapQueue.add`` (``disaggregation/prefill.py:180``)
  checks only the pool's capacity; the placeholder is forwarded and
  ``process_batch_result_disagg_prefill`` (378) sends it
  (``send_kv_chunk(req, last_chunk=True)``, 450) with no abort check, and on
  Success replaces the 400 with ``FINISH_LENGTH`` (525).
* Decode: ``DecodePreallocQueue.pop_preallocated`` (``decode.py:404``) first
  drops every queued request whose ``finished_reason`` is a ``FINISH_ABORT``
  and streams it (422-426): decode's *own* rejection is answered there, before
  any page is reserved.  A prompt only prefill rejected is preallocated in full
  (``_pre_alloc``, 602) and committed by ``pop_transferred`` (690) with no
  length check, exactly as in 0.5.5-0.5.19.

So "prefill rejects, decode admits" leaks here as it does on 0.5.11 (the
shared actions), and "decode rejects, prefill admits" does not: decode never
reserves for it.  Expected: ``no_foreign_read`` violated.
"""

import sglang_disagg_v0_5_19 as v19
from sglang_disagg_v0_5_19 import (
    HTTP,
    DecodeQ,
    Finish,
    PrefillQ,
    PromptLenId,
    ReqId,
    decode_max_input,
    prefill_max_input,
)

from ownership import Source, require, violates

spec = v19.spec.derive(
    "sglang_disagg_v0_5_4",
    summary="SGLang 0.5.4 PD disaggregation: the rejection sets finished_reason; decode admits what prefill rejected",
    models=Source(
        "SGLang",
        "0.5.4",
        where=(
            "managers/schedule_batch.py Req.set_finish_with_abort",
            "disaggregation/prefill.py PrefillBootstrapQueue.add, process_batch_result_disagg_prefill",
            "disaggregation/decode.py DecodePreallocQueue.pop_preallocated, _pre_alloc, pop_transferred",
        ),
        links=("sglang issue #30233", "sglang PR #12312"),
    ),
    expect=violates("no_foreign_read"),
)


@spec.replace
def arrive(s, r: ReqId, prompt_len: PromptLenId):
    """The router sends the request to both nodes; a rejection sets finished_reason at once."""
    require(s.p_queue[r] == PrefillQ.IDLE and s.d_queue[r] == DecodeQ.IDLE)
    if prompt_len >= prefill_max_input(s) and s.params.prefill_auto_truncate == 0:
        s.p_finished[r] = Finish.ABORT  # set_finish_with_abort: no to_finish in 0.5.4
        s.p_input_len[r] = 1
    else:
        s.p_input_len[r] = min(prompt_len, prefill_max_input(s))  # truncated to the limit, or whole
    s.p_queue[r] = PrefillQ.BOOTSTRAP  # PrefillBootstrapQueue.add: capacity is its only check
    if prompt_len >= decode_max_input(s) and s.params.decode_auto_truncate == 0:
        # pop_preallocated drops a FINISH_ABORT request and streams its 400 before reserving anything
        s.d_finished[r] = Finish.ABORT
        s.d_input_len[r] = 1
        s.http[r] = HTTP.ERROR_400
        s.d_queue[r] = DecodeQ.DONE
    else:
        s.d_input_len[r] = min(prompt_len, decode_max_input(s))
        s.d_queue[r] = DecodeQ.PREALLOC
