"""vLLM NixlConnector: KV lease renewal by heartbeats from decode (PR #41383).

Written as the patch on top of ``vllm_nixl_abort_timeout_buggy``; compare
with the upstream change (vllm/distributed/kv_transfer/kv_connector/v1/nixl/,
design notes in docs/design/nixl_kv_cache_lease.md):

* ``NixlConnectorScheduler.request_finished`` (P): the blocks are pinned with
  a short initial lease (``kv_lease_duration``, default 30 s) instead of
  ``VLLM_NIXL_ABORT_REQUEST_TIMEOUT``;
* ``NixlConnectorScheduler.on_new_request`` (D): a request with
  ``do_remote_prefill`` is tracked from the moment it enters D's scheduler
  (waiting queue included) and heartbeats ``"HB:"`` go to its P every
  ``kv_lease_duration // 6``; tracking stops when the transfer completes
  (``update_connector_output``) or the request finishes on D;
* ``_handle_heartbeat`` (P): each heartbeat extends the lease to
  ``max(old, now + kv_lease_duration * 2 // 3)``; ``get_finished`` frees
  only requests whose lease expired.

The lease is a :class:`~ownership.vocab.clock.Deadline` that may expire
*only after D stops heartbeating for the request*: when its READ has landed
(``d_recv_done``) or when D lost the request (``d_fail``, whose READ is gone
with it).  That is the design's timing assumption, "lease durations provide
sufficient margin over forward-pass latency": heartbeats are sent from the
forward loop, so a forward pass longer than the lease extension lets it lapse
under a live D.  With ``--param lease_outlasts_heartbeat_gap=0`` the lease
may expire at any time and the check finds the same release as the buggy
spec (2 steps), which is what a deployment with a too-short lease saw
(aws-samples/aws-do-eks PR #84: 8 of 42 requests served on blocks P had
released; the fix there raised ``kv_lease_duration``).

Besides the base spec's invariants the fix is checked for the lease's
bookkeeping (``lease_follows_heartbeats``: P keeps a lease exactly while it
pins the blocks, and the lease cannot lapse exactly while D tracks the
request), and for the READ it protects (``read_posted_exactly_while_tracked``:
D's READ is outstanding exactly while D waits for or receives the request, so
``no_free_with_read_in_flight`` judges every READ D can still make;
``decode_sees_only_prefilled``: D tracks only requests P has prefilled).

The temporal properties say what the lease is for, on every fair path: once
D is done with a request (it replied, or lost it) P's blocks come back
(``pages_return``; the base spec's ``pages_returned_when_idle`` is kept as
the idle-state approximation), and a request P prefilled is eventually
done on D (``requests_finish``).  The engine's own steps are weakly fair
(D's load, READ completion and forward, P's handling of the notification
and its sweep of expired leases); the arrival (``p_prefill``) and D's
failure stay unfair.

Expected: safe at every size the explorer can cover; ``ownership prove``
proves it for executions of any length.
"""

import vllm_nixl_abort_timeout_buggy as base
from vllm_nixl_abort_timeout_buggy import DState, PState, Req, ReqId, nixl, prefill

from ownership import Source, require, safe
from ownership.vocab.clock import Deadline

spec = base.spec.derive(
    "vllm_nixl_abort_timeout_fixed",
    summary="vLLM NIXL P/D: prefill blocks are leased and decode renews the lease until its READ is done",
    models=Source(
        "vLLM",
        "PR #41383",
        where=(
            "kv_connector/v1/nixl/scheduler.py NixlConnectorScheduler.request_finished (kv_lease_duration), on_new_request",
            "kv_connector/v1/nixl/worker.py start_load_kv (heartbeats), _get_new_notifs, _handle_heartbeat",
            "kv_connector/v1/nixl/worker.py get_finished (every expired lease)",
        ),
        links=("vllm PR #41383", "vllm issue #21570", "vllm PR #43099", "aws-samples/aws-do-eks PR #84"),
    ),
    expect=safe(),
)
spec.param("lease_outlasts_heartbeat_gap", 1,
           "1: a live D's heartbeats always arrive before the lease runs out; 0: the lease may lapse at any time",
           min=0, max=1)
kv_lease = Deadline(spec, "kv_lease", per=Req, after="D stops heartbeating for the request",
                    assumed="lease_outlasts_heartbeat_gap",
                    doc="the P lease on the request's blocks, renewed by D's heartbeats while D tracks the request")


