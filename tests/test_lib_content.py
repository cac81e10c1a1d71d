"""The content-identity vocabulary (ownership.vocab.content) and the specs built on it.

Pinned state counts and the shortest counterexample of the vLLM block-hash
collision pair (PR #12621, GHSA-rm76-4mrf-v9r8), the Z3 engines' agreement on
it, and unit tests of each operation and invariant: content keys judge reads
by what a page holds, not by who wrote it.
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
from ownership.core.schema import PageMark
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.vocab.content import ContentIndex, SharedPageWrites
from ownership.vocab.prefix import PrefixIndex

VLLM_BUGGY = "vllm_prefix_hash_collision_buggy"
VLLM_FIXED = "vllm_prefix_hash_collision_fixed"
LORA_BUGGY = "vllm_prefix_lora_scope_buggy"
LORA_FIXED = "vllm_prefix_lora_scope_fixed"

# (spec, symmetry) -> (verdict, distinct states, transitions, depth, violated invariant).
# For a buggy spec the counts are those explored until the violation (breadth-first, deterministic).
PINNED = {
    (VLLM_BUGGY, True): (Verdict.VIOLATED, 33, 46, 4, "no_wrong_content_read"),
    (VLLM_BUGGY, False): (Verdict.VIOLATED, 167, 208, 4, "no_wrong_content_read"),
    (VLLM_FIXED, True): (Verdict.PROVED, 46, 72, 6, None),
    (VLLM_FIXED, False): (Verdict.PROVED, 353, 512, 6, None),
    (LORA_BUGGY, True): (Verdict.VIOLATED, 17, 22, 4, "no_wrong_content_read"),
    (LORA_BUGGY, False): (Verdict.VIOLATED, 76, 84, 4, "no_wrong_content_read"),
    (LORA_FIXED, True): (Verdict.PROVED, 25, 38, 6, None),
    (LORA_FIXED, False): (Verdict.PROVED, 177, 256, 6, None),
}

# Larger instances than the defaults: (spec, params) -> (verdict, states, transitions, depth, violated).
LARGER: dict[tuple[str, tuple[tuple[str, int], ...]], tuple[Verdict, int, int, int, str | None]] = {
    (VLLM_BUGGY, (("requests", 3), ("blocks", 3), ("hashes", 2))): (Verdict.VIOLATED, 59, 103, 4, "no_wrong_content_read"),
    (VLLM_FIXED, (("requests", 3), ("blocks", 3), ("hashes", 2))): (Verdict.PROVED, 248, 540, 9, None),
    (VLLM_FIXED, (("requests", 3), ("blocks", 2), ("hashes", 3))): (Verdict.PROVED, 216, 482, 9, None),
    (LORA_BUGGY, (("requests", 3), ("blocks", 3))): (Verdict.VIOLATED, 31, 49, 4, "no_wrong_content_read"),
    (LORA_FIXED, (("requests", 3), ("blocks", 3))): (Verdict.PROVED, 145, 309, 9, None),
}


@pytest.mark.parametrize(("name", "symmetry"), sorted(PINNED))
def test_pinned_state_counts(name: str, symmetry: bool) -> None:
    assert explored(name, symmetry) == PINNED[(name, symmetry)]


@pytest.mark.parametrize(("name", "params"), sorted(LARGER))
def test_pinned_state_counts_of_larger_instances(name: str, params: tuple[tuple[str, int], ...]) -> None:
    assert explored(name, **dict(params)) == LARGER[(name, params)]



# -- vLLM PR #12621 ---------------------------------------------------------------------------------
def test_vllm_colliding_prompt_reads_the_other_prompts_block() -> None:
    trace = explore(instance(VLLM_BUGGY)).trace
    assert trace is not None
    assert [s.action for s in trace.steps] == ["schedule", "forward", "schedule", "forward"]
    writer, reader = trace.steps[0].args[0], trace.steps[2].args[0]
    assert writer != reader and trace.steps[0].args[1] != trace.steps[2].args[1]  # two different prompts
    last = trace.states[-1]
    # The two prefixes got the same block hash, and the reader was handed the writer's block.
    assert last["cache_hash"]["xz"] == last["cache_hash"]["yz"]
    (hit,) = events(trace.steps[2], "content_hit")
    assert hit.get("key") != hit.get("holds") and hit.violates is None  # the hit is the cause ...
    (read,) = events(trace.steps[3], "content_read")  # ... the read of other KV is the violation
    assert read.violates == "no_wrong_content_read" and read.get("page") == hit.get("page")
    assert read.get("writer") == writer and read.get("expected") == trace.steps[2].args[1]
    assert not events(trace.steps[3], "write")  # a hit computes nothing
    bounded = explore(instance(VLLM_BUGGY), ExploreOptions(max_depth=3))
    assert bounded.verdict is Verdict.BOUNDED_OK and bounded.stop_reason is StopReason.DEPTH_LIMIT


def test_vllm_without_a_second_hash_value_every_prompt_collides() -> None:
    # One hash value: the collision is forced, and found at the same depth.
    result = explore(instance(VLLM_BUGGY, hashes=1))
    assert result.violated == "no_wrong_content_read" and result.trace is not None and len(result.trace) == 4


def test_vllm_fix_shares_blocks_between_requests_with_the_same_prompt() -> None:
    """The fixed spec still shares: some reachable read is of a block another request wrote, and it is no violation."""
    inst = instance(VLLM_FIXED)
    result = explore(inst, ExploreOptions(symmetry=False))
    assert result.verdict is Verdict.PROVED
    seen_shared = False
    frontier = [inst.init_state]
    seen = {inst.init_state}
    while frontier and not seen_shared:
        state = frontier.pop()
        for ai in inst.action_instances:
            for out in inst.successors_of(state, ai):
                for e in out.events:
                    if e.kind == "content_read" and e.get("writer") != e.get("req"):
                        assert e.violates is None and e.get("expected") == e.get("holds")
                        seen_shared = True
                if out.state not in seen:
                    seen.add(out.state)
                    frontier.append(out.state)
    assert seen_shared


def test_vllm_fix_refuses_the_colliding_hash() -> None:
    trace = explore(instance(VLLM_BUGGY)).trace
    assert trace is not None
    inst = instance(VLLM_FIXED)
    state = inst.init_state
    for i, step in enumerate(trace.steps):
        domains = inst.spec.actions[step.action].arg_domains
        ai = inst.find_instance(step.action, [inst.parse_arg(d, a) for d, a in zip(domains, step.args, strict=True)])
        outs = inst.successors_of(state, ai)
        if i == 2:
            # The second prompt can only get the other hash value: a miss, a fresh block.
            assert outs and all(inst.to_json(o.state)["cache_hash"]["yz"] != inst.to_json(o.state)["cache_hash"]["xz"]
                                for o in outs)
            assert all(not events(o, "content_hit") for o in outs)
            break
        (out,) = [o for o in outs if inst.to_json(o.state) == trace.states[i + 1]]  # the trace's own choices
        state = out.state


def test_vllm_fix_checks_the_hash_itself_never_collides() -> None:
    """With the weak hash put back, the fixed spec fails at the collision, two steps before any wrong read."""
    fixed = load_spec(SPECS / f"{VLLM_FIXED}.py")
    weak = fixed.derive("vllm_fixed_with_the_weak_hash")
    cache = fixed.actions["schedule"].fn.__globals__["cache"]

    @weak.replace
    def block_hash(s: Any, prompt: Any) -> Any:
        return cache.hash(s, prompt, collide=True)

    result = explore(Instance(weak))
    assert result.violated == "block_hashes_distinct" and result.trace is not None
    assert [s.action for s in result.trace.steps] == ["schedule", "schedule"]
    wrong = explore(Instance(weak), ExploreOptions(invariants=("no_wrong_content_read",)))
    assert wrong.violated == "no_wrong_content_read" and wrong.trace is not None and len(wrong.trace) == 4


# -- vLLM PR #3263 ----------------------------------------------------------------------------------
def test_vllm_request_under_another_adapter_reads_the_first_adapters_kv() -> None:
    trace = explore(instance(LORA_BUGGY)).trace
    assert trace is not None
    assert [s.action for s in trace.steps] == ["schedule", "forward", "schedule", "forward"]
    (_, first), (_, second) = trace.steps[0].args, trace.steps[2].args
    assert first != second  # the same prompt under two adapters
    (hit,) = events(trace.steps[2], "content_hit")
    assert hit.get("holds") == f"p@{first}"
    (read,) = events(trace.steps[3], "content_read")
    assert (read.get("expected"), read.get("holds")) == (f"p@{second}", f"p@{first}")
    assert read.violates == "no_wrong_content_read"
    # No shorter execution does it.
    assert explore(instance(LORA_BUGGY), ExploreOptions(max_depth=3)).verdict is Verdict.BOUNDED_OK


def test_vllm_lora_fix_keeps_one_cached_block_per_adapter() -> None:
    # Some reachable state caches the prompt twice, once under each adapter.
    spec = load_spec(SPECS / f"{LORA_FIXED}.py").derive("two_entries_are_unreachable")

    @spec.invariant
    def at_most_one_entry(s: Any) -> bool:
        return sum(s.cache_published[p] for p in s.all(spec.domains["KvPage"])) <= 1

    found = explore(Instance(spec, {"requests": 3, "blocks": 3}))
    assert found.violated == "at_most_one_entry" and found.trace is not None
    last = found.trace.states[-1]
    scopes = {last["cache_entry_scope"][p] for p, pub in last["cache_published"].items() if pub}
    assert scopes == {"base", "sql"}


def test_vllm_lora_fix_checks_the_adapter_is_in_the_cache_key() -> None:
    """The fix's own invariant fails on the unfixed registration as soon as a block is cached (2 steps, not 4)."""
    fixed = load_spec(SPECS / f"{LORA_FIXED}.py")
    buggy = load_spec(SPECS / f"{LORA_BUGGY}.py").derive("lora_buggy_checked_for_the_key")
    buggy.invariant(fixed.invariants["cached_under_own_adapter"].fn, name="cached_under_own_adapter")
    result = explore(Instance(buggy))
    assert result.violated == "cached_under_own_adapter" and result.trace is not None
    assert [s.action for s in result.trace.steps] == ["schedule", "forward"]


