"""vLLM NIXL connector, heterogeneous TP: one failed transfer handle frees blocks its sibling handles still write.

Models the decode (KV consumer) side of vLLM's NixlConnector when the decode
worker reads a request's KV from several prefill ranks (heterogeneous tensor
parallelism, prefill TP > decode TP: one NIXL transfer handle per remote
rank), before vLLM PR #56104
(vllm/distributed/kv_transfer/kv_connector/v1/nixl/worker.py and
vllm/v1/core/sched/scheduler.py):

* ``Scheduler.schedule`` / ``update_state_after_alloc``: a request with a
  remote prefill gets its blocks and waits in WAITING_FOR_REMOTE_KVS;
* ``NixlConnectorWorker.start_load_kv`` -> ``_read_blocks_for_req``: for each
  remote rank, ``_read_blocks`` prepares (``make_prepped_xfer``) and posts
  (``nixl_wrapper.transfer``) an RDMA READ into the request's local blocks,
  and appends the handle to ``_recving_transfers[req_id]``;
* ``_pop_done_transfers``: polls each handle with ``check_xfer_state``; on
  ``DONE`` it releases the handle, and the request is reported in
  ``done_recving`` once **all** of its handles are done (PR #19874); on
  ``ERR``, ``_handle_failed_transfer`` releases that handle, adds the
  request's blocks to ``_invalid_block_ids`` and reports the request as
  failed to the scheduler **at once**;
* ``Scheduler._update_from_kv_xfer_finished`` / ``_handle_invalid_blocks``
  (kv_load_failure_policy ``fail``): the request is finished with an error
  and its blocks return to the block pool;
* a request whose KV arrived is scheduled, decodes, replies and frees its
  blocks.

Known bug (PR #56104, "[Bugfix][NIXL] Fix multiple handles xfer race"): "the
first handle to reach ERR immediately invalidates the request's blocks and
reports the failure to the scheduler, while the sibling handles may still be
posting RDMA writes into those same blocks. Posted transfers cannot be
aborted, so once the scheduler reassigns the blocks, the in-flight writes
corrupt whichever request owns them next."  The checked invariant
``no_release_with_operation_pending`` fails at the free (3 steps);
``--invariant no_foreign_read`` shows the corruption: the next request is
given the block, its own KV arrives, the sibling handle's late write lands on
top and the request decodes over the failed request's KV.

Simplified: one block per request (``prompt_pages``), covered by every
handle (each remote rank sends its slice of heads for every block); the
handles are posted together; a failure is reported and handled by the
scheduler in one step; with ``fail`` as the load-failure policy the failed
request does not come back.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.handles import Handles

spec = Spec(
    "vllm_nixl_multi_handle_failure_buggy",
    summary="vLLM NIXL heterogeneous TP: the first failed handle frees a request's blocks while sibling handles still write them",
    models=Source(
        "vLLM",
        "before PR #56104",
        where=(
            "distributed/kv_transfer/kv_connector/v1/nixl/worker.py NixlConnectorWorker._read_blocks_for_req, "
            "_read_blocks, _pop_done_transfers, _handle_failed_transfer, get_finished",
            "v1/core/sched/scheduler.py Scheduler._update_from_kv_xfer_finished, _handle_invalid_blocks, _free_blocks",
        ),
        links=("vllm PR #56104", "vllm PR #19874", "vllm PR #40364"),
    ),
    expect=violates("no_release_with_operation_pending"),
)

spec.param("requests", 2, "concurrent requests modelled", min=1, max=3)
spec.param("blocks", 2, "decode KV blocks in the pool", min=1)
spec.param("prompt_pages", 1, "blocks one request's remote KV fills", min=1)
spec.param("tp_ratio", 2, "remote prefill ranks one decode worker reads from (one handle each)", min=1, max=3)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "blocks", prefix="K")
xfer = Handles(pool, "xfer", "tp_ratio", prefix="R")  # one NIXL handle per remote rank: R0, R1, ...
XferId = Annotated[Element, xfer.Handle]

Status = Enum("Status", "NEW WAITING_FOR_REMOTE_KVS RUNNING FINISHED")
HTTP = Enum("HTTP", "NONE OK_200 ERROR")
spec.var("status", Status, per=Req, init=Status.NEW, doc="RequestStatus in the decode scheduler")
spec.var("failed_recv", bool, per=Req, init=False,
         doc="the worker reported the request's load as failed (_failed_recv_reqs / invalid blocks)")
spec.var("http", HTTP, per=Req, init=HTTP.NONE, doc="what the client got")


@spec.action
def start_load_kv(s, r: ReqId):
    """schedule + start_load_kv: allocate the blocks, post one RDMA READ per remote rank (_read_blocks_for_req)."""
    require(s.status[r] == Status.NEW)
    pool.alloc(s, r, s.params.prompt_pages)
    for h in s.all(xfer.Handle):
        xfer.start(s, r, h)  # make_prepped_xfer + transfer: posted, cannot be called back
    s.status[r] = Status.WAITING_FOR_REMOTE_KVS


@spec.action
def xfer_done(s, r: ReqId, h: XferId):
    """_pop_done_transfers: check_xfer_state(handle) == DONE; the remote rank's slice has landed."""
    xfer.complete(s, r, h)


@spec.action
def xfer_failed(s, r: ReqId, h: XferId):
    """_pop_done_transfers: state ERR -> _handle_failed_transfer: invalidate the blocks, report the failure now."""
    xfer.fail(s, r, h)
    s.failed_recv[r] = True  # BUG: reported while the sibling handles may still be writing


@spec.action
def finished_recving(s, r: ReqId):
    """get_finished: every handle of the request is DONE (PR #19874): done_recving; the request is scheduled."""
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS and xfer.all_done(s, r))
    s.status[r] = Status.RUNNING


@spec.action
def fail_request(s, r: ReqId):
    """_update_from_kv_xfer_finished / _handle_invalid_blocks (policy fail): finish with an error, free the blocks."""
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS and s.failed_recv[r])
    xfer.free(s, r)  # _free_blocks: back to the block pool
    s.http[r] = HTTP.ERROR
    s.status[r] = Status.FINISHED


@spec.action
def decode(s, r: ReqId):
    """The request decodes over its blocks, replies 200, finishes and frees them."""
    require(s.status[r] == Status.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    s.http[r] = HTTP.OK_200
    s.emit("reply", req=r, status=200)
    pool.free(s, r)
    s.status[r] = Status.FINISHED


@spec.terminal
def nothing_in_flight(s) -> bool:
    """Every request is new or finished, and no transfer handle is outstanding."""
    return all(s.status[r] in (Status.NEW, Status.FINISHED) and xfer.settled(s, r) for r in s.all(Req))


xfer.invariant()
xfer.terminal_when_idle()
xfer.consistency()
own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership", "pages_returned_when_idle")
