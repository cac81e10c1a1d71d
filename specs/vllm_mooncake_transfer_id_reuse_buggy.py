"""vLLM MooncakeConnector P/D prefill: a reused transfer_id overwrites the send entry, and the first request's blocks stay allocated until restart.

Models the prefill (P, KV producer) side of vLLM's ``MooncakeConnector``, in
which the decode node (D) pulls a finished prefill's blocks by a
``transfer_id`` the client (or its proxy) provides in ``kv_transfer_params``,
before vLLM PR #49796
(vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py,
vllm/v1/core/sched/scheduler.py):

* a request with ``do_remote_decode`` gets its blocks, runs its prefill and
  finishes; ``request_finished`` returns ``delay_free_blocks``: the blocks
  stay allocated under the request (its own, randomized, internal id) until
  the connector reports it in ``finished_sending``;
* ``MooncakeConnectorWorker.record_send_reqs``: ``send_meta =
  self.reqs_need_send[transfer_id]``; ``send_meta.p_req_id = p_req_id``;
  ``send_meta.local_block_ids = block_ids``; ``send_meta.expire_time = now +
  VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT``: one entry per transfer id, last
  writer wins;
* ``send_kv_to_decode``: D's pull names the transfer id; P sends
  ``send_meta.local_block_ids`` and reports ``send_meta.p_req_id`` in
  ``finished_sending``; the entry is deleted;
* ``fetch_finished_sending_reqs``: the expiry sweep reports the
  ``p_req_id`` of every expired entry in ``finished_sending`` ("Request %s
  timed out after %d seconds without being sent. Freeing its blocks on the
  producer side") and deletes the entry;
* ``Scheduler._update_from_kv_xfer_finished``: ``finished_sending`` frees the
  named request's blocks (``_free_blocks``).

Known bug (vLLM PR #49796, "reject duplicate transfer_id to prevent
KV-cache leak", a vulnerability accepted by the vLLM security team): "A
client-controlled transfer_id reused across multiple do_remote_decode
requests caused metadata overwrites in the producer's reqs_need_send
dictionary. Overwritten requests lost their tracked owner, leaving GPU
KV-cache blocks permanently allocated until process restart."  Every
request id stays distinct (PR #27987's random suffix): the collision is in
the transfer id alone.  No state is wrong, and both the pull and the expiry
sweep run; the checked property ``pages_return`` (a request finished on P
eventually holds no block) fails on a lasso (4 steps): A and B finish under
the same transfer id, B's entry replaces A's, the expiry sweep frees B (a
pull would too), B's slot takes the id again, and so on for ever: nothing
will ever name A again.

Fairness: the engine's own steps are weakly fair: the expiry sweep
(``p_expire_sends``: the timer always passes and ``get_finished`` runs every
step).  The environment is not: a request arriving with the transfer id its
client chose (``p_prefill``) and D's pull (``d_pull``: the decode may crash
or reject the request and never pull).

Simplified: one block per request (``prompt_pages``); a request's arrival,
prefill and ``request_finished`` are one step, and so are a pull's transfer,
``finished_sending`` and the free; ``transfer_ids`` transfer ids (one by
default: every request carries it, as a client reusing an id does); a slot
whose request is gone takes a new request; the placeholder entry a pull
creates for a transfer id P has not seen yet is left out (PR #51236).
"""

from typing import Annotated

from ownership import Element, Enum, Optional, Ownership, Source, Spec, require, violates
from ownership.vocab.clock import Deadline

spec = Spec(
    "vllm_mooncake_transfer_id_reuse_buggy",
    summary="vLLM Mooncake P/D prefill: a reused transfer_id overwrites reqs_need_send; the first request's blocks are never freed",
    models=Source(
        "vLLM",
        "MooncakeConnector before PR #49796",
        where=(
            "distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py MooncakeConnectorWorker."
            "record_send_reqs (reqs_need_send[transfer_id]), send_kv_to_decode, fetch_finished_sending_reqs (expiry)",
            "v1/core/sched/scheduler.py Scheduler._free_request (delay_free_blocks), _update_from_kv_xfer_finished",
        ),
        links=("vllm PR #49796", "vllm PR #51236", "vllm PR #27987"),
    ),
    expect=violates("pages_return"),
)

spec.param("requests", 2, "concurrent prefill requests modelled (distinct internal ids)", min=1, max=3)
spec.param("blocks", 2, "prefill KV blocks in the pool", min=1)
spec.param("prompt_pages", 1, "blocks one prefill fills", min=1)
spec.param("transfer_ids", 1, "transfer ids clients may send (1: every request reuses the same one)", min=1, max=2)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]
Xfer = spec.domain("Xfer", "transfer_ids", symmetric=True, names=lambda i: f"X{i}")
XferId = Annotated[Element, Xfer]
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "blocks", prefix="K")
abort_timeout = Deadline(spec, "abort_timeout", per=Xfer,
                         doc="reqs_need_send[transfer_id].expire_time: VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT")

Status = Enum("Status", "NEW DELAY_FREE FREED REJECTED")
spec.var("status", Status, per=Req, init=Status.NEW,
         doc="the request on P: not arrived, finished with its blocks held for D's pull, blocks freed, rejected")
spec.var("xfer_of", Optional(Xfer), per=Req, init=None, doc="the transfer_id in the request's kv_transfer_params")
spec.var("send_owner", Optional(Req), per=Xfer, init=None,
         doc="reqs_need_send[transfer_id].p_req_id: the request a pull or expiry of the id frees (none: no entry)")


@spec.helper
def ended(s, r):
    """The request finished on P (its blocks held for D, or freed) or was rejected."""
    return s.status[r] != Status.NEW


@spec.helper
def finished_sending(s, x, owner):
    """_update_from_kv_xfer_finished for the entry's request: its blocks are freed; the entry is gone."""
    pool.free(s, owner)  # _free_blocks(self.requests[p_req_id])
    s.status[owner] = Status.FREED
    s.send_owner[x] = None


@spec.action
def p_prefill(s, r: ReqId, x: XferId):
    """A request with do_remote_decode and transfer_id x runs its prefill; request_finished: delay_free_blocks."""
    require(s.status[r] == Status.NEW or s.status[r] == Status.FREED or s.status[r] == Status.REJECTED)
    blocks = pool.alloc(s, r, s.params.prompt_pages)
    pool.write(s, r, blocks)
    s.xfer_of[r] = x
    s.send_owner[x] = r  # BUG: record_send_reqs overwrites the entry another request may still own
    abort_timeout.arm(s, x)  # send_meta.expire_time = now + VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT
    s.status[r] = Status.DELAY_FREE


@spec.action
def d_pull(s, x: XferId, owner: ReqId):
    """send_kv_to_decode: D pulls transfer x; P sends the blocks of the entry's p_req_id and reports it finished_sending."""
    require(s.send_owner[x] == owner)
    pool.read(s, owner, pool.pages_of(s, owner))  # what D receives for the transfer id
    abort_timeout.disarm(s, x)
    finished_sending(s, x, owner)


@spec.action(fair="weak")
def p_expire_sends(s, x: XferId, owner: ReqId):
    """fetch_finished_sending_reqs: the entry of transfer x expired: its p_req_id is reported finished_sending."""
    abort_timeout.fire(s, x)
    require(s.send_owner[x] == owner)
    finished_sending(s, x, owner)


own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership")
own.properties("pages_return", ended=ended)
