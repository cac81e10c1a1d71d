"""vLLM async scheduling with a PD KV consumer: block frees fenced on the newest in-flight step (PR #45357).

Written as the patch on top of ``vllm_async_sched_inflight_step_buggy``;
compare with the upstream diff (vllm/v1/core/sched/scheduler.py):

* ``Scheduler.__init__``: ``defer_block_free`` is on when more than one batch
  can be in flight and the connector is a KV consumer (both hold here);
* ``Scheduler.schedule``: every non-empty step advances ``sched_step_seq`` and
  each scheduled request records ``last_sched_seq`` (``InflightSteps``);
* ``Scheduler._free_request_blocks`` (called by ``_free_blocks`` and
  ``_preempt_request``): if ``last_sched_seq <= processed_step_seq`` the
  blocks are freed at once; otherwise ``pop_blocks_for_free`` detaches them
  and ``deferred_frees`` keeps them with the fence ``sched_step_seq``, the
  newest step in flight;
* ``Scheduler.update_from_output``: ``processed_step_seq += 1`` and
  ``_drain_deferred_frees`` returns every entry whose fence has passed.

The fence is kept relative: ``DeferredFrees`` counts the step outputs still
to process (``sched_step_seq - processed_step_seq`` at the free), which is
the upstream FIFO with monotone fences.  Request bookkeeping stays immediate
(the request is FINISHED at once); in this model the held blocks stay in the
finished request's page table until the fence passes, which changes nothing
the request can still do.

Expected: safe; ``ownership prove`` proves it for executions of any length
by 1-induction, with the helper invariants at the end of this file (what a
reviewer would argue: a pending write targets a block its request still
holds, and a held request's fence is no earlier than its latest step).
"""


import vllm_async_sched_inflight_step_buggy as base
from vllm_async_sched_inflight_step_buggy import Req, ReqId, Status, gpu, pool, scheduler_between_steps, steps

from ownership import Source, require, safe
from ownership.vocab.inflight import DeferredFrees, holds

spec = base.spec.derive(
    "vllm_async_sched_inflight_step_fixed",
    summary="vLLM async scheduling + PD KV consumer: freed blocks return only after the newest in-flight step",
    models=Source(
        "vLLM",
        "PR #45357",
        where=(
            "v1/core/sched/scheduler.py Scheduler._free_request_blocks, _drain_deferred_frees",
            "v1/core/sched/scheduler.py Scheduler.schedule (sched_step_seq), update_from_output (processed_step_seq)",
        ),
        links=("vllm PR #45357", "vllm PR #49675"),
    ),
    expect=safe(),
)
deferred = DeferredFrees(pool, spec=spec, writes=gpu)  # Scheduler.deferred_frees


def free_request_blocks(s, r) -> None:
    """FIX: Scheduler._free_request_blocks: defer the return while a step with r is in flight."""
    if not steps.scheduled_in_flight(s, r):  # last_sched_seq <= processed_step_seq
        pool.free(s, r)
        return
    deferred.defer(s, r, fence=steps.count(s))  # deferred_frees.append((sched_step_seq, blocks))


@spec.replace
def finish_or_preempt(s, r: ReqId):
    """A stop token, a client abort or a preemption: _free_request_blocks (deferred if in flight)."""
    require(s.status[r] == Status.RUNNING and scheduler_between_steps(s))
    s.status[r] = Status.FINISHED
    free_request_blocks(s, r)


@spec.replace
def update_from_output(s):
    """update_from_output: processed_step_seq += 1, then _drain_deferred_frees."""
    for r in s.all(Req):
        if steps.in_oldest_only(s, r):
            require(gpu.drained(s, r))
    steps.complete(s)
    deferred.advance(s)  # FIX: blocks whose fence step is processed return to the pool


for _step in ("finished_recving", "schedule", "gpu_step", "update_from_output"):
    spec.fair(_step, "weak")  # the engine's own steps; arrival and finish_or_preempt (stop, abort, preemption) unfair
base.own.properties("pages_return", spec=spec, ended=lambda s, r: s.status[r] == Status.FINISHED)


# -- helper invariants: true in every reachable state, they make the induction proof close ------------
steps.invariant(spec=spec)


@spec.invariant(helper=True)
def fence_covers_latest_step(s) -> bool:
    """A held request waits for at least its latest step, at most for every step in flight."""
    return all(
        s.deferred_fence[r] == 0 if not s.deferred_held[r]
        else steps.count(s) >= s.deferred_fence[r] >= s.steps_last[r] and s.deferred_fence[r] >= 1
        for r in s.all(Req)
    )


@spec.invariant(helper=True)
def pending_write_into_own_block(s) -> bool:
    """A write still in flight targets a block its request holds, from a step still in flight."""
    return all(
        not s.gpu_pending[r, p] or (holds(s, pool, r, p) and steps.scheduled_in_flight(s, r))
        for r in s.all(Req) for p in s.all(pool.Page)
    )


@spec.invariant(helper=True)
def only_running_or_finished_in_flight(s) -> bool:
    """Only running or finished requests are in a step in flight."""
    return all(s.status[r] in (Status.RUNNING, Status.FINISHED) or not steps.scheduled_in_flight(s, r) for r in s.all(Req))


@spec.invariant(helper=True)
def only_finished_held(s) -> bool:
    """Only finished requests have blocks in the deferred-free queue."""
    return all(s.status[r] == Status.FINISHED or not s.deferred_held[r] for r in s.all(Req))


@spec.invariant(helper=True)
def new_holds_nothing(s) -> bool:
    """A request not yet scheduled holds no block."""
    return all(s.status[r] != Status.NEW or not holds(s, pool, r, p) for r in s.all(Req) for p in s.all(pool.Page))


@spec.invariant(helper=True)
def finished_holds_only_while_held(s) -> bool:
    """A finished request holds blocks only while they wait in the deferred-free queue."""
    return all(
        s.status[r] != Status.FINISHED or s.deferred_held[r] or not holds(s, pool, r, p)
        for r in s.all(Req) for p in s.all(pool.Page)
    )


@spec.invariant(helper=True)
def ready_blocks_hold_own_kv(s) -> bool:
    """The blocks of a request whose KV arrived hold its own KV."""
    return all(
        s.status[r] not in (Status.WAITING, Status.RUNNING) or not holds(s, pool, r, p) or s.kv_content[p] == r
        for r in s.all(Req) for p in s.all(pool.Page)
    )


@spec.invariant(helper=True)
def block_free_or_held(s) -> bool:
    """Every block is on the free list once, or held and off it."""
    return all(
        (s.kv_free[p] == 1 and s.kv_holders[p] == 0) or (s.kv_free[p] == 0 and s.kv_holders[p] != 0)
        for p in s.all(pool.Page)
    )


# vLLM's finish_requests aborts a request in any status; the model lets only running ones finish.
# Letting every status finish (the two mutants below) is safe as well: the fix holds for those too.
_ANY_STATUS = ("finishing a request in any status (as finish_requests does) keeps the fix safe: "
               "the model only restricts finishing to running requests")
spec.accept_mutant(
    "finish_or_preempt delete-require: require(s.status[r] == Status.RUNNING and scheduler_between_steps(s)) => pass",
    reason=_ANY_STATUS,
)
spec.accept_mutant(
    "finish_or_preempt swap-boolop: require(s.status[r] == Status.RUNNING and scheduler_between_steps(s)) "
    "=> require((s.status[r] == Status.RUNNING or scheduler_between_steps(s)))",
    reason=_ANY_STATUS + " (with async scheduling the scheduler always runs between steps)",
)
