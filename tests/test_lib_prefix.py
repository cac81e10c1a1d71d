"""The prefix-index vocabulary (ownership.vocab.prefix) and the specs built on it.

Pinned state counts and shortest counterexamples of the two buggy/fixed pairs
(text-generation-inference PR #2489, mini-sglang PR #52), the Z3 engine's
agreement on them, and unit tests of each operation.
"""

from __future__ import annotations

from typing import Any

import pytest
from pins import events, explored
from typer.testing import CliRunner

from conftest import SPECS, instance
from conftest import run_once as run
from ownership import Enum, Ownership, Spec, require
from ownership.cli import app
from ownership.core.result import StopReason, Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.vocab.prefix import PrefixIndex

TGI_BUGGY = "tgi_prefix_published_before_write_buggy"
TGI_FIXED = "tgi_prefix_published_before_write_fixed"
RADIX_BUGGY = "radix_lock_skips_leaf_buggy"
RADIX_FIXED = "radix_lock_skips_leaf_fixed"

# (spec, symmetry) -> (verdict, distinct states, transitions, depth, violated invariant).
# For a buggy spec the counts are those explored until the violation (breadth-first, deterministic).
PINNED = {
    (TGI_BUGGY, True): (Verdict.VIOLATED, 15, 23, 6, "prefix_hit_written"),
    (TGI_BUGGY, False): (Verdict.VIOLATED, 275, 423, 6, "prefix_hit_written"),
    (TGI_FIXED, True): (Verdict.PROVED, 21, 29, 8, None),
    (TGI_FIXED, False): (Verdict.PROVED, 604, 820, 8, None),
    (RADIX_BUGGY, True): (Verdict.VIOLATED, 14, 21, 5, "no_evict_in_use"),
    (RADIX_BUGGY, False): (Verdict.VIOLATED, 24, 35, 5, "no_evict_in_use"),
    (RADIX_FIXED, True): (Verdict.PROVED, 14, 21, 6, None),
    (RADIX_FIXED, False): (Verdict.PROVED, 25, 36, 6, None),
}

# Larger instances than the defaults: (spec, params) -> (verdict, states, transitions, depth, violated).
LARGER: dict[tuple[str, tuple[tuple[str, int], ...]], tuple[Verdict, int, int, int, str | None]] = {
    (TGI_BUGGY, (("requests", 3), ("blocks", 6))): (Verdict.VIOLATED, 23, 48, 6, "prefix_hit_written"),
    (TGI_FIXED, (("requests", 3), ("blocks", 6))): (Verdict.PROVED, 89, 167, 12, None),
    (RADIX_BUGGY, (("requests", 3), ("pages", 2))): (Verdict.VIOLATED, 56, 128, 7, "no_evict_in_use"),
    (RADIX_FIXED, (("requests", 3), ("pages", 3))): (Verdict.PROVED, 106, 217, 9, None),
}


@pytest.mark.parametrize(("name", "symmetry"), sorted(PINNED))
def test_pinned_state_counts(name: str, symmetry: bool) -> None:
    assert explored(name, symmetry) == PINNED[(name, symmetry)]


@pytest.mark.parametrize(("name", "params"), sorted(LARGER))
def test_pinned_state_counts_of_larger_instances(name: str, params: tuple[tuple[str, int], ...]) -> None:
    assert explored(name, **dict(params)) == LARGER[(name, params)]



# -- text-generation-inference PR #2489 ----------------------------------------------------------
def test_tgi_pushed_back_batch_publishes_blocks_nobody_wrote() -> None:
    result = explore(instance(TGI_BUGGY))
    trace = result.trace
    assert trace is not None and len(trace) == 6
    assert [s.action for s in trace.steps] == [
        "arrive", "arrive", "next_batch", "prefill", "next_batch_below_min_size", "next_batch"
    ]
    # Step 5: the entry's allocation is dropped before any prefill and its block is published as x.
    pushed = trace.steps[4]
    (published,) = events(pushed, "publish")
    page = published.get("page")
    assert published.get("node") == "x" and not events(pushed, "write")
    assert trace.states[5]["trie_node"][page] == "x" and trace.states[5]["trie_kv"][page] != "x"
    # Step 6: the same entry is batched again and the trie hands it that page as cached prefix x.
    (hit,) = events(trace.steps[5], "prefix_hit")
    assert hit.get("page") == page and hit.violates == "prefix_hit_written"
    assert hit.get("req") == pushed.args[0]
    # No shorter execution does it.
    bounded = explore(instance(TGI_BUGGY), ExploreOptions(max_depth=5))
    assert bounded.verdict is Verdict.BOUNDED_OK and bounded.stop_reason is StopReason.DEPTH_LIMIT