@pytest.mark.parametrize("buggy", [VLLM_BUGGY, LORA_BUGGY])
def test_hypothesis_finds_the_bug(buggy: str) -> None:
    # bmc and prove on every library spec: tests/test_corpus.py.
    found = check_stateful(instance(buggy), HypothesisOptions(seed=0))
    assert found.verdict is Verdict.VIOLATED and found.violated == "no_wrong_content_read"


@pytest.mark.parametrize("name", [VLLM_BUGGY, LORA_BUGGY])
def test_committed_counterexamples_replay(name: str) -> None:
    res = CliRunner().invoke(app, ["replay", str(SPECS.parent / "counterexamples" / name / "trace.json")])
    assert res.exit_code == 0 and res.stdout.startswith("REPLAYED"), res.output


# -- vocabulary unit tests ---------------------------------------------------------------------------
A, B = 0, 1
X, Y = 0, 1


def nth(s: Any, domain: Any, k: int) -> Any:
    """Element ``k`` of ``domain`` as spec code reaches it (by iterating: never an int index)."""
    return list(s.all(domain))[k]


def tiny(pages: int = 2, *, hashes: int | None = None, collide: bool = False, scoped: bool = False,
         radix: bool = False) -> tuple[Spec, Any, ContentIndex, PrefixIndex | None]:
    spec = Spec("tiny_content")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    trie = PrefixIndex(pool, "trie", {"t": None}) if radix else None
    scopes = spec.domain("Tenant", 2, names=["red", "blue"]) if scoped else None
    index = ContentIndex(pool, "cache", ["x", "y"], hashes=hashes, collide=collide, scopes=scopes,
                         also=(trie,) if trie is not None else ())
    index.invariants()
    own.invariants("no_foreign_read")
    return spec, pool, index, trie




