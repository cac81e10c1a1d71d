"""vLLM NIXL connector: a receive failure is reported only once every transfer handle of the request has stopped (PR #56104).

Written as the patch on top of ``vllm_nixl_multi_handle_failure_buggy``;
compare with the upstream diff
(vllm/distributed/kv_transfer/kv_connector/v1/nixl/worker.py):

* ``_pop_done_transfers`` also returns the failures of the current poll, and
  a request with a failed handle stays in ``_recving_transfers`` while any
  sibling handle is still in progress;
* the failure (``_failed_recv_reqs`` from background threads,
  ``_recv_failures`` from the engine thread) and the block invalidation are
  reported in ``get_finished`` only when all of the request's handles have
  been processed, so the scheduler frees the blocks after the last RDMA write
  into them has stopped.

Besides the base spec's invariants the fix is checked for the property in
its title, ``failure_reported_only_when_settled``: a request's load is
reported failed only when one of its handles failed and none is still
outstanding.

Expected: safe; ``ownership prove`` proves it for executions of any length.
"""

import vllm_nixl_multi_handle_failure_buggy as base
from vllm_nixl_multi_handle_failure_buggy import HTTP, Req, ReqId, Status, XferId, xfer

from ownership import Source, safe

spec = base.spec.derive(
    "vllm_nixl_multi_handle_failure_fixed",
    summary="vLLM NIXL: a failed load is reported, and its blocks freed, only after every transfer handle has stopped",
    models=Source(
        "vLLM",
        "PR #56104",
        where=(
            "distributed/kv_transfer/kv_connector/v1/nixl/worker.py NixlConnectorWorker._pop_done_transfers "
            "(poll failures returned, the request kept while a handle is in progress), get_finished",
        ),
        links=("vllm PR #56104",),
    ),
    expect=safe(),
)


@spec.replace
def xfer_done(s, r: ReqId, h: XferId):
    """_pop_done_transfers: DONE; if it was the last handle of a request with a failed one, report the failure."""
    xfer.complete(s, r, h)
    if xfer.settled(s, r) and xfer.failed(s, r):
        s.failed_recv[r] = True  # FIX: every handle has stopped


@spec.replace
def xfer_failed(s, r: ReqId, h: XferId):
    """_pop_done_transfers: ERR; the failure is held back while a sibling handle is still in progress."""
    xfer.fail(s, r, h)
    if xfer.settled(s, r):
        s.failed_recv[r] = True  # FIX: reported only when no sibling can still write the blocks


for _step in ("xfer_done", "finished_recving", "fail_request", "decode"):
    spec.fair(_step, "weak")  # the engine's own steps; start_load_kv (arrival) and xfer_failed stay unfair
base.own.properties("pages_return", "requests_finish", spec=spec,
                    ended=lambda s, r: s.http[r] != HTTP.NONE,  # the client got its reply (200 or an error)
                    started=lambda s, r: s.status[r] != Status.NEW)  # its load started


@spec.invariant
def failure_reported_only_when_settled(s) -> bool:
    """FIX: a load is reported failed only once a handle failed and every handle of the request has stopped."""
    return all(not s.failed_recv[r] or (xfer.settled(s, r) and xfer.failed(s, r)) for r in s.all(Req))
