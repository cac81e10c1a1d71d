"""vLLM async scheduling with a PD KV consumer: blocks freed while the next step still writes them.

Models the V1 scheduler of a decode instance that receives KV from a prefill
node (a KV-consumer connector) with async scheduling, before vLLM PR #45357
(vllm/v1/core/sched/scheduler.py):

* ``Scheduler.schedule``: a new request whose KV the prefill node sends gets
  its blocks (``allocate_slots``) and waits in WAITING_FOR_REMOTE_KVS while
  the connector loads them (a NIC/RDMA write); once ``finished_recving`` is
  reported it is scheduled like any running request; every scheduled request
  decodes one token per step;
* async scheduling (``max_concurrent_batches > 1``, ``step_with_batch_queue``
  in ``engine/core.py``): step N+1 is dispatched before step N's output is
  processed, so the device may still run a step whose block tables were
  fixed at dispatch;
* ``Scheduler.update_from_output``: processes the oldest step's output; a
  stop token finishes the request;
* ``Scheduler.finish_requests`` (client abort), ``_free_request`` ->
  ``_free_blocks`` and ``_preempt_request``: ``kv_cache_manager.free(request)``
  returns the blocks to the block pool **at once**.

Known bug (PR #45357, "Defer block freeing until in-flight steps finish under
async scheduling + PD KV consumer"): a request finished, aborted or preempted
on the basis of step N may still be written by step N+1, already in flight.
Its blocks go straight back to the pool and can be handed to a request
receiving KV from the prefill node; the NIC write that fills them is not
ordered with the stale GPU write, which can land last and corrupt the new
request's KV.  The default check reports the stale write itself (5 steps:
``no_unowned_write``); ``--invariant no_foreign_read`` shows the corrupted
request reading it (9 steps).  With ``--param max_concurrent_batches=1``
(no async scheduling) the same spec is safe: the engine core blocks on each
step, so the scheduler frees only between steps.

Simplified: one block per request, enough for every token it decodes; the
connector's load is modelled as landing when ``finished_recving`` is
reported; finishing, aborting and preempting are one action (they reach the
same free, and what becomes of the request afterwards is not modelled); the
device runs each request's part of a step as its own action (any order), and
the output of a step is processed only after the device wrote the KV of the
requests whose latest step it is.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.inflight import InflightSteps, InflightWrites

spec = Spec(
    "vllm_async_sched_inflight_step_buggy",
    summary="vLLM async scheduling + PD KV consumer: a finished request's blocks are reused while step N+1 still writes them",
    models=Source(
        "vLLM",
        "before PR #45357",
        where=(
            "v1/core/sched/scheduler.py Scheduler.schedule, update_from_output",
            "v1/core/sched/scheduler.py Scheduler.finish_requests, _free_request, _free_blocks, _preempt_request",
            "v1/engine/core.py EngineCore.step_with_batch_queue",
        ),
        links=("vllm PR #45357", "vllm PR #19970"),
    ),
    expect=violates("no_unowned_write"),
)

spec.param("requests", 2, "concurrent requests modelled", min=1, max=4)
spec.param("blocks", 2, "KV blocks in the pool", min=1)
spec.param("max_concurrent_batches", 2, "steps in flight at once (2 with async scheduling, 1 without)", min=1, max=3)

Req = spec.domain("Req", "requests", symmetric=True, names="ABCD")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "blocks", prefix="K")
gpu = InflightWrites(pool, "gpu", doc="a dispatched step will write the request's new token KV into the block")
steps = InflightSteps(spec, Req, "max_concurrent_batches")

Status = Enum("RequestStatus", "NEW WAITING_FOR_REMOTE_KVS WAITING RUNNING FINISHED")
spec.var("status", Status, per=Req, init=Status.NEW, doc="RequestStatus")


def scheduler_between_steps(s) -> bool:
    """The scheduler thread runs: without async scheduling only when no step is in flight."""
    return s.params.max_concurrent_batches > 1 or steps.count(s) == 0


@spec.action
def start_remote_kv_load(s, r: ReqId):
    """schedule(): allocate_slots for a new request whose KV the prefill node sends; the load starts."""
    require(s.status[r] == Status.NEW and scheduler_between_steps(s))
    pool.alloc(s, r, 1)
    s.status[r] = Status.WAITING_FOR_REMOTE_KVS


@spec.action
def finished_recving(s, r: ReqId):
    """The connector's NIC write of r's KV has landed and finished_recving is reported."""
    require(s.status[r] == Status.WAITING_FOR_REMOTE_KVS and scheduler_between_steps(s))
    pool.write(s, r, pool.pages_of(s, r))
    s.status[r] = Status.WAITING


@spec.action
def schedule(s):
    """schedule() + dispatch: every running or ready request decodes one token in a new step."""
    require(scheduler_between_steps(s))
    steps.dispatch(s)  # not enabled while max_concurrent_batches steps are in flight
    scheduled = False
    for r in s.all(Req):
        if s.status[r] in (Status.WAITING, Status.RUNNING):
            s.status[r] = Status.RUNNING
            steps.include(s, r)  # request.last_sched_seq = sched_step_seq
            gpu.post(s, r)  # the step's slot mapping: r's blocks, fixed now
            scheduled = True
    require(scheduled)  # only non-empty steps are dispatched


@spec.action
def gpu_step(s, r: ReqId):
    """The device runs r's part of a dispatched step: attention reads r's blocks, the new KV is written."""
    require(not gpu.drained(s, r))
    if s.status[r] == Status.RUNNING:  # a finished request's step still runs; its output is dropped
        pool.read(s, r, pool.pages_of(s, r))
    gpu.land(s, r)


@spec.action
def update_from_output(s):
    """update_from_output: the oldest step's output is processed (the device has finished it)."""
    for r in s.all(Req):
        if steps.in_oldest_only(s, r):
            require(gpu.drained(s, r))
    steps.complete(s)


@spec.action
def finish_or_preempt(s, r: ReqId):
    """A stop token, a client abort (finish_requests) or a preemption: kv_cache_manager.free at once."""
    require(s.status[r] == Status.RUNNING and scheduler_between_steps(s))
    s.status[r] = Status.FINISHED
    gpu.free(s, r)  # _free_blocks / _preempt_request: step N+1 may still write these blocks


@spec.terminal
def idle(s) -> bool:
    """No step in flight and every request either new or finished."""
    return steps.count(s) == 0 and all(s.status[r] in (Status.NEW, Status.FINISHED) for r in s.all(Req))


own.invariants("no_unowned_write", "no_foreign_read", "no_double_ownership", "pages_returned_when_idle")
