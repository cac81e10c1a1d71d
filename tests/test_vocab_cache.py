"""The hand-off-to-a-cache vocabulary (ownership.vocab.cache): each operation and invariant, concretely and under Z3."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import run_once as run
from ownership import Enum, Ownership, PagePool, Spec, require
from ownership.core.replay import trace_schema
from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.vocab.cache import Cache, overwrite_row, register_partition
from ownership.vocab.paired import PairedCaches
from ownership.vocab.prefix import PrefixIndex


def tiny(pages: int = 2, nodes: tuple[str, ...] = ("x",)) -> tuple[Spec, PagePool, Cache]:
    spec = Spec("tiny_cache")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    cache = Cache(pool, "tree", list(nodes))
    cache.invariants(idle=lambda s: False)  # these bodies leave pages in tables; the idle check has its own test
    own.invariants("no_double_ownership")
    return spec, pool, cache


def paired(pages: int = 2) -> tuple[Spec, PairedCaches]:
    spec = Spec("tiny_pair")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    full = Cache(own.pool("full", pages, prefix="F"), "full_tree", ["x"])
    window = Cache(own.pool("swa", pages, prefix="S"), "swa_tree", full.Node)
    pair = PairedCaches(full, window)
    pair.invariants(idle=lambda s: False)
    return spec, pair




def one(spec: Spec, body: Callable[[Any], None]) -> tuple[Instance, Any, dict[str, Any]]:
    """``run`` for a body with a single outcome (it picks its pages by itself): the outcome and its state as JSON."""
    inst, outs = run(spec, body)
    out = outs[0]
    return inst, out, inst.to_json(out.state)


# -- hand_off ------------------------------------------------------------------------------------
def test_hand_off_moves_pages_from_the_table_to_the_node_without_a_free() -> None:
    spec, pool, cache = tiny()
    seen: list[tuple[Any, ...]] = []

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 2)
        cache.hand_off(s, 0, 0)
        seen.append((pool.available(s), pool.held(s, 0), cache.count(s, 0), cache.evictable(s)))

    inst, outs = run(spec, body)
    assert len(outs) == 2 and seen[0] == (0, 0, 2, 2)  # nothing freed; both pages held by x, unlocked
    st = inst.to_json(outs[0].state)
    assert st["kv_holders"] == {"K0": [], "K1": []} and st["kv_free"] == {"K0": 0, "K1": 0}
    assert st["tree_held"] == {"K0": ["x"], "K1": ["x"]}
    assert sorted(st["tree_pos"].values()) == [0, 1]  # the page's slot becomes its offset in the node
    assert inst.violated(outs[0].state) is None
    assert [e.kind for e in outs[0].events] == ["alloc", "hand_off"]


def test_hand_off_of_a_slot_range_keeps_the_other_pages_in_the_table() -> None:
    spec, pool, cache = tiny()

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 2)
        cache.hand_off(s, 0, 0, first_slot=1)

    inst, outs = run(spec, body)
    for out in outs:
        st = inst.to_json(out.state)
        (cached,) = [p for p, h in st["tree_held"].items() if h == ["x"]]
        assert st["kv_slot"][cached] == -1 and st["tree_pos"][cached] == 0
        assert [p for p, h in st["kv_holders"].items() if h == ["A"]] == [p for p in ("K0", "K1") if p != cached]
        assert inst.violated(out.state) is None


def test_hand_off_into_a_tombstone_revives_it() -> None:
    spec, pool, cache = tiny(pages=1)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        cache.tombstone(s, 0)
        assert cache.tombstoned(s, 0) and not cache.cached(s, 0)
        pool.alloc(s, 1, 1)
        cache.hand_off(s, 1, 0)

    inst, out, st = one(spec, body)
    assert st["tree_tomb"] == {"x": False} and st["tree_held"] == {"K0": ["x"]}
    assert [e.kind for e in out.events] == ["alloc", "hand_off", "cache_release", "tombstone", "alloc", "hand_off"]


# -- match, unmatch, drop ----------------------------------------------------------------------
def test_match_maps_and_locks_and_unmatch_undoes_it() -> None:
    spec, pool, cache = tiny(pages=1)
    seen: list[tuple[Any, ...]] = []

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        cache.match(s, 1, 0)
        seen.append((cache.locked(s, 0), cache.in_use(s, list(s.all(pool.Page))[0]), cache.evictable(s)))
        cache.unmatch(s, 1, 0)
        seen.append((cache.locked(s, 0), cache.in_use(s, list(s.all(pool.Page))[0]), cache.evictable(s)))

    inst, out, st = one(spec, body)
    assert seen == [(True, 1, 0), (False, 0, 1)]  # a locked node's pages are protected, not evictable
    assert "cache_hit" in [e.kind for e in out.events]


def test_a_tombstoned_or_empty_node_cannot_be_matched() -> None:
    spec, pool, cache = tiny(pages=1)

    def empty(s):  # noqa: ANN001, ANN202
        cache.match(s, 0, 0)

    assert run(spec, empty)[1] == []

    def tombstoned(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        cache.tombstone(s, 0)
        cache.match(s, 1, 0)

    assert run(spec, tombstoned)[1] == []


def test_unmatch_leaves_a_page_the_node_gave_up_mapped_until_drop() -> None:
    spec, pool, cache = tiny(pages=2)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        cache.match(s, 1, 0)
        cache.unmatch(s, 1, 0)
        cache.drop(s, 1)

    inst, out, st = one(spec, body)
    assert st["tree_mapped"]["B"] == {"K0": False, "K1": False} and inst.violated(out.state) is None


# -- release, evict, tombstone -----------------------------------------------------------------
def test_release_of_a_page_in_use_is_the_violation_and_sets_the_ghost() -> None:
    spec, pool, cache = tiny(pages=1)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        cache.match(s, 1, 0)
        cache.release(s, 0)  # the lock is not consulted

    inst, out, st = one(spec, body)
    assert st["kv_free"] == {"K0": 1} and st["tree_held"] == {"K0": []} and st["tree_freed_in_use"]["B"] is True
    assert inst.violated(out.state) == "no_release_in_use"
    (rel,) = [e for e in out.events if e.kind == "cache_release"]
    assert rel.violates == "no_release_in_use" and rel.get("in_use_by") == ["B"] and rel.get("pages") == ["K0"]
    # A search does not record events: the step is the violation all the same.
    (ai,) = inst.action_instances
    with inst.mode(recording=False):
        (quiet,) = inst.successors_of(inst.init_state, ai)
    assert quiet.events == () and quiet.violations == ("no_release_in_use",)


def test_release_of_an_unused_page_is_safe() -> None:
    spec, pool, cache = tiny(pages=1)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        cache.match(s, 1, 0)
        cache.unmatch(s, 1, 0)
        cache.evict(s, 0)

    inst, out, st = one(spec, body)
    assert st["kv_free"] == {"K0": 1} and inst.violated(out.state) is None
    (rel,) = [e for e in out.events if e.kind == "cache_release"]
    assert rel.violates is None and rel.get("in_use_by") == []


def test_evict_is_not_enabled_while_the_node_is_locked_or_empty() -> None:
    spec, pool, cache = tiny(pages=1)

    def locked(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        cache.match(s, 1, 0)
        cache.evict(s, 0)

    assert run(spec, locked)[1] == []

    def empty(s):  # noqa: ANN001, ANN202
        cache.evict(s, 0)

    assert run(spec, empty)[1] == []


# -- split -------------------------------------------------------------------------------------
def test_split_moves_the_tail_and_keeps_every_page_held_once() -> None:
    spec, pool, cache = tiny(pages=3, nodes=("x", "xy"))

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 3)
        cache.hand_off(s, 0, 0)
        cache.match(s, 1, 0)
        cache.split(s, 0, 1, at=1)
        assert cache.count(s, 0) == 1 and cache.count(s, 1) == 2

    inst, outs = run(spec, body)
    assert len(outs) == 6  # which free page lands in which slot
    for out in outs:
        st = inst.to_json(out.state)
        by_pos = {p: (st["tree_held"][p], st["tree_pos"][p]) for p in st["tree_held"]}
        assert sorted(by_pos.values()) == [(["x"], 0), (["xy"], 0), (["xy"], 1)]
        assert st["tree_lock"] == {"x": 1, "xy": 1}  # the halves share the lock
        assert inst.violated(out.state) is None
        (ev,) = [e for e in out.events if e.kind == "split"]
        assert ev.get("into") == "xy" and len(ev.get("pages")) == 2


def test_split_into_a_node_that_holds_pages_or_into_itself_is_not_enabled() -> None:
    spec, pool, cache = tiny(pages=2, nodes=("x", "xy"))

    def busy(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        pool.alloc(s, 1, 1)
        cache.hand_off(s, 1, 1)
        cache.split(s, 0, 1, at=0)

    assert run(spec, busy)[1] == []

    def itself(s):  # noqa: ANN001, ANN202
        cache.split(s, 0, 0, at=0)

    assert run(spec, itself)[1] == []


# -- the invariants on broken states ------------------------------------------------------------
def test_a_page_held_by_two_nodes_breaks_single_node() -> None:
    spec, pool, cache = tiny(pages=1, nodes=("x", "xy"))
    spec.invariants.pop("cache_accounting")  # which counts the page once per node, as evictable_size does

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        s.tree_held[list(s.all(pool.Page))[0]] = 0b11  # what a split that copies instead of moving would do

    inst, out, st = one(spec, body)
    assert inst.violated(out.state) == "cache_pages_single_node"


def _bound(case: Callable[..., None], pool: PagePool, cache: Cache) -> Callable[[Any], None]:
    """``case`` as a body taking only the view (an action's other arguments would be domain elements)."""
    def body(s):  # noqa: ANN001, ANN202
        case(s, pool, cache)

    return body


def test_the_partition_catches_double_free_leak_and_free_while_cached() -> None:
    def double_free(s, pool: PagePool, cache: Cache) -> None:  # noqa: ANN001
        pool.alloc(s, 0, 1)
        pool.free(s, 0)
        s.kv_free[list(s.all(pool.Page))[0]] = 2

    def leak(s, pool: PagePool, cache: Cache) -> None:  # noqa: ANN001
        pool.alloc(s, 0, 1)
        s.kv_holders[list(s.all(pool.Page))[0]] = 0  # the table forgets the page, nobody frees it

    def free_while_cached(s, pool: PagePool, cache: Cache) -> None:  # noqa: ANN001
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        s.kv_free[list(s.all(pool.Page))[0]] = 1

    for case in (double_free, leak, free_while_cached):
        spec, pool, cache = tiny(pages=1)
        inst, outs = run(spec, _bound(case, pool, cache))
        assert inst.violated(outs[0].state) == "pages_partitioned", case.__name__


def test_accounting_fails_when_a_page_counts_as_free_and_evictable() -> None:
    spec, pool, cache = tiny(pages=1)
    spec.invariants.pop("pages_partitioned")  # see the accounting's own verdict

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        s.kv_free[list(s.all(pool.Page))[0]] = 1  # released to the allocator, still in the tree

    inst, out, st = one(spec, body)
    assert inst.violated(out.state) == "cache_accounting"


def test_a_tombstone_holding_pages_and_a_negative_lock_are_violations() -> None:
    spec, pool, cache = tiny(pages=1)

    def tomb(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        s.tree_tomb[0] = True

    inst, out, st = one(spec, tomb)
    assert inst.violated(out.state) == "tombstones_hold_nothing"

    def unlock(s):  # noqa: ANN001, ANN202
        cache.unmatch(s, 0, 0)

    inst, out, st = one(spec, unlock)
    assert inst.violated(out.state) == "cache_locks_nonnegative"


def test_a_node_holding_two_pages_at_one_offset_breaks_unique_offsets() -> None:
    spec, pool, cache = tiny(pages=2)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        cache.hand_off(s, 0, 0)
        pool.alloc(s, 1, 1)
        cache.hand_off(s, 1, 0)  # a re-insert that adds the second request's page instead of replacing

    inst, out, st = one(spec, body)
    assert st["tree_pos"] == {"K0": 0, "K1": 0} and inst.violated(out.state) == "cache_offsets_unique"


def test_a_page_left_in_a_finished_requests_table_is_a_leak_when_idle() -> None:
    spec = Spec("tiny_idle")
    Req = spec.domain("Req", 1, names="A")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", 2, prefix="K")
    cache = Cache(pool, "tree", ["x"])
    cache.invariants("pages_cached_or_free_when_idle")
    spec.var("done", bool, per=Req, init=False)
    spec.terminal(lambda s: all(s.done[r] for r in s.all(Req)))

    def leaky(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 2)
        cache.hand_off(s, 0, 0, count=1)  # only the first page goes to the cache
        s.done[0] = True

    inst, outs = run(spec, leaky)
    assert {inst.violated(o.state) for o in outs} == {"pages_cached_or_free_when_idle"}

    def tidy(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 2)
        cache.hand_off(s, 0, 0, count=1)
        pool.free(s, 0)  # the rest goes back
        s.done[0] = True

    inst, outs = run(spec, tidy)
    assert {inst.violated(o.state) for o in outs} == {None}


def test_overwriting_a_row_that_still_holds_its_page_leaks_it() -> None:
    spec, pool, cache = tiny(pages=2)

    def leak(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        pool.alloc(s, 1, 1)
        cache.hand_off(s, 1, 0)
        cache.match(s, 0, 0)
        overwrite_row(s, pool, 0, 0, 1)  # A's own page at slot 0 is overwritten with the cached one

    inst, outs = run(spec, leak)
    assert {inst.violated(o.state) for o in outs} == {"pages_partitioned"}

    def freed_first(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        pool.alloc(s, 1, 1)
        cache.hand_off(s, 1, 0)
        pool.free(s, 0)  # the duplicate goes back first, as insert does
        cache.match(s, 0, 0)
        overwrite_row(s, pool, 0, 0, 1)

    inst, outs = run(spec, freed_first)
    assert {inst.violated(o.state) for o in outs} == {None}


def test_a_prefix_index_declares_a_keeper_and_its_pages_count_in_the_partition() -> None:
    spec = Spec("tiny_prefix")
    Req = spec.domain("Req", 1, names="A")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", 1, prefix="K")
    index = PrefixIndex(pool, "radix", {"x": None})
    register_partition(own)
    assert [(m.var, m.role) for m in pool.marks] == [("radix_node", "keeper")]

    def body(s):  # noqa: ANN001, ANN202
        index.alloc(s, 0, 0, None)
        index.write(s, 0)
        index.insert(s, 0, 0)  # published: the index holds the page, the request's table lets go
        index.release(s, 0)

    inst, out, st = one(spec, body)
    assert st["radix_node"] == {"K0": "x"} and st["kv_free"] == {"K0": 0}
    assert inst.violated(out.state) is None
    schema = trace_schema(inst)
    assert schema.pools is not None and [m.role for m in schema.pools[0].marks] == ["keeper"]


def test_a_cache_declares_its_marks() -> None:
    spec, pool, cache = tiny()
    assert [(m.var, m.role) for m in pool.marks] == [("tree_held", "keeper"), ("tree_mapped", "pending")]


# -- paired pools (SWA) --------------------------------------------------------------------------
def test_paired_alloc_and_free_take_and_return_both_halves() -> None:
    spec, pair = paired()

    def body(s):  # noqa: ANN001, ANN202
        pair.alloc(s, 0, 2)
        assert pair.full.pool.held(s, 0) == pair.window.pool.held(s, 0) == 2
        pair.free(s, 0)

    inst, outs = run(spec, body)
    assert len(outs) == 4 and all(inst.violated(o.state) is None for o in outs)
    st = inst.to_json(outs[0].state)
    assert st["full_free"] == {"F0": 1, "F1": 1} and st["swa_free"] == {"S0": 1, "S1": 1}


def test_free_window_releases_only_the_sliding_window_half() -> None:
    spec, pair = paired()

    def body(s):  # noqa: ANN001, ANN202
        pair.alloc(s, 0, 2)
        pair.free_window(s, 0, below=1)  # slot 0 is outside the window

    inst, outs = run(spec, body)
    for out in outs:
        st = inst.to_json(out.state)
        assert sorted(st["swa_free"].values()) == [0, 1] and sorted(st["full_free"].values()) == [0, 0]
        assert inst.violated(out.state) is None


def test_a_full_page_released_before_its_window_page_breaks_the_pair() -> None:
    spec, pair = paired()

    def body(s):  # noqa: ANN001, ANN202
        pair.alloc(s, 0, 1)
        pair.full.pool.free(s, 0)  # the full half goes, the SWA half stays

    inst, outs = run(spec, body)
    assert {inst.violated(o.state) for o in outs} == {"pairs_held_together"}

    def cached(s):  # noqa: ANN001, ANN202
        pair.alloc(s, 0, 1)
        pair.window.hand_off(s, 0, 0)  # only the SWA half handed to the node
        pair.full.pool.free(s, 0)

    inst, outs = run(spec, cached)
    assert {inst.violated(o.state) for o in outs} == {"pairs_held_together"}


def test_a_live_node_without_its_window_pages_breaks_the_pair() -> None:
    spec, pair = paired()

    def body(s):  # noqa: ANN001, ANN202
        pair.alloc(s, 0, 1)
        pair.free_window(s, 0, below=1)  # the window moved past the block
        pair.hand_off(s, 0, 0)  # inserted as a live node all the same

    inst, outs = run(spec, body)
    assert {inst.violated(o.state) for o in outs} == {"window_held_unless_tombstone"}
    assert [e.kind for e in outs[0].events] == ["alloc", "alloc", "free", "hand_off"]

    def tombstoned(s):  # noqa: ANN001, ANN202
        pair.alloc(s, 0, 1)
        pair.free_window(s, 0, below=1)
        pair.full.hand_off(s, 0, 0)
        s.swa_tree_tomb[0] = True  # the same node as a tombstone is what the tree means

    inst, outs = run(spec, tombstoned)
    assert {inst.violated(o.state) for o in outs} == {None}


def test_paired_hand_off_match_and_evict() -> None:
    spec, pair = paired(pages=1)

    def body(s):  # noqa: ANN001, ANN202
        pair.alloc(s, 0, 1)
        pair.hand_off(s, 0, 0)
        assert pair.matchable(s, 0)
        pair.match(s, 1, 0)
        pair.window.unmatch(s, 1, 0)
        pair.window.tombstone(s, 0)
        assert not pair.matchable(s, 0)
        pair.full.unmatch(s, 1, 0)
        pair.evict(s, 0)  # a tombstone: its full half only

    inst, out, st = one(spec, body)
    assert st["full_free"] == {"F0": 1} and st["swa_free"] == {"S0": 1} and inst.violated(out.state) is None


# -- declaration errors ----------------------------------------------------------------------------
def test_bad_declarations_are_refused_at_the_calling_line() -> None:
    spec = Spec("bad_cache")
    Req = spec.domain("Req", 1, names="A")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", 1)
    with pytest.raises(OwnershipError) as nodes:
        Cache(pool, "tree", 3)  # type: ignore[arg-type]
    assert nodes.value.code is Code.CACHE_INVALID and nodes.value.file == __file__ and "non-empty" in nodes.value.message
    a = Cache(pool, "a", ["x"])
    b = Cache(own.pool("other", 1), "b", ["x"])
    with pytest.raises(OwnershipError) as pair:
        PairedCaches(a, b)
    assert pair.value.code is Code.CACHE_INVALID and pair.value.file == __file__
    with pytest.raises(OwnershipError) as same_pool:
        PairedCaches(a, Cache(pool, "c", a.Node))
    assert same_pool.value.code is Code.CACHE_INVALID
    with pytest.raises(OwnershipError) as unknown:
        a.invariants("nope")
    assert unknown.value.code is Code.UNKNOWN_INVARIANT and unknown.value.file == __file__


# -- symbolic support ----------------------------------------------------------------------------
def symbolic_spec(*, check_lock: bool) -> Spec:
    """Every operation as an action of a two-request, two-node spec; ``check_lock=False`` releases locked nodes."""
    spec, pair = paired(pages=2)
    full, window = pair.full, pair.window
    Req = spec.domains["Req"]
    Phase = Enum("Phase", "IDLE RUNNING DONE")
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)
    spec.var("in_window", bool, per=Req, init=False)
    spec.actions.clear()

    @spec.action
    def compute(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.IDLE)
        if pair.matchable(s, 0):
            pair.match(s, r, 0)
        else:
            pair.alloc(s, r, 1)
            if full.cached(s, 0):
                pair.free(s, r)
            else:
                pair.hand_off(s, r, 0)
            require(pair.matchable(s, 0))
            pair.match(s, r, 0)
        s.phase[r] = Phase.RUNNING
        s.in_window[r] = True

    @spec.action
    def window_passes(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.RUNNING and s.in_window[r])
        window.unmatch(s, r, 0)
        s.in_window[r] = False
        if not window.locked(s, 0):
            window.tombstone(s, 0)

    @spec.action
    def finish(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.RUNNING)
        full.unmatch(s, r, 0)
        if s.in_window[r]:
            window.unmatch(s, r, 0)
            s.in_window[r] = False
        full.drop(s, r)
        window.drop(s, r)
        s.phase[r] = Phase.DONE

    @spec.action
    def reclaim(s):  # noqa: ANN001, ANN202
        if check_lock:
            pair.evict(s, 0)
        else:
            require(full.cached(s, 0))
            full.release(s, 0)  # the lock is not consulted
            window.release(s, 0)

    return spec


@pytest.mark.slow
def test_the_operations_under_bmc_find_the_release_of_a_locked_node() -> None:
    spec = symbolic_spec(check_lock=False)
    e = explore(Instance(spec))
    b = bmc(Instance(spec), BmcOptions(max_depth=3))
    assert e.violated == b.violated == "no_release_in_use"
    assert e.trace is not None and b.trace is not None and len(e.trace) == len(b.trace) == 2


@pytest.mark.slow
def test_the_operations_under_prove_are_safe_when_eviction_honours_locks() -> None:
    spec = symbolic_spec(check_lock=True)
    assert explore(Instance(spec)).verdict is Verdict.PROVED
    result = prove(Instance(spec), BmcOptions())
    assert result.verdict is Verdict.PROVED, result.notes


@pytest.mark.slow
def test_split_under_bmc_and_prove() -> None:
    spec, pool, cache = tiny(pages=2, nodes=("x", "xy"))
    Req = spec.domains["Req"]
    spec.actions.clear()
    spec.var("done", bool, per=Req, init=False)

    @spec.action
    def insert(s, r: Req):  # noqa: ANN001, ANN202
        require(not s.done[r])
        require(not cache.cached(s, 0))
        require(not cache.cached(s, 1))
        pool.alloc(s, r, 2)
        cache.hand_off(s, r, 0)
        s.done[r] = True

    @spec.action
    def split(s):  # noqa: ANN001, ANN202
        cache.split(s, 0, 1, at=1)

    @spec.action
    def evict_tail(s):  # noqa: ANN001, ANN202
        cache.evict(s, 1)

    @spec.action
    def evict_head(s):  # noqa: ANN001, ANN202
        cache.evict(s, 0)

    e = explore(Instance(spec))
    assert e.verdict is Verdict.PROVED
    b = bmc(Instance(spec), BmcOptions(max_depth=e.stats.depth + 1))
    assert b.verdict in (Verdict.BOUNDED_OK, Verdict.PROVED) and b.violated is None
    assert prove(Instance(spec), BmcOptions()).verdict is Verdict.PROVED


# -- the documented example ----------------------------------------------------------------------
def test_the_example_in_the_vocabulary_guide_runs_and_finds_the_release_in_use(tmp_path: Path) -> None:
    from conftest import ROOT

    doc = (ROOT / "docs" / "vocabulary.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Hand-off to a cache"):]
    code = section[section.index("```python\n") + len("```python\n"):section.index("```\n", section.index("```python"))]
    (tmp_path / "cache_example.py").write_text(code, encoding="utf-8")
    result = explore(Instance(load_spec(tmp_path / "cache_example.py")))
    assert result.violated == "no_release_in_use" and result.trace is not None
    assert [s.action for s in result.trace.steps] == ["prefill", "evict"]
