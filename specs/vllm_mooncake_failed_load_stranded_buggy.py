"""vLLM MooncakeConnector P/D: a failed remote KV load is only logged, and the decode request is stranded holding its blocks.

Models the decode (D, KV consumer) side of vLLM's ``MooncakeConnector``, in
which D pulls a request's KV from the prefill node (P), before vLLM PR #50984
(vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py,
vllm/v1/core/sched/scheduler.py):

* ``Scheduler.schedule`` / ``update_state_after_alloc``: a request with a
  remote prefill gets its blocks and waits in ``WAITING_FOR_REMOTE_KVS``;
* ``MooncakeConnectorWorker.start_load_kv`` -> ``receive_kv``: the pull of
  P's KV into those blocks is posted (D sends ``MooncakeXferMetadata``, P
  writes, answers ``MooncakeXferResponse``);
* ``process_pulling_result``: the ``ok_reqs`` go to ``finished_recving``;
  the ``err_reqs`` ("pulling kv_caches for [...] failed: Timeout waiting for P
  side ready"), an ``ERROR`` response and a bootstrap failure
  (``handle_new_engine_id``) are **only logged**;
* ``Scheduler._update_waiting_for_remote_kv``: "a request leaves
  ``WAITING_FOR_REMOTE_KVS`` only via ``finished_recving``" (``if
  request.request_id not in self.finished_recving_kv_req_ids: return
  False``); ``MooncakeConnector`` never implemented
  ``get_block_ids_with_load_errors()``, so ``kv_load_failure_policy`` was a
  no-op;
* ``Scheduler.finish_requests``: a client abort of a request in
  ``WAITING_FOR_REMOTE_KVS`` delays the free until ``finished_recving``
  (``delay_free_blocks``, PR #32255).

Known bug (vLLM issue #50719, "Decode requests stuck in
WAITING_FOR_REMOTE_KVS and fail with Timeout waiting for P side ready"; PR
#50984: "On the decode side a failed remote KV load was only logged. Since
a request leaves WAITING_FOR_REMOTE_KVS only via finished_recving, it was
then stranded forever while still holding its KV blocks, which stalls the D
node under traffic").  Nothing is wrong in any one state; the checked
property ``requests_finish`` (an admitted request eventually finishes or is
aborted) fails on a lasso (8 steps): D admits two requests, one's pull
fails, and from then on the engine serves the other slot again and again
while the failed request never moves.  ``--invariant pages_return`` shows
the blocks are lost even when the client gives up (9 steps): the abort waits
for the ``finished_recving`` that will never come.

Fairness: the engine's own steps are weakly fair: the pull returning with
the KV (``pull_ok``: Mooncake's transfer either completes or fails, a lost
answer ends with ``zmq.RCVTIMEO``), D's handling of ``finished_recving``
(``d_finished_recving``) and D's decode (``d_decode``).  The environment is
not: a request arriving (``d_add_request``), P not getting ready in time or
the transfer failing (``pull_failed``) and a client abort (``d_abort``).

Simplified: one D block per request (``prompt_pages``), pulled by one
transfer; a pull's result, the worker reporting it and (in the fix) the
scheduler's reaction are as few steps as the code's order allows; a slot
whose request is gone takes a new request.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.handles import Handles

spec = Spec(
    "vllm_mooncake_failed_load_stranded_buggy",
    summary="vLLM Mooncake P/D: a failed remote KV load is only logged; the decode request waits for ever holding its blocks",
    models=Source(
        "vLLM",
        "v0.26.1rc1 (before PR #50984)",
        where=(
            "distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py MooncakeConnectorWorker."
            "receive_kv, process_pulling_result (err_reqs logged), handle_new_engine_id",
            "v1/core/sched/scheduler.py Scheduler._update_waiting_for_remote_kv, finish_requests "
            "(delay_free_blocks), _update_from_kv_xfer_finished",
        ),
        links=("vllm issue #50719", "vllm PR #50984", "vllm PR #36014", "vllm PR #32255"),
    ),
    expect=violates("requests_finish"),
)

spec.param("requests", 2, "concurrent decode requests modelled", min=1, max=3)
spec.param("blocks", 2, "decode KV blocks in the pool", min=1)
spec.param("prompt_pages", 1, "blocks one request's remote KV fills", min=1)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "blocks", prefix="K")
pull = Handles(pool, "pull", 1, prefix="T", doc="the Mooncake transfer of P's KV into the request's D blocks")

Status = Enum("Status", "NEW WAITING_FOR_REMOTE_KVS RUNNING FINISHED FINISHED_ABORTED FINISHED_ERROR")
spec.var("status", Status, per=Req, init=Status.NEW, doc="RequestStatus in the decode scheduler")
spec.var("recvd", bool, per=Req, init=False, doc="finished_recving for the request reached the D scheduler, not yet handled")


@spec.helper
def ended(s, r):
    """The request finished on D: decoded, aborted by its client, or failed."""
    st = s.status[r]
    return st == Status.FINISHED or st == Status.FINISHED_ABORTED or st == Status.FINISHED_ERROR


@spec.helper
def started(s, r):
    """D admitted the request."""
    return s.status[r] != Status.NEW


@spec.action
def d_add_request(s, r: ReqId):
    """A request with do_remote_prefill arrives: blocks allocated, WAITING_FOR_REMOTE_KVS, the pull posted (receive_kv)."""
    require(s.status[r] == Status.NEW or (ended(s, r) and pool.held(s, r) == 0 and not s.recvd[r]))
    pull.reset(s, r)
    pool.alloc(s, r, s.params.prompt_pages)
    for h in s.all(pull.Handle):
        pull.start(s, r, h)
    s.status[r] = Status.WAITING_FOR_REMOTE_KVS


@spec.action(fair="weak")
def pull_ok(s, r: ReqId):
    """process_pulling_result: the request is in ok_reqs; its KV is in the blocks; finished_recving."""
    for h in s.all(pull.Handle):
        pull.complete(s, r, h)
    s.recvd[r] = True


@spec.action
def pull_failed(s, r: ReqId):
    """The pull fails (Timeout waiting for P side ready, an ERROR response, no bootstrap): only logged."""
    for h in s.all(pull.Handle):
        pull.fail(s, r, h)
    # BUG: logger.error(...) and nothing else: no finished_recving, no invalid block ids


@spec.action
def d_abort(s, r: ReqId):
    """finish_requests: a client abort while WAITING_FOR_REMOTE_KVS keeps the blocks until finished_recving."""
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS)
    s.status[r] = Status.FINISHED_ABORTED


@spec.action(fair="weak")
def d_finished_recving(s, r: ReqId):
    """_update_from_kv_xfer_finished: schedule a request whose KV arrived, or free an aborted one's blocks."""
    require(s.recvd[r])
    s.recvd[r] = False
    if s.status[r] == Status.FINISHED_ABORTED:
        pull.free(s, r)  # _free_blocks
        return
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS)
    s.status[r] = Status.RUNNING


@spec.action(fair="weak")
def d_decode(s, r: ReqId):
    """The request decodes over the pulled KV, replies 200, finishes and frees its blocks."""
    require(s.status[r] == Status.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    s.emit("reply", req=r, status=200)
    pool.free(s, r)
    s.status[r] = Status.FINISHED


pull.invariant()
pull.consistency()
own.invariants("no_foreign_read", "no_read_of_unwritten", "no_unowned_write", "no_double_ownership")
own.properties("requests_finish", "pages_return", ended=ended, started=started)
