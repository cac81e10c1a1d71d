"""Memory registration (ownership.vocab.regions): register/deregister and no_transfer_on_deregistered.

Each operation concretely, the flag on a deregistration that races a posted
transfer (reads and writes), bad declarations (OWN091), then bmc and prove
on a ten-line spec.
"""

from __future__ import annotations

import pytest

from conftest import run_once as run
from ownership import Enum, Ownership, PagePool, Spec, require
from ownership.core.replay import trace_schema
from ownership.core.result import Verdict
from ownership.core.schema import PageMark
from ownership.engines.bmc import bmc
from ownership.engines.explore import explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.vocab.inflight import InflightWrites
from ownership.vocab.reads import InflightReads
from ownership.vocab.regions import Regions


def tiny(pages: int = 2, *, registered: bool = True) -> tuple[Spec, PagePool, InflightReads, InflightWrites, Regions]:
    spec = Spec("tiny_regions")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    reads = InflightReads(pool, "nixl")
    writes = InflightWrites(pool, "rdma")
    mr = Regions(pool, "mr", registered=registered)
    mr.invariant(reads, writes)
    own.invariants("no_double_ownership")
    return spec, pool, reads, writes, mr




def test_the_flag_is_marked_deregistered_and_reaches_the_schema() -> None:
    spec, pool, *_ = tiny()
    run(spec, lambda s: None)
    assert PageMark("mr_deregistered", "flag", "deregistered") in pool.marks
    schema = trace_schema(Instance(spec))
    assert schema.pools is not None and PageMark("mr_deregistered", "flag", "deregistered") in schema.pools[0].marks


def test_register_and_deregister_a_requests_pages_and_single_pages() -> None:
    spec, pool, _, _, mr = tiny(registered=False)
    seen: list[tuple[bool, bool]] = []

    def body(s):  # noqa: ANN001, ANN202
        (p,) = pool.alloc(s, 0, 1)
        seen.append((mr.registered(s, p), mr.all_registered(s, 0)))
        mr.register(s, 0)  # only A's page
        seen.append((mr.registered(s, p), mr.all_registered(s, 0)))
        assert mr.all_registered(s, 1)  # B holds nothing
        mr.deregister(s, 0)
        seen.append((mr.registered(s, p), mr.all_registered(s, 0)))
        mr.register_page(s, p)
        seen.append((mr.registered(s, p), mr.all_registered(s, 0)))

    inst, outs = run(spec, body)
    assert len(outs) == 2 and seen[:4] == [(False, False), (True, True), (False, False), (True, True)]
    for out in outs:
        st = inst.to_json(out.state)
        mine = next(p for p, h in st["kv_holders"].items() if h == ["A"])
        other = next(p for p in st["kv_holders"] if p != mine)
        assert st["mr_deregistered"] == {mine: False, other: True}  # the other page was never registered
        assert [e.kind for e in out.events] == ["alloc", "registered", "deregistered", "registered"]


def test_register_all_and_deregister_all_cover_the_pool() -> None:
    spec, pool, _, _, mr = tiny(registered=False)

    def body(s):  # noqa: ANN001, ANN202
        mr.register_all(s)
        assert all(mr.registered(s, p) for p in s.all(pool.Page))
        mr.deregister_all(s)

    inst, (out,) = run(spec, body)
    assert inst.to_json(out.state)["mr_deregistered"] == {"K0": True, "K1": True}
    assert inst.violated(out.state) is None  # nothing was posted


def test_posting_onto_deregistered_memory_breaks_the_invariant() -> None:
    spec, pool, reads, _, mr = tiny()

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        mr.deregister(s, 0)
        reads.post(s, 0)

    inst, outs = run(spec, body)
    assert all(inst.violated(out.state) == "no_transfer_on_deregistered" for out in outs)


@pytest.mark.parametrize("channel", ["nixl", "rdma"])
def test_deregistering_under_a_posted_transfer_is_flagged_at_that_step(channel: str) -> None:
    spec, pool, reads, writes, mr = tiny(pages=1)
    op = reads if channel == "nixl" else writes

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        op.post(s, 0)
        mr.deregister(s, 0)

    inst, (out,) = run(spec, body)
    assert inst.violated(out.state) == "no_transfer_on_deregistered"
    (flag,) = [e for e in out.events if e.kind == "transfer on deregistered memory"]
    assert (flag.get("channel"), flag.get("req"), flag.get("page"), flag.violates) == (
        channel, "A", "K0", "no_transfer_on_deregistered")


def test_a_racing_deregistration_is_flagged_outside_recording_even_if_the_step_ends_clean() -> None:
    spec, pool, reads, _, mr = tiny(pages=1)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        reads.post(s, 0)
        mr.deregister_page(s, pool.pages_of(s, 0)[0])
        reads.discard(s, 0)  # gone by the end of the step
        mr.register_all(s)

    inst, (out,) = run(spec, body, recording=False)
    assert inst.violated(out.state) is None and out.violations == ("no_transfer_on_deregistered",)