def compute(index: ContentIndex, s: Any, r: int, key: int, scope: Any = None) -> None:
    """``r`` misses, computes ``key`` in a fresh page and publishes it."""
    h = index.hash(s, key)
    assert not index.lookup(s, r, h, key, scope)
    index.alloc(s, r, 1, key)
    index.write(s, r, key, scope)
    index.insert(s, r, h, key, scope)


def test_a_hit_on_the_same_key_is_a_shared_read_not_a_wrong_one() -> None:
    spec, pool, index, _ = tiny()

    def body(s: Any) -> None:
        compute(index, s, A, X)
        index.release(s, A)
        assert index.lookup(s, B, index.hash(s, X), X)
        index.read(s, B)

    inst, outs = run(spec, body)
    assert len(outs) == 2  # either page
    for out in outs:
        st = inst.to_json(out.state)
        (page,) = [p for p, pub in st["cache_published"].items() if pub]
        assert st["kv_holders"][page] == ["B"] and st["kv_content"][page] == "A" and st["cache_key"][page] == "x"
        assert inst.violated(out.state) is None and st["read_foreign"]["B"] is None
        (read,) = [e for e in out.events if e.kind == "content_read"]
        assert read.get("writer") == "A" and read.get("expected") == read.get("holds") == "x" and read.violates is None


