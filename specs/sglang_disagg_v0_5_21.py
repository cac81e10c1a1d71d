"""SGLang 0.5.21 disaggregated prefill/decode: pending rejections retired at each node's door.

Written as the patch on top of ``sglang_disagg_v0_5_20``: every declaration
is shared, and only the code path 0.5.21 changed is replaced (line numbers:
the 0.5.21 wheel, python/sglang/srt/).  sglang PR #38935 ("[PD] Do not
admit intake-rejected requests to a PD handoff"):

* ``disaggregation/prefill.py:417 PrefillBootstrapQueue.add``: if
  ``is_unadmitted_reject(req)`` (``disaggregation/utils.py:1754``: a
  ``FINISH_ABORT`` in ``to_finish`` or ``finished_reason`` on a request that
  holds nothing yet), ``Scheduler.retire_unadmitted_request``
  (``managers/scheduler.py:3242``: ``update_finish_state``, stream the 400)
  and return (422-424): no sender, no handshake, no metadata buffer, no
  forward pass.
* ``disaggregation/decode.py:734 DecodePreallocQueue.add``: the same check
  for a fresh request (750-752), before any receiver is created.

Both run synchronously where the request arrives
(``managers/scheduler.py:3033-3040`` ``validate_input_length`` ->
``set_finish_with_abort`` -> ``_add_request_to_queue``, 3266, which calls
the queue's ``add`` at 3284/3289), so the model does them in ``arrive``.
Each node sees only its own rejection: when prefill rejects a prompt that
decode accepts, decode still reserves pages for the whole prompt
(``pop_preallocated``, 1231; 1293 still reads only ``finished_reason``) and
frees them when its receiver's waiting timeout fails the transfer
(``common/conn.py:1982``), as in 0.5.20.  0.5.20's retirement of an aborted
prefill result (``prefill.py:839``) is kept.

Not in 0.5.21 (nor 0.5.22 or 0.5.23): a check that the transferred length
equals the reserved one; ``_commit_transfer_to_req`` (2404) still compares
only the bootstrap room (2457).  0.5.21 adds an opt-in KV checksum
(``--disaggregation-enable-kv-checksum``, default off:
``arg_groups/fields/disagg.py:66``; verified in ``_verify_kv_checksums``,
3039), the ``kv_checksum`` parameter: with ``--allow-auto-truncate`` and a
longer decode limit (``prefill_auto_truncate``), decode reads pages prefill
never sent unless the checksum turns that into a 500.  0.5.22 and 0.5.23 keep
both doors as they are (``is_unadmitted_reject``, ``PrefillBootstrapQueue.add``
and ``retire_unadmitted_request`` unchanged on this path); 0.5.23 skips the
checksum when the two nodes' TP width, PP stage or page size differ
(``decode.py:2580-2598``), which preflight's single page size and this model
do not distinguish.

Expected (without auto-truncate): safe at every size the explorer can cover,
and provable by induction (the Z3 engine).  The temporal properties
``pages_return`` and ``requests_finish`` and their fairness are inherited
from 0.5.20 and hold on every fair path.
"""


import sglang_disagg_v0_5_19 as v19
import sglang_disagg_v0_5_20 as v20
from sglang_disagg_v0_5_19 import (
    HTTP,
    KV,
    DecodeQ,
    Finish,
    PrefillQ,
    PromptLenId,
    Req,
    ReqId,
    decode_max_input,
    decode_pool,
    prefill_max_input,
)

from ownership import Source, ceil_div, require, safe

spec = v20.spec.derive(
    "sglang_disagg_v0_5_21",
    summary="SGLang 0.5.21 PD disaggregation: pending rejections retired at each node's queue door",
    models=Source(
        "SGLang",
        "0.5.21",
        where=(
            "disaggregation/prefill.py PrefillBootstrapQueue.add",
            "disaggregation/decode.py DecodePreallocQueue.add",
            "disaggregation/utils.py is_unadmitted_reject",
            "managers/scheduler.py Scheduler.retire_unadmitted_request",
        ),
        links=("sglang PR #38935", "sglang PR #36988"),
    ),
    expect=safe(),
)


