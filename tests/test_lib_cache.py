"""The library specs built on the cache vocabulary (ownership.vocab.cache).

Pinned state counts and the shortest counterexample of the SGLang SWA
radix-cache pair (PR #29352), the engines' agreement on it, what the fix
relies on, and the prefix-index specs checked against the partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import SPECS, instance
from ownership import safe
from ownership.cli import app
from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.vocab.cache import register_partition

SWA_BUGGY = "sglang_swa_recover_locked_full_buggy"
SWA_FIXED = "sglang_swa_recover_locked_full_fixed"

# (spec, symmetry) -> (verdict, distinct states, transitions, depth, violated invariant).
# For a buggy spec the counts are those explored until the violation (breadth-first, deterministic).
PINNED = {
    (SWA_BUGGY, True): (Verdict.VIOLATED, 10, 12, 3, "no_release_in_use"),
    (SWA_BUGGY, False): (Verdict.VIOLATED, 38, 39, 3, "no_release_in_use"),
    (SWA_FIXED, True): (Verdict.PROVED, 53, 80, 7, None),
    (SWA_FIXED, False): (Verdict.PROVED, 409, 632, 7, None),
}

LARGER = {
    (SWA_BUGGY, (("full_pages", 3), ("requests", 3), ("swa_pages", 3))): (Verdict.VIOLATED, 11, 17, 3, "no_release_in_use"),
    (SWA_FIXED, (("full_pages", 3), ("requests", 3), ("swa_pages", 3))): (Verdict.PROVED, 286, 658, 10, None),
}


@pytest.mark.parametrize(("name", "symmetry"), sorted(PINNED))
def test_pinned_state_counts(name: str, symmetry: bool) -> None:
    result = explore(instance(name), ExploreOptions(symmetry=symmetry))
    s = result.stats
    assert (result.verdict, s.states, s.transitions, s.depth, result.violated) == PINNED[(name, symmetry)]


@pytest.mark.parametrize(("name", "params"), sorted(LARGER))
def test_pinned_state_counts_of_larger_instances(name: str, params: tuple[tuple[str, int], ...]) -> None:
    result = explore(instance(name, **dict(params)))
    s = result.stats
    assert (result.verdict, s.states, s.transitions, s.depth, result.violated) == LARGER[(name, params)]


def test_declared_expectations_match_the_explorer() -> None:
    for name in (SWA_BUGGY, SWA_FIXED):
        spec = load_spec(SPECS / f"{name}.py")
        result = explore(Instance(spec))
        assert spec.expect is not None
        if spec.expect.violates is None:
            assert result.verdict is Verdict.PROVED, name
        else:
            assert result.verdict is Verdict.VIOLATED and result.violated == spec.expect.violates, name


def _events(step: Any, kind: str) -> list[Any]:
    return [e for e in step.events if e.kind == kind]


def test_recovering_the_tombstone_frees_the_full_page_the_first_request_still_maps() -> None:
    trace = explore(instance(SWA_BUGGY)).trace
    assert trace is not None
    assert [s.action for s in trace.steps] == ["prefill", "window_passes", "prefill"]
    first, second = trace.steps[0].args[0], trace.steps[2].args[0]
    assert first != second
    # The first request's pages were handed to the tree, not freed, and it maps them.
    (full_off,) = [e for e in _events(trace.steps[0], "hand_off") if e.get("pool") == "full"]
    (page,) = full_off.get("pages")
    assert not _events(trace.steps[0], "free")
    assert trace.states[1]["full_tree_mapped"][first][page] is True
    # Its window passes: the SWA half is freed and the node is a tombstone; the Full page stays locked.
    assert _events(trace.steps[1], "tombstone") and trace.states[2]["swa_tree_tomb"]["x"] is True
    assert trace.states[2]["full_tree_lock"]["x"] == 1
    # The second request cannot match the tombstone, computes the block, and its insert frees the locked page.
    kinds = [e.kind for e in trace.steps[2].events]
    assert kinds.index("alloc") < kinds.index("cache_release") < kinds.index("cache_hit")
    (rel,) = _events(trace.steps[2], "cache_release")
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


# -- engines ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_bmc_finds_the_same_shortest_violation() -> None:
    result = bmc(instance(SWA_BUGGY), BmcOptions(max_depth=3))
    assert result.verdict is Verdict.VIOLATED and result.violated == "no_release_in_use"
    assert result.trace is not None and len(result.trace) == 3


def test_hypothesis_finds_the_violation() -> None:
    result = check_stateful(instance(SWA_BUGGY), HypothesisOptions(seed=1))
    assert result.verdict is Verdict.VIOLATED and result.violated == "no_release_in_use"


@pytest.mark.slow
def test_prove_proves_the_fix() -> None:
    result = prove(instance(SWA_FIXED), BmcOptions())
    assert result.verdict is Verdict.PROVED, result.notes


def test_committed_counterexample_replays(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["replay", str(SPECS.parent / "counterexamples" / SWA_BUGGY / "trace.json")])
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