@spec.replace
def p_prefill(s, r: ReqId):
    """Prefill runs; request_finished pins the blocks with the initial lease and hands out remote_block_ids."""
    require(s.p_state[r] == PState.IDLE)
    blocks = prefill.alloc(s, r, s.params.blocks_per_req)
    prefill.write(s, r, blocks)
    kv_lease.arm(s, r)  # FIX: now + kv_lease_duration; D's heartbeats extend it
    nixl.post(s, r)
    s.p_state[r] = PState.HELD
    s.d_state[r] = DState.WAITING  # on_new_request: D tracks it and heartbeats from now on


@spec.replace
def p_get_new_notifs(s, r: ReqId):
    """_get_new_notifs: D's read-completion notification arrives; the blocks are freed at once."""
    require(s.p_state[r] == PState.HELD and s.notified[r])
    kv_lease.disarm(s, r)
    nixl.free(s, r)
    s.p_state[r] = PState.FREED


@spec.replace
def p_release_expired(s, r: ReqId):
    """get_finished: the lease expired (no heartbeat came in time): the blocks are reclaimed."""
    kv_lease.fire(s, r)
    require(s.p_state[r] == PState.HELD)
    nixl.free(s, r)
    s.p_state[r] = PState.FREED


@spec.replace
def d_recv_done(s, r: ReqId):
    """_pop_done_transfers: the READ is DONE; D notifies P and stops tracking (update_connector_output)."""
    require(s.d_state[r] == DState.RECVING)
    nixl.land(s, r)
    s.notified[r] = True
    kv_lease.allow(s, r)  # FIX: heartbeats for the request stop only now
    s.d_state[r] = DState.RUNNING


@spec.replace
def d_fail(s, r: ReqId):
    """D crashes or the request is lost before its READ completes: no READ, and no more heartbeats."""
    require(s.d_state[r] in (DState.WAITING, DState.RECVING))
    nixl.discard(s, r)
    kv_lease.allow(s, r)  # FIX: the lease runs out and P reclaims the blocks
    s.d_state[r] = DState.FAILED


for _step in ("p_get_new_notifs", "p_release_expired", "d_start_load_kv", "d_recv_done", "d_forward"):
    spec.fair(_step, "weak")  # the engine's own steps; p_prefill (arrival) and d_fail stay unfair
base.own.properties("pages_return", "requests_finish", spec=spec,
                    ended=lambda s, r: s.d_state[r] in (DState.DONE, DState.FAILED),  # D replied or lost it
                    started=lambda s, r: s.p_state[r] != PState.IDLE)  # P prefilled it


@spec.invariant
def lease_follows_heartbeats(s) -> bool:
    """FIX: P keeps a lease exactly while it pins the blocks; heartbeats hold it open exactly while D tracks the request."""
    for r in s.all(Req):
        if (s.p_state[r] == PState.HELD) != kv_lease.running(s, r):
            return False
        tracked = s.d_state[r] == DState.WAITING or s.d_state[r] == DState.RECVING
        if s.p_state[r] == PState.HELD and tracked != (s.kv_lease_deadline[r] == kv_lease.states.ARMED):
            return False
    return True


@spec.invariant
def read_posted_exactly_while_tracked(s) -> bool:
    """D's READ of remote_block_ids is outstanding exactly while D waits for or receives the request."""
    return all(
        (s.d_state[r] == DState.WAITING or s.d_state[r] == DState.RECVING) == (not nixl.drained(s, r))
        for r in s.all(Req)
    )


@spec.invariant
def decode_sees_only_prefilled(s) -> bool:
    """D tracks a request only once P prefilled it and handed out its remote_block_ids."""
    return all((s.p_state[r] == PState.IDLE) == (s.d_state[r] == DState.NONE) for r in s.all(Req))


spec.accept_mutant(
    "p_get_new_notifs flip-compare: require(s.p_state[r] == PState.HELD and s.notified[r]) "
    "=> require(s.p_state[r] != PState.HELD and s.notified[r])",
    reason="reaches exactly the original's reachable states: P then frees a notified request's blocks only when "
    "the lease lapses (D stopped heartbeating once its READ landed), later but not unsafely, and a notification "
    "for freed blocks only clears the spent lease; no invariant over states can tell the two apart",
)
