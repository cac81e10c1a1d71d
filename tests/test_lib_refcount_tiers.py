"""Refcounted block tables and storage tiers: the vocabulary and the two spec pairs built on it.

Pairs: vLLM issue #1556 / PR #3347 (``vllm_fork_double_free_*``) and SGLang
PR #27108 (``sglang_hicache_demote_without_copy_*``).
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import instance
from ownership import Ownership, Spec, require, safe
from ownership.core.result import StopReason, Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.vocab.refcount import BlockTables
from ownership.vocab.tiers import Tiers

# (spec, symmetry) -> (verdict, distinct states, transitions, depth); for a
# buggy spec the counts are those explored until the violation.
PINNED = {
    ("vllm_fork_double_free_buggy", True): (Verdict.VIOLATED, 18, 66, 4),
    ("vllm_fork_double_free_buggy", False): (Verdict.VIOLATED, 251, 453, 4),
    ("vllm_fork_double_free_fixed", True): (Verdict.PROVED, 18, 79, 4),
    ("vllm_fork_double_free_fixed", False): (Verdict.PROVED, 364, 1008, 4),
    ("sglang_hicache_demote_without_copy_buggy", True): (Verdict.VIOLATED, 28, 81, 6),
    ("sglang_hicache_demote_without_copy_buggy", False): (Verdict.VIOLATED, 91, 259, 6),
    ("sglang_hicache_demote_without_copy_fixed", True): (Verdict.PROVED, 23, 93, 6),
    ("sglang_hicache_demote_without_copy_fixed", False): (Verdict.PROVED, 83, 356, 6),
}


@pytest.mark.parametrize(("name", "symmetry"), sorted(PINNED))
def test_pinned_state_counts(name: str, symmetry: bool) -> None:
    result = explore(instance(name), ExploreOptions(symmetry=symmetry))
    s = result.stats
    assert (result.verdict, s.states, s.transitions, s.depth) == PINNED[(name, symmetry)]


# -- vLLM #1556 ------------------------------------------------------------------------
def test_vllm_buggy_frees_a_block_the_sibling_still_uses() -> None:
    result = explore(instance("vllm_fork_double_free_buggy"))
    assert result.violated == "no_free_while_referenced"
    trace = result.trace
    assert trace is not None and [s.action for s in trace.steps] == ["allocate", "fork", "append_slot", "free"]
    # Fork counted the block the prompt names twice (prompt 3 blocks > window 2) twice.
    forked = trace.states[2]["gpu_ref"]
    assert sorted(forked.values(), reverse=True)[:2] == [3, 2]
    # The free puts a block on the free list while the other sequence's window still holds it.
    last = trace.steps[-1]
    bad = [e for e in last.events if e.violates == "no_free_while_referenced"]
    assert bad and bad[0].kind == "free"
    page = bad[0].get("pages")[0]
    other = next(r for r in ("A", "B") if r != last.args[0])
    assert trace.states[-1]["gpu_free"][page] == 1 and other in trace.states[-1]["gpu_holders"][page]
    # No shorter interleaving breaks it.
    bounded = explore(instance("vllm_fork_double_free_buggy"), ExploreOptions(max_depth=3))
    assert bounded.verdict is Verdict.BOUNDED_OK and bounded.stop_reason is StopReason.DEPTH_LIMIT


def test_vllm_buggy_ends_in_the_allocators_double_free_error() -> None:
    """The issue's "ValueError: Double free!": the sibling's free one step later."""
    result = explore(instance("vllm_fork_double_free_buggy"), ExploreOptions(invariants=("refcount_nonnegative",)))
    assert result.violated == "refcount_nonnegative" and result.trace is not None
    # The block freed too early is freed again by the sibling (its copy-on-write, or its own free).
    assert len(result.trace) == 5 and result.trace.steps[-1].args != result.trace.steps[-2].args
    errors = [e.get("error") for e in result.trace.steps[-1].events if e.violates == "refcount_nonnegative"]
    assert errors == ["Double free!"]


def test_vllm_fix_is_the_pr_and_both_parts_are_needed() -> None:
    fixed = explore(instance("vllm_fork_double_free_fixed"))
    assert fixed.verdict is Verdict.PROVED
    # Only fork's set(): the free of the whole table still frees the copied-on-write block.
    only_fork = explore(_patched(fork="fixed", free="buggy"))
    assert only_fork.violated == "no_free_while_referenced"
    # Only the window in free: fork's per-entry count leaks a reference (the block never comes back).
    only_free = explore(_patched(fork="buggy", free="fixed"), ExploreOptions(invariants=("refcount_matches_tables",)))
    assert only_free.violated == "refcount_matches_tables"


def test_vllm_fix_is_incomplete_beyond_the_prs_scenario() -> None:
    """Past more than W decode steps after a fork, block_table[len % W] names a stale entry."""
    big = {"max_blocks": 6, "num_gpu_blocks": 6}
    result = explore(instance("vllm_fork_double_free_fixed", **big), ExploreOptions(invariants=("no_free_while_referenced",)))
    assert result.violated == "no_free_while_referenced" and result.trace is not None
    assert len(result.trace) == 6
    # The fixed spec also checks refcount_matches_tables, which sees the stale entry one step
    # earlier: the sixth entry names a block without taking a reference to it.
    result = explore(instance("vllm_fork_double_free_fixed", **big))
    assert result.violated == "refcount_matches_tables" and result.trace is not None
    assert len(result.trace) == 5


def _patched(*, fork: str, free: str) -> Instance:
    import importlib
    import sys

    from conftest import SPECS

    sys.path.insert(0, str(SPECS))
    try:
        buggy = importlib.import_module("vllm_fork_double_free_buggy")
        fixed = importlib.import_module("vllm_fork_double_free_fixed")
    finally:
        sys.path.remove(str(SPECS))
    spec = buggy.spec.derive(f"vllm_mixed_{fork}_{free}", expect=safe())
    spec.replace((fixed if fork == "fixed" else buggy).spec.actions["fork"].fn)
    spec.replace((fixed if free == "fixed" else buggy).spec.actions["free"].fn)
    buggy.blocks.invariants("refcount_matches_tables", spec=spec)
    return Instance(spec)


# -- SGLang #27108 -----------------------------------------------------------------------
def test_sglang_buggy_demotes_without_a_copy_and_a_later_hit_reads_nothing() -> None:
    result = explore(instance("sglang_hicache_demote_without_copy_buggy"))
    assert result.violated == "tier_read_matches_index"
    trace = result.trace
    assert trace is not None and len(trace) == 6
    victim = trace.steps[-1].args[0]
    # The root cause is the eviction of the victim: the host had no room, nothing was committed.
    lost = [i for i, st in enumerate(trace.states) if st["tier_lost"][victim]]
    assert lost and trace.steps[lost[0] - 1].action == "evict_device_leaf"
    demote = [e for e in trace.steps[lost[0] - 1].events if e.kind == "demote"]
    assert demote and "data lost" in demote[0].get("note")
    # The later hit reads the host copy the tree claims, which does not exist.
    reads = [e for e in trace.steps[-1].events if e.violates == "tier_read_matches_index"]
    assert reads and reads[0].get("pool") == "host" and reads[0].get("content") is None


def test_sglang_fixed_keeps_the_node_on_device() -> None:
    result = explore(instance("sglang_hicache_demote_without_copy_fixed"))
    assert result.verdict is Verdict.PROVED
    bigger = explore(instance("sglang_hicache_demote_without_copy_fixed", nodes=3, device_pages=3, host_pages=2))
    assert bigger.verdict is Verdict.PROVED


def test_symmetry_never_changes_verdicts_or_shortest_length() -> None:
    for name in {n for n, _ in PINNED}:
        on = explore(instance(name), ExploreOptions(symmetry=True))
        off = explore(instance(name), ExploreOptions(symmetry=False))
        assert (on.verdict, on.violated) == (off.verdict, off.violated)
        assert (len(on.trace) if on.trace else None) == (len(off.trace) if off.trace else None)


# -- the vocabulary, one operation at a time ------------------------------------------------
def _block_spec(window: int | None) -> tuple[Spec, BlockTables]:
    spec = Spec("blocks_unit", expect=safe())
    spec.param("seqs", 2)
    Seq = spec.domain("Seq", "seqs", names="AB")
    blocks = BlockTables(spec, Seq, 2, 4, window=window)
    spec.var("dummy", bool, init=False)

    @spec.invariant
    def ok(s: Any) -> bool:
        return True

    return spec, blocks


def _run(spec: Spec, fn: Any) -> list[Any]:
    """Every outcome of ``fn`` from the initial state: (state as JSON, events)."""
    spec.action(fn)
    inst = Instance(spec)
    act = next(a for a in inst.action_instances if a.action.name == fn.__name__)
    return [(inst.to_json(sc.state), sc.events) for sc in inst.successors_of(inst.init_state, act)]


@pytest.mark.parametrize(("per_block", "expected"), [(False, 3), (True, 2)])
def test_incref_counts_per_entry_or_per_distinct_block(per_block: bool, expected: int) -> None:
    spec, blocks = _block_spec(window=2)

    def fork_like(s: Any) -> None:
        b = blocks.allocate(s, 0)
        for blk in (b, blocks.allocate(s, 0), b):  # a table naming b twice
            blocks.append(s, 0, blk)
        blocks.incref(s, 0, range(3), per_block=per_block)

    (state, _), *_ = _run(spec, fork_like)
    assert max(state["block_ref"].values()) == expected


def test_decref_returns_at_zero_and_a_second_free_is_the_double_free() -> None:
    spec, blocks = _block_spec(window=None)

    def twice(s: Any) -> None:
        b = blocks.allocate(s, 0)
        blocks.append(s, 0, b)
        blocks.decref(s, 0, b)
        blocks.decref(s, 0, b)

    outcomes = _run(spec, twice)
    assert len(outcomes) == 2  # either free block; --no-symmetry view of the choice
    state, events = outcomes[0]
    b = next(k for k, v in state["block_ref"].items() if v != 0)
    assert state["block_ref"][b] == -1 and state["block_free"][b] == 1
    assert [e.get("error") for e in events if e.kind == "free"] == [None, "Double free!"]


def test_holders_follow_the_live_window() -> None:
    spec, blocks = _block_spec(window=1)

    def grow(s: Any) -> None:
        first = blocks.allocate(s, 0)
        blocks.append(s, 0, first)
        blocks.append(s, 0, blocks.allocate(s, 0))  # the window now shows only the second block

    state, _ = _run(spec, grow)[0]
    held = {b for b, h in state["block_holders"].items() if h}
    assert len(held) == 1 and state["block_len"]["A"] == 2


def test_unknown_builtin_invariant_is_a_numbered_error() -> None:
    spec, blocks = _block_spec(window=None)
    with pytest.raises(OwnershipError) as err:
        blocks.invariants("no_such_thing")
    assert err.value.code is Code.UNKNOWN_INVARIANT


def _tier_spec() -> tuple[Spec, Any, Any, Tiers]:
    spec = Spec("tiers_unit", expect=safe())
    spec.param("items", 2)
    Item = spec.domain("Item", "items", names="AB")
    own = Ownership(spec, requests=Item)
    fast = own.pool("fast", 2, prefix="F")
    slow = own.pool("slow", 1, prefix="S")
    tiers = Tiers(own, fast, slow)
    tiers.invariants()
    return spec, fast, slow, tiers


def test_copy_commits_or_changes_nothing() -> None:
    spec, fast, slow, tiers = _tier_spec()

    def two_copies(s: Any) -> None:
        for item in (0, 1):
            fast.write(s, item, fast.alloc(s, item, 1))
        require(tiers.copy(s, 0, fast, slow))  # the slow tier's only page
        require(not tiers.copy(s, 1, fast, slow))  # no room: nothing committed

    state, events = _run(spec, two_copies)[0]
    assert state["slow_content"] == {"S0": "A"} and state["slow_holders"] == {"S0": ["A"]}
    assert [e.kind for e in events].count("copy_failed") == 1


def test_demote_without_copy_is_lost_and_the_read_is_a_misread() -> None:
    spec, fast, slow, tiers = _tier_spec()

    def demote_and_read(s: Any) -> None:
        fast.write(s, 0, fast.alloc(s, 0, 1))
        tiers.demote(s, 0, fast, slow)
        tiers.read(s, 0, slow)

    inst_outcomes = _run(spec, demote_and_read)
    state, events = inst_outcomes[0]
    assert state["tier_lost"]["A"] is True and state["tier_misread"]["A"] is True
    assert {e.violates for e in events if e.violates} == {"demote_only_after_copy", "tier_read_matches_index"}


def test_read_of_a_page_holding_other_content_is_a_misread() -> None:
    spec, fast, slow, tiers = _tier_spec()

    def stale(s: Any) -> None:
        pages = fast.alloc(s, 0, 1)
        fast.write(s, 1, pages)  # B's KV lands in the page A's index entry names
        tiers.read(s, 0, fast)

    state, events = _run(spec, stale)[0]
    assert state["tier_misread"]["A"] is True
    assert [e.get("content") for e in events if e.kind == "read"] == ["B"]