def test_tgi_min_size_needs_a_running_batch() -> None:
    # With one request nothing runs while it is batched, so no batch is ever pushed back.
    result = explore(instance(TGI_BUGGY, requests=1))
    assert result.verdict is Verdict.PROVED


def test_tgi_fix_never_hands_out_unwritten_blocks_at_a_larger_size() -> None:
    # Three requests, room for eviction and re-publication: every hit and every matched read
    # still sees its prefix's KV.
    result = explore(instance(TGI_FIXED, requests=3, blocks=6),
                     ExploreOptions(invariants=("prefix_read_matches", "prefix_hit_written")))
    assert result.verdict is Verdict.PROVED


# -- mini-sglang PR #52 --------------------------------------------------------------------------
def test_radix_unlocked_match_is_evicted_while_in_use() -> None:
    result = explore(instance(RADIX_BUGGY))
    trace = result.trace
    assert trace is not None and len(trace) == 5
    assert [s.action for s in trace.steps] == ["arrive", "arrive", "prefill", "finish", "prefill"]
    last = trace.steps[-1]
    req = last.args[0]
    (evicted,) = events(last, "evict")
    assert evicted.violates == "no_evict_in_use" and evicted.get("in_use_by") == [req]
    assert evicted.get("node") == "x"
    before, after = trace.states[4], trace.states[5]
    # The request matched x, yet lock_handle counted only the root: x stayed unlocked.
    assert after["handle"][req] == "x"
    assert after["radix_lock"]["x"] == before["radix_lock"]["x"] == 0
    assert after["radix_root_lock"] == before["radix_root_lock"] + 1
    bounded = explore(instance(RADIX_BUGGY), ExploreOptions(max_depth=4))
    assert bounded.verdict is Verdict.BOUNDED_OK and bounded.stop_reason is StopReason.DEPTH_LIMIT


def test_radix_fix_locks_the_matched_node_and_the_request_waits() -> None:
    # Replay the buggy counterexample's actions on the fixed spec: the last prefill is not enabled,
    # because x is locked and no page is free or evictable.
    trace = explore(instance(RADIX_BUGGY)).trace
    assert trace is not None
    inst = instance(RADIX_FIXED)
    state = inst.init_state
    for i, step in enumerate(trace.steps):
        domains = inst.spec.actions[step.action].arg_domains
        ai = inst.find_instance(step.action, [inst.parse_arg(d, a) for d, a in zip(domains, step.args, strict=True)])
        outs = inst.successors_of(state, ai)
        if i == len(trace.steps) - 1:
            assert outs == []
            assert inst.to_json(state)["radix_lock"]["x"] == 0  # A finished: nobody holds x yet
        else:
            (out,) = outs
            state = out.state


# -- both pairs: the other engines -------------------------------------------------------------------
@pytest.mark.parametrize(("name", "violated", "depth"), [
    (TGI_BUGGY, "prefix_hit_written", 6),
    (RADIX_BUGGY, "no_evict_in_use", 5),
])
@pytest.mark.slow
def test_bmc_finds_the_same_shortest_violation(name: str, violated: str, depth: int) -> None:
    result = bmc(instance(name), BmcOptions(max_depth=depth))
    assert result.verdict is Verdict.VIOLATED and result.violated == violated
    assert result.trace is not None and len(result.trace) == depth


def test_committed_counterexamples_replay() -> None:
    for name in (TGI_BUGGY, RADIX_BUGGY):
        res = CliRunner().invoke(app, ["replay", str(SPECS.parent / "counterexamples" / name / "trace.json")])
        assert res.exit_code == 0 and res.stdout.startswith("REPLAYED"), res.output


# -- vocabulary unit tests ---------------------------------------------------------------------------
def tiny(pages: int = 2, *, root_refs: bool = False) -> tuple[Spec, Any, PrefixIndex]:
    spec = Spec("tiny_prefix")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    radix = PrefixIndex(pool, "radix", {"x": None, "xy": "x", "xz": "x"}, root_refs=root_refs)
    radix.invariants("prefix_hit_written", "no_evict_in_use", "lock_refs_nonnegative", "prefix_read_matches",
                     "index_pages_exclusive", "free_count_at_most_one")
    own.invariants("no_foreign_read", "no_double_ownership")
    return spec, pool, radix


X, XY, XZ = 0, 1, 2
A, B = 0, 1




def cache(radix: PrefixIndex, s: Any, r: int, prompt: int) -> None:
    """``r`` computes ``prompt`` from scratch and publishes it (a finished request)."""
    radix.alloc(s, r, prompt, None)
    radix.write(s, r)
    radix.insert(s, r, prompt)
    radix.release(s, r)


