"""Library pairs on remote reads, registration and deadlines: vLLM NIXL, Mooncake Store, SGLang EPD.

Pinned state counts and shortest counterexamples of the three buggy/fixed
pairs (vLLM issue #21570 / PR #41383, Mooncake PR #778, SGLang PR #32071),
the timing assumption each fix rests on, the engines' agreement, and the
committed counterexamples.
"""

from __future__ import annotations

import pytest
from pins import events, explored
from typer.testing import CliRunner

from conftest import SPECS, instance
from ownership.cli import app
from ownership.core.result import StopReason, Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.z3run import BmcOptions
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

VLLM_BUGGY = "vllm_nixl_abort_timeout_buggy"
VLLM_FIXED = "vllm_nixl_abort_timeout_fixed"
MOONCAKE_BUGGY = "mooncake_get_outlives_lease_buggy"
MOONCAKE_FIXED = "mooncake_get_outlives_lease_fixed"
EPD_BUGGY = "sglang_epd_send_deregister_buggy"
EPD_FIXED = "sglang_epd_send_deregister_fixed"
BUGGY = (VLLM_BUGGY, MOONCAKE_BUGGY, EPD_BUGGY)
FIXED = (VLLM_FIXED, MOONCAKE_FIXED, EPD_FIXED)

# (spec, symmetry) -> (verdict, distinct states, transitions, depth, violated invariant).
# For a buggy spec the counts are those explored until the violation (breadth-first, deterministic).
PINNED = {
    (VLLM_BUGGY, True): (Verdict.VIOLATED, 3, 5, 2, "no_free_with_read_in_flight"),
    (VLLM_BUGGY, False): (Verdict.VIOLATED, 4, 5, 2, "no_free_with_read_in_flight"),
    (VLLM_FIXED, True): (Verdict.PROVED, 61, 99, 10, None),
    (VLLM_FIXED, False): (Verdict.PROVED, 121, 196, 10, None),
    (MOONCAKE_BUGGY, True): (Verdict.VIOLATED, 15, 26, 7, "no_foreign_read"),
    (MOONCAKE_BUGGY, False): (Verdict.VIOLATED, 26, 45, 7, "no_foreign_read"),
    (MOONCAKE_FIXED, True): (Verdict.PROVED, 31, 75, 12, None),
    (MOONCAKE_FIXED, False): (Verdict.PROVED, 61, 148, 12, None),
    (EPD_BUGGY, True): (Verdict.VIOLATED, 32, 70, 4, "no_transfer_on_deregistered"),
    (EPD_BUGGY, False): (Verdict.VIOLATED, 60, 122, 4, "no_transfer_on_deregistered"),
    # The fix's encode lets the backstop pass at once when every rank gave up before the
    # embedding was ready (before, such an embedding was held for ever: 16 states that could
    # never finish, which hid every lost-progress fault from `ownership mutate`).
    (EPD_FIXED, True): (Verdict.PROVED, 170, 360, 12, None),
    (EPD_FIXED, False): (Verdict.PROVED, 336, 704, 12, None),
}


@pytest.mark.parametrize(("name", "symmetry"), sorted(PINNED))
def test_pinned_state_counts(name: str, symmetry: bool) -> None:
    assert explored(name, symmetry) == PINNED[(name, symmetry)]



# -- vLLM issue #21570 / PR #41383 -------------------------------------------------------------
def test_vllm_timeout_frees_blocks_decode_may_still_read() -> None:
    trace = explore(instance(VLLM_BUGGY)).trace
    assert trace is not None and [s.action for s in trace.steps] == ["p_prefill", "p_release_expired"]
    last = trace.steps[-1]
    (freed,) = events(last, "free")
    (flag,) = events(last, "read still in flight")
    (expired,) = events(last, "deadline expired")
    assert flag.violates == "no_free_with_read_in_flight" and flag.get("page") in freed.get("pages")
    assert expired.get("deadline") == "abort_timeout" and expired.get("req") == flag.get("req")
    # D had not even started its READ: the request was still in D's waiting queue.
    assert trace.states[-1]["d_state"][flag.get("req")] == "WAITING"


def test_vllm_decode_reads_the_next_prefills_kv() -> None:
    result = explore(instance(VLLM_BUGGY), ExploreOptions(invariants=("no_foreign_read",)))
    trace = result.trace
    assert result.violated == "no_foreign_read" and trace is not None
    assert [s.action for s in trace.steps] == [
        "p_prefill", "p_release_expired", "p_prefill", "d_start_load_kv", "d_recv_done"
    ]
    bounded = explore(instance(VLLM_BUGGY), ExploreOptions(invariants=("no_foreign_read",), max_depth=4))
    assert bounded.verdict is Verdict.BOUNDED_OK and bounded.stop_reason is StopReason.DEPTH_LIMIT
    (read,) = [e for e in events(trace.steps[-1], "read") if e.violates == "no_foreign_read"]
    assert read.get("req") == trace.steps[0].args[0] and read.get("content") == trace.steps[2].args[0]


def test_vllm_lease_fix_rests_on_heartbeats_arriving_within_the_lease() -> None:
    result = explore(instance(VLLM_FIXED, lease_outlasts_heartbeat_gap=0))
    trace = result.trace
    assert result.violated == "no_free_with_read_in_flight" and trace is not None
    assert [s.action for s in trace.steps] == ["p_prefill", "p_release_expired"]
    (expired,) = events(trace.steps[-1], "deadline expired")
    assert expired.get("deadline") == "kv_lease"


def test_vllm_lease_fix_is_safe_at_larger_sizes() -> None:
    result = explore(instance(VLLM_FIXED, requests=3, prefill_blocks=2))
    assert result.verdict is Verdict.PROVED and result.stats.states == 541


