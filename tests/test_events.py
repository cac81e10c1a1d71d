"""Typed events, the trace kind and the bug story (issue 13, item 5).

Every kind the vocabulary emits is a declared event type; a spec's own kind is
a :class:`SpecEvent`; both keep the bytes of ``trace.json`` and ITF.  The bug
story names the incident's root-cause and symptom steps.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from ownership.core.events import (
    DECLARED,
    Alloc,
    CacheHit,
    CacheRelease,
    ContentHit,
    ContentRead,
    CopyFailed,
    DeadlineExpired,
    Decref,
    Demote,
    Deregistered,
    Event,
    Evict,
    Free,
    FreeDeferred,
    HandlePosted,
    HandleSettled,
    HandOff,
    JobDone,
    JobHolds,
    JobKeeps,
    JobStarted,
    NodeSplit,
    OperationPending,
    PrefixHit,
    PrefixRead,
    Publish,
    Read,
    ReadInFlight,
    ReadPosted,
    Registered,
    Reply,
    SpecEvent,
    StaleCompletion,
    Tombstone,
    Transfer,
    TransferOnDeregistered,
    Write,
    WriteInFlight,
    WritePosted,
    make_event,
)
from ownership.core.story import story_of
from ownership.core.trace import Trace, TraceKind
from ownership.errors import OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.render.dot import trace_to_dot
from ownership.render.html import _steps_table
from ownership.render.itf import trace_to_itf
from ownership.render.text import trace_table, violation_sentence

COMMITTED = sorted((ROOT / "counterexamples").glob("*/trace.json"))
INCIDENT = ROOT / "counterexamples" / "sglang_disagg_v0_5_19" / "trace.json"

ONE_OF_EACH: list[Event] = [
    Alloc(pool="kv", req="A", pages=("K0", "K1")),
    Write(pool="kv", req="B", page="K0", violates="no_unowned_write"),
    Read(pool="kv", req="B", page="K0", content=None, violates="no_read_of_unwritten"),
    Read(pool="kv", req="B", page="K0", content="A"),
    Free(pool="kv", req="A", pages=("K0",)),
    Free(pool="gpu", req="A", pages=("B0",), refcount="1->-1", error="Double free!", violates="refcount_nonnegative"),
    Free(pool="gpu", req="A", pages=("B0",), refcount="1->0", still_used_by=()),
    Transfer(req="A", src="prefill", dst="decode", pages=("P0->D0", "P1->D1")),
    Decref(pool="gpu", req="A", page="B0", refcount="2->1"),
    CopyFailed(req="x", src="device", dst="host", reason="no free host page"),
    Demote(req="x", src="device", dst="host", note="no committed host copy: data lost", violates="demote_only_after_copy"),
    WritePosted(channel="rdma", pool="decode", req="A", pages=("D0",)),
    WriteInFlight(pool="decode", req="A", page="D0", violates="no_free_with_write_in_flight"),
    FreeDeferred(pool="decode", req="A", pages=("D0", "D1")),
    PrefixHit(pool="kv", req="B", page="K1", node="x", kv="-"),
    PrefixRead(pool="kv", req="B", page="K1", node="x", kv="y", violates="prefix_read_matches"),
    Publish(pool="kv", req="A", page="K1", node="x"),
    Evict(pool="kv", req="B", page="K1", node="x", in_use_by=("A",), violates="no_evict_in_use"),
    ContentHit(pool="kv", req="B", page="K0", entry="h0", key="yz", holds="xz"),
    ContentRead(pool="kv", req="B", page="K0", expected="yz", holds="xz", writer="A", violates="no_wrong_content_read"),

    HandOff(pool="full", req="A", node="x", pages=("F0",)),
    CacheHit(pool="full", req="B", node="x", pages=("F0",)),
    CacheRelease(pool="full", node="x", pages=("F0",), in_use_by=("A",), violates="no_release_in_use"),
    Tombstone(pool="swa", node="x"),
    NodeSplit(pool="full", node="x", into="xy", pages=("F1",)),
    Reply(req="B", status=200),
    ReadPosted(channel="nixl", pool="prefill", req="A", pages=("P0",)),
    ReadInFlight(pool="prefill", req="A", page="P0", violates="no_free_with_read_in_flight"),
    Registered(pool="kv", pages=("K0",)),
    Deregistered(pool="kv", pages=("K0", "K1")),
    TransferOnDeregistered(channel="nixl", pool="kv", req="A", page="K0", violates="no_transfer_on_deregistered"),
    DeadlineExpired(deadline="kv_lease", req="A"),
    DeadlineExpired(deadline="ttl"),

    # -- operations per request and jobs (vocab/handles.py, vocab/jobs.py)
    HandlePosted(pool="kv", req="A", handle="R0", pages=("K0",)),
    HandleSettled(pool="kv", req="A", handle="R0", outcome="FAILED"),
    OperationPending(pool="kv", req="A", handle="R1", page="K0", violates="no_release_with_operation_pending"),
    JobStarted(channel="send", pool="kv", req="A", pages=("K0",)),
    JobKeeps(channel="send", pool="kv", req="A", pages=("K0",)),
    JobDone(channel="send", pool="kv", req="A", age=1, pages=()),
    JobHolds(channel="send", pool="kv", req="A", page="K0", violates="no_free_while_job_holds"),
    StaleCompletion(channel="send", req="A", age=1, violates="no_stale_completion"),
]


def test_every_declared_kind_is_exercised() -> None:
    assert {type(e) for e in ONE_OF_EACH} == {*DECLARED, WritePosted}


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: e.kind)
def test_a_declared_event_round_trips_through_json_as_its_type(event: Event) -> None:
    data = json.loads(json.dumps(event.to_json()))
    back = Event.from_json(data)
    assert type(back) is type(event) and back == event
    assert json.dumps(back.to_json()) == json.dumps(event.to_json())
    assert list(data)[0] == "kind" and ("violates" in data) == (event.violates is not None)


def test_the_json_form_is_the_one_events_always_had() -> None:
    assert Free(pool="gpu", req="A", pages=("B0",), refcount="1->0", still_used_by=("B",)).to_json() == {
        "kind": "free", "pool": "gpu", "req": "A", "pages": ["B0"], "refcount": "1->0", "still_used_by": ["B"]}
    assert Read(pool="kv", req="B", page="K0", content=None).to_json() == {
        "kind": "read", "pool": "kv", "req": "B", "page": "K0", "content": None}  # content is kept when null
    assert WritePosted(channel="rdma", pool="d", req="A", pages=()).to_json() == {
        "kind": "rdma write posted", "pool": "d", "req": "A", "pages": []}


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.parent.name)
def test_committed_traces_load_typed_and_write_back_byte_identical(path: Path) -> None:
    trace = Trace.load(path)
    assert trace.dumps() == path.read_text()
    events = [e for step in trace.steps for e in step.events]
    assert events and not any(isinstance(e, SpecEvent) for e in events)
    itf = path.parent / "trace.itf.json"
    assert json.dumps(trace_to_itf(trace), indent=1) + "\n" == itf.read_text()


@pytest.mark.parametrize("data", [
    {"kind": "oops", "detail": "x"},
    {"kind": "read", "page": "K0", "pool": "kv", "req": "A", "content": None},  # declared fields, other order
    {"kind": "reply", "req": "A", "status": 200, "body": "ok"},  # one field more
    {"kind": "free", "pool": "kv", "req": "A", "pages": ["K0"], "error": None},  # an optional field written as null
    {"kind": "alloc", "pool": "kv", "req": "A", "pages": "K0"},  # not a list
    {"kind": " write posted", "pool": "kv", "req": "A", "pages": []},  # no channel
])
def test_what_does_not_fit_a_declared_kind_is_a_spec_event_kept_as_given(data: dict[str, Any]) -> None:
    event = Event.from_json(data)
    assert isinstance(event, SpecEvent) and event.kind == data["kind"]
    assert json.dumps(event.to_json()) == json.dumps(data)


def test_make_event_gives_the_declared_type() -> None:
    assert make_event("reply", {"req": "B", "status": 200}) == Reply(req="B", status=200)
    assert make_event("rdma write posted", {"pool": "d", "req": "A", "pages": ["D0"]}) == WritePosted(
        channel="rdma", pool="d", req="A", pages=("D0",))


def _unknown_kind_spec(tmp_path: Path) -> Path:
    path = tmp_path / "user_events.py"
    path.write_text(
        "from ownership import Spec, require, violates\n\n"
        "spec = Spec('user_events', summary='a spec with its own events', expect=violates('no_oops'))\n"
        "spec.param('n', 1)\nReq = spec.domain('Req', 'n', names='A')\n"
        "spec.var('done', bool, per=Req, init=False)\n\n\n"
        "@spec.action\ndef finish(s, r: Req):\n    require(not s.done[r])\n    s.done[r] = True\n"
        "    s.emit('reply', req=s.name_of(Req, r), status=500)\n"
        "    s.emit('oops', violates='no_oops', detail='lost', req=s.name_of(Req, r))\n\n\n"
        "@spec.invariant\ndef no_oops(s) -> bool:\n    return True\n"
    )
    return path


def test_a_user_spec_emit_gives_typed_and_spec_events(tmp_path: Path) -> None:
    inst = Instance(load_spec(_unknown_kind_spec(tmp_path)))
    ai = inst.find_instance("finish", (0,))
    with inst.mode(recording=True):
        (succ,) = inst.successors_of(inst.init_state, ai)
    reply, oops = succ.events
    assert reply == Reply(req="A", status=500)
    assert oops == SpecEvent(name="oops", fields=(("detail", "lost"), ("req", "A")), violates="no_oops")
    assert succ.violations == ("no_oops",)


def test_an_unknown_kind_from_a_user_spec_still_renders(tmp_path: Path) -> None:
    from ownership.core.replay import build_trace

    inst = Instance(load_spec(_unknown_kind_spec(tmp_path)))
    trace = build_trace(inst, [(inst.find_instance("finish", (0,)).index, [])], engine="explore", violation="no_oops")
    back = Trace.from_json(json.loads(trace.dumps()))
    assert back == trace
    table = "\n".join(trace_table(back))
    assert "> client of A gets HTTP 500" in table
    assert "! oops: detail lost, req A  <-- no_oops" in table
    assert violation_sentence(back) == "oops: detail lost, req A"
    dot = trace_to_dot(back)
    assert "oops by A (no_oops)" in dot and "client gets HTTP 500" in dot
    assert "oops: detail lost, req A" in _steps_table(back, set())


# -- the trace kind ------------------------------------------------------------------------
def test_the_trace_kind_is_stored_as_the_flags_it_always_was() -> None:
    data = json.loads(INCIDENT.read_text())
    assert Trace.from_json(data).kind is TraceKind.COUNTEREXAMPLE
    for flag, kind in (("cti", TraceKind.CTI), ("deadlock", TraceKind.DEADLOCK)):
        marked = json.loads(json.dumps(data))
        marked["extra"][flag] = True
        trace = Trace.from_json(marked)
        assert trace.kind is kind and trace.schema.to_json() == data["extra"]["schema"]
        assert json.loads(trace.dumps()) == marked
    both = json.loads(json.dumps(data))
    both["extra"].update(cti=True, deadlock=True)
    with pytest.raises(OwnershipError, match="both a deadlock and a counterexample to induction"):
        Trace.from_json(both)


# -- the story -------------------------------------------------------------------------------
def test_the_incident_story_names_root_cause_and_symptom() -> None:
    trace = Trace.load(INCIDENT)
    story = story_of(trace)
    page = story.page
    assert page is not None and (page.pool, page.page, page.content, page.reader) == ("decode", "D0", "A", "B")
    assert page.written == (6, "P0->D0") and page.writer == "A"
    assert page.freed == (9, "A") and page.given == (10, "B")
    assert page.filled == ((13, "P0->D1"),) and page.skipped
    assert page.held == ("D0", "D1", "D2")
    # The symptom is B's read of D0.  B's own transfer filled D1 and left D0's old KV, because B's prefill
    # and decode sizes disagree: the root cause is the step that set them (the placeholder swapped in).
    assert story.symptom == page.symptom == 15 == len(trace.steps)
    assert page.sized == (2, "p_input_len=1, p_to_finish=true, d_input_len=6")
    assert story.root_cause == page.root_cause == 2
    assert trace.steps[1].call == "arrive(B, 6)" and trace.steps[12].call == "prefill_send(B)"
    assert page.steps == {6, 9, 10, 15}
    assert [(step, r.status) for step, r in story.replies] == [(8, 200), (15, 200)]
    primary = story.primary
    assert primary is not None and primary.event == Read(
        pool="decode", req="B", page="D0", content="A", violates="no_foreign_read")
    assert story.final == primary


def test_without_a_foreign_read_the_root_cause_falls_back() -> None:
    trace = Trace.load(INCIDENT)
    # Cut before B's transfer: the page is handed over with A's KV, and the hand-over is the cause.
    step = trace.steps[-1]
    cut = dataclasses.replace(trace, steps=(*trace.steps[:12], step))
    page = story_of(cut).page
    assert page is not None and not page.filled and page.root_cause == 10 and page.symptom == 13
    # A violation that is not a read has no page history; with nothing earlier to blame (B never freed
    # D3), its own step is the root cause.
    write = Write(pool="decode", req="B", page="D3", violates="no_foreign_read")
    other = dataclasses.replace(trace, steps=(*trace.steps[:-1], dataclasses.replace(step, events=(write,))))
    story = story_of(other)
    assert story.page is None and story.root_cause == story.symptom == 15