def test_the_key_tree_is_static_and_checked() -> None:
    _, _, radix = tiny()
    assert radix.path(None) == () and radix.path(XY) == (X, XY)
    assert radix.parent_of == (None, X, X) and radix.children_of == ((XY, XZ), (), ())
    spec = Spec("bad_tree")
    spec.param("requests", 1)
    own = Ownership(spec, requests=spec.domain("Req", "requests"))
    pool = own.pool("kv", 1)
    with pytest.raises(OwnershipError) as err:
        PrefixIndex(pool, "radix", {"xy": "x", "x": None})
    assert err.value.code is Code.SPEC_INVALID and "declared before" in str(err.value)
    with pytest.raises(OwnershipError) as err:
        tiny()[2].invariants("no_such_thing")
    assert err.value.code is Code.UNKNOWN_INVARIANT


def test_insert_publishes_written_pages_and_match_maps_them() -> None:
    spec, _, radix = tiny()

    def body(s: Any) -> None:
        cache(radix, s, A, XY)
        assert radix.match(s, B, XZ) == X  # the longest cached prefix of xz is x
        assert radix.match(s, B, XY) == XY

    inst, outs = run(spec, body)
    assert len(outs) == 2  # either page for x
    for out in outs:
        st = inst.to_json(out.state)
        page_of = {n: p for p, n in st["radix_node"].items() if n is not None}
        assert set(page_of) == {"x", "xy"} and st["kv_free"] == {"K0": 0, "K1": 0}
        assert st["kv_holders"] == {"K0": [], "K1": []}  # the index owns them now
        assert st["radix_table"]["B"] == {page_of["x"]: "x", page_of["xy"]: "xy"}
        assert st["radix_kv"] == st["radix_node"] and inst.violated(out.state) is None
        assert [e.kind for e in out.events].count("prefix_hit") == 3


def test_written_says_whether_the_forward_filled_the_own_pages() -> None:
    spec, _, radix = tiny()

    def body(s: Any) -> None:
        radix.alloc(s, A, XY, None)
        assert not radix.written(s, A) and radix.written(s, B)
        radix.write(s, A)
        assert radix.written(s, A)

    assert len(run(spec, body)[1]) == 2


def test_a_hit_on_a_page_nobody_wrote_breaks_prefix_hit_written() -> None:
    spec, _, radix = tiny(pages=1)

    def body(s: Any) -> None:
        radix.alloc(s, A, X, None)
        radix.insert(s, A, X)  # published without a write
        radix.release(s, A)
        radix.match(s, B, X)

    inst, (out,) = run(spec, body)
    assert inst.violated(out.state) == "prefix_hit_written"
    (hit,) = [e for e in out.events if e.kind == "prefix_hit"]
    assert hit.violates == "prefix_hit_written" and hit.get("kv") == "-"


def test_insert_frees_the_duplicate_of_a_block_already_cached() -> None:
    spec, _, radix = tiny(pages=3)

    def body(s: Any) -> None:
        radix.alloc(s, A, X, None)  # A and B both compute x
        radix.alloc(s, B, X, None)
        radix.write(s, A)
        radix.write(s, B)
        radix.insert(s, A, X)
        radix.release(s, A)
        radix.insert(s, B, X)  # x is cached already: B's page goes back to the free list
        radix.release(s, B)

    inst, outs = run(spec, body)
    for out in outs:
        st = inst.to_json(out.state)
        assert sorted(st["kv_free"].values()) == [0, 1, 1]
        assert list(st["radix_node"].values()).count("x") == 1 and inst.violated(out.state) is None
        assert [e.get("req") for e in out.events if e.kind == "free"] == ["B"]


def test_locks_protect_an_entry_from_eviction() -> None:
    spec, _, radix = tiny(pages=1, root_refs=True)

    def locked(s: Any) -> None:
        cache(radix, s, A, X)
        radix.lock_path(s, radix.match(s, B, X), 1)
        radix.alloc(s, B, XY, X)  # needs the only page: x is locked, nothing can be evicted

    assert run(spec, locked)[1] == []

    def unlocked(s: Any) -> None:
        cache(radix, s, A, X)
        radix.match(s, B, X)  # matched but not locked
        radix.alloc(s, B, XY, X)

    inst, (out,) = run(spec, unlocked)
    assert inst.violated(out.state) == "no_evict_in_use"
    (ev,) = [e for e in out.events if e.kind == "evict"]
    assert ev.get("in_use_by") == ["B"] and ev.violates == "no_evict_in_use"


