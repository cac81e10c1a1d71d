"""The library specs built on the cache vocabulary (ownership.vocab.cache).

Pinned state counts and the shortest counterexamples of the two SGLang SWA
radix-cache pairs (PR #29352, PR #22470), the engines' agreement on them,
what the fixes rely on, and the prefix-index specs checked against the
partition.
"""

from __future__ import annotations

import pytest
from pins import events, explored
from typer.testing import CliRunner

from conftest import SPECS, instance
from ownership import safe
from ownership.cli import app
from ownership.core.result import Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.vocab.cache import register_partition

SWA_BUGGY = "sglang_swa_recover_locked_full_buggy"
SWA_FIXED = "sglang_swa_recover_locked_full_fixed"
WIN_BUGGY = "sglang_swa_insert_evicted_window_buggy"
WIN_FIXED = "sglang_swa_insert_evicted_window_fixed"

# (spec, symmetry) -> (verdict, distinct states, transitions, depth, violated invariant).
# For a buggy spec the counts are those explored until the violation (breadth-first, deterministic).
PINNED = {
    (SWA_BUGGY, True): (Verdict.VIOLATED, 10, 12, 3, "no_release_in_use"),
    (SWA_BUGGY, False): (Verdict.VIOLATED, 38, 39, 3, "no_release_in_use"),
    (SWA_FIXED, True): (Verdict.PROVED, 53, 80, 7, None),
    (SWA_FIXED, False): (Verdict.PROVED, 409, 632, 7, None),
    (WIN_BUGGY, True): (Verdict.VIOLATED, 9, 12, 3, "window_held_unless_tombstone"),
    (WIN_BUGGY, False): (Verdict.VIOLATED, 35, 39, 3, "window_held_unless_tombstone"),
    (WIN_FIXED, True): (Verdict.PROVED, 56, 74, 6, None),
    (WIN_FIXED, False): (Verdict.PROVED, 425, 560, 6, None),
}

LARGER = {
    (SWA_BUGGY, (("full_pages", 3), ("requests", 3), ("swa_pages", 3))): (Verdict.VIOLATED, 11, 17, 3, "no_release_in_use"),
    (SWA_FIXED, (("full_pages", 3), ("requests", 3), ("swa_pages", 3))): (Verdict.PROVED, 286, 658, 10, None),
    (WIN_BUGGY, (("full_pages", 3), ("requests", 3), ("swa_pages", 3))):
        (Verdict.VIOLATED, 10, 17, 3, "window_held_unless_tombstone"),
    (WIN_FIXED, (("full_pages", 3), ("requests", 3), ("swa_pages", 3))): (Verdict.PROVED, 336, 662, 9, None),
}


@pytest.mark.parametrize(("name", "symmetry"), sorted(PINNED))
def test_pinned_state_counts(name: str, symmetry: bool) -> None:
    assert explored(name, symmetry) == PINNED[(name, symmetry)]


@pytest.mark.parametrize(("name", "params"), sorted(LARGER))
def test_pinned_state_counts_of_larger_instances(name: str, params: tuple[tuple[str, int], ...]) -> None:
    assert explored(name, **dict(params)) == LARGER[(name, params)]



def test_recovering_the_tombstone_frees_the_full_page_the_first_request_still_maps() -> None:
    trace = explore(instance(SWA_BUGGY)).trace
    assert trace is not None
    assert [s.action for s in trace.steps] == ["prefill", "window_passes", "prefill"]
    first, second = trace.steps[0].args[0], trace.steps[2].args[0]
    assert first != second
    # The first request's pages were handed to the tree, not freed, and it maps them.
    (full_off,) = [e for e in events(trace.steps[0], "hand_off") if e.get("pool") == "full"]
    (page,) = full_off.get("pages")
    assert not events(trace.steps[0], "free")
    assert trace.states[1]["full_tree_mapped"][first][page] is True
    # Its window passes: the SWA half is freed and the node is a tombstone; the Full page stays locked.
    assert events(trace.steps[1], "tombstone") and trace.states[2]["swa_tree_tomb"]["x"] is True
    assert trace.states[2]["full_tree_lock"]["x"] == 1
    # The second request cannot match the tombstone, computes the block, and its insert frees the locked page.
    kinds = [e.kind for e in trace.steps[2].events]
    assert kinds.index("alloc") < kinds.index("cache_release") < kinds.index("cache_hit")
    (rel,) = events(trace.steps[2], "cache_release")
    assert rel.get("pages") == [page] and rel.get("in_use_by") == [first] and rel.violates == "no_release_in_use"
    last = trace.states[3]
    assert last["full_free"][page] == 1 and last["full_tree_mapped"][first][page] is True


