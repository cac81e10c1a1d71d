"""The bug story of a trace, computed once for every renderer.

A counterexample is easier to believe as a story about one page: who wrote
the KV the offending read saw, who freed the page without clearing it, who
got it next, what the reader itself filled in, and the read.  :func:`story_of`
finds, from a :class:`~ownership.core.trace.Trace` alone:

* every event that breaks an invariant (:class:`Violation`), and the primary
  one: the first event of the last step that breaks the trace's own
  invariant, else the latest such event anywhere;
* for a primary read, the page's history (:class:`PageHistory`) with its
  **symptom** (the read) and its **root cause** (the step that left the wrong
  content in place: see :attr:`PageHistory.root_cause`);
* the replies to clients (``reply`` events), since a success reply in the
  violating step means nobody hears of the bug.

Events say it best; the pools' state variables (named by the trace's schema)
are the fallback for a spec whose actions change pages without emitting
events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.core.events import Alloc, Event, Free, Read, Reply, Transfer, Write
from ownership.core.schema import PageMark
from ownership.core.trace import Trace


@dataclass(frozen=True)
class PoolShape:
    """A pool of the trace's schema whose state variables are all there: what the renderers draw."""

    name: str
    pages: tuple[str, ...]
    free: str
    holders: str
    content: str
    slot: str
    marks: tuple[PageMark, ...] = ()
    """The pool's marks whose variables are in the trace's states."""


def pool_shapes(trace: Trace) -> tuple[PoolShape, ...]:
    """The schema's pools whose variables really are in the trace's states."""
    out: list[PoolShape] = []
    for raw in trace.schema.pools or ():
        if raw.name is None or raw.pages is None or raw.free is None or raw.holders is None or raw.content is None:
            continue
        marks = tuple(m for m in raw.marks if isinstance(trace.initial.get(m.var), Mapping))
        pool = PoolShape(raw.name, raw.pages, raw.free, raw.holders, raw.content, raw.slot or "", marks)
        if all(isinstance(trace.initial.get(v), Mapping) for v in (pool.free, pool.holders, pool.content)):
            out.append(pool)
    return tuple(out)


def cell(state: Mapping[str, Any], var: str, key: str) -> Any:
    """``state[var][key]``, or ``None`` when ``var`` is not a table."""
    table = state.get(var)
    return table.get(key) if isinstance(table, Mapping) else None


@dataclass(frozen=True)
class Violation:
    """An event that breaks an invariant, located in the trace."""

    step: int
    pos: int
    """Index of the event within its step."""
    event: Event
    invariant: str
    primary: bool

    @property
    def pool(self) -> str | None:
        pool = self.event.get("pool")
        return str(pool) if pool is not None else None

    @property
    def page(self) -> str | None:
        page = self.event.get("page")
        return str(page) if page is not None else None


@dataclass(frozen=True)
class PageHistory:
    """The history of the page the offending read touched."""

    pool: str
    page: str
    content: str | None
    """Whose KV the read saw (``None``: never written)."""
    reader: str
    read_step: int
    written: tuple[int, str] | None = None
    """Step of the last write before the read, and how (``"write"``, ``"P0->D0"``, or ``"content"`` from the state)."""
    writer: str | None = None
    freed: tuple[int, str] | None = None
    """Step and request that freed the page after that write."""
    given: tuple[int, str] | None = None
    """Step at which the reader got the page."""
    filled: tuple[tuple[int, str], ...] = ()
    """The reader's own writes into the pool after it got the page: (step, page or pair)."""
    held: tuple[str, ...] = ()
    """The reader's pages in the pool when it reads."""

    @property
    def skipped(self) -> bool:
        """The reader filled pages of its own, but not this one: it read what it never wrote."""
        return bool(self.filled) and self.page not in {how.partition("->")[2] or how for _, how in self.filled}

    @property
    def symptom(self) -> int:
        """The step that shows the bug: the read."""
        return self.read_step

    @property
    def root_cause(self) -> int:
        """The latest step of the history that left the wrong content in place for the read.

        The reader's own fill that skipped the page, else the hand-over of the
        page with old content still in it, else the free that did not clear
        it, else the write of that content; the read itself when the page has
        no history (never written, never moved).
        """
        if self.skipped:
            return max(j for j, _ in self.filled)
        for mark in (self.given, self.freed, self.written):
            if mark is not None:
                return mark[0]
        return self.read_step

    @property
    def steps(self) -> set[int]:
        """Every step of the history (drawn outlined in the picture)."""
        return {x[0] for x in (self.written, self.freed, self.given) if x is not None} | {self.read_step}


@dataclass(frozen=True)
class Story:
    """What went wrong in a trace, for the title of a picture or a report."""

    violations: tuple[Violation, ...]
    page: PageHistory | None
    replies: tuple[tuple[int, Reply], ...]
    """``reply`` events with their step."""
    steps: int
    """How many steps the trace has."""

    @property
    def primary(self) -> Violation | None:
        """The violation the trace is about (see the module docstring)."""
        return next((v for v in self.violations if v.primary), None)

    @property
    def final(self) -> Violation | None:
        """The first event of the trace's last step that breaks any invariant (the step's verdict)."""
        return next((v for v in self.violations if v.step == self.steps), None)

    @property
    def symptom(self) -> int | None:
        """The step that shows the bug: the primary violation's step."""
        primary = self.primary
        return primary.step if primary is not None else None

    @property
    def root_cause(self) -> int | None:
        """The step that caused it, when the page's history says (see :attr:`PageHistory.root_cause`)."""
        return self.page.root_cause if self.page is not None else None