def test_deregistering_drained_or_other_pages_is_fine() -> None:
    spec, pool, reads, _, mr = tiny()

    def body(s):  # noqa: ANN001, ANN202
        a = pool.alloc(s, 0, 1)
        pool.write(s, 0, a)
        pool.alloc(s, 1, 1)
        reads.post(s, 0)
        mr.deregister(s, 1)  # B's page: A's read is not on it
        reads.land(s, 0)
        mr.deregister(s, 0)  # drained

    inst, outs = run(spec, body)
    assert outs and all(inst.violated(o.state) is None and o.violations == () for o in outs)


def test_an_invariant_without_transfers_is_refused_at_the_calling_line() -> None:
    spec = Spec("bad_regions")
    Req = spec.domain("Req", 1, names="A")
    pool = Ownership(spec, requests=Req).pool("kv", 1)
    mr = Regions(pool)
    with pytest.raises(OwnershipError) as none:
        mr.invariant()
    assert none.value.code is Code.REGIONS_NO_TRANSFERS and none.value.file == __file__
    assert "needs the posted transfers it watches" in none.value.message
    with pytest.raises(OwnershipError) as wrong:
        mr.invariant(pool)
    assert wrong.value.code is Code.REGIONS_NO_TRANSFERS and "PagePool" in wrong.value.message


def teardown_spec(*, drain_first: bool) -> Spec:
    """Ten lines: a read is posted; the memory is deregistered (after the drain, with ``drain_first``)."""
    spec, pool, reads, _, mr = tiny(pages=1)
    Phase = Enum("Phase", "IDLE POSTED GONE")
    Req = spec.domains["Req"]
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)
    spec.actions.clear()

    @spec.action
    def post(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.IDLE)
        pool.write(s, r, pool.alloc(s, r, 1))
        require(mr.all_registered(s, r))
        reads.post(s, r)
        s.phase[r] = Phase.POSTED

    @spec.action
    def land(s, r: Req):  # noqa: ANN001, ANN202
        require(not reads.drained(s, r))
        reads.land(s, r)

    @spec.action
    def teardown(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.POSTED)
        if drain_first:
            require(reads.drained(s, r))
        mr.deregister(s, r)
        pool.free(s, r)
        mr.register_all(s)  # the next buffer registers the freed memory again
        s.phase[r] = Phase.GONE

    return spec


def test_the_operations_run_under_bmc() -> None:
    spec = teardown_spec(drain_first=False)
    e = explore(Instance(spec))
    b = bmc(Instance(spec), BmcOptions(max_depth=3))
    # The step re-registers everything, so only the flag of the racing deregistration shows it.
    assert e.violated == b.violated == "no_transfer_on_deregistered"
    assert b.trace is not None and [s.action for s in b.trace.steps] == ["post", "teardown"]


@pytest.mark.slow
def test_deregistering_after_the_drain_is_proved() -> None:
    spec = teardown_spec(drain_first=True)
    assert explore(Instance(spec)).verdict is Verdict.PROVED
    assert prove(Instance(spec)).verdict is Verdict.PROVED


def test_page_and_pool_wide_operations_run_under_bmc() -> None:
    """register_page, deregister_page, deregister_all and registered() symbolically, with the flag each raises."""
    spec, pool, reads, _, mr = tiny(pages=1, registered=False)
    Req = spec.domains["Req"]
    KvPage = pool.Page  # noqa: N806 - named as the domain, which the annotations name
    spec.actions.clear()

    @spec.action
    def setup(s, p: KvPage):  # noqa: ANN001, ANN202
        require(not mr.registered(s, p))
        mr.register_page(s, p)

    @spec.action
    def post(s, r: Req):  # noqa: ANN001, ANN202
        require(reads.drained(s, r))
        pool.alloc(s, r, 1)
        require(mr.all_registered(s, r))
        reads.post(s, r)

    @spec.action
    def drop_page(s, p: KvPage):  # noqa: ANN001, ANN202
        require(mr.registered(s, p))
        mr.deregister_page(s, p)
        mr.register_all(s)  # the step ends with everything registered: only the flag shows the race

    e = explore(Instance(spec))
    b = bmc(Instance(spec), BmcOptions(max_depth=4))
    assert e.violated == b.violated == "no_transfer_on_deregistered"
    assert b.trace is not None and [s.action for s in b.trace.steps] == ["setup", "post", "drop_page"]

    @spec.replace
    def drop_page(s, p: KvPage):  # noqa: ANN001, ANN202, F811
        require(mr.registered(s, p))
        mr.deregister_all(s)
        mr.register_all(s)

    b = bmc(Instance(spec), BmcOptions(max_depth=4))
    assert b.violated == "no_transfer_on_deregistered" and b.trace is not None and len(b.trace) == 3