@spec.replace
def arrive(s, r: ReqId, prompt_len: PromptLenId):
    """Each node runs validate_input_length, then its queue's add retires a pending rejection at the door."""
    require(s.p_queue[r] == PrefillQ.IDLE and s.d_queue[r] == DecodeQ.IDLE)
    if prompt_len >= prefill_max_input(s) and s.params.prefill_auto_truncate == 0:
        s.p_to_finish[r] = True  # set_finish_with_abort
        s.p_input_len[r] = 1
        s.p_finished[r] = Finish.ABORT  # FIX: PrefillBootstrapQueue.add -> retire_unadmitted_request
        s.p_queue[r] = PrefillQ.DONE  # no sender: decode is not told
    else:
        s.p_input_len[r] = min(prompt_len, prefill_max_input(s))  # truncated to the limit, or whole
        s.p_queue[r] = PrefillQ.BOOTSTRAP
    if prompt_len >= decode_max_input(s) and s.params.decode_auto_truncate == 0:
        s.d_to_finish[r] = True
        s.d_input_len[r] = 1
        s.d_finished[r] = Finish.ABORT  # FIX: DecodePreallocQueue.add -> retire_unadmitted_request
        s.http[r] = HTTP.ERROR_400
        s.d_queue[r] = DecodeQ.DONE
    else:
        s.d_input_len[r] = min(prompt_len, decode_max_input(s))
        s.d_queue[r] = DecodeQ.PREALLOC


spec.param("kv_checksum", 0, "1: both nodes run with --disaggregation-enable-kv-checksum (0.5.21+)", min=0, max=1)


@spec.replace
def decode_forward(s, r: ReqId):
    """get_new_prebuilt_batch: the opt-in KV checksum, the prebuilt step, then the decode forward.

    ``_verify_kv_checksums`` (``disaggregation/decode.py:3039``) recomputes the
    checksum over decode's pages for ``len(origin_input_ids)`` tokens and
    compares it with the one prefill computed over the pages it sent
    (``prefill.py:1330-1340``); on a mismatch ``_handle_kv_checksum_mismatch``
    (3070) answers 500 and releases the pages before any read.  Modelled as
    exact: a different number of pages is always a mismatch (a checksum
    collision is not).
    """
    require(s.d_queue[r] == DecodeQ.RUNNING)
    if s.params.kv_checksum == 1:
        sent = ceil_div(s.kv_tokens[r], s.params.page_size)
        if sent != len(decode_pool.pages_of(s, r)):
            s.d_finished[r] = Finish.ABORT  # prepare_abort(..., INTERNAL_SERVER_ERROR)
            s.http[r] = HTTP.ERROR_500
            decode_pool.free(s, r)  # release_kv_cache
            s.d_queue[r] = DecodeQ.DONE
            return
    v19.decode_forward_checked(s, r)


# -- what the fix must guarantee, beyond 0.5.20's invariants (no_read_of_unwritten included) ----


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
        d_held, p_held = decode_pool.held(s, r), v19.prefill_pool.held(s, r)
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
            if not ((h in (HTTP.ERROR_400, HTTP.ERROR_500) and f == Finish.ABORT)
                    or (h == HTTP.OK_200 and f == Finish.LENGTH)):
                return False
        elif q == DecodeQ.FINISHED:
            if h != HTTP.OK_200 or f != Finish.NONE:
                return False
        elif h != HTTP.NONE or f != Finish.NONE:
            return False
    return True


# Which prompts prefill turns away is not a safety property: a long prompt prefill admits instead
# (the default one fits its pool) is sent in full and matches decode's reservation, and a short one
# it turns away leaves decode's reservation to the waiting timeout, as any prefill rejection does.
_WHO_IS_REJECTED = "which prompts prefill rejects changes no page ownership: admitted runs in full, rejected times out"
spec.accept_mutant(
    "arrive+3 negate-if: if prompt_len >= prefill_max_input(s): => if not (prompt_len >= prefill_max_input(s)):",
    reason=_WHO_IS_REJECTED,
)
spec.accept_mutant(
    "arrive+3 flip-compare: if prompt_len >= prefill_max_input(s): => if prompt_len < prefill_max_input(s):",
    reason=_WHO_IS_REJECTED,
)