def story_of(trace: Trace, pools: Sequence[PoolShape] | None = None) -> Story:
    """The story of ``trace``; ``pools`` defaults to :func:`pool_shapes` of the trace."""
    shapes = pool_shapes(trace) if pools is None else tuple(pools)
    found = violations(trace)
    primary = next((v for v in found if v.primary), None)
    replies = tuple(
        (i, e) for i, step in enumerate(trace.steps, start=1) for e in step.events if isinstance(e, Reply)
    )
    return Story(found, _history(trace, shapes, primary), replies, len(trace.steps))


def violations(trace: Trace) -> tuple[Violation, ...]:
    """Events that break an invariant; one breaking the trace's own is primary.

    The primary one is the first such event of the last step (the step that
    reached the violating state), else the latest one anywhere.
    """
    found = [
        (i, pos, e) for i, step in enumerate(trace.steps, start=1) for pos, e in enumerate(step.events) if e.violates
    ]
    own = [k for k, (_, _, e) in enumerate(found) if e.violates == trace.violation]
    in_last = [k for k in own if found[k][0] == len(trace.steps)]
    primary = in_last[0] if in_last else (own[-1] if own else None)
    return tuple(Violation(i, pos, e, str(e.violates), k == primary) for k, (i, pos, e) in enumerate(found))


def _writes_into(e: Event, pool: str, page: str) -> str | None:
    """How ``e`` put content into ``page`` (``"write"``, ``"P0->D0"``), or ``None``."""
    if isinstance(e, Write) and e.pool == pool and e.page == page:
        return "write"
    if isinstance(e, Transfer) and e.dst == pool:
        for src, dst in e.pairs():
            if dst == page:
                return f"{src}->{dst}"
    return None


def _events_before(trace: Trace, j: int, flag: Violation) -> Sequence[Event]:
    """Step ``j``'s events, cut just before ``flag``'s event when ``j`` is its step."""
    events = trace.steps[j - 1].events
    return events[: flag.pos] if j == flag.step else events


def _history(trace: Trace, pools: Sequence[PoolShape], flag: Violation | None) -> PageHistory | None:
    """Who wrote the page the offending read saw, who freed it, who got it next."""
    if flag is None or not isinstance(flag.event, Read) or flag.pool is None or flag.page is None:
        return None
    name, page, read = flag.pool, flag.page, flag.event
    pool = next((p for p in pools if p.name == name), None)
    content = None if read.content is None else str(read.content)
    reader = str(read.req)
    states = trace.states
    written: tuple[int, str] | None = None
    writer: str | None = None
    for j in range(flag.step, 0, -1):
        hit = next(
            ((h, e) for e in reversed(_events_before(trace, j, flag)) if (h := _writes_into(e, name, page))), None
        )
        if hit is not None:
            written, writer = (j, hit[0]), str(hit[1].get("req", "?"))
            break
    if written is None and pool is not None:
        for j in range(flag.step, 0, -1):
            if cell(states[j], pool.content, page) != cell(states[j - 1], pool.content, page):
                written, writer = (j, "content"), content
                break
    start = written[0] if written else 0
    freed: tuple[int, str] | None = None
    given: tuple[int, str] | None = None
    for j in range(start + 1, flag.step + 1):
        for e in _events_before(trace, j, flag):
            if page not in e.touches(name):
                continue
            if isinstance(e, Free):
                freed = (j, str(e.req))
            elif isinstance(e, Alloc) and e.req == reader:
                given = (j, reader)
    if freed is None and given is None and pool is not None:
        for j in range(start + 1, flag.step + 1):
            before = cell(states[j - 1], pool.holders, page) or []
            after = cell(states[j], pool.holders, page) or []
            left = [str(h) for h in before if h not in after]
            if left and not after:
                freed = (j, ",".join(left))
            if reader in after and reader not in before:
                given = (j, reader)
    # What the reader itself put into its pages before reading: the bug is
    # usually that it filled fewer pages than it holds.
    filled: list[tuple[int, str]] = []
    first = given[0] if given else start + 1
    for j in range(first, flag.step + 1):
        for e in _events_before(trace, j, flag):
            if e.get("req") != reader:
                continue
            if isinstance(e, Write) and e.pool == name and (pool is None or e.page in pool.pages):
                filled.append((j, str(e.page)))
            elif isinstance(e, Transfer) and e.dst == name:
                filled.extend((j, str(pair)) for pair in e.pages)
    held: tuple[str, ...] = ()
    if pool is not None:
        holders = states[flag.step].get(pool.holders)
        if isinstance(holders, Mapping):
            held = tuple(p for p in pool.pages if reader in (holders.get(p) or []))
    return PageHistory(name, page, content, reader, flag.step, written, writer, freed, given, tuple(filled), held)
