"""Unit tests of the spec API and the ownership vocabulary."""

from __future__ import annotations

import pytest

from ownership import Enum, Ownership, Spec, ceil_div, require
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance


def tiny() -> tuple[Spec, object]:
    spec = Spec("tiny")
    spec.param("requests", 2)
    spec.param("pages", 3)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", "pages")
    own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership", "no_read_of_unwritten")
    return spec, pool


def run(spec: Spec, body, state=None):
    """Run ``body(s)`` as an action on the initial state; return all outcomes."""
    spec.actions.clear()
    spec.action(body)
    inst = Instance(spec)
    (ai,) = inst.action_instances
    return inst, inst.successors_of(state or inst.init_state, ai)


def test_ceil_div() -> None:
    assert [ceil_div(n, 4) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_enum_members_are_ints_and_named() -> None:
    Q = Enum("Q", "IDLE RUNNING")
    assert (Q.IDLE, Q.RUNNING) == (0, 1) and list(Q) == [0, 1]
    assert Q.show(1, {}) == "RUNNING" and Q.from_json("IDLE", {}) == 0
    with pytest.raises(AttributeError, match="no member DONE"):
        _ = Q.DONE
    with pytest.raises(ValueError):
        Enum("Bad", "A A")


def test_alloc_explores_every_page_order() -> None:
    spec, pool = tiny()

    def take_two(s):
        pool.alloc(s, 0, 2)

    inst, outs = run(spec, take_two)
    assert len(outs) == 3 * 2  # ordered choice of 2 out of 3 free pages
    for o in outs:
        st = inst.to_json(o.state)
        held = [p for p, h in st["kv_holders"].items() if h == ["A"]]
        assert len(held) == 2 and sum(st["kv_free"].values()) == 1
        assert sorted(st["kv_slot"][p] for p in held) == [0, 1]


def test_alloc_is_disabled_without_enough_free_pages() -> None:
    spec, pool = tiny()

    def take_four(s):
        pool.alloc(s, 0, 4)

    _, outs = run(spec, take_four)
    assert outs == []


def test_free_keeps_content_and_read_detects_foreign_kv() -> None:
    spec, pool = tiny()

    def a_then_b(s):
        pages = pool.alloc(s, 0, 1)
        pool.write(s, 0, pages)
        pool.free(s, 0)
        again = pool.alloc(s, 1, 1)
        pool.read(s, 1, again)

    inst, outs = run(spec, a_then_b)
    leaks = [o for o in outs if inst.to_json(o.state)["read_foreign"]["B"] == "A"]
    unwritten = [o for o in outs if inst.to_json(o.state)["read_unwritten"]["B"]]
    assert leaks and unwritten and len(leaks) + len(unwritten) == len(outs)
    assert inst.violated(leaks[0].state) == "no_foreign_read"
    ev = [e for e in leaks[0].events if e.kind == "read"][0]
    assert ev.violates == "no_foreign_read" and ev.get("content") == "A"


def test_write_without_owning_is_recorded() -> None:
    spec, pool = tiny()

    def stray(s):
        pool.write(s, 1, [0])

    inst, (out,) = run(spec, stray)
    assert inst.violated(out.state) == "no_unowned_write"


def test_double_ownership_detected_after_double_free() -> None:
    spec, pool = tiny()

    def double_free(s):
        pages = pool.alloc(s, 0, 1)
        pool.free_pages(s, 0, pages)
        pool.free_pages(s, 0, pages)  # the same page goes on the free list twice
        pool.alloc(s, 1, 1)

    inst, outs = run(spec, double_free)
    assert any(inst.violated(o.state) == "no_double_ownership" for o in outs)


def test_transfer_copies_content_slot_by_slot() -> None:
    from ownership import transfer

    spec = Spec("two_pools")
    Req = spec.domain("Req", 1, names="A")
    own = Ownership(spec, requests=Req)
    src = own.pool("prefill", 2, prefix="P")
    dst = own.pool("decode", 3, prefix="D")
    own.invariants("no_foreign_read")

    def move(s):
        pool_pages = src.alloc(s, 0, 1)
        src.write(s, 0, pool_pages)
        dst.alloc(s, 0, 3)
        transfer(s, 0, src, dst, 1)
        dst.read(s, 0, dst.pages_of(s, 0))

    spec.action(move)
    inst = Instance(spec)
    outs = inst.successors_of(inst.init_state, inst.action_instances[0])
    for o in outs:
        st = inst.to_json(o.state)
        slot0 = [p for p, k in st["decode_slot"].items() if k == 0][0]
        assert st["decode_content"][slot0] == "A"
        assert st["read_unwritten"]["A"] is True  # slots 1, 2 were never written
        assert st["read_foreign"]["A"] is None


def test_require_disables_and_leaves_no_trace() -> None:
    spec, pool = tiny()

    def guarded(s):
        pool.alloc(s, 0, 1)
        require(False)

    _, outs = run(spec, guarded)
    assert outs == []


def test_spec_errors_name_file_and_line() -> None:
    spec = Spec("broken")
    with pytest.raises(OwnershipError) as info:
        spec.param("x", "three")  # type: ignore[arg-type]
    assert info.value.code is Code.SPEC_INVALID and info.value.file and info.value.file.endswith("test_vocab.py")
    assert info.value.line is not None

    Req = spec.domain("Req", 2)
    with pytest.raises(OwnershipError, match="annotated with a domain"):

        @spec.action
        def bad(s, r):  # no annotation
            pass

    @spec.action
    def ok(s, r: Req):
        pass

    with pytest.raises(OwnershipError) as info2:
        spec.validate()
    assert info2.value.code is Code.SPEC_NO_INVARIANTS


def test_unknown_and_out_of_range_params() -> None:
    spec, _ = tiny()
    spec.action(lambda s: None)
    with pytest.raises(OwnershipError) as info:
        Instance(spec, {"nope": 1})
    assert info.value.code is Code.UNKNOWN_PARAM and "requests" in info.value.message


def test_derive_and_replace_patch_one_action() -> None:
    spec, pool = tiny()
    Req = spec.domains["Req"]

    @spec.action
    def step(s, r: Req):
        pool.alloc(s, r, 1)

    fixed = spec.derive("tiny_fixed")

    @fixed.replace
    def step(s, r: Req):  # noqa: F811
        require(False)

    assert spec.actions["step"].fn is not fixed.actions["step"].fn
    assert fixed.invariants == spec.invariants and fixed.name == "tiny_fixed"
    with pytest.raises(OwnershipError, match="no action or @spec.helper missing"):

        @fixed.replace
        def missing(s):
            pass


def test_a_replaced_helper_changes_every_caller_of_the_derived_spec_only() -> None:
    from ownership.engines.explore import explore

    spec = Spec("counter")
    spec.var("x", int, init=0)

    @spec.helper
    def bump(s, by: int) -> None:
        s.x = s.x + by

    @spec.action
    def once(s):
        require(s.x < 3)
        bump(s, 1)

    @spec.action
    def twice(s):
        require(s.x < 3)
        bump(s, 2)

    @spec.invariant
    def small(s):
        return s.x <= 4

    fixed = spec.derive("counter_by_zero")

    @fixed.replace
    def bump(s, by: int) -> None:  # noqa: F811
        s.x = s.x + 0 * by

    # The base spec still steps by 1 and 2 (x reaches 4); the derived one never moves.
    assert explore(Instance(spec)).stats.states == 5
    assert explore(Instance(fixed)).stats.states == 1
    assert spec.helpers["bump"] is not fixed.helpers["bump"]
    with pytest.raises(OwnershipError, match="helper bump declared twice"):

        @spec.helper
        def bump(s) -> None:  # noqa: F811
            pass


def test_state_json_round_trip() -> None:
    spec, pool = tiny()

    def take(s):
        pool.write(s, 1, pool.alloc(s, 1, 2))

    inst, outs = run(spec, take)
    for o in outs:
        assert inst.from_json(inst.to_json(o.state)) == o.state
    with pytest.raises(ValueError, match="kv_free"):
        bad = inst.to_json(outs[0].state)
        bad["kv_free"] = {"k0": 1}
        inst.from_json(bad)


def test_pages_returned_when_idle_needs_a_terminal_predicate() -> None:
    spec = Spec("idle")
    Req = spec.domain("Req", 1)
    own = Ownership(spec, requests=Req)
    own.pool("kv", 1)
    own.invariants("pages_returned_when_idle")
    spec.action(lambda s: None)
    with pytest.raises(OwnershipError, match="@spec.terminal") as info:
        spec.validate()
    assert info.value.code is Code.SPEC_INVALID and info.value.line is not None


def test_events_flag_only_checked_invariants() -> None:
    spec, pool = tiny()
    del spec.invariants["no_read_of_unwritten"]

    def read_unwritten(s):
        pool.read(s, 0, pool.alloc(s, 0, 1))

    _, outs = run(spec, read_unwritten)
    reads = [e for o in outs for e in o.events if e.kind == "read"]
    assert reads and all(e.violates is None for e in reads)
