"""vLLM NIXL push mode: the decode scheduler reclaims an aborted remote-KV load's blocks once the prefill lease is over (PR #46289).

Written as the patch on top of ``vllm_push_abort_recv_leak_buggy``; compare
with the proposed change (vllm PR #46289, open at the time of writing;
vllm/v1/core/sched/scheduler.py):

* ``Scheduler.finish_requests``: a request aborted while
  ``WAITING_FOR_REMOTE_KVS`` is still freed late (``delay_free_blocks``), but
  is now tracked with a reclaim deadline (``_aborted_kv_recv_reclaim``);
* ``Scheduler.update_from_output`` sweeps the expired entries every step and
  frees their blocks through ``_free_blocks``;
* the grace period is "kept comfortably above the connector's
  ``kv_lease_duration``" (``MultiConnector`` children included), "so a slow
  remote prefill still gets its full lease window before we reclaim —
  preserving the cross-request KV-corruption protection from #32255";
* a ``finished_recving`` that arrives after the reclaim is ignored instead of
  tripping an ``assert`` (not reachable here: P is gone by then).

The reclaim deadline may expire only once P can no longer write into the
blocks (``p_gone``: its lease ran out, or it dropped the request), which is
what a grace period longer than P's lease buys; a push that lands first frees
the blocks through ``finished_recving`` and cancels the reclaim.  With
``--param grace_outlasts_lease=0`` the reclaim may expire at any time and the
check finds the free under a posted WRITE that PR #32255 closed
(``no_release_with_operation_pending``, 3 steps).

The fix frees *later* than the abort, so the idle-state approximation
``pages_returned_when_idle`` would flag the state between the abort and the
sweep; ``pages_return`` says what is meant and holds on every fair path.
The sweep is weakly fair: it runs in ``update_from_output`` on every engine
step, and the engine keeps stepping while a finished request still holds
blocks (``has_finished_requests``, PR #43433: without that the engine goes
idle and never sweeps, vLLM PR #41180's leak).  The environment's steps stay
unfair, as in the base spec.

Expected: the invariants hold and ``pages_return`` holds on every fair path.
"""

import vllm_push_abort_recv_leak_buggy as base
from vllm_push_abort_recv_leak_buggy import Req, ReqId, Status, pool, push

from ownership import Source, require, safe
from ownership.vocab.clock import Deadline

spec = base.spec.derive(
    "vllm_push_abort_recv_leak_fixed",
    summary="vLLM NIXL push P/D: an aborted remote-KV load's blocks are reclaimed by a sweep once the prefill lease is over",
    models=Source(
        "vLLM",
        "PR #46289",
        where=(
            "v1/core/sched/scheduler.py Scheduler.finish_requests (_aborted_kv_recv_reclaim), "
            "update_from_output (sweep of expired entries), _update_from_kv_xfer_finished (late signal ignored)",
        ),
        links=("vllm PR #46289", "vllm issue #46283", "vllm PR #32255", "vllm PR #43433"),
    ),
    expect=safe(),
)
spec.param("grace_outlasts_lease", 1,
           "1: the reclaim grace period outlasts P's kv_lease_duration; 0: the reclaim may expire at any time",
           min=0, max=1)
reclaim = Deadline(spec, "reclaim", per=Req, after="P can no longer push into the blocks",
                   assumed="grace_outlasts_lease",
                   doc="_aborted_kv_recv_reclaim[req]: the reclaim deadline of a request aborted while its KV was awaited")


@spec.replace
def p_gone(s, r: ReqId):
    """P gives the push up (it aborted the request too, crashed, or its lease ran out): it never writes or notifies."""
    for h in s.all(push.Handle):
        push.fail(s, r, h)
    reclaim.allow(s, r)  # FIX: the grace period now outlasts anything P could still write


@spec.replace
def d_abort(s, r: ReqId):
    """finish_requests: abort while WAITING_FOR_REMOTE_KVS keeps the blocks and arms the reclaim deadline."""
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS)
    reclaim.arm(s, r)  # FIX: _aborted_kv_recv_reclaim[req_id] = now + grace
    if push.failed(s, r):  # P already gave up: nothing can write into the blocks any more
        reclaim.allow(s, r)
    s.status[r] = Status.FINISHED_ABORTED


@spec.replace
def d_finished_recving(s, r: ReqId):
    """_update_from_kv_xfer_finished: the request's KV is in; schedule it, or free an aborted one's blocks now."""
    require(s.recvd[r])
    s.recvd[r] = False
    if s.status[r] == Status.FINISHED_ABORTED:
        reclaim.disarm(s, r)  # FIX: the push landed first; nothing left to reclaim
        push.free(s, r)
        return
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS)
    s.status[r] = Status.RUNNING


@spec.action(fair="weak")
def d_reclaim_expired(s, r: ReqId):
    """FIX: update_from_output sweeps an expired reclaim entry and frees the aborted request's blocks (_free_blocks)."""
    reclaim.fire(s, r)
    require(s.status[r] == Status.FINISHED_ABORTED and pool.held(s, r) > 0)
    push.free(s, r)


@spec.invariant
def reclaim_runs_while_aborted_blocks_are_held(s) -> bool:
    """FIX: a reclaim deadline runs exactly while an aborted request still holds blocks."""
    return all(
        (s.status[r] == Status.FINISHED_ABORTED and pool.held(s, r) > 0) == reclaim.running(s, r)
        for r in s.all(Req)
    )
