"""vLLM P/D prefill with a reused request id: a stale finished_sending frees the new request's blocks.

Models the prefill (KV producer) side of vLLM's P/D disaggregation with the
NIXL connector, where the remote decode pulls a finished prefill's blocks,
when client-provided request ids are used as the engine's request ids (before
vLLM PR #27987, v0.14.0, or with ``VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1``
from PR #34415):

* ``Scheduler.add_request``: ``self.requests[request.request_id] = request``;
  the id is the key of the request, of its blocks and of every connector
  message about it;
* a prefill request is scheduled, runs one step and finishes
  (``max_tokens=1``); ``_free_request`` asks the connector: ``NixlConnectorScheduler.request_finished``
  returns ``delay_free_blocks`` and records the id in ``_reqs_need_send``:
  the blocks stay out of the pool until the decode has pulled them (a *send
  job* with its own reference to them);
* the frontend is done with the id as soon as the prefill replied, so the
  client (or a proxy's retry) may send a new request with the same id while
  the decode is still pulling the old one's KV (PR #27987's case 3: "With
  P/D, a request will continue to be tracked by the prefill engine long after
  the prefill request has" finished);
* the decode's notification ``{req_id}:{tp}`` -> ``_get_new_notifs`` ->
  ``finished_sending`` -> ``Scheduler._update_from_kv_xfer_finished``:
  ``self._free_blocks(self.requests[req_id])``, the request now registered
  under the id.

Known bug (PR #27987, "[Core] Add a random suffix to frontend-provided
request IDs"; the warning of PR #34415: "Duplicate externally-provided request
IDs may cause failures and/or subtle correctness errors"): a notification
names the id, not the lifecycle, and ``_free_blocks`` frees every block listed
under the id.  After a reuse, the first notification for the id
frees the blocks of both lifecycles: the second lifecycle's own notification
returns the blocks the decode is still pulling for the first (the checked
``no_free_while_job_holds`` fails there, 3 steps), and the first lifecycle's
late one is applied to the second (``--invariant no_stale_completion``, 3
steps).  ``--invariant no_foreign_read`` shows the silent corruption (5
steps): another request is given a freed block and writes it, and the decode
receives that request's KV as the first lifecycle's.

Simplified: a prefill request's arrival, step and finish are one action
(so a notification never meets a lifecycle that is still running, the case
in which ``_free_blocks``' ``assert request.is_finished()`` crashes the
engine instead); one block per request; the decode's pull of a lifecycle's blocks
is a job holding its own reference to them (the connector's
``_reqs_need_send`` entry), and it reads them when it completes; the blocks
of every lifecycle of an id are listed under the id, as the KV cache
manager's ``req_to_blocks[req_id]`` does; at most one reuse of an id while a
previous pull is outstanding (``generations=2``).
"""

from typing import Annotated

from ownership import Element, Ownership, Source, Spec, require, violates
from ownership.vocab.inflight import holds
from ownership.vocab.jobs import Jobs

spec = Spec(
    "vllm_request_id_reuse_stale_send_buggy",
    summary="vLLM P/D prefill: a reused request id's stale finished_sending frees the new request's blocks",
    models=Source(
        "vLLM",
        "before PR #27987 (v0.14.0), or VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1",
        where=(
            "v1/core/sched/scheduler.py Scheduler.add_request, _free_request, _update_from_kv_xfer_finished, "
            "_free_blocks",
            "distributed/kv_transfer/kv_connector/v1/nixl_connector.py NixlConnectorScheduler.request_finished "
            "(delay_free_blocks, _reqs_need_send), NixlConnectorWorker._get_new_notifs (finished_sending)",
        ),
        links=("vllm PR #27987", "vllm PR #34415", "vllm PR #43265"),
    ),
    expect=violates("no_free_while_job_holds"),
)

spec.param("requests", 2, "request ids modelled (each may be reused)", min=1, max=3)
spec.param("blocks", 2, "prefill KV blocks in the pool", min=1)
spec.param("prompt_pages", 1, "blocks one prefill fills", min=1)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "blocks", prefix="K")
send = Jobs(pool, "send", generations=2)  # the decode's pull of a finished prefill's blocks
AgeId = Annotated[int, send.Age]  # the lifecycle a notification belongs to, as an age

@spec.helper
def own_blocks(s, r):
    """The blocks of the id's current lifecycle: those listed under the id that no earlier pull still holds."""
    return [p for p in s.all(pool.Page) if holds(s, pool, r, p) and not send.references(s, r, p)]


@spec.action
def prefill(s, r: ReqId):
    """A request arrives under id r (new or reused), runs its one prefill step and finishes: delay_free_blocks."""
    send.new_lifecycle(s, r)  # a pull still running for the id now belongs to the previous lifecycle
    pool.alloc(s, r, s.params.prompt_pages)  # allocate_slots: the blocks are listed under the id
    mine = own_blocks(s, r)
    pool.write(s, r, mine)
    send.start(s, r, mine)  # _reqs_need_send[req_id]: the pull holds the blocks until the decode's notification


@spec.action
def finished_sending(s, r: ReqId, age: AgeId):
    """The decode pulled the blocks of one lifecycle and notifies; _update_from_kv_xfer_finished frees by id."""
    require(send.running(s, r, age))
    pool.read(s, r, [p for p in s.all(pool.Page) if send.refs_of(s, r, p, age)])  # what the decode receives
    send.complete(s, r, age, touches_current=True)  # BUG: the notification names the id, not the lifecycle
    send.free(s, r)  # _free_blocks(self.requests[req_id]): every block listed under the id goes back


@spec.terminal
def nothing_in_flight(s) -> bool:
    """No pull is outstanding."""
    return send.idle(s)


send.invariant()  # first: the free the bug makes is what the fix prevents
send.no_stale_completion()
send.consistency()
own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership", "pages_returned_when_idle")
