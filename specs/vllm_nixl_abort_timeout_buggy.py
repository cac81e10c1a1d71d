"""vLLM NixlConnector: prefill frees KV blocks on a fixed timeout while decode may still read them.

Models the prefill (P) side of vLLM's NIXL P/D disaggregation and the decode
(D) side's NIXL READ of P's blocks, after PR #20139 and before PR #41383
(vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py):

* ``NixlConnectorScheduler.request_finished`` (P): a finished prefill keeps
  its blocks (``delay_free_blocks``), records
  ``_reqs_need_send[req] = now + VLLM_NIXL_ABORT_REQUEST_TIMEOUT`` and hands
  ``remote_block_ids`` to the router in ``kv_transfer_params``: from then on
  D may read exactly those blocks;
* ``NixlConnectorWorker.start_load_kv`` / ``_read_blocks_for_req`` (D): once
  D schedules the request, a NIXL ``READ`` of ``remote_block_ids`` is posted;
  ``_pop_done_transfers`` sees it ``DONE`` and D sends ``send_notif`` to P;
* ``NixlConnectorWorker._get_new_notifs`` (P): the notification reports the
  request done sending and the scheduler frees its blocks;
* ``NixlConnectorWorker.get_finished`` (P): the sweep of ``_reqs_to_send``
  "Releasing expired KV blocks": once the timeout passes the request is
  reported done sending and its blocks are freed, **whether or not D has read
  them**; a later notification only logs "Potentially invalid KV blocks for
  unrecognized request ... They may have expired" and D uses what it read.

Known bug (vLLM issue #21570, "the P node implements a request timeout but
the D node cannot detect"): under load D's waiting queue holds requests past
the timeout; P frees their blocks, hands them to the next prefill, and D's
READ returns the next request's KV ("abnormal precision").  The checked
invariant ``no_free_with_read_in_flight`` fails at the release (2 steps);
``--invariant no_foreign_read`` shows the leak (5 steps: the next prefill
writes the block, D's READ of the first request lands on it).

The read is pending from the moment ``remote_block_ids`` leave P: D may read
them at any later time (in its waiting queue, then in flight), and the
blocks it reads are the ones named then.  Simplified: one TP rank each side;
the router forwards the request to D at once; D's own KV blocks (the READ's
destination) and its abort paths are left out; a D failure (crash, request
lost on the way) drops the request's READ; the timeout may pass at any
moment (``Deadline`` with no ``after=``), which is all a fixed timer can
promise against a queue of unbounded length.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.clock import Deadline
from ownership.vocab.reads import InflightReads

spec = Spec(
    "vllm_nixl_abort_timeout_buggy",
    summary="vLLM NIXL P/D: prefill frees blocks when VLLM_NIXL_ABORT_REQUEST_TIMEOUT passes, though decode may still read them",
    models=Source(
        "vLLM",
        "after PR #20139, before PR #41383",
        where=(
            "kv_connector/v1/nixl_connector.py NixlConnectorScheduler.request_finished (delay_free_blocks, _reqs_need_send)",
            "kv_connector/v1/nixl_connector.py NixlConnectorWorker.start_load_kv, _read_blocks_for_req, _pop_done_transfers",
            "kv_connector/v1/nixl_connector.py NixlConnectorWorker.get_finished (expired _reqs_to_send), _get_new_notifs",
        ),
        links=("vllm issue #21570", "vllm PR #20139", "vllm PR #41383"),
    ),
    expect=violates("no_free_with_read_in_flight"),
)

spec.param("requests", 2, "concurrent requests modelled", min=1, max=4)
spec.param("prefill_blocks", 1, "prefill KV pool size in blocks", min=1)
spec.param("blocks_per_req", 1, "blocks one prompt fills on P", min=1)

Req = spec.domain("Req", "requests", symmetric=True, names="ABCD")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
own = Ownership(spec, requests=Req)
prefill = own.pool("prefill", "prefill_blocks", prefix="P")
nixl = InflightReads(prefill, "nixl", doc="D may read (or is reading) the block through NIXL for the request")
abort_timeout = Deadline(spec, "abort_timeout", per=Req,
                         doc="_reqs_to_send[req]: VLLM_NIXL_ABORT_REQUEST_TIMEOUT after request_finished")

PState = Enum("PState", "IDLE HELD FREED")
DState = Enum("DState", "NONE WAITING RECVING RUNNING DONE FAILED")

spec.var("p_state", PState, per=Req, init=PState.IDLE, doc="the request on P: not prefilled, blocks held for D, freed")
spec.var("d_state", DState, per=Req, init=DState.NONE, doc="the request on D")
spec.var("notified", bool, per=Req, init=False, doc="D's send_notif for the request reached P")


# -- prefill node ------------------------------------------------------------------------
@spec.action
def p_prefill(s, r: ReqId):
    """Prefill runs; request_finished keeps the blocks (delay_free_blocks), starts the timer, hands out remote_block_ids."""
    require(s.p_state[r] == PState.IDLE)
    blocks = prefill.alloc(s, r, s.params.blocks_per_req)  # not enabled while P is short of blocks
    prefill.write(s, r, blocks)
    abort_timeout.arm(s, r)  # _reqs_need_send[req] = now + VLLM_NIXL_ABORT_REQUEST_TIMEOUT
    nixl.post(s, r)  # kv_transfer_params(remote_block_ids=...): D will read these blocks
    s.p_state[r] = PState.HELD
    s.d_state[r] = DState.WAITING  # the router forwards the request to D


@spec.action
def p_get_new_notifs(s, r: ReqId):
    """_get_new_notifs: D's notification arrives; the request is done sending and its blocks are freed."""
    require(s.p_state[r] == PState.HELD and s.notified[r])
    abort_timeout.disarm(s, r)  # _reqs_to_send.pop(req_id)
    nixl.free(s, r)
    s.p_state[r] = PState.FREED


