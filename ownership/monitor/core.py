"""The runtime ownership monitor: page events checked online against the ownership invariants.

An engine's instrumentation calls one :class:`Monitor` method per page event
(``alloc``, ``share``, ``write``, ``cache``, ``transfer``, ``read``,
``free``, ``finish``), with the meanings of the event-log contract
(docs/event-log.md).  The monitor keeps, per node and page, who holds a
reference, the page's content key and who wrote it, and the prefix-cache key,
and raises :class:`OwnershipViolation` at the first event that breaks an
invariant.  It can also write the events as a JSON-lines log
(:mod:`ownership.monitor.log`) that ``ownership validate`` reads.

Pure Python and small on purpose: it runs inside an engine's test suite, on
every allocation, so the per-event cost is a few dictionary operations per page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ownership.errors import Code, OwnershipError

_STR = {str}

#: The invariants checked online, in the order a single page's checks run.
INVARIANTS: tuple[str, ...] = (
    "no_double_alloc",
    "no_foreign_free",
    "no_unowned_access",
    "no_write_to_shared",
    "no_wrong_cache_hit",
    "no_foreign_read",
    "no_leak_at_finish",
)


@dataclass(frozen=True)
class Node:
    """One KV pool: page ids ``0..pages-1`` of ``page_size`` tokens; ``reserved`` are never handed out."""

    pages: int
    page_size: int = 1
    reserved: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The header's form: ``{"pages": 64, "page_size": 16, "reserved": [0]}``."""
        return {"pages": self.pages, "page_size": self.page_size, "reserved": list(self.reserved)}


class OwnershipViolation(AssertionError):  # noqa: N818 - the name the contract gives it
    """An event broke an ownership invariant.

    ``invariant`` is its name (one of :data:`INVARIANTS`), ``seq`` the event's
    sequence number, ``event`` the event as a log record, ``req``/``node``/``page``
    what it concerns and ``writer`` who wrote that page's content (``None``:
    never written).  ``str()`` is one sentence naming all of them.
    """

    def __init__(self, invariant: str, seq: int, event: Mapping[str, Any], req: str, node: str | None,
                 page: int | None, writer: str | None, sentence: str) -> None:
        self.invariant = invariant
        self.seq = seq
        self.event = dict(event)
        self.req = req
        self.node = node
        self.page = page
        self.writer = writer
        self.sentence = sentence
        super().__init__(f"{invariant} at seq {seq} ({event.get('event')}): {sentence}")


