"""The library specs built on ownership.vocab.handles and ownership.vocab.jobs.

Pinned state counts and shortest counterexamples of the two buggy/fixed pairs
(vLLM PR #56104: one failed NIXL handle frees blocks its siblings still
write; vLLM PR #27987: a reused request id's late finished_sending frees the
wrong lifecycle's blocks), the engines' agreement on them, and the committed
counterexamples.
"""

from __future__ import annotations

import pytest
from pins import events, explored
from typer.testing import CliRunner

from conftest import SPECS, instance
from ownership import require
from ownership.cli import app
from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.z3run import BmcOptions
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

NIXL_BUGGY = "vllm_nixl_multi_handle_failure_buggy"
NIXL_FIXED = "vllm_nixl_multi_handle_failure_fixed"
REUSE_BUGGY = "vllm_request_id_reuse_stale_send_buggy"
REUSE_FIXED = "vllm_request_id_reuse_stale_send_fixed"

# (spec, symmetry) -> (verdict, distinct states, transitions, depth, violated invariant).
# For a buggy spec the counts are those explored until the violation (breadth-first, deterministic).
PINNED = {
    (NIXL_BUGGY, True): (Verdict.VIOLATED, 11, 22, 3, "no_release_with_operation_pending"),
    (NIXL_BUGGY, False): (Verdict.VIOLATED, 36, 42, 3, "no_release_with_operation_pending"),
    (NIXL_FIXED, True): (Verdict.PROVED, 98, 212, 10, None),
    (NIXL_FIXED, False): (Verdict.PROVED, 602, 1296, 10, None),
    (REUSE_BUGGY, True): (Verdict.VIOLATED, 6, 7, 3, "no_free_while_job_holds"),
    (REUSE_BUGGY, False): (Verdict.VIOLATED, 16, 18, 3, "no_free_while_job_holds"),
    (REUSE_FIXED, True): (Verdict.PROVED, 12, 31, 5, None),
    (REUSE_FIXED, False): (Verdict.PROVED, 39, 108, 5, None),
}


@pytest.mark.parametrize(("name", "symmetry"), sorted(PINNED))
def test_pinned_state_counts(name: str, symmetry: bool) -> None:
    assert explored(name, symmetry) == PINNED[(name, symmetry)]



# -- vLLM PR #56104 ------------------------------------------------------------------------
def test_nixl_first_failed_handle_frees_the_block_a_sibling_still_writes() -> None:
    trace = explore(instance(NIXL_BUGGY)).trace
    assert trace is not None
    assert [s.action for s in trace.steps] == ["start_load_kv", "xfer_failed", "fail_request"]
    failed = trace.steps[1].args[1]
    (pending,) = events(trace.steps[-1], "operation still pending")
    assert pending.violates == "no_release_with_operation_pending"
    assert pending.get("handle") != failed  # the sibling, not the handle that failed
    (freed,) = events(trace.steps[-1], "free")
    assert pending.get("page") in freed.get("pages")
    assert trace.states[-1]["xfer_state"][pending.get("req")][pending.get("handle")] == "POSTED"


def test_nixl_sibling_write_lands_in_the_next_requests_block() -> None:
    result = explore(instance(NIXL_BUGGY), ExploreOptions(invariants=("no_foreign_read",)))
    trace = result.trace
    assert result.violated == "no_foreign_read" and trace is not None and len(trace) == 9
    bounded = explore(instance(NIXL_BUGGY), ExploreOptions(invariants=("no_foreign_read",), max_depth=8))
    assert bounded.verdict is Verdict.BOUNDED_OK
    (read,) = [e for e in events(trace.steps[-1], "read") if e.violates == "no_foreign_read"]
    failed_req = read.get("content")
    # The late write is the failed request's sibling handle completing after the block was reused.
    late = [i for i, st in enumerate(trace.steps) for e in events(st, "write")
            if e.get("req") == failed_req and e.violates == "no_unowned_write"]
    assert late and trace.steps[late[0]].action == "xfer_done"
    assert trace.states[-1]["http"][failed_req] == "ERROR"


def test_nixl_with_one_handle_per_request_is_safe() -> None:
    """Homogeneous TP (one remote rank): the failed handle is the only one, so nothing still writes."""
    result = explore(instance(NIXL_BUGGY, tp_ratio=1))
    assert result.verdict is Verdict.PROVED and result.stats.states == 33


@pytest.mark.slow
def test_nixl_fix_is_safe_at_larger_sizes() -> None:
    assert explore(instance(NIXL_FIXED, tp_ratio=3)).stats.states == 254
    result = explore(instance(NIXL_FIXED, requests=3, blocks=3))
    assert result.verdict is Verdict.PROVED and result.stats.states == 701