def test_the_same_shared_read_through_the_pool_is_a_foreign_read() -> None:
    """Why the index judges content: the pool's writer label calls the legitimate hit a leak."""
    spec, pool, index, _ = tiny(pages=1)

    def body(s: Any) -> None:
        compute(index, s, A, X)
        index.lookup(s, B, index.hash(s, X), X)
        pool.read(s, B, pool.pages_of(s, B))

    inst, (out,) = run(spec, body)
    assert inst.violated(out.state) == "no_foreign_read"


def test_a_colliding_hash_hands_out_other_content() -> None:
    spec, _, index, _ = tiny(pages=1, hashes=1, collide=True)

    def body(s: Any) -> None:
        compute(index, s, A, X)
        assert index.lookup(s, B, index.hash(s, Y), Y)  # y hashes like x: a hit on x's page
        index.read(s, B)

    inst, (out,) = run(spec, body)  # one hash value: no choice
    assert inst.violated(out.state) == "no_wrong_content_read"
    st = inst.to_json(out.state)
    assert st["cache_hash"] == {"x": "h0", "y": "h0"} and st["cache_read_wrong"] == {"A": False, "B": True}
    (hit,) = [e for e in out.events if e.kind == "content_hit"]
    assert (hit.get("entry"), hit.get("key"), hit.get("holds")) == ("h0", "y", "x")


def test_an_injective_hash_never_collides_and_is_fixed_once_computed() -> None:
    spec, _, index, _ = tiny(hashes=2, collide=False)
    seen: list[tuple[Any, Any, Any]] = []

    def body(s: Any) -> None:
        hx = index.hash(s, X)
        hy = index.hash(s, Y)
        seen.append((hx, hy, index.hash(s, X)))

    inst, outs = run(spec, body)
    assert len(outs) == 2 and all(hx != hy and again == hx for hx, hy, again in seen)

    spec, _, index, _ = tiny(hashes=2, collide=True)
    seen.clear()
    inst, outs = run(spec, body)
    assert len(outs) == 4 and sum(hx == hy for hx, hy, _ in seen) == 2  # collisions are explored


def test_without_hashes_the_index_is_keyed_by_the_content_key() -> None:
    spec, _, index, _ = tiny()

    def body(s: Any) -> None:
        assert index.hash(s, Y) == Y
        compute(index, s, A, X)
        assert not index.lookup(s, B, index.hash(s, Y), Y)

    inst, outs = run(spec, body)
    assert outs and all(inst.to_json(o.state)["cache_entry"] in ({"K0": "x", "K1": None}, {"K0": None, "K1": "x"})
                        for o in outs)


def test_a_lookup_without_the_scope_hits_another_tenants_page() -> None:
    spec, _, index, _ = tiny(scoped=True)
    RED, BLUE = 0, 1

    def scoped(s: Any) -> None:
        compute(index, s, A, X, RED)
        assert not index.lookup(s, B, X, X, BLUE)  # the scope is part of the key: a miss

    inst, outs = run(spec, scoped)
    assert outs and all(inst.violated(o.state) is None for o in outs)

    def unscoped(s: Any) -> None:
        compute(index, s, A, X, RED)
        assert index.lookup(s, B, X, X)  # the lookup forgot the scope: red's page
        index.read(s, B, BLUE)

    inst, outs = run(spec, unscoped)
    assert outs and all(inst.violated(o.state) == "no_wrong_content_read" for o in outs)
    read = next(e for e in outs[0].events if e.kind == "content_read")
    assert (read.get("expected"), read.get("holds")) == ("x@blue", "x@red")  # the same key, another tenant's KV
    assert read.violates == "no_wrong_content_read"


