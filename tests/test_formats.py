"""The published JSON Schemas: well-formed, installed, true to what the tool writes, and as strict as its readers."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
import tomllib
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from conftest import ROOT
from ownership.core import formats
from ownership.core.schema import MARK_ROLES, TraceSchema
from ownership.core.trace import TRACE_FORMAT, TRACE_VERSION, Trace, TraceKind
from ownership.errors import Code, OwnershipError
from ownership.lang.logmap import LOG_KINDS
from ownership.monitor.log import FIELDS
from ownership.render.itf import trace_to_itf
from ownership.validate.eventlog import read_log

SCHEMA_DIR = ROOT / "ownership" / "schemas"
COUNTEREXAMPLES = sorted((ROOT / "counterexamples").glob("*/trace.json"))
LOGS = sorted((ROOT / "examples" / "logs").glob("*.jsonl"))
LEAK = ROOT / "counterexamples" / "sglang_disagg_v0_5_19" / "trace.json"


def errors(name: str, instance: Any) -> list[str]:
    """Every way ``instance`` breaks the published schema ``name``, for an assertion's message."""
    return [f"{list(e.absolute_path)}: {e.message}" for e in Draft202012Validator(formats.schema(name)).iter_errors(instance)]


# -- the schemas themselves ---------------------------------------------------------------------------------------
def test_every_published_schema_is_a_draft_2020_12_schema_and_is_installed_with_the_package() -> None:
    assert sorted(p.name for p in SCHEMA_DIR.iterdir()) == sorted(f"{n}.schema.json" for n in formats.SCHEMAS)
    for name in formats.SCHEMAS:
        schema = formats.schema(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(schema)
        assert schema == json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    # setuptools ships only the data files pyproject names: every schema must match its package-data glob.
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for path in SCHEMA_DIR.iterdir():
        assert any(fnmatch(f"schemas/{path.name}", glob) for glob in package_data["ownership"]), path.name


def test_an_unknown_schema_name_is_refused() -> None:
    with pytest.raises(KeyError, match="trace, itf, event-log"):
        formats.schema_text("sarif")


def test_field_paths_and_sentences() -> None:
    assert formats.field_path(("nodes", "gpu", "pages")) == "nodes.gpu.pages"
    assert formats.field_path(("steps", 2, "args", 0)) == "steps[2].args[0]"
    top = formats.Problem((), 'needs "pages"')
    inner = formats.Problem(("pages", 1), "must be an integer, got 'x'")
    assert top.sentence("alloc") == 'alloc needs "pages"'
    assert inner.sentence("alloc") == "alloc: field pages[1] must be an integer, got 'x'"
    assert inner.sentence("the event", prefix=False) == "field pages[1] must be an integer, got 'x'"


def test_a_long_bad_value_is_cut_short_so_the_error_stays_readable() -> None:
    problem = formats.problem("trace", {**json.loads(LEAK.read_text()), "spec": ["x" * 500]})
    assert problem is not None and problem.path == ("spec",)
    assert problem.what.startswith("must be a string, got ['xxx") and problem.what.endswith("...") \
        and len(problem.what) < 100


# -- what the tool writes fits what it publishes -----------------------------------------------------------------
@pytest.mark.parametrize("path", COUNTEREXAMPLES, ids=[p.parent.name for p in COUNTEREXAMPLES])
def test_the_committed_counterexamples_fit_the_trace_and_itf_schemas(path: Path) -> None:
    assert len(COUNTEREXAMPLES) >= 10
    assert errors("trace", json.loads(path.read_text(encoding="utf-8"))) == []
    assert errors("itf", json.loads((path.parent / "trace.itf.json").read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize("kind", list(TraceKind))
def test_a_trace_of_every_kind_and_its_itf_export_fit_the_schemas(kind: TraceKind) -> None:
    leak = Trace.load(LEAK)
    trace = dataclasses.replace(leak, kind=kind, violation=None if kind is TraceKind.DEADLOCK else "no_foreign_read",
                                loop=len(leak.steps) if kind is TraceKind.LASSO else None)
    assert errors("trace", trace.to_json()) == []
    assert errors("itf", trace_to_itf(trace)) == []
    assert Trace.from_json(json.loads(trace.dumps())).kind is kind


def test_the_itf_schema_holds_itf_values_to_what_the_export_writes() -> None:
    itf = trace_to_itf(Trace.load(LEAK))
    broken: list[Callable[[dict[str, Any]], None]] = [
        lambda d: d["states"][1].update(p_input_len={"#map": [["A", 2]]}),  # a bare number: ITF writes #bigint
        lambda d: d["states"][1].update(decode_content={"#map": [["D0", None]]}),  # ITF has no null
        lambda d: d["states"][0].update({"#meta": {}}),
        lambda d: d["states"][0].pop("mbt::actionTaken"),
        lambda d: d["#meta"].update(format="ownership-trace"),
        lambda d: d["states"][2].update(p_input_len={"#bigint": "two"}),
    ]
    for change in broken:
        bad = copy.deepcopy(itf)
        change(bad)
        assert errors("itf", bad), change


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_every_line_of_the_committed_event_logs_fits_the_schema(log: Path) -> None:
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    header = formats.problem("event-log", lines[0], "header")
    assert header is None, header
    for n, line in enumerate(lines[1:], start=2):
        problem = formats.problem("event-log", line, "event")
        assert problem is None, f"{log.name}:{n}: {problem}"
    # Both ways: each line is a header or an event, and nothing else (the document's own oneOf).
    assert all(errors("event-log", line) == [] for line in lines[:50])
    assert read_log(log).events


def test_the_event_schema_names_the_kinds_and_fields_the_monitor_writes() -> None:
    event = formats.schema("event-log")["$defs"]["event"]
    assert event["properties"]["event"]["enum"] == list(LOG_KINDS) == list(FIELDS)
    required = {clause["if"]["properties"]["event"]["const"]: clause["then"]["required"] for clause in event["allOf"]}
    for kind, fields in FIELDS.items():
        assert ["seq", "event", *fields] == [*event["required"], *required.get(kind, [])], kind
    # The documented write order is the schema's property order.
    assert list(event["properties"]) == ["seq", "event", "req", "node", "pages", "content", "src_node", "src_pages",
                                         "at", "note"]


def test_the_trace_schema_names_the_mark_roles_the_vocabulary_has_and_the_format_the_writer_writes() -> None:
    schema = formats.schema("trace")
    assert schema["$defs"]["mark"]["properties"]["role"]["enum"] == list(MARK_ROLES)
    assert schema["properties"]["format"]["const"] == TRACE_FORMAT
    assert schema["properties"]["version"]["const"] == TRACE_VERSION


# -- trace.json: the schema is the reader's check ------------------------------------------------------------------
def _trace(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = json.loads(LEAK.read_text(encoding="utf-8"))
    change(data)
    return data


# Each was rejected by the field-by-field checks the schema replaced (but the flags, which were read as truthy).
BAD_TRACES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("version", lambda d: d.update(version=2), "field version must be 1, got 2"),
    ("no spec", lambda d: d.pop("spec"), 'the trace needs "spec"'),
    ("steps not a list", lambda d: d.update(steps={}), "field steps must be a list, got {}"),
    ("step not an object", lambda d: d.update(steps=[1]), "step 1 must be an object, got 1"),
    ("step without state", lambda d: d["steps"][2].pop("state"), 'step 3 needs "state"'),
    ("args not a list", lambda d: d["steps"][2].update(args="B"), "step 3: field args must be a list, got 'B'"),
    ("event without kind", lambda d: d["steps"][0]["events"].append({"page": "P0"}),
     'step 1: field events[0] needs "kind"'),
    ("params not ints", lambda d: d.update(params={"requests": "two"}),
     "field params.requests must be an integer, got 'two'"),
    ("a bool param", lambda d: d.update(params={"requests": True}), "field params.requests must be an integer"),
    ("violation not a name", lambda d: d.update(violation=3), "field violation must be a string or null, got 3"),
    ("extra not an object", lambda d: d.update(extra="x"), "field extra must be an object or null, got 'x'"),
    ("pools not a list", lambda d: d["extra"]["schema"].update(pools="nope"),
     "field extra.schema.pools must be a list or null, got 'nope'"),
    ("requests not names", lambda d: d["extra"]["schema"].update(requests=[1]),
     "field extra.schema.requests[0] must be a string, got 1"),
    ("a pool's pages", lambda d: d["extra"]["schema"]["pools"][0].update(pages="P0"),
     "field extra.schema.pools[0].pages must be a list, got 'P0'"),
    ("a mark's role", lambda d: d["extra"]["schema"]["pools"][0].update(
        marks=[{"var": "x", "role": "sparkle", "label": "x"}]),
     "field extra.schema.pools[0].marks[0].role must be one of keeper, count, pending, flag, got 'sparkle'"),
    ("a mark without a label", lambda d: d["extra"]["schema"]["pools"][0].update(marks=[{"var": "x", "role": "flag"}]),
     'field extra.schema.pools[0].marks[0] needs "label"'),
    ("an action's line", lambda d: d["extra"]["schema"]["actions"]["arrive"].update(line="12"),
     "field extra.schema.actions.arrive.line must be an integer or null, got '12'"),
    ("a deadlock flag", lambda d: d["extra"].update(deadlock="yes"),
     "field extra.deadlock must be true or false, got 'yes'"),
]


@pytest.mark.parametrize(("change", "message"), [c[1:] for c in BAD_TRACES], ids=[c[0] for c in BAD_TRACES])
def test_the_trace_schema_rejects_what_the_reader_rejects_naming_the_field(
        change: Callable[[dict[str, Any]], None], message: str) -> None:
    data = _trace(change)
    assert errors("trace", data)
    with pytest.raises(OwnershipError) as caught:
        Trace.from_json(data, "t.json")
    assert caught.value.code is Code.TRACE_CORRUPT
    assert caught.value.one_line().startswith(f"error[OWN020]: t.json: {message}")


def test_what_a_schema_cannot_say_stays_a_check_of_the_reader() -> None:
    both = _trace(lambda d: d["extra"].update(deadlock=True, cti=True))
    assert errors("trace", both) == []
    with pytest.raises(OwnershipError, match="both a deadlock and a counterexample to induction"):
        Trace.from_json(both, "t.json")


def test_json_integers_written_with_a_fraction_are_read_as_integers() -> None:
    # JSON Schema counts 2.0 as an integer; the reader must give back the int the spec's parameters expect.
    trace = Trace.from_json(_trace(lambda d: d["params"].update(requests=2.0)))
    assert trace.params["requests"] == 2 and isinstance(trace.params["requests"], int)


def test_a_schema_read_on_its_own_is_checked_by_the_same_definition() -> None:
    good = json.loads(LEAK.read_text())["extra"]["schema"]
    assert TraceSchema.from_json(good).to_json() == good
    with pytest.raises(ValueError, match=r"^field pools\[0\]\.free must be a string or null, got 3$"):
        TraceSchema.from_json({**good, "pools": [{**good["pools"][0], "free": 3}]})


# -- the event log: the hand checks and the schema agree -----------------------------------------------------------
LOG_HEADER = {"schema": "ownership.events/1", "engine": "vllm", "engine_version": "0.33.0",
              "nodes": {"gpu": {"pages": 8, "page_size": 16, "reserved": [0]}}, "source": "test"}
ALLOC = {"seq": 1, "event": "alloc", "req": "r1", "node": "gpu", "pages": [1, 2]}
TRANSFER = {"seq": 1, "event": "transfer", "req": "r1", "node": "gpu", "pages": [1], "content": ["k"],
            "src_node": "gpu", "src_pages": [2]}


def _header(**changes: Any) -> dict[str, Any]:
    return {**LOG_HEADER, **changes}


def _node(**changes: Any) -> dict[str, Any]:
    return _header(nodes={"gpu": {**LOG_HEADER["nodes"]["gpu"], **changes}})


# (header, event or None, the reader's code, whether the schema rejects the line too)
BAD_LINES: list[tuple[str, dict[str, Any], dict[str, Any] | None, str, bool]] = [
    ("header: other schema", _header(schema="other/1"), None, "OWN086", True),
    ("header: no schema", {k: v for k, v in LOG_HEADER.items() if k != "schema"}, None, "OWN086", True),
    ("header: no nodes", _header(nodes={}), None, "OWN086", True),
    ("header: node not an object", _header(nodes={"gpu": 8}), None, "OWN086", True),
    ("header: no pages", _header(nodes={"gpu": {"page_size": 16}}), None, "OWN086", True),
    ("header: zero pages", _node(pages=0), None, "OWN086", True),
    ("header: page_size a string", _node(page_size="16"), None, "OWN086", True),
    ("header: reserved not ids", _node(reserved=["0"]), None, "OWN086", True),
    ("header: reserved negative", _node(reserved=[-1]), None, "OWN086", True),
    ("header: engine not text", _header(engine=3), None, "OWN086", True),
    ("event: seq a string", LOG_HEADER, {**ALLOC, "seq": "1"}, "OWN086", True),
    ("event: seq a bool", LOG_HEADER, {**ALLOC, "seq": True}, "OWN086", True),
    ("event: no seq", LOG_HEADER, {k: v for k, v in ALLOC.items() if k != "seq"}, "OWN086", True),
    ("event: unknown kind", LOG_HEADER, {**ALLOC, "event": "evict"}, "OWN086", True),
    ("event: no kind", LOG_HEADER, {k: v for k, v in ALLOC.items() if k != "event"}, "OWN086", True),
    ("event: req a number", LOG_HEADER, {**ALLOC, "req": 1}, "OWN086", True),
    ("event: alloc without pages", LOG_HEADER, {k: v for k, v in ALLOC.items() if k != "pages"}, "OWN086", True),
    ("event: alloc without node", LOG_HEADER, {k: v for k, v in ALLOC.items() if k != "node"}, "OWN086", True),
    ("event: node a number", LOG_HEADER, {**ALLOC, "node": 0}, "OWN086", True),
    ("event: pages not a list", LOG_HEADER, {**ALLOC, "pages": 1}, "OWN086", True),
    ("event: a page id a string", LOG_HEADER, {**ALLOC, "pages": [1, "2"]}, "OWN086", True),
    ("event: a page id a bool", LOG_HEADER, {**ALLOC, "pages": [True]}, "OWN086", True),
    ("event: a negative page id", LOG_HEADER, {**ALLOC, "pages": [-1]}, "OWN088", True),
    ("event: write without content", LOG_HEADER, {**ALLOC, "event": "write"}, "OWN086", True),
    ("event: content not strings", LOG_HEADER, {**ALLOC, "event": "read", "content": [1, 2]}, "OWN086", True),
    ("event: transfer without src_node", LOG_HEADER, {k: v for k, v in TRANSFER.items() if k != "src_node"},
     "OWN086", True),
    ("event: transfer without src_pages", LOG_HEADER, {k: v for k, v in TRANSFER.items() if k != "src_pages"},
     "OWN086", True),
    ("event: at not text", LOG_HEADER, {**ALLOC, "at": 12}, "OWN086", True),
    # What a schema cannot say: the reader alone rejects these.
    ("event: seq skips", LOG_HEADER, {**ALLOC, "seq": 2}, "OWN087", False),
    ("event: unknown node", LOG_HEADER, {**ALLOC, "node": "cpu"}, "OWN088", False),
    ("event: page beyond the node", LOG_HEADER, {**ALLOC, "pages": [8]}, "OWN088", False),
    ("event: a key per page", LOG_HEADER, {**ALLOC, "event": "write", "content": ["k"]}, "OWN086", False),
    ("event: src_pages per page", LOG_HEADER, {**TRANSFER, "src_pages": [2, 3]}, "OWN086", False),
    ("header: reserved beyond the node", _node(reserved=[8]), None, "OWN086", False),
]


@pytest.mark.parametrize(("header", "event", "code", "schema_rejects"), [c[1:] for c in BAD_LINES],
                         ids=[c[0] for c in BAD_LINES])
def test_the_event_log_schema_rejects_what_the_reader_rejects(tmp_path: Path, header: dict[str, Any],
                                                              event: dict[str, Any] | None, code: str,
                                                              schema_rejects: bool) -> None:
    lines = [header] if event is None else [header, event]
    log = tmp_path / "bad.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(OwnershipError) as caught:
        read_log(log)
    assert caught.value.code.label == code and caught.value.line == len(lines)
    definition = "header" if event is None else "event"
    assert (formats.problem("event-log", lines[-1], definition) is not None) is schema_rejects


def test_jsonschema_loads_only_when_a_file_is_read() -> None:
    # The command line and every spec import these modules; the schema library costs 0.2 s to import.
    code = ("import sys, ownership.cli, ownership.core.trace, ownership.core.schema, ownership.validate.eventlog; "
            "print('jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "False"
    code = f"import sys; from ownership.core.trace import Trace; Trace.load({str(LEAK)!r}); print('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "True"
