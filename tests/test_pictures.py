"""What the pictures, the step tables and the story say about the library's counterexamples and page marks."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest

from conftest import ROOT
from ownership import Ownership, Spec
from ownership.core.events import DECLARED, Event, SpecEvent, WritePosted
from ownership.core.replay import build_trace, trace_schema
from ownership.core.schema import PageMark
from ownership.core.story import PoolShape, keepers, pending, pool_shapes, story_of
from ownership.core.trace import Step, Trace, TraceKind
from ownership.lang.instance import Instance
from ownership.lang.types import Int
from ownership.render.dot import trace_to_dot
from ownership.render.dot_model import RED, anomaly, esc, mark_lines
from ownership.render.html import _steps_table, _story_html
from ownership.render.text import describe_event, trace_table
from ownership.vocab.refcount import BlockTables

COUNTEREXAMPLES = ROOT / "counterexamples"


def committed(name: str) -> Trace:
    return Trace.load(COUNTEREXAMPLES / name / "trace.json")


def cell_texts(dot: str) -> str:
    """The step table's node only (the legend names every mark's label, which would match anything)."""
    return dot.split("  steps [label=<", 1)[1].split("  legend [label=<", 1)[0]


# -- keepers: pages a cache or tree holds are not lost ------------------------------------------
@pytest.mark.parametrize("name", ["tgi_prefix_published_before_write_buggy", "radix_lock_skips_leaf_buggy"])
def test_pages_held_by_the_prefix_index_are_cached_not_lost(name: str) -> None:
    trace = committed(name)
    (pool,) = pool_shapes(trace)
    assert any(m.role == "keeper" and m.var.endswith("_node") for m in pool.marks)
    dot = trace_to_dot(trace)
    assert "lost" not in cell_texts(dot) and "lost" not in dot.split("  steps [label=<", 1)[0]
    assert "cached x" in cell_texts(dot)
    for state in trace.states:
        for page in pool.pages:
            if keepers(state, pool, page):
                assert anomaly(state, pool, page) is None


def test_a_kept_page_on_the_free_list_is_still_an_anomaly() -> None:
    pool = PoolShape("kv", ("K0",), "kv_free", "kv_holders", "kv_content", "kv_slot",
                     (PageMark("idx_node", "keeper", "cached"),))
    state = {"kv_free": {"K0": 1}, "kv_holders": {"K0": []}, "kv_content": {"K0": None}, "idx_node": {"K0": "x"}}
    assert anomaly(state, pool, "K0") == "K0 is cached x and also on the free list"
    state["kv_free"]["K0"] = 0
    assert anomaly(state, pool, "K0") is None
    state["idx_node"]["K0"] = None
    assert anomaly(state, pool, "K0") == "K0 is held by nobody and not on the free list (lost)"


# -- refcounted block tables: a pool of blocks --------------------------------------------------
def test_block_tables_are_a_pool_of_blocks_in_the_trace_schema() -> None:
    spec = Spec("blocks")
    Seq = spec.domain("Seq", 2, symmetric=True, names="AB")
    blocks = BlockTables(spec, Seq, 3, 2, name="gpu")
    blocks.invariants()

    @spec.action
    def take(s, r: Seq) -> None:  # type: ignore[no-untyped-def]
        blocks.append(s, r, blocks.allocate(s, r))

    schema = trace_schema(Instance(spec))
    assert schema.request_domain == "Seq" and schema.requests == ("A", "B")
    assert schema.pools is not None
    (pool,) = schema.pools
    assert (pool.name, pool.pages, pool.free, pool.holders, pool.content) == (
        "gpu", ("B0", "B1", "B2"), "gpu_free", "gpu_holders", None)
    assert pool.marks == (PageMark("gpu_ref", "count", "rc"),)
    assert "gpu_len" in (schema.per_request or ())
    again = type(schema).from_json(json.loads(json.dumps(schema.to_json())))
    assert again == schema


def test_the_fork_picture_has_block_cells_with_holders_and_counts() -> None:
    trace = committed("vllm_fork_double_free_buggy")
    (pool,) = pool_shapes(trace)
    assert pool.name == "gpu" and pool.shared and not pool.content
    cells = cell_texts(trace_to_dot(trace))
    assert "<B>B1</B>" in cells and "<B>B3</B>" in cells  # a column per block
    assert "<B>A,B</B>" in cells and "rc=3" in cells and "rc=2" in cells  # B0 after the fork: shared, counted twice
    assert "<B>B+free</B>" in cells  # B1 after A's second free: B still holds it, and it is on the free list
    assert "gpu_ref[" not in cells and "gpu_holders[" not in cells and "gpu_free[" not in cells  # no field dumps
    # Two holders of a refcounted block are the point of sharing, not a double ownership.
    after_fork = trace.states[2]
    assert anomaly(after_fork, pool, "B0") is None
    assert anomaly(trace.states[4], pool, "B1") == "B1 is held by B and also on the free list"


# -- the story names the root cause --------------------------------------------------------------
ROOT_CAUSES = {
    # name: (root-cause step, symptom step, what the root-cause step is)
    "sglang_disagg_v0_5_19": (2, 15, "arrive(B, 6)"),  # the prompt is swapped for a one-token placeholder
    "sglang_disagg_v0_5_4": (9, 15, "arrive(B, 6)"),  # the rejection sets finished_reason, the placeholder is still sent
    "tgi_prefix_published_before_write_buggy": (5, 6, "next_batch_below_min_size(B, x)"),  # unwritten block published
    "radix_lock_skips_leaf_buggy": (5, 5, "prefill(B, xy)"),  # the matched node is not locked, then evicted
    "vllm_fork_double_free_buggy": (3, 4, "append_slot(A)"),  # copy-on-write drops A's reference to B1
    "sglang_pd_abort_inflight_buggy": (4, 4, "decode_pop_transferred(A)"),  # the free while the write is in flight
    "vllm_async_sched_inflight_step_buggy": (4, 5, "finish_or_preempt(A)"),  # the free while step N+1 still writes
    "sglang_hicache_demote_without_copy_buggy": (5, 6, "evict_device_leaf(B)"),  # demoted though the backup failed
    # The transfer vocabulary's library pairs (pending reads, deregistered memory), told from their marks:
    "mooncake_get_outlives_lease_buggy": (5, 7, "evict(A)"),  # the buffer evicted while the Get still reads it
    "sglang_epd_send_deregister_buggy": (4, 4, "rank0_send_done(A)"),  # deregistered while rank 1 still reads
    "vllm_nixl_abort_timeout_buggy": (2, 2, "p_release_expired(A)"),  # freed while decode's read is in flight
    # Content identity: the lookup whose index key does not tell two contents apart hands the page over.
    "vllm_prefix_hash_collision_buggy": (3, 4, "schedule(B, yz)"),  # yz's lookup hits xz's block (colliding hash)
    "vllm_prefix_lora_scope_buggy": (3, 4, "schedule(B, sql)"),  # the lookup ignores the LoRA scope
    # Paired (SWA) caches: the insert as a live node of a block whose window pages are gone (a state invariant:
    # no event breaks it, the last step does); the recovery that releases a locked node's full pages.
    "sglang_swa_insert_evicted_window_buggy": (3, 3, "finish(A)"),
    "sglang_swa_recover_locked_full_buggy": (3, 3, "prefill(B)"),
    # Handles: the first handle's failure taken for the request's while its sibling still writes the block.
    "vllm_nixl_multi_handle_failure_buggy": (2, 3, "xfer_failed(A, R0)"),
    # Jobs: the id reused while the first lifecycle's send job holds its block; the free by id then frees it.
    "vllm_request_id_reuse_stale_send_buggy": (2, 3, "prefill(A)"),
}


def test_every_library_counterexample_has_its_root_cause_listed() -> None:
    # A lasso has none (no event causes what never happens): its loop is marked instead (test_liveness.py).
    committed_names = {p.parent.name for p in COUNTEREXAMPLES.glob("*/trace.json")
                       if Trace.load(p).kind is not TraceKind.LASSO}
    assert committed_names <= set(ROOT_CAUSES), sorted(committed_names - set(ROOT_CAUSES))


def test_a_committed_lasso_names_no_root_cause_and_marks_its_loop() -> None:
    lassos = [p for p in COUNTEREXAMPLES.glob("*/trace.json") if Trace.load(p).kind is TraceKind.LASSO]
    assert len(lassos) >= 3
    for path in lassos:
        trace = Trace.load(path)
        assert story_of(trace).named_cause is None
        dot = trace_to_dot(trace)
        assert "root cause" not in dot and ">loop<" in dot


@pytest.mark.parametrize("name", sorted(ROOT_CAUSES))
def test_the_story_names_the_root_cause_step(name: str) -> None:
    if not (COUNTEREXAMPLES / name / "trace.json").exists():
        pytest.skip(f"counterexamples/{name} is not committed here")
    cause, symptom, call = ROOT_CAUSES[name]
    trace = committed(name)
    story = story_of(trace)
    assert (story.root_cause, story.symptom) == (cause, symptom)
    assert trace.steps[cause - 1].call == call
    beat = story.cause_beat
    assert beat is not None and beat.step == cause and call in beat.text
    assert len(story.beats) > 1  # more than the symptom: the story leads up to it
    dot = trace_to_dot(trace)
    assert f"root cause, step {cause}: " in dot
    assert "root cause, step" in _story_html(trace) and "root cause" in _steps_table(trace, set())


@pytest.mark.parametrize("name", sorted(ROOT_CAUSES))
def test_the_terminal_table_names_the_root_cause_as_the_picture_does(name: str) -> None:
    """The row of the root-cause step says so under its action, and the table ends with the story's line for it."""
    if not (COUNTEREXAMPLES / name / "trace.json").exists():
        pytest.skip(f"counterexamples/{name} is not committed here")
    cause, _symptom, call = ROOT_CAUSES[name]
    trace = committed(name)
    lines = trace_table(trace)
    row = next(k for k, ln in enumerate(lines) if ln.startswith(f"  {cause:>3}  {call} "))
    assert lines[row + 1].startswith(f"  {'':>3}  (root cause) ")
    assert sum("(root cause)" in ln for ln in lines) == 1
    beat = story_of(trace).cause_beat
    assert beat is not None
    start = next(k for k, ln in enumerate(lines) if ln.startswith("  root cause, step "))
    said = " ".join(ln.strip() for ln in lines[start:])
    assert said == f"root cause, step {cause}: {beat.text}"  # the picture's own line, word for word
    assert esc(f"root cause, step {cause}: {beat.text}") in trace_to_dot(trace)