def test_the_bug_breaks_no_partition_only_the_use() -> None:
    """The freed page is accounted for (free once); the fault is that a running request still reads it."""
    result = explore(instance(SWA_BUGGY), ExploreOptions(invariants=("pages_partitioned", "cache_accounting",
                                                                     "pairs_held_together", "tombstones_hold_nothing")))
    assert result.verdict is Verdict.PROVED


def test_the_fix_keeps_the_locked_full_page_and_adopts_the_incoming_swa_page() -> None:
    base = load_spec(SPECS / f"{SWA_FIXED}.py")
    spec = base.derive("swa_fixed_at_the_recovery")

    @spec.invariant
    def locked_tombstone_recovered_with_its_own_full_page(s) -> bool:  # noqa: ANN001
        """Whenever a request maps a cached Full page, the tree still holds it."""
        return all(not s.full_tree_mapped[r, p] or s.full_tree_held[p] != 0
                   for r in s.all(spec.domains["Req"]) for p in s.all(spec.domains["FullPage"]))

    assert explore(Instance(spec)).verdict is Verdict.PROVED


def test_without_a_running_request_the_shipped_recovery_is_safe() -> None:
    """With one request no one holds the tombstone's Full lock when it is recovered."""
    assert explore(instance(SWA_BUGGY, requests=1)).verdict is Verdict.PROVED


# -- SGLang PR #22470 ----------------------------------------------------------------------------
def test_a_block_whose_window_pages_are_gone_is_inserted_as_a_live_node() -> None:
    trace = explore(instance(WIN_BUGGY)).trace
    assert trace is not None
    assert [s.action for s in trace.steps] == ["prefill", "window_passes", "finish"]
    req = trace.steps[0].args[0]
    (freed,) = events(trace.steps[1], "free")
    assert freed.get("pool") == "swa" and freed.get("req") == req
    (off,) = events(trace.steps[2], "hand_off")
    assert off.get("pool") == "full"  # only the Full half reaches the node: the SWA half is already free
    last = trace.states[3]
    assert last["swa_tree_tomb"]["x"] is False and sorted(last["full_tree_held"].values()) == [[], ["x"]]
    assert all(h == [] for h in last["swa_tree_held"].values())


def test_the_evicted_window_bug_keeps_pages_partitioned_and_the_pairs_together() -> None:
    """The fault is the node's claim to be live, not a page in two places: only the tree's own invariant sees it."""
    result = explore(instance(WIN_BUGGY), ExploreOptions(invariants=("pages_partitioned", "pairs_held_together")))
    assert result.verdict is Verdict.PROVED


def test_without_the_window_passing_the_block_the_shipped_insert_is_safe() -> None:
    base = load_spec(SPECS / f"{WIN_BUGGY}.py")
    spec = base.derive("swa_window_never_passes", expect=safe())
    del spec.actions["window_passes"]
    assert explore(Instance(spec)).verdict is Verdict.PROVED


@pytest.mark.parametrize(("name", "violated"), [(SWA_BUGGY, "no_release_in_use"),
                                                (WIN_BUGGY, "window_held_unless_tombstone")])
def test_hypothesis_finds_the_violation(name: str, violated: str) -> None:
    result = check_stateful(instance(name), HypothesisOptions(seed=1))
    assert result.verdict is Verdict.VIOLATED and result.violated == violated


@pytest.mark.parametrize("name", [SWA_BUGGY, WIN_BUGGY])
def test_committed_counterexample_replays(name: str) -> None:
    res = CliRunner().invoke(app, ["replay", str(SPECS.parent / "counterexamples" / name / "trace.json")])
    assert res.exit_code == 0 and res.stdout.startswith("REPLAYED"), res.output


# -- the prefix index's pages count as cache-held ------------------------------------------------
@pytest.mark.parametrize("name", ["radix_lock_skips_leaf_fixed", "tgi_prefix_published_before_write_fixed",
                                  "radix_lock_skips_leaf_buggy", "tgi_prefix_published_before_write_buggy"])
def test_prefix_index_specs_keep_every_page_in_exactly_one_place(name: str) -> None:
    base = load_spec(SPECS / f"{name}.py")
    spec = base.derive(f"{name}_partitioned", expect=safe())
    spec.invariants.clear()
    register_partition(base.actions["prefill"].fn.__globals__["own"], spec=spec)
    assert explore(Instance(spec)).verdict is Verdict.PROVED