def test_writing_a_page_published_before_it_was_written_is_a_shared_write() -> None:
    spec, _, index, _ = tiny(pages=1)

    def body(s: Any) -> None:
        index.alloc(s, A, 1, X)
        index.insert(s, A, X, X)  # published before the forward
        index.write(s, A, X)

    inst, (out,) = run(spec, body)
    assert inst.violated(out.state) == "no_write_to_shared_page"
    (write,) = [e for e in out.events if e.kind == "write"]
    assert write.violates == "no_write_to_shared_page"


def test_recomputing_a_hit_in_place_writes_a_page_another_request_holds() -> None:
    spec, _, index, _ = tiny(pages=1)

    def shared(s: Any) -> None:
        compute(index, s, A, X)
        index.lookup(s, B, X, X)
        index.write(s, B, X)  # a hit is not recomputed: nothing written
        assert not getattr(s, index.shared_var)[nth(s, spec.domains["Req"], B)]
        index.write(s, B, X, recompute=True)

    inst, (out,) = run(spec, shared)
    assert inst.violated(out.state) == "no_write_to_shared_page"
    assert [e.get("req") for e in out.events if e.kind == "write"] == ["A", "B"]


def test_a_page_published_by_a_prefix_index_counts_as_shared() -> None:
    spec, pool, index, trie = tiny(pages=1, radix=True)
    assert trie is not None

    def body(s: Any) -> None:
        (p,) = s.all(pool.Page)
        trie.alloc(s, A, 0, None)
        trie.write(s, A)
        trie.insert(s, A, 0)  # the trie owns the page now
        assert trie.published(s, p) and not index.published(s, p)
        # A stale page table of B still maps the page, expecting x there (state set by hand).
        b = nth(s, spec.domains["Req"], B)
        getattr(s, pool.holders_var)[p] = frozenset({b})
        getattr(s, index.expect_var)[b, p] = X
        index.write(s, B, X, recompute=True)

    inst, (out,) = run(spec, body)
    assert inst.violated(out.state) == "no_write_to_shared_page"


