"""In-flight reads (ownership.vocab.reads): posting, landing, discarding, the free path and its invariant.

Each operation concretely, then the same operations under bmc and prove on a
ten-line spec.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT
from conftest import run_once as run
from ownership import Enum, Ownership, PagePool, Spec, require
from ownership.core.replay import trace_schema
from ownership.core.result import Verdict
from ownership.core.schema import PageMark
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.vocab.reads import InflightReads


def tiny(pages: int = 1) -> tuple[Spec, PagePool, InflightReads]:
    spec = Spec("tiny_reads")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    reads = InflightReads(pool, "nixl")
    reads.invariant()
    own.invariants("no_foreign_read", "no_read_of_unwritten", "no_double_ownership")
    return spec, pool, reads




def test_the_pending_variable_is_marked_for_the_pictures() -> None:
    spec, reads = race_spec()
    pool = reads.pool
    assert PageMark("nixl_pending", "pending", "nixl read") in pool.marks
    schema = trace_schema(Instance(spec))
    assert schema.pools is not None and PageMark("nixl_pending", "pending", "nixl read") in schema.pools[0].marks


def test_a_read_of_the_readers_own_page_lands_clean() -> None:
    spec, pool, reads = tiny(pages=2)
    seen: list[tuple[bool, bool, bool]] = []

    def body(s):  # noqa: ANN001, ANN202
        (p,) = pool.alloc(s, 0, 1)
        pool.write(s, 0, [p])
        reads.post(s, 0)
        seen.append((reads.drained(s, 0), reads.pending_of(s, p), reads.drained(s, 1)))
        reads.land(s, 0)
        seen.append((reads.drained(s, 0), reads.pending_of(s, p), reads.drained(s, 1)))

    inst, outs = run(spec, body)
    assert len(outs) == 2 and seen[:2] == [(False, True, True), (True, False, True)]
    for out in outs:
        assert inst.violated(out.state) is None and out.violations == ()
        assert [e.kind for e in out.events] == ["alloc", "write", "read posted", "read"]
        posted = out.events[2]
        assert posted.get("channel") == "nixl" and posted.get("req") == "A" and len(posted.get("pages")) == 1


def test_the_source_list_is_fixed_at_post_time() -> None:
    spec, pool, reads = tiny(pages=2)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        reads.post(s, 0)
        pool.alloc(s, 0, 1)  # a page the table gains later is not read by the posted read

    inst, outs = run(spec, body)
    for out in outs:
        st = inst.to_json(out.state)
        first = out.events[0].get("pages")[0]
        assert [p for p, v in st["nixl_pending"]["A"].items() if v] == [first]


def test_a_read_landing_after_free_and_reuse_returns_the_next_owners_kv() -> None:
    spec, pool, reads = tiny()

    def body(s):  # noqa: ANN001, ANN202
        a = pool.alloc(s, 0, 1)
        pool.write(s, 0, a)
        reads.post(s, 0)
        reads.free(s, 0)  # released with the read outstanding
        b = pool.alloc(s, 1, 1)
        pool.write(s, 1, b)
        reads.land(s, 0)  # the late read sees B's KV

    inst, (out,) = run(spec, body)
    st = inst.to_json(out.state)
    assert st["read_foreign"] == {"A": "B", "B": None} and st["nixl_pending"]["A"] == {"K0": False}
    kinds = [(e.kind, e.violates) for e in out.events]
    assert ("read still in flight", "no_free_with_read_in_flight") in kinds
    assert ("read", "no_foreign_read") in kinds
    assert out.violations[0] == "no_free_with_read_in_flight"


def test_the_free_is_flagged_outside_recording_even_when_the_page_is_reused_in_the_same_step() -> None:
    """The state after the step is clean for the invariant (drained), so only the flag can say so."""
    spec, pool, reads = tiny()

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        reads.post(s, 0)
        reads.free(s, 0)
        reads.discard(s, 0)  # the read is gone by the end of the step
        pool.alloc(s, 1, 1)

    inst, (out,) = run(spec, body, recording=False)
    assert out.events == () and out.violations == ("no_free_with_read_in_flight",)
    assert inst.violated(out.state) is None


def test_discard_drops_the_data_and_records_nothing() -> None:
    spec, pool, reads = tiny()

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)  # never written: landing would be a read of garbage
        reads.post(s, 0)
        reads.discard(s, 0)
        assert reads.drained(s, 0)

    inst, (out,) = run(spec, body)
    st = inst.to_json(out.state)
    assert st["read_unwritten"]["A"] is False and inst.violated(out.state) is None

    def landing(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        reads.post(s, 0)
        reads.land(s, 0)

    inst, (out,) = run(spec, landing)
    assert inst.violated(out.state) == "no_read_of_unwritten"


def test_the_invariant_fails_on_a_free_or_reused_page_with_a_read_outstanding() -> None:
    spec, pool, reads = tiny()

    def freed(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        reads.post(s, 0)
        pool.free(s, 0)  # the pool's own free: the state alone shows it

    inst, (out,) = run(spec, freed)
    assert inst.violated(out.state) == "no_free_with_read_in_flight"

    def reused(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        reads.post(s, 0)
        pool.free(s, 0)
        pool.alloc(s, 1, 1)  # off the free list again, but in B's table

    inst, (out,) = run(spec, reused)
    assert inst.violated(out.state) == "no_free_with_read_in_flight"

    def drained(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        pool.write(s, 0, pool.pages_of(s, 0))
        reads.post(s, 0)
        reads.land(s, 0)
        reads.free(s, 0)

    inst, (out,) = run(spec, drained)
    assert inst.violated(out.state) is None and out.violations == ()


def test_a_reads_object_on_a_derived_spec_is_not_marked() -> None:
    spec, pool, _ = tiny()
    derived = spec.derive("tiny_reads_derived")
    InflightReads(pool, "offload", spec=derived)
    assert "offload_pending" in derived.vars and "offload_pending" not in spec.vars
    assert [m.var for m in pool.marks] == ["nixl_pending"]


def race_spec(*, guarded: bool = False) -> tuple[Spec, InflightReads]:
    """Ten lines: a read is posted, and the page may be released before it lands (unless ``guarded``)."""
    spec, pool, reads = tiny()
    Phase = Enum("Phase", "IDLE POSTED FREED")
    Req = spec.domains["Req"]
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)
    spec.actions.clear()

    @spec.action
    def post(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.IDLE)
        pool.write(s, r, pool.alloc(s, r, 1))
        reads.post(s, r)
        s.phase[r] = Phase.POSTED

    @spec.action
    def release(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.POSTED)
        if guarded:
            require(reads.drained(s, r))
        reads.free(s, r)
        s.phase[r] = Phase.FREED

    @spec.action
    def land(s, r: Req):  # noqa: ANN001, ANN202
        require(not reads.drained(s, r))
        reads.land(s, r)

    @spec.action
    def drop(s, r: Req):  # noqa: ANN001, ANN202
        require(not reads.drained(s, r))
        reads.discard(s, r)

    return spec, reads


def test_the_operations_run_under_bmc() -> None:
    spec, _ = race_spec()
    e = explore(Instance(spec))
    b = bmc(Instance(spec), BmcOptions(max_depth=4))
    assert e.violated == b.violated == "no_free_with_read_in_flight"
    assert e.trace is not None and b.trace is not None and len(e.trace) == len(b.trace) == 2
    assert [s.action for s in b.trace.steps] == ["post", "release"]


def test_bmc_sees_the_racing_free_when_the_step_itself_ends_clean() -> None:
    """Free, then the read is dropped in the same step: only the flag shows it; bmc must still find it."""
    spec, reads_obj = race_spec()
    Req = spec.domains["Req"]

    @spec.replace
    def release(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == 1)  # POSTED
        reads_obj.free(s, r)
        reads_obj.discard(s, r)
        s.phase[r] = 2  # FREED

    b = bmc(Instance(spec), BmcOptions(max_depth=3))
    e = explore(Instance(spec))
    assert b.violated == e.violated == "no_free_with_read_in_flight"
    assert b.trace is not None and len(b.trace) == 2


@pytest.mark.slow
def test_the_guarded_release_is_proved_for_executions_of_any_length() -> None:
    spec, _ = race_spec(guarded=True)
    assert explore(Instance(spec)).verdict is Verdict.PROVED
    assert bmc(Instance(spec), BmcOptions(max_depth=8)).verdict is Verdict.PROVED
    assert prove(Instance(spec)).verdict is Verdict.PROVED


def _documented_example(tmp_path: Path) -> Path:
    """The complete spec of docs/vocabulary.md's section on remote reads, as a file."""
    doc = (ROOT / "docs" / "vocabulary.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Remote reads, memory registration and deadlines"):]
    block = next(b for b in section.split("```python\n")[1:] if "Spec(" in b).split("```", 1)[0]
    path = tmp_path / "remote_read_timeout.py"
    path.write_text(block, encoding="utf-8")
    return path


def test_the_documented_example_behaves_as_the_section_says(tmp_path: Path) -> None:
    path = _documented_example(tmp_path)
    spec = load_spec(path)
    first = explore(Instance(spec))
    assert first.violated == "no_free_with_read_in_flight" and first.trace is not None
    assert [s.action for s in first.trace.steps] == ["prefill", "release"]
    leak = explore(Instance(spec), ExploreOptions(invariants=("no_foreign_read",)))
    assert leak.trace is not None and len(leak.trace) == 4
    # The fix the section names: the timeout waits for the reader.
    text = path.read_text(encoding="utf-8")
    fixed = text.replace('Deadline(spec, "abort_timeout", per=Req)',
                         'Deadline(spec, "abort_timeout", per=Req, after="the reader is done")')
    fixed = fixed.replace("    reads.land(s, r)             # sees what the page holds *now*",
                          "    reads.land(s, r)             # sees what the page holds *now*\n    timeout.allow(s, r)")
    fixed = fixed.replace('expect=violates("no_free_with_read_in_flight")', "expect=None")
    assert fixed.count("allow") == 1 and "after=" in fixed
    path.write_text(fixed, encoding="utf-8")
    assert explore(Instance(load_spec(path))).verdict is Verdict.PROVED
