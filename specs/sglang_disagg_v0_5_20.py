"""SGLang 0.5.20 disaggregated prefill/decode: the rejected prompt is forwarded but no longer sent.

Written as the patch on top of ``sglang_disagg_v0_5_19``: every declaration
is shared, and only the code path 0.5.20 changed is replaced (line numbers:
the 0.5.20 wheel, python/sglang/srt/):

* ``disaggregation/prefill.py:705 process_batch_result_disagg_prefill``: a
  finished result for which ``is_aborted(req)`` holds
  (``disaggregation/utils.py:1707``: ``to_finish`` or ``finished_reason`` is a
  ``FINISH_ABORT``, so the parked 400 counts) is retired at lines 781-786 by
  ``_retire_aborted_prefill_result`` (1096): ``sender.abort()`` (marks the
  room Failed on the prefill side only, ``disaggregation/common/conn.py:1578``),
  ``update_finish_state`` (the 400 becomes ``finished_reason``),
  ``release_kv_cache``; ``send_kv_chunk`` (869) is never reached.  This is
  sglang PR #36988 ("Retire aborted disaggregated prefill results"), a
  cleanup for aborted VLM prefills that also stops the leak.

Unchanged from 0.5.19, so still modelled by the shared actions: the rejection
(``managers/scheduler.py:2990-2997`` -> ``schedule_batch.py:2054
set_finish_with_abort``, ``to_finish`` at 2073), ``PrefillBootstrapQueue.add``
(``prefill.py:399``, no rejection check: the stub still gets a handshake, a
metadata buffer in ``finalize_bootstrap`` (377) and a forward pass),
``DecodePreallocQueue.add`` (``decode.py:640``) and ``pop_preallocated``
(1096; 1157 skips only ``finished_reason`` ``FINISH_ABORT``), which reserve
pages for the full prompt; nothing tells decode, whose receiver turns Failed
after ``SGLANG_DISAGGREGATION_WAITING_TIMEOUT`` (``common/conn.py:1823``) and
then frees the reservation (``pop_transferred``, 2331).  No release compares
the transferred length with the reserved one (``_commit_transfer_to_req``,
2131, checks the bootstrap room only, 2178).

Expected: safe.  The leak's precondition, a Success for a transfer prefill
never finished, is gone; decode holding the pages until its timeout is a cost,
not a safety violation, and 0.5.21 removes it (``sglang_disagg_v0_5_21``).

The base spec's ``pages_returned_when_idle`` is an idle-state approximation;
what is meant is stated as temporal properties, decided on every fair path
(and inherited by 0.5.21): once the client got its answer (200, 400 or 500)
neither node holds a page of the request (``pages_return``), and every
request that arrived gets an answer (``requests_finish``).  Both nodes' own
steps are weakly fair (the queues, the forwards, the send, the transfer
failure handling and decode's bootstrap timeout); the router's ``arrive``
stays unfair.
"""

import sglang_disagg_v0_5_19 as v19
from sglang_disagg_v0_5_19 import HTTP, KV, DecodeQ, Finish, PrefillQ, ReqId, prefill_pool

from ownership import Source, require, safe

spec = v19.spec.derive(
    "sglang_disagg_v0_5_20",
    summary="SGLang 0.5.20 PD disaggregation: rejected prompt forwarded on prefill, then retired instead of sent",
    models=Source(
        "SGLang",
        "0.5.20",
        where=(
            "disaggregation/prefill.py process_batch_result_disagg_prefill, _retire_aborted_prefill_result",
            "disaggregation/utils.py is_aborted",
        ),
        links=("sglang PR #36988", "sglang issue #30233"),
    ),
    expect=safe(),
)


@spec.replace
def prefill_send(s, r: ReqId):
    """process_batch_result_disagg_prefill: an aborted result is retired; any other is sent (send_kv_chunk)."""
    require(s.p_queue[r] == PrefillQ.FORWARDED and s.kv[r] == KV.WAITING_FOR_INPUT)
    if s.p_to_finish[r]:  # FIX: is_aborted(req) reads to_finish
        prefill_pool.free(s, r)  # release_kv_cache
        s.p_finished[r] = Finish.ABORT  # update_finish_state: the parked 400
        s.p_queue[r] = PrefillQ.DONE  # sender.abort() fails the room on prefill only: decode waits for its timeout
        return
    v19.send_kv_chunk(s, r)
    prefill_pool.free(s, r)
    s.p_finished[r] = Finish.LENGTH
    s.p_queue[r] = PrefillQ.DONE


# With nothing sent for a rejected prompt, every page decode reads was written by this request's
# own transfer (0.5.19 breaks this too: its read of the unsent pages is the stale read).
v19.own.invariants("no_read_of_unwritten", spec=spec)

# Both nodes' own steps are weakly fair; arrive (the router) stays unfair.
for _step in ("decode_pop_preallocated", "decode_pop_transferred", "decode_forward", "decode_finish",
              "decode_transfer_timeout", "prefill_pop_bootstrapped", "prefill_forward", "prefill_send",
              "prefill_transfer_failed"):
    spec.fair(_step, "weak")
v19.own.properties("pages_return", "requests_finish", spec=spec,
                   ended=lambda s, r: s.http[r] != HTTP.NONE,  # the client got its answer
                   started=lambda s, r: s.p_queue[r] != PrefillQ.IDLE or s.d_queue[r] != DecodeQ.IDLE)