def test_vllm_lease_fix_reclaims_the_blocks_of_a_failed_decode() -> None:
    """Liveness of the reclaim: after D fails, some execution frees the blocks by the lease alone."""
    spec = load_spec(SPECS / f"{VLLM_FIXED}.py")
    reached = explore(Instance(spec, {"requests": 1}), ExploreOptions(invariants=("pages_returned_when_idle",)))
    assert reached.verdict is Verdict.PROVED
    fired = {a.name: a.transitions for a in reached.actions}
    assert fired["p_release_expired"] > 0 and fired["d_fail"] > 0


# -- Mooncake PR #778 -------------------------------------------------------------------------------
def test_mooncake_slow_get_returns_the_reused_buffer() -> None:
    trace = explore(instance(MOONCAKE_BUGGY)).trace
    assert trace is not None and [s.action for s in trace.steps] == [
        "put", "get_start", "client_deadline_passes", "lease_expires", "evict", "put", "get_done"
    ]
    (read,) = [e for e in events(trace.steps[-1], "read") if e.violates == "no_foreign_read"]
    assert read.get("req") == trace.steps[0].args[0] and read.get("content") == trace.steps[5].args[0]
    # The eviction released the buffer under the Get's read.
    assert events(trace.steps[4], "free") and trace.states[4]["get_pending"][read.get("req")][read.get("page")]


def test_mooncake_check_rests_on_the_lease_ending_after_the_clients_time_point() -> None:
    result = explore(instance(MOONCAKE_FIXED, lease_starts_after_query=0))
    trace = result.trace
    assert result.violated == "no_foreign_read" and trace is not None
    assert [s.action for s in trace.steps] == ["put", "get_start", "lease_expires", "evict", "put", "get_done"]


def test_mooncake_fix_still_evicts_under_a_slow_read_but_never_returns_it() -> None:
    """The fix detects, it does not prevent: with the free-while-reading invariant added, it fails."""
    base = load_spec(SPECS / f"{MOONCAKE_FIXED}.py")
    spec = base.derive("mooncake_fixed_checked_for_frees_under_reads")
    base.actions["get_done"].fn.__globals__["rdma"].invariant(spec=spec)
    result = explore(Instance(spec))
    assert result.verdict is Verdict.VIOLATED and result.violated == "no_free_with_read_in_flight"
    assert explore(Instance(base, {"objects": 3, "buffers": 2})).stats.states == 465


# -- SGLang PR #32071 -------------------------------------------------------------------------------
def test_epd_first_send_deregisters_the_siblings_region() -> None:
    trace = explore(instance(EPD_BUGGY)).trace
    assert trace is not None and [s.action for s in trace.steps] == [
        "encode", "rank0_send", "rank1_send", "rank0_send_done"
    ]
    last = trace.steps[-1]
    (flag,) = events(last, "transfer on deregistered memory")
    assert flag.get("channel") == "rank1_send" and flag.violates == "no_transfer_on_deregistered"
    # The same step drops the embedding under the sibling's read (mm_data.embedding = None).
    (early,) = events(last, "read still in flight")
    assert early.violates == "no_free_during_rank1_send" and events(last, "free")


def test_epd_sibling_receives_the_next_requests_embedding() -> None:
    result = explore(instance(EPD_BUGGY), ExploreOptions(invariants=("no_foreign_read",)))
    trace = result.trace
    assert result.violated == "no_foreign_read" and trace is not None
    assert [s.action for s in trace.steps][-2:] == ["encode", "rank1_send_done"] and len(trace) == 6


def test_epd_fix_rests_on_send_timeout_outlasting_the_sends() -> None:
    result = explore(instance(EPD_FIXED, send_timeout_outlasts_sends=0))
    trace = result.trace
    assert result.violated == "no_transfer_on_deregistered" and trace is not None
    assert [s.action for s in trace.steps] == ["encode", "rank0_send", "cleanup_inflight_encode_state"]
    (expired,) = events(trace.steps[-1], "deadline expired")
    assert expired.get("deadline") == "send_timeout"


def test_epd_fix_never_holds_an_embedding_for_ever() -> None:
    # Both ranks may give up before the embedding is ready; the backstop must still be able to pass.
    result = explore(instance(EPD_FIXED), ExploreOptions(deadlock=True))
    assert result.verdict is Verdict.PROVED, result.stop_reason


@pytest.mark.slow
def test_epd_fix_is_safe_at_larger_sizes() -> None:
    result = explore(instance(EPD_FIXED, requests=3, embed_buffers=2))
    assert result.verdict is Verdict.PROVED and result.stats.states == 2420


# -- engines ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "violated", "depth"), [
    (VLLM_BUGGY, "no_free_with_read_in_flight", 2), (MOONCAKE_BUGGY, "no_foreign_read", 7),
    (EPD_BUGGY, "no_transfer_on_deregistered", 4),
])
def test_bmc_finds_the_same_shortest_violation(name: str, violated: str, depth: int) -> None:
    result = bmc(instance(name), BmcOptions(max_depth=depth))
    assert result.verdict is Verdict.VIOLATED and result.violated == violated
    assert result.trace is not None and len(result.trace) == depth


@pytest.mark.parametrize("name", BUGGY)
def test_hypothesis_finds_the_violation(name: str) -> None:
    spec = load_spec(SPECS / f"{name}.py")
    result = check_stateful(Instance(spec))
    assert result.verdict is Verdict.VIOLATED and result.violated == spec.expect.violates  # type: ignore[union-attr]


def test_committed_counterexamples_replay() -> None:
    for name in BUGGY:
        res = CliRunner().invoke(app, ["replay", str(SPECS.parent / "counterexamples" / name / "trace.json")])
        assert res.exit_code == 0 and res.stdout.startswith("REPLAYED"), res.output
