"""vLLM MooncakeConnector P/D: a failed remote KV load is reported to the scheduler, which fails or recomputes the request (PR #50984).

Written as the patch on top of ``vllm_mooncake_failed_load_stranded_buggy``;
compare with the upstream change
(vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py):

* ``MooncakeConnectorWorker._handle_failed_recv()`` reports a failed pull
  "the way ``KVConnectorBase_V1`` documents and
  ``NixlConnectorWorker._handle_failed_transfer()`` does": the request's
  blocks go to ``_invalid_block_ids`` (``get_block_ids_with_load_errors()``
  is now implemented) and the request to ``finished_recving``; this covers
  ``err_reqs``, an ``ERROR`` response and the bootstrap failure;
* the scheduler (``_update_waiting_for_remote_kv`` /
  ``_handle_invalid_blocks``) then applies ``kv_load_failure_policy``:
  ``fail`` (the default) finishes the request with an error and frees its
  blocks; ``recompute`` reschedules it to compute the invalid blocks' KV
  locally; a request aborted meanwhile has its blocks freed, as for any
  ``finished_recving``.

No D-side expiry timer is added ("a lost response is already covered by the
existing ``zmq.RCVTIMEO``"): every pull ends, with the KV or with an error,
and every end now reaches the scheduler.  ``--param
recompute_kv_load_failures=1`` checks the other policy.

Both temporal properties hold on every fair path: every admitted request
finishes (``requests_finish``) and every finished one gives its blocks back
(``pages_return``), with the fairness of the base spec (the environment's
failures and aborts unfair, the engine's steps weakly fair).
"""

import vllm_mooncake_failed_load_stranded_buggy as base
from vllm_mooncake_failed_load_stranded_buggy import Req, ReqId, Status, pool, pull

from ownership import Source, require, safe

spec = base.spec.derive(
    "vllm_mooncake_failed_load_stranded_fixed",
    summary="vLLM Mooncake P/D: a failed remote KV load is reported; the scheduler fails or recomputes the request and frees its blocks",
    models=Source(
        "vLLM",
        "PR #50984",
        where=(
            "distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py MooncakeConnectorWorker."
            "_handle_failed_recv, get_block_ids_with_load_errors, process_pulling_result",
            "v1/core/sched/scheduler.py Scheduler._update_waiting_for_remote_kv, _handle_invalid_blocks "
            "(kv_load_failure_policy)",
        ),
        links=("vllm PR #50984", "vllm issue #50719"),
    ),
    expect=safe(),
)
spec.param("recompute_kv_load_failures", 0,
           "kv_load_failure_policy: 0 = fail (the default: finish with an error), 1 = recompute locally",
           min=0, max=1)
spec.var("load_failed", bool, per=Req, init=False,
         doc="FIX: the worker reported the request's load as failed (_invalid_block_ids), not yet handled")


@spec.replace
def pull_failed(s, r: ReqId):
    """FIX: _handle_failed_recv: the request's blocks are reported invalid and the request finished_recving."""
    for h in s.all(pull.Handle):
        pull.fail(s, r, h)
    s.load_failed[r] = True
    s.recvd[r] = True


@spec.replace
def d_finished_recving(s, r: ReqId):
    """_update_waiting_for_remote_kv: free an aborted request, apply the failure policy, or schedule the request."""
    require(s.recvd[r])
    s.recvd[r] = False
    failed = s.load_failed[r]
    s.load_failed[r] = False
    if s.status[r] == Status.FINISHED_ABORTED:
        pull.free(s, r)  # _free_blocks
        return
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS)
    if failed and s.params.recompute_kv_load_failures == 0:
        s.emit("reply", req=r, status=500)  # FIX: policy fail: FINISHED_ERROR
        pull.free(s, r)
        s.status[r] = Status.FINISHED_ERROR
        return
    if failed:
        pool.write(s, r, pool.pages_of(s, r))  # FIX: policy recompute: the invalid blocks are computed locally
    s.status[r] = Status.RUNNING


@spec.invariant
def failure_reported_with_the_load(s) -> bool:
    """FIX: a request whose pull failed has its failure pending at the scheduler, or is past it."""
    return all(
        not (s.status[r] == Status.WAITING_FOR_REMOTE_KVS and pull.failed(s, r)) or s.load_failed[r]
        for r in s.all(Req)
    )


@spec.invariant
def failure_policy_is_applied(s) -> bool:
    """FIX: a failed load ends its request with an error under policy fail, and runs (recomputed) only under recompute."""
    recompute = s.params.recompute_kv_load_failures == 1
    return all(
        (s.status[r] != Status.FINISHED_ERROR or (pull.failed(s, r) and not recompute))
        and (not (pull.failed(s, r) and s.status[r] in (Status.RUNNING, Status.FINISHED)) or recompute)
        for r in s.all(Req)
    )
