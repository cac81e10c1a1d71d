"""vLLM NIXL push mode: a decode request aborted while waiting for its KV keeps its blocks for ever if prefill never pushes.

Models the decode (D, KV consumer) side of vLLM's ``NixlPushConnector``, in
which the prefill node (P) writes the KV into D's blocks (a NIXL WRITE) and
then notifies D, before vLLM PR #46289
(vllm/v1/core/sched/scheduler.py,
vllm/distributed/kv_transfer/kv_connector/v1/nixl/push_scheduler.py):

* ``Scheduler.schedule`` / ``NixlPushConnectorScheduler.update_state_after_alloc``
  (D): a request with a remote prefill gets its blocks, waits in
  ``WAITING_FOR_REMOTE_KVS`` and is registered with P
  (``_push_pending_registrations``): from then on P may write into those
  blocks;
* P's writer thread pushes the KV into the registered blocks within its lease
  and notifies D; D's worker reports the request in ``finished_recving``;
* ``Scheduler._update_from_kv_xfer_finished`` (D): a request in
  ``finished_recving`` that still waits for its KV is scheduled; one that was
  aborted meanwhile has its blocks freed (``_free_blocks``);
* ``Scheduler.finish_requests`` (D): a client abort of a request in
  ``WAITING_FOR_REMOTE_KVS`` sets ``delay_free_blocks`` (PR #32255: the
  blocks stay out of the pool, since a posted WRITE may still land in them);
  ``NixlPushConnectorScheduler.request_finished`` sees ``is_p_node=False``
  and returns ``(False, None)``: nothing else will ever release them;
* the D-side watchdog ``_push_registration_deadlines`` only drops the
  expired registration and logs ("the engine layer will eventually time it
  out via the lease"): it frees nothing.

Known bug (vLLM issue #46283, "decode-side KV blocks of an aborted
remote-KV load are never reclaimed when the prefill node never reports
completion"): the release "depends solely on ``update_connector_output``
seeing ``finished_recving`` for that req_id. In push mode that notif only
comes when P completes the push; if P also aborted (or never pushes), it
never arrives", and the blocks leak for the lifetime of the engine (easy to
hit when a client disconnects mid-transfer).  No state is wrong, so no
invariant fails; the checked property ``pages_return`` (an aborted or
finished request eventually holds no block) fails on a lasso (9 steps): D
admits two requests, P gives up the push of one, its client aborts it, and
from then on the engine serves the other slot again and again (push,
``finished_recving``, decode, a new request) while the aborted request's
block never comes back.

Fairness: the engine's own steps are weakly fair: P's push of a request it
still serves (``p_push``), D's handling of ``finished_recving``
(``d_finished_recving``) and D's decode (``d_decode``).  The environment is
not: a request arriving (``d_add_request``), a client abort (``d_abort``)
and P giving the push up (``p_gone``: P aborted the request too, crashed, or
its lease ran out) may happen or not, at any time.

Simplified: one D block per request (``prompt_pages``); P's push, its
notification and D's worker reporting ``finished_recving`` are one step;
P's side is only what D can observe of it (a push that lands, or none ever);
a request whose P never pushes and that nobody aborts waits for ever (that
request does not finish: not claimed here, so ``requests_finish`` is not
registered); aborts of running requests, which free at once, are left out.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.handles import Handles

spec = Spec(
    "vllm_push_abort_recv_leak_buggy",
    summary="vLLM NIXL push P/D: a decode request aborted while waiting for its KV keeps its blocks for ever if prefill never pushes",
    models=Source(
        "vLLM",
        "NixlPushConnector before PR #46289",
        where=(
            "v1/core/sched/scheduler.py Scheduler.finish_requests (delay_free_blocks), "
            "_update_from_kv_xfer_finished, _free_blocks",
            "distributed/kv_transfer/kv_connector/v1/nixl/push_scheduler.py NixlPushConnectorScheduler."
            "update_state_after_alloc, request_finished (is_p_node=False), build_connector_meta (watchdog)",
        ),
        links=("vllm issue #46283", "vllm PR #46289", "vllm PR #32255"),
    ),
    expect=violates("pages_return"),
)

spec.param("requests", 2, "concurrent decode requests modelled", min=1, max=3)
spec.param("blocks", 2, "decode KV blocks in the pool", min=1)
spec.param("prompt_pages", 1, "blocks one request's pushed KV fills", min=1)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "blocks", prefix="K")
push = Handles(pool, "push", 1, prefix="W", doc="P's NIXL WRITE into the request's registered D blocks")

Status = Enum("Status", "NEW WAITING_FOR_REMOTE_KVS RUNNING FINISHED FINISHED_ABORTED")
spec.var("status", Status, per=Req, init=Status.NEW, doc="RequestStatus in the decode scheduler")
spec.var("recvd", bool, per=Req, init=False, doc="finished_recving for the request reached the D scheduler, not yet handled")


@spec.helper
def ended(s, r):
    """The request finished or was aborted on D."""
    return s.status[r] == Status.FINISHED or s.status[r] == Status.FINISHED_ABORTED


@spec.action
def d_add_request(s, r: ReqId):
    """A request with do_remote_prefill arrives (a new one in a slot whose last request is gone): blocks, WAITING_FOR_REMOTE_KVS, registered with P."""
    require(s.status[r] == Status.NEW or (ended(s, r) and pool.held(s, r) == 0 and not s.recvd[r]))
    push.reset(s, r)
    pool.alloc(s, r, s.params.prompt_pages)
    for h in s.all(push.Handle):
        push.start(s, r, h)  # _push_pending_registrations -> P: P may write into these blocks from now on
    s.status[r] = Status.WAITING_FOR_REMOTE_KVS


@spec.action(fair="weak")
def p_push(s, r: ReqId):
    """P's writer pushes the KV into the registered blocks and notifies D: finished_recving."""
    for h in s.all(push.Handle):
        push.complete(s, r, h)
    s.recvd[r] = True


@spec.action
def p_gone(s, r: ReqId):
    """P gives the push up (it aborted the request too, crashed, or its lease ran out): it never writes or notifies."""
    for h in s.all(push.Handle):
        push.fail(s, r, h)


@spec.action
def d_abort(s, r: ReqId):
    """finish_requests: a client abort while WAITING_FOR_REMOTE_KVS keeps the blocks (delay_free_blocks, PR #32255)."""
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS)
    s.status[r] = Status.FINISHED_ABORTED  # BUG: only finished_recving will ever free the blocks


@spec.action(fair="weak")
def d_finished_recving(s, r: ReqId):
    """_update_from_kv_xfer_finished: the request's KV is in; schedule it, or free the blocks of an aborted one."""
    require(s.recvd[r])
    s.recvd[r] = False
    if s.status[r] == Status.FINISHED_ABORTED:
        push.free(s, r)  # _free_blocks
        return
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS)
    s.status[r] = Status.RUNNING


@spec.action(fair="weak")
def d_decode(s, r: ReqId):
    """The request decodes over the pushed KV, replies 200, finishes and frees its blocks."""
    require(s.status[r] == Status.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    s.emit("reply", req=r, status=200)
    pool.free(s, r)
    s.status[r] = Status.FINISHED


push.invariant()
push.consistency()
own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership")
own.properties("pages_return", ended=ended)