class MalformedEventError(OwnershipError):
    """An event the monitor cannot interpret (unknown node, page out of range, lengths that differ)."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None) -> None:
        super().__init__(Code.MONITOR_BAD_EVENT, message, file, line)


@dataclass
class _Page:
    """What the monitor knows of one page; ``valid`` is False from alloc until the holder writes it."""

    holders: dict[str, int]
    content: str | None = None
    valid: bool = False
    writer: str | None = None  # "request r1 at seq 12", said in messages
    cached: str | None = None  # the prefix-cache key, None when not cached


def _nodes(nodes: Mapping[str, Node | Mapping[str, Any]]) -> dict[str, Node]:
    out: dict[str, Node] = {}
    for name, n in nodes.items():
        if isinstance(n, Node):
            out[name] = n
            continue
        try:
            out[name] = Node(int(n["pages"]), int(n.get("page_size", 1)),
                             tuple(int(p) for p in n.get("reserved", ())))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise MalformedEventError(f"node {name!r}: needs pages (an int), page_size and reserved, got {n!r}") from e
    if not out:
        raise MalformedEventError("a monitor needs at least one node")
    return out


class Monitor:
    """Checks page events online; optionally writes them as an event log.

    ``nodes`` maps node names to :class:`Node` (or the header's dict form).
    ``log`` is a path or a text file object to write the JSON-lines log to
    (header first); ``engine``, ``engine_version`` and ``source`` go into the
    header.  With ``raise_on_violation=False`` violations are collected in
    :attr:`violations` and the events still take effect.
    """

    def __init__(self, nodes: Mapping[str, Node | Mapping[str, Any]], *, log: str | Path | IO[str] | None = None,
                 engine: str = "", engine_version: str = "", source: str = "",
                 raise_on_violation: bool = True) -> None:
        from ownership.monitor.log import LogWriter

        self.nodes = _nodes(nodes)
        self.seq = 0
        self.raise_on_violation = raise_on_violation
        self.violations: list[OwnershipViolation] = []
        self._pages: dict[str, list[_Page]] = {
            name: [_Page({}) for _ in range(n.pages)] for name, n in self.nodes.items()}
        self._reserved = {name: frozenset(n.reserved) for name, n in self.nodes.items()}
        self._held: dict[str, dict[tuple[str, int], int]] = {}  # req -> (node, page) -> references
        self._log = LogWriter(log, self.header(engine, engine_version, source)) if log is not None else None

    # -- the header and the log ------------------------------------------------------------
    def header(self, engine: str = "", engine_version: str = "", source: str = "") -> dict[str, Any]:
        """The log's first line for these nodes."""
        from ownership.monitor.log import SCHEMA

        return {"schema": SCHEMA, "engine": engine, "engine_version": engine_version,
                "nodes": {name: n.to_json() for name, n in self.nodes.items()}, "source": source}

    def close(self) -> None:
        """Flush and close the log (a file object passed in is flushed, not closed)."""
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the monitor knows (for instrumentation and tests) -----------------------------
    def holders(self, page: int, node: str = "gpu") -> dict[str, int]:
        """Request -> references it holds to ``page`` (a copy)."""
        return dict(self._page(node, page).holders)

    def held_by(self, req: str) -> dict[tuple[str, int], int]:
        """(node, page) -> references ``req`` holds (a copy)."""
        return dict(self._held.get(req, {}))

    def content(self, page: int, node: str = "gpu") -> str | None:
        """The page's content key (possibly stale) or None if never written."""
        return self._page(node, page).content

    def cached(self, page: int, node: str = "gpu") -> str | None:
        """The key the page is cached under, or None."""
        return self._page(node, page).cached

    # -- the events --------------------------------------------------------------------------
    def alloc(self, req: str, pages: Sequence[int], node: str = "gpu", at: str | None = None,
              note: str | None = None) -> None:
        """``pages`` leave the free pool; ``req`` holds one reference to each; their content is stale."""
        ev = self._begin("alloc", req, node, pages, None, at, note)
        table, reserved = self._pages[node], self._reserved[node]
        for p in pages:
            pg = table[p]
            if p in reserved:
                self._violate("no_double_alloc", ev, node, p, pg,
                              f"request {req} is allocated page {p} on node {node}, a reserved page that is never "
                              f"handed out (it holds {_held_content(pg)})")
            elif pg.holders:
                self._violate("no_double_alloc", ev, node, p, pg,
                              f"request {req} is allocated page {p} on node {node}, which {_who(pg.holders)} still "
                              f"hold{'s' if len(pg.holders) == 1 else ''} (it holds {_held_content(pg)})")
            pg.valid = False
            pg.cached = None
            self._take(req, node, p, pg)

    def share(self, req: str, pages: Sequence[int], content: Sequence[str], node: str = "gpu", at: str | None = None,
              note: str | None = None) -> None:
        """A prefix-cache hit: ``req`` takes one more reference to pages cached under ``content``."""
        ev = self._begin("share", req, node, pages, content, at, note)
        table = self._pages[node]
        for p, key in zip(pages, content, strict=True):
            pg = table[p]
            if pg.cached is None:
                self._violate("no_wrong_cache_hit", ev, node, p, pg,
                              f"request {req} shares page {p} on node {node} as {key!r}, but the page is not in the "
                              f"prefix cache (it holds {_held_content(pg)})")
            elif pg.cached != key:
                self._violate("no_wrong_cache_hit", ev, node, p, pg,
                              f"request {req} shares page {p} on node {node} as {key!r}, but it is cached as "
                              f"{pg.cached!r} (content {_held_content(pg)})")
            self._take(req, node, p, pg)

    def write(self, req: str, pages: Sequence[int], content: Sequence[str], node: str = "gpu", at: str | None = None,
              note: str | None = None) -> None:
        """``req`` writes its KV into pages it holds; each page's content becomes the given key."""
        ev = self._begin("write", req, node, pages, content, at, note)
        table = self._pages[node]
        for p, key in zip(pages, content, strict=True):
            pg = table[p]
            self._check_writable(ev, req, node, p, pg, "writes")
            pg.content, pg.valid, pg.writer = key, True, f"request {req} at seq {self.seq}"

    def cache(self, req: str, pages: Sequence[int], content: Sequence[str], node: str = "gpu", at: str | None = None,
              note: str | None = None) -> None:
        """``req`` publishes the pages to the prefix cache under these keys."""
        self._begin("cache", req, node, pages, content, at, note)
        table = self._pages[node]
        for p, key in zip(pages, content, strict=True):
            table[p].cached = key

    def transfer(self, req: str, pages: Sequence[int], content: Sequence[str], src_node: str,
                 src_pages: Sequence[int], node: str = "gpu", at: str | None = None, note: str | None = None) -> None:
        """KV copied from ``src_pages`` on ``src_node`` into ``pages`` on ``node``, both held by ``req``.

        ``content`` is what the source pages are expected to hold; the
        destination pages hold it afterwards.
        """
        ev = self._begin("transfer", req, node, pages, content, at, note, src_node, src_pages)
        src, dst = self._pages[src_node], self._pages[node]
        for sp, p, key in zip(src_pages, pages, content, strict=True):
            self._check_readable(ev, req, src_node, sp, src[sp], key, "transfers from")
            pg = dst[p]
            self._check_writable(ev, req, node, p, pg, "transfers into")
            pg.content, pg.valid = key, True
            pg.writer = f"request {req} at seq {self.seq} (transfer from page {sp} on node {src_node})"

    def read(self, req: str, pages: Sequence[int], content: Sequence[str], node: str = "gpu", at: str | None = None,
             note: str | None = None) -> None:
        """``req``'s attention reads the pages, expecting these content keys."""
        ev = self._begin("read", req, node, pages, content, at, note)
        table = self._pages[node]
        for p, key in zip(pages, content, strict=True):
            self._check_readable(ev, req, node, p, table[p], key, "reads")

    def _check_writable(self, ev: Mapping[str, Any], req: str, node: str, p: int, pg: _Page, verb: str) -> None:
        """A write (or a transfer's destination): ``req`` must hold the page, and alone."""
        if req not in pg.holders:
            self._violate("no_unowned_access", ev, node, p, pg,
                          f"request {req} {verb} page {p} on node {node} without holding it "
                          f"({_holders_said(pg)}; it holds {_held_content(pg)})")
        elif len(pg.holders) > 1:
            self._violate("no_write_to_shared", ev, node, p, pg,
                          f"request {req} {verb} page {p} on node {node}, which "
                          f"{_who({r: c for r, c in pg.holders.items() if r != req})} also hold "
                          f"(it holds {_held_content(pg)})")

    def _check_readable(self, ev: Mapping[str, Any], req: str, node: str, p: int, pg: _Page, key: str,
                        verb: str) -> None:
        """A read (or a transfer's source): ``req`` must hold the page, and it must hold the expected content."""
        if req not in pg.holders:
            self._violate("no_unowned_access", ev, node, p, pg,
                          f"request {req} {verb} page {p} on node {node} without holding it "
                          f"({_holders_said(pg)}; it holds {_held_content(pg)})")
        elif not pg.valid or pg.content != key:
            self._violate("no_foreign_read", ev, node, p, pg,
                          f"request {req} {verb} page {p} on node {node} expecting {key!r}, but it holds "
                          f"{_held_content(pg)}")

    def free(self, req: str, pages: Sequence[int], node: str = "gpu", at: str | None = None,
             note: str | None = None) -> None:
        """``req`` drops one reference to each page; content and cache entry stay."""
        ev = self._begin("free", req, node, pages, None, at, note)
        table = self._pages[node]
        held = self._held.get(req)
        for p in pages:
            pg = table[p]
            n = pg.holders.get(req, 0)
            if n == 0:
                self._violate("no_foreign_free", ev, node, p, pg,
                              f"request {req} frees page {p} on node {node} without holding it "
                              f"({_holders_said(pg)}; it holds {_held_content(pg)})")
                continue
            if n == 1:
                del pg.holders[req]
            else:
                pg.holders[req] = n - 1
            assert held is not None
            k = (node, p)
            if held[k] == 1:
                del held[k]
            else:
                held[k] -= 1

    def finish(self, req: str, at: str | None = None, note: str | None = None) -> None:
        """``req`` is done; it must hold nothing."""
        ev = self._begin("finish", req, None, None, None, at, note)
        held = self._held.pop(req, {})
        if held:
            (node, p), _ = min(held.items())
            pg = self._pages[node][p]
            pages = ", ".join(f"{n}:{q}" + (f" x{c}" if c > 1 else "") for (n, q), c in sorted(held.items()))
            sentence = (f"request {req} finishes still holding {len(held)} page(s) ({pages}); page {p} on node "
                        f"{node} holds {_held_content(pg)}")
            for n, q in held:  # the event takes effect: the leaked references are dropped with the request
                self._pages[n][q].holders.pop(req, None)
            self._violate("no_leak_at_finish", ev, node, p, pg, sentence)

    # -- internals ---------------------------------------------------------------------------
    def _page(self, node: str, page: int) -> _Page:
        table = self._pages.get(node)
        if table is None or not 0 <= page < len(table):
            raise MalformedEventError(f"no page {page} on node {node!r}")
        return table[page]

    def _begin(self, kind: str, req: str, node: str | None, pages: Sequence[int] | None,
               content: Sequence[str] | None, at: str | None, note: str | None,
               src_node: str | None = None, src_pages: Sequence[int] | None = None) -> dict[str, Any]:
        """Checks the event's shape, numbers it, logs it and returns its record."""
        seq = self.seq + 1
        ev: dict[str, Any] = {"seq": seq, "event": kind, "req": req}
        if not isinstance(req, str):
            raise MalformedEventError(f"seq {seq} ({kind}): req must be a string, got {req!r}")
        if node is not None:
            ev["node"] = node
            ev["pages"] = pages = _page_list(seq, kind, "pages", pages, self.nodes.get(node), node)
        if content is not None:
            content = list(content)
            if len(content) != len(pages or ()) or (content and not set(map(type, content)) <= _STR):
                raise MalformedEventError(f"seq {seq} ({kind}): content must be one string per page "
                                     f"({len(pages or ())} pages), got {content!r}")
            ev["content"] = content
        if src_node is not None:
            ev["src_node"] = src_node
            ev["src_pages"] = _page_list(seq, kind, "src_pages", src_pages, self.nodes.get(src_node), src_node)
            if len(ev["src_pages"]) != len(ev["pages"]):
                raise MalformedEventError(f"seq {seq} ({kind}): src_pages and pages differ in length")
        if at is not None:
            ev["at"] = at
        if note is not None:
            ev["note"] = note
        self.seq = seq
        if self._log is not None:
            self._log.write(ev)
        return ev

    def _take(self, req: str, node: str, p: int, pg: _Page) -> None:
        pg.holders[req] = pg.holders.get(req, 0) + 1
        held = self._held.get(req)
        if held is None:
            held = self._held[req] = {}
        k = (node, p)
        held[k] = held.get(k, 0) + 1

    def _violate(self, invariant: str, ev: Mapping[str, Any], node: str | None, page: int | None,
                 pg: _Page | None, sentence: str) -> None:
        v = OwnershipViolation(invariant, ev["seq"], ev, ev["req"], node, page,
                               pg.writer if pg is not None else None, sentence)
        self.violations.append(v)
        if self.raise_on_violation:
            if self._log is not None:
                self._log.flush()
            raise v


def _page_list(seq: int, kind: str, field: str, pages: Iterable[int] | None, spec: Node | None,
               node: str) -> list[int]:
    if spec is None:
        raise MalformedEventError(f"seq {seq} ({kind}): unknown node {node!r}")
    try:
        out = list(map(int, pages or ()))
    except (TypeError, ValueError) as e:
        raise MalformedEventError(f"seq {seq} ({kind}): {field} must be a list of page ids, got {pages!r}") from e
    if out and (min(out) < 0 or max(out) >= spec.pages):
        p = next(p for p in out if not 0 <= p < spec.pages)
        raise MalformedEventError(f"seq {seq} ({kind}): page {p} is not on node {node!r} "
                                  f"(pages 0..{spec.pages - 1})")
    return out


def _who(holders: Mapping[str, int]) -> str:
    names = sorted(holders)
    return ("request " if len(names) == 1 else "requests ") + ", ".join(names)


def _holders_said(pg: _Page) -> str:
    return f"{_who(pg.holders)} hold{'s' if len(pg.holders) == 1 else ''} it" if pg.holders else "it is free"


def _held_content(pg: _Page) -> str:
    if pg.content is None:
        return "nothing written since it was first allocated"
    said = f"{pg.content!r} written by {pg.writer}"
    return said if pg.valid else f"stale {said}, not written since it was allocated again"