def guarded(pages: int = 1) -> tuple[Spec, Any, SharedPageWrites, PrefixIndex]:
    spec = Spec("tiny_guard")
    Req = spec.domain("Req", 2, symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    radix = PrefixIndex(pool, "radix", {"t": None})
    guard = SharedPageWrites(pool, (radix,))
    guard.invariant()
    return spec, pool, guard, radix


def test_a_double_freed_page_handed_to_two_requests_is_a_shared_write() -> None:
    spec, pool, guard, _ = guarded()

    def body(s: Any) -> None:
        pool.alloc(s, A, 1)
        pool.free(s, A)
        pool.free_pages(s, A, s.all(pool.Page))  # a stale list frees it again: on the free list twice
        pool.alloc(s, A, 1)
        pool.alloc(s, B, 1)  # the same page
        guard.write(s, A)

    inst, (out,) = run(spec, body)
    assert inst.violated(out.state) == "no_write_to_shared_page"
    assert inst.to_json(out.state)["kv_wrote_shared"] == {"A": True, "B": False}


def test_a_prefix_published_page_still_in_a_table_is_a_shared_write_and_a_private_one_is_not() -> None:
    spec, pool, guard, radix = guarded(pages=2)

    def private(s: Any) -> None:
        radix.alloc(s, A, 0, None)
        guard.check(s, A)
        radix.write(s, A)

    inst, outs = run(spec, private)
    assert outs and all(inst.violated(o.state) is None for o in outs)

    def published(s: Any) -> None:
        radix.alloc(s, A, 0, None)
        radix.write(s, A)
        p = pool.pages_of(s, A)[0]
        radix.insert(s, A, 0)  # the trie owns the page ...
        getattr(s, pool.holders_var)[p] = frozenset({nth(s, spec.domains["Req"], B)})  # ... and a stale
        # table of B still holds it (set by hand)
        guard.write(s, B)

    inst, outs = run(spec, published)
    assert outs and all(inst.violated(o.state) == "no_write_to_shared_page" for o in outs)


def test_release_returns_only_unpublished_pages_nobody_else_holds() -> None:
    spec, pool, index, _ = tiny(pages=2)
    free_counts: list[int] = []

    def body(s: Any) -> None:
        compute(index, s, A, X)  # published
        index.alloc(s, A, 1, Y)  # private
        index.lookup(s, B, X, X)
        index.release(s, A)
        free_counts.append(pool.available(s))  # the private page only
        index.release(s, B)
        free_counts.append(pool.available(s))  # x stays cached
        index.evict_one(s)
        free_counts.append(pool.available(s))

    inst, outs = run(spec, body)
    assert outs and free_counts[:3] == [1, 1, 2]
    st = inst.to_json(outs[0].state)
    assert st["cache_published"] == {"K0": False, "K1": False} and inst.violated(outs[0].state) is None
    assert [e.kind for e in outs[0].events].count("evict") == 1


def test_alloc_evicts_an_unused_entry_and_cannot_evict_a_held_one() -> None:
    spec, pool, index, _ = tiny(pages=1)

    def evicts(s: Any) -> None:
        compute(index, s, A, X)
        index.release(s, A)
        index.alloc(s, B, 1, Y)  # the only page is x's, unused: evicted and reused

    inst, (out,) = run(spec, evicts)
    assert inst.to_json(out.state)["cache_published"] == {"K0": False}

    def held(s: Any) -> None:
        compute(index, s, A, X)
        index.alloc(s, B, 1, Y)  # A still holds x's page: nothing to evict

    assert run(spec, held)[1] == []


def test_the_bookkeeping_invariants_catch_broken_indexes() -> None:
    spec, pool, index, _ = tiny(pages=2)

    def duplicate(s: Any) -> None:
        for p in s.all(pool.Page):
            getattr(s, index.published_var)[p] = True
            getattr(s, index.entry_var)[p] = X
            getattr(s, pool.free_var)[p] = 0

    inst, (out,) = run(spec, duplicate)
    assert inst.violated(out.state) == "index_entries_unique"

    def published_and_free(s: Any) -> None:
        p = list(s.all(pool.Page))[0]
        getattr(s, index.published_var)[p] = True
        getattr(s, index.entry_var)[p] = X

    inst, (out,) = run(spec, published_and_free)
    assert inst.violated(out.state) == "published_pages_not_free"
    assert {n for n, inv in spec.invariants.items() if inv.helper} == {"index_entries_unique", "published_pages_not_free"}


def test_published_pages_are_marked_for_the_pictures() -> None:
    _, pool, index, _ = tiny()
    assert PageMark(index.published_var, "keeper", "cached") in pool.marks
    assert PageMark(index.published_var, "flag", "published") in pool.marks


def test_bad_declarations_and_calls_are_numbered_errors() -> None:
    spec = Spec("bad_content")
    spec.param("requests", 1)
    own = Ownership(spec, requests=spec.domain("Req", "requests"))
    pool = own.pool("kv", 1)
    with pytest.raises(OwnershipError) as err:
        ContentIndex(pool, "c1", ["x", "x"])
    assert err.value.code is Code.CONTENT_BAD_KEYS and err.value.file == __file__
    with pytest.raises(OwnershipError) as err:
        ContentIndex(pool, "c2", ["x"], also=(object(),))
    assert err.value.code is Code.CONTENT_ALSO_NOT_INDEX and err.value.file == __file__
    with pytest.raises(OwnershipError) as err:
        tiny()[2].invariants("no_such_thing")
    assert err.value.code is Code.UNKNOWN_INVARIANT

    small, _, index, _ = tiny(hashes=1, collide=False)

    def injective(s: Any) -> None:
        index.hash(s, X)

    with pytest.raises(OwnershipError) as err:
        run(small, injective)
    assert err.value.code is Code.CONTENT_HASH_TOO_SMALL and err.value.file == __file__

    unscoped, _, index2, _ = tiny()

    def scoped_read(s: Any) -> None:
        index2.read(s, A, 0)

    with pytest.raises(OwnershipError) as err:
        run(unscoped, scoped_read)
    assert err.value.code is Code.CONTENT_NO_SCOPES and err.value.file == __file__


# -- the operations under the Z3 engines --------------------------------------------------------------
def solver_spec(*, collide: bool, publish_early: bool = False) -> Spec:
    spec, _, index, _ = tiny(pages=1, hashes=2, collide=collide, scoped=True)
    spec.invariants.pop("no_foreign_read")  # every hit is a foreign read; the index judges content instead
    Req, CacheKey, Tenant = spec.domains["Req"], index.Key, spec.domains["Tenant"]  # resolved by declared name
    Phase = Enum("Phase", "IDLE RUN DONE")
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)
    spec.actions.clear()

    def start(s, r: Req, key: CacheKey, tenant: Tenant):  # type: ignore[valid-type]  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.IDLE)
        h = index.hash(s, key)
        if not index.lookup(s, r, h, key, tenant):
            index.alloc(s, r, 1, key)
            if publish_early:
                index.insert(s, r, h, key, tenant)
            index.write(s, r, key, tenant)
            index.insert(s, r, h, key, tenant)
        index.read(s, r, tenant)
        s.phase[r] = Phase.RUN

    def finish(s, r: Req):  # type: ignore[valid-type]  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.RUN)
        index.release(s, r)
        s.phase[r] = Phase.DONE

    spec.action(start)
    spec.action(finish)
    return spec


