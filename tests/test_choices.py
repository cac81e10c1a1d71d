"""The picks of ``s.choose`` that decided a trace, with their labels: recorded, read back, shown.

A trace records each step's picks as bare values (what replay needs) and,
since they became part of the format, each pick's label and the chosen
value's name (``choices``), which the terminal table, the picture and the
HTML report print.  A trace written before has bare picks only: it still
reads, and says them as unlabelled.
"""

from __future__ import annotations

import dataclasses
import json

from conftest import ROOT
from ownership import Optional, Spec, require
from ownership.core import formats
from ownership.core.replay import build_trace, replay
from ownership.core.trace import Choice, Trace
from ownership.lang.instance import Instance
from ownership.render.dot import trace_to_dot
from ownership.render.html import _steps_table
from ownership.render.text import trace_table, wrap_items

MAIN = ROOT / "counterexamples" / "sglang_disagg_v0_5_19" / "trace.json"


def pick_spec() -> Spec:
    """A request gets a slot the scheduler chooses, and a path that may or may not be fast (hand-made)."""
    spec = Spec("pick")
    Req = spec.domain("Req", 2, symmetric=True, names="AB")
    Slot = spec.domain("Slot", 3, names=["S0", "S1", "S2"])
    spec.var("at", Optional(Slot), per=Req, init=None, doc="the slot the request was given")
    spec.var("fast", bool, per=Req, init=False, doc="the request took the fast path")

    @spec.action
    def place(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        require(s.at[r] is None)
        s.at[r] = s.choose(list(s.all(Slot)), label="slot the scheduler gives", domain=Slot)
        s.fast[r] = s.choose([True, False], label="fast path")

    @spec.invariant
    def placed_when_fast(s) -> bool:  # type: ignore[no-untyped-def]
        """A request on the fast path has a slot."""
        return all(s.at[r] is not None for r in s.all(Req) if s.fast[r])

    return spec


def test_a_replayed_trace_names_each_pick_with_its_label() -> None:
    inst = Instance(pick_spec())
    trace = build_trace(inst, [(inst.find_instance("place", (1,)).index, [2, False])], engine="explore", violation=None)
    (step,) = trace.steps
    assert step.picks == (2, False)
    assert step.choices == (Choice("slot the scheduler gives", "S2"), Choice("fast path", "no"))
    assert step.chose == ["chose S2 (slot the scheduler gives)", "no (fast path)"]
    rows = "\n".join(trace_table(trace))
    assert "place(B)                         chose S2 (slot the scheduler gives), no (fast path)" in rows
    dot = trace_to_dot(trace)  # the lane is narrower: a line per pick
    assert "chose S2 (slot the scheduler gives),</FONT>" in dot and ">no (fast path)</FONT>" in dot
    assert "chose S2 (slot the scheduler gives) no (fast path)" in _steps_table(trace, set())


def test_choices_survive_the_file_and_replay() -> None:
    inst = Instance(pick_spec())
    trace = build_trace(inst, [(inst.find_instance("place", (0,)).index, [1, True])], engine="explore", violation=None)
    data = json.loads(trace.dumps())
    assert data["steps"][0]["choices"] == [
        {"label": "slot the scheduler gives", "value": "S1"}, {"label": "fast path", "value": "yes"}]
    assert formats.problem("trace", data) is None
    again = Trace.from_json(data)
    assert again.steps[0].choices == trace.steps[0].choices
    assert replay(inst, again).ok


def test_a_search_records_no_labels_only_a_replay_does() -> None:
    """The explorer's runs are not recorded: its successors carry picks, and no labels to build or clear."""
    inst = Instance(pick_spec())
    with inst.mode(recording=False):
        outcomes = inst.successors_of(inst.init_state, inst.find_instance("place", (0,)))
    assert len(outcomes) == 6 and all(o.picks and not o.choices for o in outcomes)


def test_the_main_counterexample_says_which_decode_pages_b_was_given() -> None:
    trace = Trace.load(MAIN)
    step = trace.steps[9]
    assert step.call == "decode_pop_preallocated(B)"
    assert [(c.value, c.label) for c in step.choices] == [
        ("D1", "decode page for slot 0"), ("D0", "decode page for slot 1"), ("D2", "decode page for slot 2")]
    table = "\n".join(trace_table(trace))
    assert ("   10  decode_pop_preallocated(B)       chose D1 (decode page for slot 0),\n"
            "                                        D0 (decode page for slot 1), D2 (decode page for slot 2)\n") in table
    dot = trace_to_dot(trace)
    assert "chose D1 (decode page for slot 0)," in dot and "D0 (decode page for slot 1)," in dot
    assert "below the action: what it chose (grey), then the fields it changed." in dot  # the legend says so


def test_the_legend_mentions_picks_only_when_a_step_chose_something() -> None:
    inst = Instance(pick_spec())
    trace = build_trace(inst, [(inst.find_instance("place", (0,)).index, [1, True])], engine="explore", violation=None)
    plain = dataclasses.replace(trace, steps=tuple(dataclasses.replace(s, picks=(), choices=()) for s in trace.steps))
    assert "what it chose" in trace_to_dot(trace)
    assert "what it chose" not in trace_to_dot(plain) and "the fields it changed." in trace_to_dot(plain)


def test_a_trace_without_choices_still_reads_and_says_its_picks_are_unlabelled() -> None:
    data = json.loads(MAIN.read_text())
    for raw in data["steps"]:
        raw.pop("choices", None)
    assert formats.problem("trace", data) is None
    old = Trace.from_json(data)
    assert old.steps[9].choices == () and old.steps[9].picks == (1, 0, 2)
    assert old.steps[9].chose == ["picks 1", "0", "2 (unlabelled)"]
    assert "   10  decode_pop_preallocated(B)       picks 1, 0, 2 (unlabelled)" in "\n".join(trace_table(old))
    assert old.steps[0].chose == []  # arrive chooses nothing


def test_a_choice_must_have_its_label_and_value() -> None:
    data = json.loads(MAIN.read_text())
    data["steps"][9]["choices"][0] = {"value": "D1"}
    problem = formats.problem("trace", data)
    assert problem is not None and "label" in problem.what


def test_wrap_items_breaks_between_items_only() -> None:
    items = ["chose D1 (decode page for slot 0)", "D0 (decode page for slot 1)", "D2 (decode page for slot 2)"]
    assert wrap_items(items, 60) == [
        "chose D1 (decode page for slot 0),", "D0 (decode page for slot 1), D2 (decode page for slot 2)"]
    assert wrap_items(["a very long label indeed"], 5) == ["a very long label indeed"]
    assert wrap_items([], 10) == []
