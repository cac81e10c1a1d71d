"""ITF export of traces (the Apalache/Quint Informal Trace Format)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from ownership.core.schema import UNKNOWN_SCHEMA
from ownership.core.trace import Trace, TraceKind
from ownership.render.itf import ACTION_TAKEN, NONDET_PICKS, to_itf_value, trace_to_itf, write_itf


@pytest.fixture(scope="module")
def itf(trace: Trace) -> dict[str, Any]:
    return trace_to_itf(trace)


def _map(value: dict[str, Any]) -> dict[Any, Any]:
    assert set(value) == {"#map"}
    return {k: v for k, v in value["#map"]}


def test_meta(itf: dict[str, Any]) -> None:
    meta = itf["#meta"]
    assert meta["format"] == "ITF"
    assert meta["format-description"].startswith("https://")
    assert meta["source"].endswith("sglang_disagg_v0_5_19.py")
    assert meta["invariant"] == "no_foreign_read"
    assert "no_foreign_read" in meta["description"]


def test_one_state_per_step_plus_initial(trace: Trace, itf: dict[str, Any]) -> None:
    assert len(itf["states"]) == len(trace.steps) + 1
    assert [s["#meta"]["index"] for s in itf["states"]] == list(range(len(trace.steps) + 1))


def test_vars_cover_every_state_variable(trace: Trace, itf: dict[str, Any]) -> None:
    assert itf["vars"] == [*trace.initial, ACTION_TAKEN, NONDET_PICKS]
    for state in itf["states"]:
        assert set(state) == {"#meta", *itf["vars"]}


def test_values(itf: dict[str, Any]) -> None:
    first = itf["states"][1]  # after arrive(A, 2)
    assert _map(first["p_input_len"]) == {"A": {"#bigint": "2"}, "B": {"#bigint": "0"}}
    assert _map(first["p_queue"]) == {"A": "BOOTSTRAP", "B": "IDLE"}
    assert _map(first["p_to_finish"]) == {"A": False, "B": False}
    last = itf["states"][-1]
    assert _map(last["decode_holders"])["D0"] == {"#set": ["B"]}
    assert _map(last["decode_holders"])["D3"] == {"#set": []}
    assert _map(last["decode_content"]) == {"D0": "A", "D1": "B", "D2": "-", "D3": "-"}
    assert _map(last["read_foreign"]) == {"A": "-", "B": "A"}
    assert _map(last["decode_slot"])["D3"] == {"#bigint": "-1"}


def test_no_nulls_or_bare_numbers(itf: dict[str, Any]) -> None:
    def walk(value: Any, under_meta: bool) -> None:
        assert value is not None
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, under_meta or k == "#meta")
        elif isinstance(value, list):
            for v in value:
                walk(v, under_meta)
        elif not under_meta:
            assert isinstance(value, (str, bool)), value

    for state in itf["states"]:
        walk(state, False)


def test_mbt_variables(trace: Trace, itf: dict[str, Any]) -> None:
    states = itf["states"]
    assert states[0][ACTION_TAKEN] == "init"
    assert states[0][NONDET_PICKS] == {"#map": []}
    assert [s[ACTION_TAKEN] for s in states[1:]] == [step.action for step in trace.steps]
    assert _map(states[1][NONDET_PICKS]) == {"0": "A", "1": {"#bigint": "2"}, "picks": []}
    prealloc_b = next(i for i, s in enumerate(trace.steps, start=1) if s.call == "decode_pop_preallocated(B)")
    picks = _map(states[prealloc_b][NONDET_PICKS])
    assert picks["0"] == "B"
    assert picks["picks"] == [{"#bigint": str(p)} for p in trace.steps[prealloc_b - 1].picks]


def test_deadlock_and_empty(trace: Trace) -> None:
    stuck = dataclasses.replace(trace, steps=trace.steps[:3], violation=None, kind=TraceKind.DEADLOCK, schema=UNKNOWN_SCHEMA)
    doc = trace_to_itf(stuck)
    assert doc["#meta"]["deadlock"] is True
    assert "invariant" not in doc["#meta"]
    empty = trace_to_itf(dataclasses.replace(trace, steps=(), violation=None))
    assert len(empty["states"]) == 1


def test_to_itf_value_rejects_unknown_types() -> None:
    with pytest.raises(TypeError):
        to_itf_value(1.5)
    assert to_itf_value(True) is True
    assert to_itf_value(10**30) == {"#bigint": str(10**30)}


def test_write_itf(trace: Trace, itf: dict[str, Any], tmp_path: Path) -> None:
    path = write_itf(trace, tmp_path / "sub" / "trace.itf.json")
    assert json.loads(path.read_text(encoding="utf-8")) == itf