def test_lock_path_counts_the_node_its_ancestors_and_the_root() -> None:
    spec, _, radix = tiny(root_refs=True)

    def body(s: Any) -> None:
        radix.lock_path(s, XY, 1)
        radix.add_ref(s, XZ, 1)
        radix.add_ref(s, None, -1)

    inst, (out,) = run(spec, body)
    st = inst.to_json(out.state)
    assert st["radix_lock"] == {"x": 1, "xy": 1, "xz": 1} and st["radix_root_lock"] == 1

    def underflow(s: Any) -> None:
        radix.add_ref(s, X, -1)

    inst, (out,) = run(spec, underflow)
    assert inst.violated(out.state) == "lock_refs_nonnegative"


def test_eviction_takes_leaves_only() -> None:
    spec, _, radix = tiny(pages=2)

    def body(s: Any) -> None:
        cache(radix, s, A, XY)  # x and xy cached, nothing locked, no free page
        radix.evict_one(s)

    inst, outs = run(spec, body)
    assert len(outs) == 2  # either page order; x has a cached child, so only xy is a leaf
    for out in outs:
        st = inst.to_json(out.state)
        assert sorted(n for n in st["radix_node"].values() if n) == ["x"]
        assert inst.violated(out.state) is None


def test_a_read_of_a_reused_matched_page_breaks_prefix_read_matches() -> None:
    spec, _, radix = tiny(pages=1)

    def body(s: Any) -> None:
        cache(radix, s, A, X)
        radix.match(s, B, X)
        radix.evict_one(s)  # x is unlocked: evicted while B maps it
        radix.alloc(s, A, XY, X)  # A gets the page for its block xy
        radix.write(s, A)
        radix.read(s, B)  # B still attends over it as x

    inst, (out,) = run(spec, body)
    st = inst.to_json(out.state)
    assert st["radix_evicted_in_use"]["B"] is True and st["radix_read_stale"]["B"] is True
    (read,) = [e for e in out.events if e.kind == "prefix_read"]
    assert read.get("node") == "x" and read.get("kv") == "xy" and read.violates == "prefix_read_matches"


def test_a_cached_page_that_is_also_free_breaks_the_exclusivity_invariants() -> None:
    spec, pool, radix = tiny(pages=1)

    def published_then_freed(s: Any) -> None:
        radix.alloc(s, A, X, None)
        radix.write(s, A)
        radix.insert(s, A, X)
        pool.free_pages(s, A, [0])  # a stale page list frees the cached page
        pool.free_pages(s, A, [0])  # twice

    inst, (out,) = run(spec, published_then_freed)
    assert inst.violated(out.state) == "index_pages_exclusive"
    assert not inst.holds(out.state, "free_count_at_most_one")


def test_pages_accounted_when_idle_counts_cached_pages_as_returned() -> None:
    spec, _, radix = tiny(pages=2)
    Phase = Enum("Phase", "IDLE BUSY")
    spec.var("phase", Phase, init=Phase.IDLE)
    spec.terminal(lambda s: s.phase == Phase.IDLE)
    radix.invariants("pages_accounted_when_idle")

    def cached_and_idle(s: Any) -> None:
        cache(radix, s, A, X)

    inst, outs = run(spec, cached_and_idle)
    assert len(outs) == 2 and all(inst.violated(o.state) is None for o in outs)

    def leaked(s: Any) -> None:
        radix.alloc(s, A, X, None)  # still held while idle

    inst, outs = run(spec, leaked)
    assert all(inst.violated(o.state) == "pages_accounted_when_idle" for o in outs)


@pytest.mark.slow
def test_the_vocabulary_runs_under_the_solver() -> None:
    spec, _, radix = tiny(pages=1, root_refs=True)
    Req = spec.domains["Req"]
    RadixNode = radix.Node  # annotations resolve by the domain's declared name
    Phase = Enum("Phase", "IDLE RUN DONE")
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)

    def start(s, r: Req, prompt: RadixNode):  # type: ignore[valid-type]  # noqa: ANN001, ANN202 - never locked
        require(s.phase[r] == Phase.IDLE)
        handle = radix.match(s, r, radix.parent(s, prompt))
        radix.alloc(s, r, prompt, handle)
        radix.write(s, r)
        radix.read(s, r)
        s.phase[r] = Phase.RUN

    def finish(s, r: Req, prompt: RadixNode):  # type: ignore[valid-type]  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.RUN)
        radix.insert(s, r, prompt)
        radix.release(s, r)
        s.phase[r] = Phase.DONE

    spec.action(start)
    spec.action(finish)
    e = explore(Instance(spec))
    b = bmc(Instance(spec), BmcOptions(max_depth=4))
    assert e.verdict is Verdict.VIOLATED and e.violated == "no_evict_in_use"
    assert b.verdict is Verdict.VIOLATED and b.violated == e.violated
    assert e.trace is not None and b.trace is not None and len(b.trace) == len(e.trace) == 3