@pytest.mark.slow
@pytest.mark.parametrize(("collide", "publish_early", "violated", "depth"), [
    (True, False, "no_wrong_content_read", 2),
    (False, True, "no_write_to_shared_page", 1),
])
def test_the_vocabulary_runs_under_bmc(collide: bool, publish_early: bool, violated: str, depth: int) -> None:
    spec = solver_spec(collide=collide, publish_early=publish_early)
    e = explore(Instance(spec))
    b = bmc(Instance(spec), BmcOptions(max_depth=depth))
    assert e.violated == b.violated == violated
    assert e.trace is not None and b.trace is not None and len(e.trace) == len(b.trace) == depth


@pytest.mark.slow
def test_the_shared_write_guard_runs_under_bmc() -> None:
    spec, pool, guard, _ = guarded()
    Req = spec.domains["Req"]
    Phase = Enum("Phase", "IDLE HELD")
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)
    spec.actions.clear()

    def take(s, r: Req):  # type: ignore[valid-type]  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.IDLE)
        pool.alloc(s, r, 1)
        s.phase[r] = Phase.HELD

    def stale_free(s, r: Req, q: Req):  # type: ignore[valid-type]  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.HELD and q != r)
        pool.free_pages(s, q, pool.pages_of(s, r))  # the bug: q frees r's page, which r still holds

    def forward(s, r: Req):  # type: ignore[valid-type]  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.HELD)
        guard.write(s, r)

    for fn in (take, stale_free, forward):
        spec.action(fn)
    e = explore(Instance(spec))
    b = bmc(Instance(spec), BmcOptions(max_depth=4))
    assert e.violated == b.violated == "no_write_to_shared_page"
    assert e.trace is not None and b.trace is not None and len(e.trace) == len(b.trace) == 4
    assert [st.action for st in b.trace.steps] == ["take", "stale_free", "take", "forward"]


@pytest.mark.slow
def test_the_vocabulary_is_proved_under_prove() -> None:
    spec = solver_spec(collide=False)
    assert explore(Instance(spec)).verdict is Verdict.PROVED
    assert prove(Instance(spec), BmcOptions()).verdict is Verdict.PROVED


def test_the_documented_example_finds_the_collision_and_is_safe_without_it(tmp_path: Any) -> None:
    doc = (SPECS.parent / "docs" / "vocabulary.md").read_text()
    code = doc.split("## Content identity", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    buggy = tmp_path / "hashed_prefix_cache.py"
    buggy.write_text(code)
    result = explore(Instance(load_spec(buggy)))
    assert result.violated == "no_wrong_content_read" and result.trace is not None and len(result.trace) == 2
    fixed = tmp_path / "hashed_prefix_cache_fixed.py"
    fixed.write_text(code.replace("collide=True", "collide=False"))
    assert explore(Instance(load_spec(fixed))).verdict is Verdict.PROVED
