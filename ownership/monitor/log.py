"""The event log (JSON lines, schema ``ownership.events/1``): writing it, and applying its records to a monitor.

Line 1 is the header, every later line one event, exactly as in
docs/event-log.md.  Keys are written in a fixed order (seq, event, req, node,
pages, content, src_node, src_pages, at, note) with no timestamps, so a run
that makes the same events writes the same bytes: committed logs are compared
byte for byte with what the code produces.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ownership.errors import Code, OwnershipError
from ownership.monitor.core import MalformedEventError, Monitor

SCHEMA = "ownership.events/1"

#: Each event kind's required fields after ``seq`` and ``event``, in the order they are written.
FIELDS: dict[str, tuple[str, ...]] = {
    "alloc": ("req", "node", "pages"),
    "share": ("req", "node", "pages", "content"),
    "write": ("req", "node", "pages", "content"),
    "cache": ("req", "node", "pages", "content"),
    "transfer": ("req", "node", "pages", "content", "src_node", "src_pages"),
    "read": ("req", "node", "pages", "content"),
    "free": ("req", "node", "pages"),
    "finish": ("req",),
}


def dumps(record: Mapping[str, Any]) -> str:
    """One log line (no newline): compact JSON, keys in the order given, non-ASCII kept."""
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


class LogWriter:
    """Writes the header at once, then one line per event; owns the file only if it opened it."""

    def __init__(self, target: str | Path | IO[str], header: Mapping[str, Any]) -> None:
        if isinstance(target, str | Path):
            try:
                self._file: IO[str] = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
            except OSError as e:
                raise OwnershipError(Code.OUTPUT_PATH, f"cannot write the event log: {e.strerror}",
                                     str(target)) from e
            self._owned = True
        else:
            self._file, self._owned = target, False
        self._file.write(dumps(header) + "\n")

    def write(self, record: Mapping[str, Any]) -> None:
        """Appends one event line."""
        self._file.write(dumps(record) + "\n")

    def flush(self) -> None:
        """Flushes what is written (before a violation propagates)."""
        self._file.flush()

    def close(self) -> None:
        """Closes a file this writer opened; flushes one it was given."""
        if self._owned:
            if not self._file.closed:
                self._file.close()
        else:
            self._file.flush()


def monitor_from_header(header: Mapping[str, Any], **kwargs: Any) -> Monitor:
    """A monitor for the nodes a log's header names (``kwargs`` go to :class:`Monitor`, e.g. ``log=``)."""
    if header.get("schema") != SCHEMA:
        raise MalformedEventError(f"header schema is {header.get('schema')!r}, expected {SCHEMA!r}")
    nodes = header.get("nodes")
    if not isinstance(nodes, Mapping):
        raise MalformedEventError("header has no nodes object")
    return Monitor(nodes, engine=str(header.get("engine", "")), engine_version=str(header.get("engine_version", "")),
                   source=str(header.get("source", "")), **kwargs)


def apply(monitor: Monitor, record: Mapping[str, Any]) -> None:
    """Feeds one event record (a parsed log line) to ``monitor``; its ``seq`` must be the next one.

    Raises :class:`MalformedEventError` for a record that breaks the schema and
    :class:`OwnershipViolation` (with ``raise_on_violation``) for one that
    breaks an invariant.
    """
    kind = record.get("event")
    fields = FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None or not isinstance(kind, str):
        raise MalformedEventError(f"unknown event kind {kind!r} (known: {', '.join(FIELDS)})")
    if record.get("seq") != monitor.seq + 1:
        raise MalformedEventError(f"seq is {record.get('seq')!r}, expected {monitor.seq + 1}")
    missing = [f for f in fields if f not in record]
    if missing:
        raise MalformedEventError(f"{kind} event lacks {', '.join(missing)}")
    args = {f: record[f] for f in fields}
    for opt in ("at", "note"):
        if opt in record:
            if not isinstance(record[opt], str):
                raise MalformedEventError(f"{opt} must be a string, got {record[opt]!r}")
            args[opt] = record[opt]
    for f in ("pages", "src_pages", "content"):
        if f in args and not isinstance(args[f], list):
            raise MalformedEventError(f"{f} must be a list, got {args[f]!r}")
    if any(isinstance(p, bool) or not isinstance(p, int) for f in ("pages", "src_pages") for p in args.get(f, ())):
        raise MalformedEventError("page ids must be integers")
    getattr(monitor, kind)(**args)
