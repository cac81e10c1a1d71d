"""Reading an event log (``docs/event-log.md``, schema ``ownership.events/1``) into checked records.

Every way a file can fail to be such a log is a one-line error at the log's
line: not a JSON object (OWN085), a missing field or one of the wrong type,
an unknown event kind (OWN086), a ``seq`` that skips or repeats (OWN087), a
node or page id the header does not declare (OWN088).  Whether the events
make sense is not this module's business: that is what validation decides.

The structure of a line is published as a JSON Schema,
``ownership/schemas/event-log.schema.json``, and ``tests/test_formats.py``
holds it to these checks (each bad line rejected by both, each committed log
accepted by both).  The checks stay in code because a log is read line by
line at the size of an engine's run: jsonschema takes about 0.4 ms a line
(0.1 ms with the event kind's fields picked out first), these checks 0.03 ms,
and the validation search itself about 0.25 ms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ownership.errors import Code, OwnershipError
from ownership.lang.logmap import LOG_KINDS, LogNode

SCHEMA = "ownership.events/1"
WITH_CONTENT = ("share", "write", "cache", "transfer", "read")
"""Kinds whose events carry one content key per page."""


@dataclass(frozen=True)
class LogHeader:
    """Line 1 of a log: the engine that ran and the nodes (KV pools) the events talk about."""

    engine: str
    engine_version: str
    nodes: dict[str, LogNode]
    source: str


@dataclass(frozen=True)
class LogEvent:
    """One event line, its fields checked against the header."""

    line: int
    seq: int
    kind: str
    req: str | None
    node: str | None
    pages: tuple[int, ...]
    content: tuple[str, ...] | None
    src_node: str | None
    src_pages: tuple[int, ...] | None
    raw: dict[str, Any]


@dataclass(frozen=True)
class EventLog:
    """A whole log: its header and its events in order."""

    path: str
    header: LogHeader
    events: tuple[LogEvent, ...]

    def kinds(self) -> set[str]:
        """The event kinds that occur in the log (the rest were not recorded)."""
        return {e.kind for e in self.events}


def _err(code: Code, path: str, line: int, message: str) -> OwnershipError:
    return OwnershipError(code, message, path, line)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _header(path: str, obj: dict[str, Any]) -> LogHeader:
    if obj.get("schema") != SCHEMA:
        raise _err(Code.LOG_SCHEMA, path, 1, f"line 1 must be the header with \"schema\": \"{SCHEMA}\", "
                                            f"got schema {obj.get('schema')!r}")
    nodes = obj.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise _err(Code.LOG_SCHEMA, path, 1, "header: \"nodes\" must be an object naming at least one node")
    out: dict[str, LogNode] = {}
    for name, node in nodes.items():
        if not isinstance(node, dict):
            raise _err(Code.LOG_SCHEMA, path, 1, f"header: node {name!r} must be an object")
        pages: Any = node.get("pages")
        size: Any = node.get("page_size")
        reserved: Any = node.get("reserved", [])
        if not _int(pages) or pages < 1:
            raise _err(Code.LOG_SCHEMA, path, 1, f"header: node {name!r} needs \"pages\", a positive int, got {pages!r}")
        if not _int(size) or size < 1:
            raise _err(Code.LOG_SCHEMA, path, 1, f"header: node {name!r} needs \"page_size\", a positive int, "
                                                 f"got {size!r}")
        if not isinstance(reserved, list) or not all(_int(p) and 0 <= p < pages for p in reserved):
            raise _err(Code.LOG_SCHEMA, path, 1, f"header: node {name!r}: \"reserved\" must list page ids "
                                                 f"0..{pages - 1}, got {reserved!r}")
        out[name] = LogNode(name, pages, size, tuple(sorted(set(reserved))))
    _text_fields(path, 1, obj, ("engine", "engine_version", "source"), "header")
    return LogHeader(obj.get("engine", ""), obj.get("engine_version", ""), out, obj.get("source", ""))


def _text_fields(path: str, n: int, obj: dict[str, Any], names: tuple[str, ...], what: str) -> None:
    """The optional free-text fields, when present, are strings (as the published schema says)."""
    for name in names:
        if name in obj and not isinstance(obj[name], str):
            raise _err(Code.LOG_SCHEMA, path, n, f"{what}: \"{name}\" must be a string, got {obj[name]!r}")


def _pages(path: str, n: int, header: LogHeader, node: Any, pages: Any, field: str) -> tuple[int, ...]:
    if not isinstance(node, str):
        raise _err(Code.LOG_SCHEMA, path, n, f"\"{'src_node' if field == 'src_pages' else 'node'}\" must be a node "
                                             f"name, got {node!r}")
    if node not in header.nodes:
        raise _err(Code.LOG_UNKNOWN_ID, path, n, f"node {node!r} is not in the header "
                                                 f"(nodes: {', '.join(header.nodes)})")
    if not isinstance(pages, list) or not all(_int(p) for p in pages):
        raise _err(Code.LOG_SCHEMA, path, n, f"\"{field}\" must be a list of page ids, got {pages!r}")
    size = header.nodes[node].pages
    for p in pages:
        if not 0 <= p < size:
            raise _err(Code.LOG_UNKNOWN_ID, path, n, f"page {p} is not a page of node {node!r} "
                                                     f"(ids 0..{size - 1})")
    return tuple(pages)


def _event(path: str, n: int, obj: dict[str, Any], header: LogHeader, seq: int) -> LogEvent:
    got = obj.get("seq")
    if not _int(got):
        raise _err(Code.LOG_SCHEMA, path, n, f"event needs \"seq\", an int, got {got!r}")
    if got != seq:
        raise _err(Code.LOG_SEQ, path, n, f"seq {got} where {seq} was due (seq counts from 1 by 1 per line)")
    kind = obj.get("event")
    if kind not in LOG_KINDS:
        raise _err(Code.LOG_SCHEMA, path, n, f"\"event\" must be one of {', '.join(LOG_KINDS)}, got {kind!r}")
    _text_fields(path, n, obj, ("at", "note"), kind)
    req = obj.get("req")
    if not isinstance(req, str):
        raise _err(Code.LOG_SCHEMA, path, n, f"{kind} needs \"req\", a string request id, got {req!r}")
    if kind == "finish":
        return LogEvent(n, seq, kind, req, None, (), None, None, None, obj)
    for field in ("node", "pages"):
        if field not in obj:
            raise _err(Code.LOG_SCHEMA, path, n, f"{kind} needs \"{field}\"")
    pages = _pages(path, n, header, obj["node"], obj["pages"], "pages")
    content: tuple[str, ...] | None = None
    if kind in WITH_CONTENT:
        keys = obj.get("content")
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or len(keys) != len(pages):
            raise _err(Code.LOG_SCHEMA, path, n, f"{kind} needs \"content\", one string key per page "
                                                 f"({len(pages)}), got {keys!r}")
        content = tuple(keys)
    src_node: str | None = None
    src_pages: tuple[int, ...] | None = None
    if kind == "transfer":
        for field in ("src_node", "src_pages"):
            if field not in obj:
                raise _err(Code.LOG_SCHEMA, path, n, f"transfer needs \"{field}\"")
        src_node = obj["src_node"]
        src_pages = _pages(path, n, header, src_node, obj["src_pages"], "src_pages")
        if len(src_pages) != len(pages):
            raise _err(Code.LOG_SCHEMA, path, n, f"transfer: {len(src_pages)} src_pages for {len(pages)} pages")
    return LogEvent(n, seq, kind, req, obj["node"], pages, content, src_node, src_pages, obj)


def read_log(path: Path | str) -> EventLog:
    """The log at ``path``, checked line by line (the first bad line is the error)."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OwnershipError(Code.LOG_NOT_JSON, f"cannot read the log: {exc}", name) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    if not lines:
        raise _err(Code.LOG_SCHEMA, name, 1, "the log is empty: line 1 must be the header")
    header: LogHeader | None = None
    events: list[LogEvent] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            raise _err(Code.LOG_NOT_JSON, name, n, "blank line (every line is one JSON object)")
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _err(Code.LOG_NOT_JSON, name, n, f"not JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(obj, dict):
            raise _err(Code.LOG_NOT_JSON, name, n, f"a JSON {type(obj).__name__}, not an object")
        if header is None:
            header = _header(name, obj)
        else:
            events.append(_event(name, n, obj, header, len(events) + 1))
    assert header is not None
    return EventLog(name, header, tuple(events))