def test_a_story_of_one_beat_names_no_root_cause_anywhere() -> None:
    """The symptom's own step is the headline: neither the table, the picture nor the report calls it a root cause."""
    event = SpecEvent(name="oops", fields=(("req", "A"),), violates="no_such_thing")
    trace = Trace("t", None, {}, {}, (Step("act", (), (), (event,), {}),), violation="no_such_thing")
    story = story_of(trace)
    assert len(story.beats) <= 1 and story.named_cause is None
    assert not any("root cause" in ln for ln in trace_table(trace))
    assert "root cause" not in trace_to_dot(trace) and "root cause" not in _steps_table(trace, set())


def test_the_placeholder_step_is_named_with_the_fields_it_set() -> None:
    story = story_of(committed("sglang_disagg_v0_5_19"))
    assert story.page is not None and story.page.sized == (2, "p_input_len=1, p_to_finish=true, d_input_len=6")
    assert story.beats[0].text.startswith("arrive(B, 6) sets B's p_input_len=1")


# -- the text table marks every violating event ----------------------------------------------------
def _instance_of(cls: type[Event], violates: str) -> Event:
    """An event of ``cls`` with plausible field values."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == "violates" or f.default is not dataclasses.MISSING and f.name != "channel":
            continue
        hint = str(hints.get(f.name))
        values[f.name] = ("P0",) if "tuple" in hint else (200 if hint == "typing.Any" else "A")
    if cls is SpecEvent:
        values = {"name": "oops", "fields": (("req", "A"),)}
    return cls(violates=violates, **values)


EVENT_TYPES = [*DECLARED, WritePosted, SpecEvent]


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda c: c.__name__)
def test_every_violating_event_gets_a_bang_line_naming_its_invariant(cls: type[Event]) -> None:
    event = _instance_of(cls, "no_such_thing")
    desc = describe_event(event)
    assert desc is not None and desc.endswith("  <-- no_such_thing")
    trace = Trace("t", None, {}, {}, (Step("act", (), (), (event,), {}),), violation="no_such_thing")
    bangs = [line for line in trace_table(trace) if line.strip().startswith("! ")]
    assert len(bangs) == 1 and bangs[0].endswith("<-- no_such_thing")
    assert '<span class="ev bad">! ' in _steps_table(trace, set())


# -- every mark role is drawn ------------------------------------------------------------------------
def marked_spec() -> Spec:
    """A pool whose pages carry one mark of every role, declared by hand as vocabulary would."""
    spec = Spec("every_mark")
    Req = spec.domain("Req", 2, symmetric=True, names="AB")
    Job = spec.domain("Job", 2, names=["J0", "J1"])
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", 2, prefix="K")
    spec.var("pinned", bool, per=pool.Page, init=False, doc="a transfer job holds the page")
    spec.var("ref", Int, per=pool.Page, init=0, doc="references the job holds")
    spec.var("reading", bool, per=(Job, pool.Page), init=False, doc="a read of the page is posted")
    spec.var("dereg", bool, per=pool.Page, init=False, doc="the page's memory is deregistered")
    pool.mark("pinned", "keeper", "pinned")
    pool.mark("ref", "count", "rc")
    pool.mark("reading", "pending", "read posted")
    pool.mark("dereg", "flag", "deregistered")
    own.invariants("no_double_ownership")

    @spec.action
    def take(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        pool.alloc(s, r, 1)

    @spec.action
    def post_read(s, r: Req, j: Job) -> None:  # type: ignore[no-untyped-def]
        for p in pool.pages_of(s, r):
            s.reading[j, p] = True

    @spec.action
    def hand_off(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        """The request lets go of its pages; the job keeps them (not on the free list)."""
        pages = pool.pages_of(s, r)
        pool.free_pages(s, r, pages)
        for p in pages:
            getattr(s, pool.free_var)[p] -= 1
            s.pinned[p] = True
            s.ref[p] += 2
            s.dereg[p] = True

    return spec


def marked_trace() -> Trace:
    inst = Instance(marked_spec())
    path = [
        (inst.find_instance("take", (0,)).index, [0]),
        (inst.find_instance("post_read", (0, 1)).index, []),
        (inst.find_instance("hand_off", (0,)).index, []),
    ]
    built = build_trace(inst, path, engine="explore", violation=None)
    return Trace.from_json(json.loads(built.dumps()))  # drawn from the saved form, as `ownership render` does


def test_marks_of_every_role_are_drawn_in_the_page_cell() -> None:
    trace = marked_trace()
    (pool,) = pool_shapes(trace)
    assert [m.role for m in pool.marks] == ["keeper", "count", "pending", "flag"]
    final = trace.states[-1]
    assert mark_lines(final, trace.states[-2], pool, "K0") == ["pinned", "rc=2", "read posted (J1)", "deregistered"]
    assert anomaly(final, pool, "K0") is None  # pinned: held, not lost
    after_post = trace.states[2]
    assert mark_lines(after_post, None, pool, "K0") == ["read posted (J1)"]
    cells = cell_texts(trace_to_dot(trace))
    for text in ("<B>pinned</B>", "rc=2", "read posted (J1)", "deregistered"):
        assert text in cells
    assert "lost" not in cells
    # Drawn in the cells, so not repeated as field dumps in the lanes.
    assert "pinned[K0]" not in cells and "reading[J1, K0]" not in cells and "ref[K0]" not in cells


def test_pending_reads_either_orientation_of_the_table() -> None:
    mark = PageMark("op", "pending", "read")
    by_element = {"op": {"J0": {"K0": True, "K1": False}, "J1": {"K0": True, "K1": True}}}
    by_page = {"op": {"K0": {"J0": True, "J1": True}, "K1": {"J0": False, "J1": True}}}
    assert pending(by_element, mark, "K0") == pending(by_page, mark, "K0") == ["J0", "J1"]
    assert pending(by_element, mark, "K1") == pending(by_page, mark, "K1") == ["J1"]


def test_a_count_is_drawn_while_set_and_in_the_step_it_drops_to_zero() -> None:
    pool = PoolShape("gpu", ("B0",), "gpu_free", "gpu_holders", "", "", (PageMark("gpu_ref", "count", "rc"),))
    base = {"gpu_free": {"B0": 1}, "gpu_holders": {"B0": []}}
    assert mark_lines({**base, "gpu_ref": {"B0": 0}}, {**base, "gpu_ref": {"B0": 1}}, pool, "B0") == ["rc=0"]
    assert mark_lines({**base, "gpu_ref": {"B0": 0}}, {**base, "gpu_ref": {"B0": 0}}, pool, "B0") == []
    negative = {**base, "gpu_free": {"B0": 0}, "gpu_ref": {"B0": -1}}
    assert anomaly(negative, pool, "B0") == "B0 has rc=-1, below zero"


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda c: c.__name__)
def test_every_violating_event_is_said_in_its_lane_of_the_picture(cls: type[Event]) -> None:
    event = _instance_of(cls, "no_such_thing")
    trace = Trace("t", None, {}, {}, (Step("act", (), (), (event,), {}),), violation="no_such_thing")
    lanes = cell_texts(trace_to_dot(trace))
    if cls.__name__ == "Read":
        # A read joins the lane's list of reads, red and marked "A's KV!"; the headline names the invariant.
        assert "A: own KV" in lanes and f'COLOR="{RED}"><B>A: own KV</B>' in lanes
    else:
        assert "no_such_thing" in lanes


@pytest.mark.parametrize("name", ["tgi_prefix_published_before_write_buggy", "radix_lock_skips_leaf_buggy",
                                  "sglang_pd_abort_inflight_buggy", "vllm_fork_double_free_buggy"])
def test_the_offending_event_is_in_the_lane_of_its_step(name: str) -> None:
    trace = committed(name)
    assert f"({trace.violation})" in cell_texts(trace_to_dot(trace))


def test_the_text_table_keeps_block_holders_that_no_event_explains() -> None:
    # A fork shares blocks without an event: its holder changes stay in the table (a page pool's are
    # summarised by its alloc/free events).
    trace = committed("vllm_fork_double_free_buggy")
    table = "\n".join(trace_table(trace, ghosts=trace.schema.ghosts or ()))
    fork = table.split("fork(A, B)", 1)[1].split("append_slot(A)", 1)[0]
    assert "gpu_holders[B0]:" in fork and "{A}->{A,B}" in fork
    incident = committed("sglang_disagg_v0_5_19")
    assert "decode_holders" not in "\n".join(trace_table(incident))


@pytest.mark.parametrize("name, cause, symptom", [
    ("sglang_pd_abort_inflight_buggy", 4, 10), ("vllm_async_sched_inflight_step_buggy", 4, 9)])
def test_a_read_of_a_late_write_goes_back_to_the_free_it_raced(name: str, cause: int, symptom: int) -> None:
    # The specs' docstrings: `--invariant no_foreign_read` shows the whole story, whose root cause is the
    # free while the write was in flight (the default check's violation).
    from ownership.session.run import check
    from ownership.session.settings import Settings

    settings = Settings(invariants=("no_foreign_read",), render=False, progress=False)
    result = check(ROOT / "specs" / f"{name}.py", settings, outputs=False).results[0]
    assert result.trace is not None
    story = story_of(result.trace)
    assert story.page is not None and story.page.late == (cause, "A")
    assert (story.root_cause, story.symptom) == (cause, symptom)
    assert "late write lands in" in trace_to_dot(result.trace)


def test_a_count_driven_below_zero_goes_back_to_the_reference_dropped_before_the_early_free() -> None:
    from ownership.session.run import check
    from ownership.session.settings import Settings

    settings = Settings(invariants=("refcount_nonnegative",), render=False, progress=False)
    result = check(ROOT / "specs" / "vllm_fork_double_free_buggy.py", settings, outputs=False).results[0]
    assert result.trace is not None
    story = story_of(result.trace)
    # Step 3 drops A's reference to B1, step 4 frees B1 again while B uses it, step 5 is B's "Double free!".
    assert (story.root_cause, story.symptom) == (3, 5)
    assert [b.step for b in story.beats] == [3, 4, 5] and "Double free!" in story.beats[-1].text


def late_read_spec() -> Spec:
    """A read posted while the reader holds the page completes after it let the page go (hand-made)."""
    spec = Spec("late_read")
    Req = spec.domain("Req", 2, symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", 1, prefix="K")
    spec.var("reading", bool, per=(Req, pool.Page), init=False, doc="a read of the page is posted")
    pool.mark("reading", "pending", "read")
    own.invariants("no_foreign_read")

    @spec.action
    def fill(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        pool.write(s, r, pool.alloc(s, r, 1))

    @spec.action
    def post(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        for p in pool.pages_of(s, r):
            s.reading[r, p] = True

    @spec.action
    def drop(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        pool.free(s, r)

    @spec.action
    def complete(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        pages = [p for p in s.all(pool.Page) if s.reading[r, p]]
        for p in pages:
            s.reading[r, p] = False
        pool.read(s, r, pages)

    return spec


def test_a_late_read_goes_back_to_the_readers_free() -> None:
    inst = Instance(late_read_spec())
    path = [(inst.find_instance(a, (r,)).index, picks) for a, r, picks in (
        ("fill", 0, [0]), ("post", 0, []), ("drop", 0, []), ("fill", 1, [0]), ("complete", 0, []))]
    trace = build_trace(inst, path, engine="explore", violation="no_foreign_read")
    story = story_of(trace)
    assert story.page is not None and story.page.late_read == 3
    assert (story.root_cause, story.symptom) == (3, 5)
    assert story.cause_beat is not None and "while its read of it is still in flight" in story.cause_beat.text
    cells = cell_texts(trace_to_dot(trace))
    assert "read (A)" in cells  # the pending read is drawn on the page B now holds


def test_a_vocabulary_event_of_its_own_is_told_from_the_marks_it_declares() -> None:
    # A kind the story does not know (a read still in flight, as vocabulary may emit): the pending mark on
    # the page says when the operation started.
    spec = late_read_spec()
    Req = spec.domains["Req"]
    pool = spec.extensions["ownership"].pools[0]

    @spec.invariant
    def no_free_while_reading(s) -> bool:  # type: ignore[no-untyped-def]
        """Judged by the event: no page is freed while a read of it is in flight."""
        return True

    @spec.action
    def drop_reading(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        pages = pool.pages_of(s, r)
        pool.free(s, r)
        for p in pages:
            if s.reading[r, p]:
                s.flag("no_free_while_reading")
                s.emit("read still in flight", pool="kv", req=r, page=p,
                       violates="no_free_while_reading")

    inst = Instance(spec)
    path = [(inst.find_instance(a, (0,)).index, picks) for a, picks in (("fill", [0]), ("post", []),
                                                                        ("drop_reading", []))]
    trace = build_trace(inst, path, engine="explore", violation="no_free_while_reading")
    story = story_of(trace)
    assert [(b.step, b.text) for b in story.beats] == [
        (2, "read (A) on K0 starts (post(A))"),
        (3, "read still in flight on K0 (req A) (drop_reading(A))"),
    ]
    assert (story.root_cause, story.symptom) == (3, 3)
    assert "root cause, step 3: read still in flight on K0" in trace_to_dot(trace)


def test_a_state_invariant_no_event_breaks_gets_the_last_step_as_its_symptom() -> None:
    # Judged on the state alone: no event of the trace violates it, yet the last step reached the bad state.
    spec = late_read_spec()
    pool = spec.extensions["ownership"].pools[0]

    @spec.invariant
    def b_holds_nothing(s) -> bool:  # type: ignore[no-untyped-def]
        """Request B never holds a page (judged on the state: no event flags it)."""
        return len(pool.pages_of(s, 1)) == 0

    inst = Instance(spec)
    path = [(inst.find_instance(a, (r,)).index, picks) for a, r, picks in (
        ("fill", 0, [0]), ("drop", 0, []), ("fill", 1, [0]))]
    trace = build_trace(inst, path, engine="explore", violation="b_holds_nothing")
    assert not any(e.violates for step in trace.steps for e in step.events)
    story = story_of(trace)
    assert story.primary is None
    assert (story.symptom, story.root_cause) == (3, 3)
    # The last step's events on pages, each after the event before it on the same page: A's free of K0.
    assert [b.step for b in story.beats] == [2, 3, 3]
    assert "free by A on K0 (drop(A))" == story.beats[0].text
    dot = trace_to_dot(trace)
    assert "b_holds_nothing is violated after step 3" in dot and "root cause, step 3: " in dot


def test_a_state_invariant_broken_at_the_initial_state_has_no_symptom_step() -> None:
    trace = Trace("t", None, {}, {"x": 1}, (), violation="x_is_zero")
    story = story_of(trace)
    assert story.symptom is None and story.root_cause is None and story.beats == ()
