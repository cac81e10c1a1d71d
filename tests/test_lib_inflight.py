"""The in-flight vocabulary (ownership.vocab.inflight) and the specs built on it.

Pinned state counts and shortest counterexamples of the two buggy/fixed pairs
(SGLang PR #35049, vLLM PR #45357), the engines' agreement on them, the
timeout assumption of the SGLang fix, and unit tests of each operation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pins import events, explored
from typer.testing import CliRunner

from conftest import SPECS, instance
from conftest import run_once as run
from ownership import Enum, Ownership, PagePool, Spec, require
from ownership.cli import app
from ownership.core.result import StopReason, Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.vocab.inflight import DeferredFrees, InflightSteps, InflightWrites

SGLANG_BUGGY = "sglang_pd_abort_inflight_buggy"
SGLANG_FIXED = "sglang_pd_abort_inflight_fixed"
VLLM_BUGGY = "vllm_async_sched_inflight_step_buggy"
VLLM_FIXED = "vllm_async_sched_inflight_step_fixed"

# (spec, symmetry) -> (verdict, distinct states, transitions, depth, violated invariant).
# For a buggy spec the counts are those explored until the violation (breadth-first, deterministic).
PINNED = {
    (SGLANG_BUGGY, True): (Verdict.VIOLATED, 20, 30, 4, "no_free_with_write_in_flight"),
    (SGLANG_BUGGY, False): (Verdict.VIOLATED, 52, 72, 4, "no_free_with_write_in_flight"),
    (SGLANG_FIXED, True): (Verdict.PROVED, 396, 1092, 14, None),
    (SGLANG_FIXED, False): (Verdict.PROVED, 1507, 4180, 14, None),
    (VLLM_BUGGY, True): (Verdict.VIOLATED, 22, 30, 5, "no_unowned_write"),
    (VLLM_BUGGY, False): (Verdict.VIOLATED, 52, 68, 5, "no_unowned_write"),
    (VLLM_FIXED, True): (Verdict.PROVED, 87, 206, 12, None),
    (VLLM_FIXED, False): (Verdict.PROVED, 321, 760, 12, None),
}


@pytest.mark.parametrize(("name", "symmetry"), sorted(PINNED))
def test_pinned_state_counts(name: str, symmetry: bool) -> None:
    assert explored(name, symmetry) == PINNED[(name, symmetry)]



# -- SGLang PR #35049 ------------------------------------------------------------------
def test_sglang_abort_frees_pages_with_the_rdma_write_outstanding() -> None:
    result = explore(instance(SGLANG_BUGGY))
    trace = result.trace
    assert trace is not None and len(trace) == 4
    assert [s.action for s in trace.steps] == [
        "decode_pop_preallocated", "prefill_send", "decode_abort", "decode_pop_transferred"
    ]
    last = trace.steps[-1]
    (freed,) = events(last, "free")
    (flag,) = events(last, "write still in flight")
    assert flag.violates == "no_free_with_write_in_flight"
    assert flag.get("page") in freed.get("pages") and flag.get("req") == freed.get("req")
    assert trace.states[-1]["rdma_pending"][flag.get("req")][flag.get("page")] is True


def test_sglang_late_write_lands_in_the_next_owners_page() -> None:
    result = explore(instance(SGLANG_BUGGY), ExploreOptions(invariants=("no_foreign_read",)))
    trace = result.trace
    assert result.violated == "no_foreign_read" and trace is not None and len(trace) == 10
    # No shorter execution leaks: the same search bounded to 9 steps is clean.
    bounded = explore(instance(SGLANG_BUGGY), ExploreOptions(invariants=("no_foreign_read",), max_depth=9))
    assert bounded.verdict is Verdict.BOUNDED_OK and bounded.stop_reason is StopReason.DEPTH_LIMIT
    reader = trace.steps[-1].args[0]
    (read,) = [e for e in events(trace.steps[-1], "read") if e.violates == "no_foreign_read"]
    aborted = read.get("content")
    assert aborted != reader
    # The aborted request's write lands after the reader was given the page and after its own write.
    late = [i for i, st in enumerate(trace.steps) for e in events(st, "write")
            if e.get("req") == aborted and e.get("page") == read.get("page")]
    own_write = [i for i, st in enumerate(trace.steps) for e in events(st, "write") if e.get("req") == reader]
    given = [i for i, st in enumerate(trace.steps) for e in events(st, "alloc") if e.get("req") == reader]
    assert late and own_write and given and given[0] < own_write[0] < late[0]
    assert [e.violates for e in events(trace.steps[late[0]], "write")] == ["no_unowned_write"]
    assert trace.states[-1]["http"][reader] == "OK_200"


def test_sglang_fix_depends_on_the_timeout_assumption() -> None:
    result = explore(instance(SGLANG_FIXED, deadline_covers_transfer=0))
    trace = result.trace
    assert result.violated == "no_free_with_write_in_flight" and trace is not None and len(trace) == 5
    assert trace.steps[-1].action == "deferred_release_timeout"
    (flag,) = events(trace.steps[-1], "write still in flight")
    assert flag.violates == "no_free_with_write_in_flight"


def test_sglang_fix_is_safe_at_larger_sizes() -> None:
    result = explore(instance(SGLANG_FIXED, requests=3, decode_pages=3))
    assert result.verdict is Verdict.PROVED and result.stats.states == 4455


# -- vLLM PR #45357 -----------------------------------------------------------------------
def test_vllm_stale_step_writes_a_freed_block() -> None:
    trace = explore(instance(VLLM_BUGGY)).trace
    assert trace is not None
    assert [s.action for s in trace.steps] == [
        "start_remote_kv_load", "finished_recving", "schedule", "finish_or_preempt", "gpu_step"
    ]
    assert [e.violates for e in events(trace.steps[-1], "write")] == ["no_unowned_write"]
    # When the blocks were freed, the dispatched step had not written them yet.
    assert events(trace.steps[3], "write still in flight")
    assert trace.states[3]["steps_in_flight"] == 1


def test_vllm_stale_write_corrupts_a_request_receiving_kv() -> None:
    result = explore(instance(VLLM_BUGGY), ExploreOptions(invariants=("no_foreign_read",)))
    trace = result.trace
    assert result.violated == "no_foreign_read" and trace is not None and len(trace) == 9
    actions = [s.action for s in trace.steps]
    # The new owner's KV arrives over the NIC before the stale GPU write lands.
    assert actions.index("finished_recving", 2) < len(actions) - 2
    assert actions[-2:] == ["gpu_step", "gpu_step"]
    assert [e.violates for e in events(trace.steps[-2], "write")] == ["no_unowned_write"]


def test_vllm_without_async_scheduling_is_safe() -> None:
    result = explore(instance(VLLM_BUGGY, max_concurrent_batches=1))
    assert result.verdict is Verdict.PROVED and result.stats.states == 30


def test_vllm_fix_never_frees_a_block_with_a_write_in_flight() -> None:
    base = load_spec(SPECS / f"{VLLM_FIXED}.py")
    spec = base.derive("vllm_fixed_checked_for_inflight_frees")
    base.actions["finish_or_preempt"].fn.__globals__["gpu"].invariant(spec=spec)
    for params in ({}, {"max_concurrent_batches": 3, "blocks": 3}):
        result = explore(Instance(spec, params))
        assert result.verdict is Verdict.PROVED, params


def test_vllm_fence_must_be_the_newest_step_not_the_oldest() -> None:
    """Fencing on the oldest in-flight step (one output) re-opens the race: the model tells them apart."""
    base = load_spec(SPECS / f"{VLLM_FIXED}.py")
    spec = base.derive("vllm_fence_on_oldest")
    mod = base.actions["finish_or_preempt"].fn.__globals__
    steps, pool, deferred = mod["steps"], mod["pool"], mod["deferred"]
    Status, Req, between_steps = mod["Status"], mod["Req"], mod["scheduler_between_steps"]

    @spec.replace
    def finish_or_preempt(s, r: Req):  # noqa: ANN001, ANN202
        require(s.status[r] == Status.RUNNING and between_steps(s))
        s.status[r] = Status.FINISHED
        if steps.scheduled_in_flight(s, r):
            deferred.defer(s, r, fence=1)
        else:
            pool.free(s, r)

    assert explore(Instance(spec)).violated == "fence_covers_latest_step"  # the helper says why
    result = explore(Instance(spec), ExploreOptions(invariants=("no_unowned_write",)))
    assert result.verdict is Verdict.VIOLATED and result.violated == "no_unowned_write"


# -- engines ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "violated", "depth"),
    [(SGLANG_BUGGY, "no_free_with_write_in_flight", 4), (VLLM_BUGGY, "no_unowned_write", 5)],
)
def test_bmc_finds_the_same_shortest_violation(name: str, violated: str, depth: int) -> None:
    result = bmc(instance(name, requests=1), BmcOptions(max_depth=depth))
    assert result.verdict is Verdict.VIOLATED and result.violated == violated
    assert result.trace is not None and len(result.trace) == depth


def test_bmc_exhausts_the_fixed_sglang_spec_at_one_request() -> None:
    e = explore(instance(SGLANG_FIXED, requests=1))
    b = bmc(instance(SGLANG_FIXED, requests=1), BmcOptions(max_depth=10))
    assert b.verdict is Verdict.PROVED and b.stop_reason is StopReason.EXHAUSTED
    assert b.stats.depth == e.stats.depth == 7


@pytest.mark.slow
def test_the_vllm_fix_is_proved_by_one_induction_with_its_helpers() -> None:
    result = prove(instance(VLLM_FIXED), BmcOptions(max_k=1, spacer=False))
    assert result.verdict is Verdict.PROVED
    assert any("1-induction" in note for note in result.notes), result.notes
    # Without the helper invariants the same induction does not close.
    spec = load_spec(SPECS / f"{VLLM_FIXED}.py")
    bare = spec.derive("vllm_fixed_without_helpers")
    for name in [n for n, inv in bare.invariants.items() if inv.helper]:
        del bare.invariants[name]
    assert prove(Instance(bare), BmcOptions(max_k=1, spacer=False, reach_states=0)).verdict is not Verdict.PROVED


def test_committed_counterexamples_replay(tmp_path: Path) -> None:
    for name in (SGLANG_BUGGY, VLLM_BUGGY):
        res = CliRunner().invoke(app, ["replay", str(SPECS.parent / "counterexamples" / name / "trace.json")])
        assert res.exit_code == 0 and res.stdout.startswith("REPLAYED"), res.output


# -- vocabulary unit tests -------------------------------------------------------------------
def tiny(pages: int = 2) -> tuple[Spec, PagePool, InflightWrites]:
    spec = Spec("tiny_inflight")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    writes = InflightWrites(pool, "dma")
    writes.invariant()
    own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership")
    return spec, pool, writes




def test_post_targets_the_table_at_post_time_and_land_writes_it() -> None:
    spec, pool, writes = tiny()

    def body(s):  # noqa: ANN001, ANN202
        (p,) = pool.alloc(s, 0, 1)
        writes.post(s, 0)
        assert not writes.drained(s, 0) and writes.pending_into(s, p) and writes.drained(s, 1)
        writes.land(s, 0)
        assert writes.drained(s, 0) and not writes.pending_into(s, p)

    inst, outs = run(spec, body)
    assert len(outs) == 2  # either free page
    for out in outs:
        st = inst.to_json(out.state)
        (page,) = [p for p, h in st["kv_holders"].items() if h == ["A"]]
        assert inst.violated(out.state) is None
        assert st["kv_content"] == {p: ("A" if p == page else None) for p in ("K0", "K1")}
        assert st["dma_pending"]["A"] == {"K0": False, "K1": False}
        assert [e.kind for e in out.events] == ["alloc", "dma write posted", "write"]


def test_a_write_landing_after_the_free_is_unowned_and_overwrites_the_next_owner() -> None:
    spec, pool, writes = tiny(pages=1)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        writes.post(s, 0)
        writes.free(s, 0)  # freed with the write outstanding
        b = pool.alloc(s, 1, 1)
        pool.write(s, 1, b)
        writes.land(s, 0)  # the late write wins
        pool.read(s, 1, b)

    inst, (out,) = run(spec, body)
    st = inst.to_json(out.state)
    assert st["kv_content"] == {"K0": "A"} and st["wrote_unowned"]["A"] is True and st["read_foreign"]["B"] == "A"
    kinds = [(e.kind, e.violates) for e in out.events]
    assert ("write still in flight", "no_free_with_write_in_flight") in kinds
    assert ("write", "no_unowned_write") in kinds and ("read", "no_foreign_read") in kinds


def test_no_free_with_write_in_flight_holds_exactly_when_no_free_page_is_pending() -> None:
    spec, pool, writes = tiny(pages=1)

    def freed_pending(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        writes.post(s, 0)
        pool.free(s, 0)

    inst, (out,) = run(spec, freed_pending)
    assert inst.violated(out.state) == "no_free_with_write_in_flight"

    def freed_drained(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        writes.post(s, 0)
        writes.land(s, 0)
        writes.free(s, 0)

    inst, (out,) = run(spec, freed_drained)
    assert inst.violated(out.state) is None
    assert not [e for e in out.events if e.kind == "write still in flight"]


def test_inflight_steps_count_and_last_scheduled() -> None:
    spec, pool, writes = tiny()
    spec.param("depth", 2)
    steps = InflightSteps(spec, spec.domains["Req"], "depth")
    seen: list[tuple[int, bool, bool]] = []

    def body(s):  # noqa: ANN001, ANN202
        steps.dispatch(s)
        steps.include(s, 0)  # step 1: A
        steps.dispatch(s)
        steps.include(s, 1)  # step 2: B
        seen.append((steps.count(s), steps.in_oldest_only(s, 0), steps.in_oldest_only(s, 1)))
        steps.complete(s)  # step 1 processed: A has nothing in flight, B's step is now the oldest
        seen.append((steps.count(s), steps.scheduled_in_flight(s, 0), steps.in_oldest_only(s, 1)))
        steps.dispatch(s)

    inst, outs = run(spec, body)
    assert len(outs) == 1 and seen[:2] == [(2, True, False), (1, False, True)]
    assert inst.to_json(outs[0].state)["steps_in_flight"] == 2

    def over_depth(s):  # noqa: ANN001, ANN202
        for _ in range(3):
            steps.dispatch(s)

    assert run(spec, over_depth)[1] == []  # a third step is not enabled at depth 2

    def complete_idle(s):  # noqa: ANN001, ANN202
        steps.complete(s)

    assert run(spec, complete_idle)[1] == []


def test_deferred_frees_hold_until_the_fence_or_the_release() -> None:
    spec, pool, writes = tiny(pages=1)
    deferred = DeferredFrees(pool, writes=writes)
    free_counts: list[int] = []

    def fenced(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        deferred.defer(s, 0, fence=2)
        free_counts.append(pool.available(s))
        deferred.advance(s)
        free_counts.append(pool.available(s))
        assert deferred.holding(s, 0) and not deferred.empty(s)
        deferred.advance(s)
        free_counts.append(pool.available(s))
        assert not deferred.holding(s, 0) and deferred.empty(s)

    inst, (out,) = run(spec, fenced)
    assert free_counts == [0, 0, 1]
    assert [e.kind for e in out.events] == ["alloc", "free deferred", "free"]

    def acked(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 1, 1)
        deferred.defer(s, 1)  # fence 0: only release() returns the pages
        deferred.advance(s)
        free_counts.append(pool.available(s))
        deferred.release(s, 1)
        free_counts.append(pool.available(s))

    free_counts.clear()
    inst, (out,) = run(spec, acked)
    assert free_counts == [0, 1] and inst.violated(out.state) is None

    def release_unheld(s):  # noqa: ANN001, ANN202
        deferred.release(s, 0)

    assert run(spec, release_unheld)[1] == []


def test_the_vocabulary_runs_under_the_solver() -> None:
    """The same operations, symbolically: BMC finds the free-before-land race in a ten-line spec."""
    spec, pool, writes = tiny(pages=1)
    Phase = Enum("Phase", "IDLE POSTED FREED")
    Req = spec.domains["Req"]
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)
    spec.actions.clear()

    @spec.action
    def post(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.IDLE)
        pool.alloc(s, r, 1)
        writes.post(s, r)
        s.phase[r] = Phase.POSTED

    @spec.action
    def abort(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.POSTED)
        writes.free(s, r)
        s.phase[r] = Phase.FREED

    @spec.action
    def land(s, r: Req):  # noqa: ANN001, ANN202
        require(not writes.drained(s, r))
        writes.land(s, r)

    e = explore(Instance(spec))
    b = bmc(Instance(spec), BmcOptions(max_depth=4))
    assert e.violated == b.violated == "no_free_with_write_in_flight"
    assert e.trace is not None and b.trace is not None and len(e.trace) == len(b.trace) == 2