@spec.action
def p_release_expired(s, r: ReqId):
    """get_finished: the request's timeout passed: "Releasing expired KV blocks", freed whatever D is doing."""
    abort_timeout.fire(s, r)
    require(s.p_state[r] == PState.HELD)
    nixl.free(s, r)  # done_sending.add(req_id): the READ may still be queued or in flight
    s.p_state[r] = PState.FREED


# -- decode node ---------------------------------------------------------------------------
@spec.action
def d_start_load_kv(s, r: ReqId):
    """D schedules the request: start_load_kv posts the NIXL READ of remote_block_ids."""
    require(s.d_state[r] == DState.WAITING)
    s.d_state[r] = DState.RECVING


@spec.action
def d_recv_done(s, r: ReqId):
    """_pop_done_transfers: the READ is DONE (it returns what the blocks hold now); D notifies P."""
    require(s.d_state[r] == DState.RECVING)
    nixl.land(s, r)
    s.notified[r] = True  # send_notif(f"{remote_request_id}:{tp_size}")
    s.d_state[r] = DState.RUNNING


@spec.action
def d_forward(s, r: ReqId):
    """D decodes over the KV it received and replies (HTTP 200, even if P had logged the blocks as expired)."""
    require(s.d_state[r] == DState.RUNNING)
    s.emit("reply", req=r, status=200)
    s.d_state[r] = DState.DONE


@spec.action
def d_fail(s, r: ReqId):
    """D crashes or the request is lost before its READ completes: the READ never returns anything."""
    require(s.d_state[r] in (DState.WAITING, DState.RECVING))
    nixl.discard(s, r)
    s.d_state[r] = DState.FAILED


@spec.terminal
def nothing_in_flight(s) -> bool:
    """Every request is either not prefilled or freed on P, and not pending on D."""
    return all(
        s.p_state[r] in (PState.IDLE, PState.FREED) and s.d_state[r] in (DState.NONE, DState.DONE, DState.FAILED)
        for r in s.all(Req)
    )


nixl.invariant()
own.invariants("no_foreign_read", "no_read_of_unwritten", "no_double_ownership", "pages_returned_when_idle")
