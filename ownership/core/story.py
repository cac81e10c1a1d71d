"""The bug story of a trace, computed once for every renderer.

A counterexample is easier to believe as a story about one page: who wrote
the KV the offending read saw, who freed the page without clearing it, who
got it next, what the reader itself filled in, and the read.  :func:`story_of`
finds, from a :class:`~ownership.core.trace.Trace` alone:

* every event that breaks an invariant (:class:`Violation`), and the primary
  one: the first event of the last step that breaks the trace's own
  invariant, else the latest such event anywhere;
* for a primary read, the page's history (:class:`PageHistory`);
* for every primary violation, the **symptom** (the step of the offending
  event), the **root cause** (the step that made it inevitable) and the
  story in between, one :class:`Beat` per step that matters.  What counts as
  the root cause depends on the event: the step that sized the reader's
  request when the reader's own fill skipped the page; the writer's free that
  a late write raced; the hand-over, free or write of stale content; the
  publish of a page nobody wrote; the prefix hit that put a page in use
  unprotected; the free of a page a write is still in flight into; the
  reference dropped before a second free; the demotion that dropped the only
  copy; the lookup whose index key does not tell the page's content from the
  one looked up; a sibling operation's failure taken for the request's; the
  reuse of a request id while a job of its previous lifecycle still holds
  pages; the offending step itself when nothing earlier explains it;
* for a state invariant no event breaks, the last step as the symptom (it
  reached the violating state) and the story of its events;
* the replies to clients (``reply`` events), since a success reply in the
  violating step means nobody hears of the bug.

Events say it best; the pools' state variables (named by the trace's schema)
are the fallback for a spec whose actions change pages without emitting
events.

The pools, marks, violations and beats the story is made of live in
:mod:`ownership.core.pages`, the stories of violations that are not reads in
:mod:`ownership.core.story_kinds`; renderers read :func:`story_of` (the names
of both are re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ownership.core.events import Alloc, CopyFailed, Demote, Event, Free, Read, Reply, Transfer, Write
from ownership.core.pages import (
    Beat,
    PoolShape,
    Violation,
    cell,
    earlier,
    events_before,
    keepers,
    pending,
    pool_shapes,
    show_value,
    truthy,
    violations,
)
from ownership.core.story_kinds import beats_of, state_beats
from ownership.core.trace import Trace, TraceKind

__all__ = [
    "Beat", "PageHistory", "PoolShape", "Story", "Violation", "cell", "keepers", "pending", "pool_shapes",
    "story_of", "truthy", "violations",
]


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
    sized: tuple[int, str] | None = None
    """The latest step before the reader got the page that set fields of its request which stay so until
    the read (``"p_input_len=1, ..."``): what its page table and its fill were computed from."""
    dropped: tuple[int, str] | None = None
    """For a read of a copy that does not exist: the step that dropped it, and how (a demotion's note)."""
    late: tuple[int, str] | None = None
    """When the content came from a late write (its writer no longer held the page): the step at which the
    writer freed the page with that write still outstanding, and the writer."""
    late_read: int | None = None
    """When the read itself was late (a read posted while the reader held the page, completing after it let
    the page go): the step at which the reader freed the page."""

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
        """The step of the history that made the read see the wrong content.

        When the reader filled pages of its own but not this one, the amounts
        its page table and its fill were computed from disagree: the step
        that set them (:attr:`sized`), else the fill itself.  Otherwise the
        hand-over of the page with old content still in it, else the free
        that did not clear it, else the write of that content; for a copy
        that does not exist, the step that dropped it; the read itself when
        the page has no history (never written, never moved).  When the
        content came from a late write into a page its writer had already
        freed, that free; when the read itself completed after the reader
        let the page go, the reader's free.
        """
        if self.skipped:
            return self.sized[0] if self.sized is not None else max(j for j, _ in self.filled)
        if self.late_read is not None:
            return self.late_read
        for mark in (self.late, self.given, self.freed, self.written, self.dropped):
            if mark is not None:
                return mark[0]
        return self.read_step

    @property
    def steps(self) -> set[int]:
        """Every step of the history (drawn outlined in the picture)."""
        marks = (self.late, self.written, self.freed, self.given)
        late_read = {self.late_read} if self.late_read is not None else set()
        return {x[0] for x in marks if x is not None} | {self.read_step} | late_read

    def beats(self, calls: Mapping[int, str]) -> list[Beat]:
        """The history in words, one beat per step that matters, in step order."""
        kv = f"{self.content}'s KV" if self.content else "nothing"
        out: list[Beat] = []
        if self.sized is not None and self.skipped:
            j, fields = self.sized
            out.append(Beat(j, f"{calls[j]} sets {self.reader}'s {fields}: what its {self.pool} pages and "
                               "its fill are sized from"))
        if self.late_read is not None:
            j = self.late_read
            out.append(Beat(j, f"{self.reader} frees {self.page} while its read of it is still in flight ({calls[j]})"))
        if self.late is not None:
            j, who = self.late
            out.append(Beat(j, f"{who} frees {self.page} while its write into it is still in flight ({calls[j]})"))
        if self.written is not None and self.late is not None:
            j, _ = self.written
            out.append(Beat(j, f"{self.writer}'s late write lands in {self.page}, which {self.reader} holds now "
                               f"({calls[j]})"))
        elif self.written is not None:
            j, how = self.written
            via = f" copies {how}" if "->" in how else ""
            by = self.writer or "?"
            if self.content and by != self.content:
                # A copy moves whatever the source page held, possibly someone else's KV.
                out.append(Beat(j, f"{self.page} gets {kv}, written by {by} ({calls[j]}{via})"))
            else:
                out.append(Beat(j, f"{self.page} written by {by} ({calls[j]}{via})"))
        elif self.dropped is not None:
            j, how = self.dropped
            out.append(Beat(j, f"{how} ({calls[j]})"))
        elif self.content is None:
            out.append(Beat(None, f"{self.page} was never written"))
        if self.freed is not None:
            j, who = self.freed
            out.append(Beat(j, f"{who} frees {self.page} ({calls[j]}); freeing does not clear it, it still holds {kv}"))
        if self.given is not None and self.late is not None:
            j, who = self.given
            out.append(Beat(j, f"{self.page} is given to {who} ({calls[j]})"))
        elif self.given is not None:
            j, who = self.given
            out.append(Beat(j, f"{self.page} is given to {who} ({calls[j]}) with {kv} still in it"))
        if self.skipped:
            steps = sorted({j for j, _ in self.filled})
            where = ", ".join(calls[j] for j in steps)
            what = ", ".join(how for _, how in self.filled)
            n = len(self.filled)
            if len(self.held) > n:
                amount = f"only {n} of {self.reader}'s {len(self.held)} {self.pool} pages"
            else:
                amount = f"{n} page{'s' if n != 1 else ''} for {self.reader}"
            out.append(Beat(steps[0], f"{where} fills {amount} ({what}); {self.page} is not overwritten"))
        if self.late_read is not None:
            out.append(Beat(self.read_step, f"{self.reader}'s late read of {self.page} completes, with {kv} in it "
                                            f"({calls[self.read_step]})"))
        elif self.dropped is not None and self.written is None:
            out.append(Beat(self.read_step, f"{self.reader} reads its copy in the {self.pool} tier, which the index "
                                            f"still names, and finds {self.page} ({calls[self.read_step]})"))
        else:
            out.append(Beat(self.read_step, f"{self.reader} reads {self.page} ({calls[self.read_step]})"))
        return sorted(out, key=lambda b: -1 if b.step is None else b.step)


@dataclass(frozen=True)
class Story:
    """What went wrong in a trace, for the title of a picture or a report."""

    violations: tuple[Violation, ...]
    page: PageHistory | None
    replies: tuple[tuple[int, Reply], ...]
    """``reply`` events with their step."""
    steps: int
    """How many steps the trace has."""
    beats: tuple[Beat, ...] = ()
    """The story in words, one beat per step that matters, in step order, ending at the symptom."""
    cause: int | None = None
    """The root-cause step (see :attr:`root_cause`)."""
    focus: tuple[str, str] | None = None
    """(pool, page) the story is about, when it is about one page of a drawn pool."""
    focus_steps: frozenset[int] = frozenset()
    """The steps of the story that changed that page (drawn outlined in the picture)."""
    broken_at: int | None = None
    """For a state invariant no event breaks: the step that reached the violating state (the last one)."""

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
        """The step that shows the bug: the primary violation's step, else the step that broke a state invariant."""
        primary = self.primary
        return primary.step if primary is not None else self.broken_at

    @property
    def root_cause(self) -> int | None:
        """The step that caused the primary violation (the symptom's own step when nothing earlier did)."""
        return self.cause

    @property
    def named_cause(self) -> int | None:
        """The root-cause step as every report names it (table row, picture, story line).

        ``None`` for a story of one beat: that beat is the symptom's own
        sentence, which the headline already says.
        """
        return self.cause if len(self.beats) > 1 else None

    @property
    def cause_beat(self) -> Beat | None:
        """The beat at the root-cause step (the first one there)."""
        return next((b for b in self.beats if b.step is not None and b.step == self.cause), None)


def story_of(trace: Trace, pools: Sequence[PoolShape] | None = None) -> Story:
    """The story of ``trace``; ``pools`` defaults to :func:`pool_shapes` of the trace."""
    shapes = pool_shapes(trace) if pools is None else tuple(pools)
    if trace.kind is TraceKind.LASSO:
        # A lasso breaks a property by what never happens: no event is its cause, and the last step
        # (inside the loop) is not one. Its tables and picture mark the loop instead.
        return Story((), None, (), len(trace.steps), (), None, None, frozenset(), None)
    found = violations(trace)
    primary = next((v for v in found if v.primary), None)
    replies = tuple(
        (i, e) for i, step in enumerate(trace.steps, start=1) for e in step.events if isinstance(e, Reply)
    )
    page = _history(trace, shapes, primary)
    calls = {i: s.call for i, s in enumerate(trace.steps, start=1)}
    beats: list[Beat] = []
    cause: int | None = None
    focus_steps: set[int] = set()
    if page is not None:
        beats, cause = page.beats(calls), page.root_cause
        focus_steps = page.steps
    elif primary is not None:
        beats, cause = beats_of(trace, shapes, primary, calls)
        focus_steps = {b.step for b in beats if b.step is not None}
    broken_at = None
    if primary is None and trace.violation and trace.steps:
        # A state invariant judged on the state alone: the last step reached the violating state.
        broken_at = len(trace.steps)
        beats, cause = state_beats(trace, shapes, calls)
    # The page the story is about, when it is one of a drawn pool (a tier's "(no host copy)" is not).
    focus = None
    if primary is not None and primary.pool is not None and primary.page is not None:
        if any(p.name == primary.pool and primary.page in p.pages for p in shapes):
            focus = (primary.pool, primary.page)
    return Story(found, page, replies, len(trace.steps), tuple(beats), cause, focus,
                 frozenset(focus_steps) if focus is not None else frozenset(), broken_at)


def _writes_into(e: Event, pool: str, page: str) -> str | None:
    """How ``e`` put content into ``page`` (``"write"``, ``"P0->D0"``), or ``None``."""
    if isinstance(e, Write) and e.pool == pool and e.page == page:
        return "write"
    if isinstance(e, Transfer) and e.dst == pool:
        for src, dst in e.pairs():
            if dst == page:
                return f"{src}->{dst}"
    return None


def _sized(trace: Trace, reader: str, before: int, read_step: int) -> tuple[int, str] | None:
    """The latest step before ``before`` that set fields of ``reader``'s request which keep their value until the read.

    A request's page table and the fill of its pages are both computed from
    its own fields (a prompt length, a placeholder swapped in for a rejected
    prompt); when the fill leaves pages out, the step that set those fields
    is where the two amounts came apart.
    """
    states = trace.states
    names = [v for v in trace.schema.per_request or () if isinstance(trace.initial.get(v), Mapping)]
    for j in range(before - 1, 0, -1):
        set_here = [
            v for v in names
            if cell(states[j], v, reader) != cell(states[j - 1], v, reader)
            and cell(states[j], v, reader) == cell(states[read_step], v, reader)
        ]
        if set_here:
            return j, ", ".join(f"{v}={show_value(cell(states[j], v, reader))}" for v in set_here)
    return None


def _dropped(trace: Trace, flag: Violation, reader: str, pool: str) -> tuple[int, str] | None:
    """For a read of a copy that does not exist: the demotion of ``reader`` into ``pool`` that dropped it."""
    before = earlier(trace, flag)
    demote = next(((j, e) for j, e in before if isinstance(e, Demote) and e.req == reader and e.dst == pool), None)
    if demote is None:
        return None
    j, d = demote
    failed = next((e for i, e in before if i == j and isinstance(e, CopyFailed) and e.req == reader and e.dst == pool),
                  None)
    how = f"{reader} is demoted from the {d.src} tier to the {pool} tier: {d.note}"
    if failed is not None:
        how = (f"copying {reader} to the {pool} tier fails ({failed.reason}), and {reader} is demoted from the "
               f"{d.src} tier all the same: {d.note}")
    return j, how


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
            ((h, e) for e in reversed(events_before(trace, j, flag)) if (h := _writes_into(e, name, page))), None
        )
        if hit is not None:
            written, writer = (j, hit[0]), str(hit[1].get("req", "?"))
            break
    if written is None and pool is not None and pool.content:
        for j in range(flag.step, 0, -1):
            if cell(states[j], pool.content, page) != cell(states[j - 1], pool.content, page):
                written, writer = (j, "content"), content
                break
    start = written[0] if written else 0
    late = _late(trace, pool, flag, written[0], writer) if written is not None and writer is not None else None
    if late is not None:
        start = late[0]  # the page's history runs from the writer's free: the hand-over comes before the write
    freed: tuple[int, str] | None = None
    given: tuple[int, str] | None = None
    for j in range(start + 1, flag.step + 1):
        for e in events_before(trace, j, flag):
            if page not in e.touches(name):
                continue
            if isinstance(e, Free) and (late is None or j > late[0]):
                freed = (j, str(e.req))
            elif isinstance(e, Alloc) and e.req == reader:
                given = (j, reader)
    if freed is None and given is None and pool is not None:
        for j in range(start + 1, flag.step + 1):
            before = cell(states[j - 1], pool.holders, page) or []
            after = cell(states[j], pool.holders, page) or []
            left = [str(h) for h in before if h not in after]
            if left and not after and j < flag.step:  # the read's own step frees after reading
                freed = (j, ",".join(left))
            if reader in after and reader not in before:
                given = (j, reader)
    # What the reader itself put into its pages before reading: the bug is
    # usually that it filled fewer pages than it holds.
    filled: list[tuple[int, str]] = []
    first = given[0] if given else start + 1
    for j in range(first, flag.step + 1):
        for e in events_before(trace, j, flag):
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
    sized = _sized(trace, reader, given[0] if given else (filled[0][0] if filled else 0), flag.step) if filled else None
    dropped = None
    if written is None and (pool is None or page not in pool.pages):
        dropped = _dropped(trace, flag, reader, name)
    if late is not None:
        filled = []  # the reader's own fill was overwritten by the late write: not what it read
    # A read by a request that holds the page neither before nor after its step was posted earlier and
    # completes late: the reader let the page go in between.
    late_read = _late(trace, pool, flag, flag.step, reader) if pool is not None and page in pool.pages else None
    return PageHistory(name, page, content, reader, flag.step, written, writer, freed, given, tuple(filled), held,
                       sized, dropped, late, late_read[0] if late_read is not None else None)


def _late(trace: Trace, pool: PoolShape | None, flag: Violation, j: int, writer: str) -> tuple[int, str] | None:
    """When the write of step ``j`` landed in a page ``writer`` no longer held: the step at which it freed it.

    A write posted earlier lands wherever its descriptor points, whoever holds
    the page by then; the page went to its next holder at the writer's free.
    """
    if pool is None or flag.page is None:
        return None
    for state in (trace.states[j - 1], trace.states[j]):  # held before or after its step: an ordinary write
        if writer in [str(h) for h in cell(state, pool.holders, flag.page) or []]:
            return None
    for i in range(j - 1, 0, -1):
        for e in trace.steps[i - 1].events:
            if isinstance(e, Free) and e.req == writer and flag.page in e.touches(pool.name):
                return i, writer
    return None