# -- vLLM PR #27987 ------------------------------------------------------------------------
def test_reuse_id_keyed_free_returns_blocks_the_previous_pull_still_holds() -> None:
    trace = explore(instance(REUSE_BUGGY)).trace
    assert trace is not None
    assert [(s.action, s.args) for s in trace.steps] == [
        ("prefill", ("A",)), ("prefill", ("A",)), ("finished_sending", ("A", "age0"))]
    last = trace.steps[-1]
    (holds,) = events(last, "job still holds")
    assert holds.violates == "no_free_while_job_holds"
    first_block = events(trace.steps[0], "alloc")[0].get("pages")[0]
    assert holds.get("page") == first_block and first_block in events(last, "free")[0].get("pages")
    assert trace.states[-1]["send_running"][holds.get("req")] == 2  # the first lifecycle's pull (age 1) runs


def test_reuse_stale_notification_is_applied_to_the_new_lifecycle() -> None:
    result = explore(instance(REUSE_BUGGY), ExploreOptions(invariants=("no_stale_completion",)))
    trace = result.trace
    assert result.violated == "no_stale_completion" and trace is not None
    assert [(s.action, s.args) for s in trace.steps][-1] == ("finished_sending", ("A", "age1"))
    (stale,) = events(trace.steps[-1], "stale completion")
    assert stale.violates == "no_stale_completion" and stale.get("age") == 1
    assert trace.states[-1]["send_stale"]["A"] is True


def test_reuse_freed_block_is_pulled_with_another_requests_kv() -> None:
    result = explore(instance(REUSE_BUGGY), ExploreOptions(invariants=("no_foreign_read",)))
    trace = result.trace
    assert result.violated == "no_foreign_read" and trace is not None and len(trace) == 5
    (read,) = [e for e in events(trace.steps[-1], "read") if e.violates == "no_foreign_read"]
    assert trace.steps[-1].action == "finished_sending" and read.get("content") != read.get("req")
    given = [i for i, st in enumerate(trace.steps) for e in events(st, "alloc") if e.get("req") == read.get("content")]
    freed = [i for i, st in enumerate(trace.steps) for e in events(st, "job still holds")]
    assert freed and given and freed[0] < given[0]  # freed under the pull, then given to the other request


def test_reuse_without_reuse_is_safe() -> None:
    """Without a second lifecycle of an id while its pull runs, the id-keyed free is harmless."""
    base = load_spec(SPECS / f"{REUSE_BUGGY}.py")
    spec = base.derive("reuse_never_while_pulling")
    send, pool, holds = (base.actions["prefill"].fn.__globals__[n] for n in ("send", "pool", "holds"))

    @spec.replace
    def prefill(s, r: Req):  # noqa: ANN001, ANN202, F821
        require(not send.any_running(s, r))
        send.new_lifecycle(s, r)
        pool.alloc(s, r, s.params.prompt_pages)
        mine = [p for p in s.all(pool.Page) if holds(s, pool, r, p)]
        pool.write(s, r, mine)
        send.start(s, r, mine)

    result = explore(Instance(spec))
    assert result.verdict is Verdict.PROVED and result.stats.states == 8


@pytest.mark.slow
def test_reuse_fix_is_safe_at_larger_sizes() -> None:
    result = explore(instance(REUSE_FIXED, requests=3, blocks=3))
    assert result.verdict is Verdict.PROVED and result.stats.states == 37


# -- engines ----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "violated", "depth"),
    [
        (NIXL_BUGGY, {"no_release_with_operation_pending"}, 3),
        # two notifications violate at depth 3: bmc reports the one declared first, a random walk either
        (REUSE_BUGGY, {"no_free_while_job_holds", "no_stale_completion"}, 3),
    ],
)
def test_bmc_and_hypothesis_find_the_buggy_specs(name: str, violated: set[str], depth: int) -> None:
    b = bmc(instance(name), BmcOptions(max_depth=depth))
    assert b.verdict is Verdict.VIOLATED and b.violated == load_spec(SPECS / f"{name}.py").expect.violates  # type: ignore[union-attr]
    assert b.trace is not None and len(b.trace) == depth
    h = check_stateful(instance(name), HypothesisOptions(seed=1))
    assert h.verdict is Verdict.VIOLATED and h.violated in violated


def test_committed_counterexamples_replay() -> None:
    for name in (NIXL_BUGGY, REUSE_BUGGY):
        res = CliRunner().invoke(app, ["replay", str(SPECS.parent / "counterexamples" / name / "trace.json")])
        assert res.exit_code == 0 and res.stdout.startswith("REPLAYED"), res.output
