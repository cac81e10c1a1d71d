"""vLLM P/D prefill: every lifecycle gets its own internal request id, so a late finished_sending frees only its own blocks (PR #27987).

Written as the patch on top of ``vllm_request_id_reuse_stale_send_buggy``;
compare with the upstream change (vllm/v1/engine/input_processor.py):

* ``InputProcessor.assign_request_id`` keeps the client's id as
  ``external_req_id`` and makes the engine's ``request_id``
  ``f"{external_req_id}-{random_uuid():.8}"``: every lifecycle of a reused
  external id is a different key for the scheduler, the KV cache manager and
  the connector, so the decode's notification names the lifecycle whose
  blocks it pulled;
* ``_update_from_kv_xfer_finished`` therefore frees that lifecycle's blocks
  and no other; a new request under the same external id is untouched.

The model keeps one request domain of external ids; the generation of the
send job (its age) stands for the random suffix.

Expected: safe; ``ownership prove`` proves it for executions of any length.
"""

import vllm_request_id_reuse_stale_send_buggy as base
from vllm_request_id_reuse_stale_send_buggy import AgeId, ReqId, pool, send

from ownership import Source, require, safe

spec = base.spec.derive(
    "vllm_request_id_reuse_stale_send_fixed",
    summary="vLLM P/D prefill: internal request ids per lifecycle; a late finished_sending frees only its own blocks",
    models=Source(
        "vLLM",
        "PR #27987 (v0.14.0)",
        where=(
            "v1/engine/input_processor.py InputProcessor.assign_request_id (external_req_id, random suffix)",
            "v1/core/sched/scheduler.py Scheduler._update_from_kv_xfer_finished, _free_blocks",
        ),
        links=("vllm PR #27987",),
    ),
    expect=safe(),
)


@spec.replace
def finished_sending(s, r: ReqId, age: AgeId):
    """The notification names the lifecycle (internal id): its pull completes and its blocks alone go back."""
    require(send.running(s, r, age))
    pulled = [p for p in s.all(pool.Page) if send.refs_of(s, r, p, age)]
    pool.read(s, r, pulled)
    send.complete(s, r, age)  # FIX: addressed to the lifecycle, never to the one now holding the id
    pool.free_pages(s, r, pulled)  # _free_blocks(request of that internal id)
