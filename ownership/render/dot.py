"""Draw a trace as a Graphviz picture that explains the bug on its own.

:func:`trace_to_dot` turns a :class:`~ownership.core.trace.Trace` into DOT
text with three parts, top to bottom:

* a **title**: spec, summary, the violated invariant and a one-line headline
  of what went wrong ("B reads D0, which holds A's KV"), followed by the
  page's history (who wrote it, who freed it, who got it next) and whether
  the client was told everything was fine (HTTP 200);
* one **table**, one row per step (row 0 is the initial state).  The left
  columns are lanes, one per request: a step's action sits in the lane of
  the request named by its first argument, with the per-request fields it
  changed.  The right columns are the page pools, one column per page: each
  cell shows who holds the page after that step and whose KV it contains,
  coloured by the KV's owner, so a free page or another request's page still
  holding old KV stands out.  The offending read is filled red, secondary
  violations orange, and the cells of the page's history are outlined red;
* a **legend**: request colours, what a cell means, and the spec's one-line
  description of every action in the trace.

Steps run top to bottom, so long traces grow downwards, not sideways.  The
output is a pure function of the trace (byte-identical for equal traces) and
plain ASCII: every text is escaped for Graphviz HTML labels.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ownership.core.trace import Step, Trace, changed_fields
from ownership.spec.instance import Event

# -- colours -------------------------------------------------------------------
RED = "#d62728"
ORANGE = "#ff7f0e"
GREY = "#6b6b6b"
_RED_PALE = "#fde0e0"
_ORANGE_PALE = "#ffe8cc"
_HEADER = "#efefef"

# (strong, light, pale) per request, by position in the request domain; red and
# orange are kept out so they only ever mean "violation".
_PALETTE: tuple[tuple[str, str, str], ...] = (
    ("#2f62c9", "#cfe0ff", "#edf3ff"),
    ("#23884a", "#c9efd5", "#ecf9f0"),
    ("#7d45c4", "#e4d6fa", "#f5effd"),
    ("#0d8c97", "#c8eef1", "#ebf8f9"),
    ("#8a6d0b", "#f3e6b8", "#faf5e3"),
    ("#b03a82", "#f6d3e8", "#fcf0f7"),
)
_UNKNOWN_COLOURS = ("#555555", "#dddddd", "#f2f2f2")

_FONT = "Helvetica"
_WRAP = 38  # characters per line of a lane's change list
_NO_LANE = "other"
FOLD_UNTOUCHED = 4
"""This many untouched pages of a pool or more are drawn as one "N untouched pages" column (fewer are drawn as they are)."""


def trace_to_dot(trace: Trace) -> str:
    """DOT source for a picture of ``trace``; deterministic, ASCII only."""
    model = _Model.of(trace)
    title = _title_label(trace, model)
    table = _steps_label(trace, model)
    legend = _legend_label(trace, model)
    lines = [
        "digraph counterexample {",
        f'  graph [rankdir=TB, nodesep=0.2, ranksep=0.25, bgcolor="white", fontname="{_FONT}"];',
        f'  node [shape=plaintext, margin=0, fontname="{_FONT}"];',
        "  edge [style=invis];",
        f"  title [label=<{title}>];",
        f"  steps [label=<{table}>];",
        f"  legend [label=<{legend}>];",
        "  title -> steps -> legend;",
        "}",
    ]
    return "\n".join(lines) + "\n"


# -- what the picture is about -------------------------------------------------
@dataclass(frozen=True)
class _Pool:
    name: str
    pages: tuple[str, ...]
    free: str
    holders: str
    content: str
    slot: str


@dataclass(frozen=True)
class _Flag:
    """An event that breaks an invariant, located in the trace."""

    step: int
    pos: int  # index of the event within its step
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


@dataclass
class _Story:
    """The history of the page the offending read touched."""

    pool: str
    page: str
    content: str | None
    reader: str
    read_step: int
    written: tuple[int, str] | None = None  # step, how ("write" or "P0->D0")
    writer: str | None = None
    freed: tuple[int, str] | None = None
    given: tuple[int, str] | None = None
    filled: list[tuple[int, str]] = field(default_factory=list)  # reader's own writes after ``given``
    held: list[str] = field(default_factory=list)  # reader's pages in the pool when it reads


@dataclass
class _Model:
    """Everything the picture needs, computed once from the trace."""

    schema: Mapping[str, Any]
    requests: list[str]
    pools: list[_Pool]
    lanes: list[str]
    lane_of_step: list[str]
    hidden_vars: set[str]
    per_request: set[str]
    flags: list[_Flag]
    story: _Story | None
    replies: list[tuple[int, str, Any]]
    deadlock: bool
    marks: dict[tuple[int, str, str], list[tuple[str, str]]] = field(default_factory=dict)

    @staticmethod
    def of(trace: Trace) -> _Model:
        raw = trace.extra.get("schema") if isinstance(trace.extra, Mapping) else None
        schema: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        requests = [str(r) for r in schema.get("requests", []) or []]
        pools = _pools(schema, trace.initial)
        lane_of_step = [_lane_of(step, requests) for step in trace.steps]
        # Requests that never act get no lane: an empty column only adds width.
        lanes = [r for r in requests if r in lane_of_step]
        if _NO_LANE in lane_of_step or not lanes:
            lanes.append(_NO_LANE)
        # Ghosts are the checker's bookkeeping and pool variables are drawn as
        # the page grid: neither belongs in a step's list of changed fields.
        hidden = {str(g) for g in schema.get("ghosts", []) or []}
        for p in pools:
            hidden.update((p.free, p.holders, p.content, p.slot))
        extra = trace.extra if isinstance(trace.extra, Mapping) else {}
        model = _Model(
            schema=schema,
            requests=requests,
            pools=pools,
            lanes=lanes,
            lane_of_step=lane_of_step,
            hidden_vars=hidden,
            per_request=set(str(v) for v in schema.get("per_request", []) or []),
            flags=_flags(trace),
            story=None,
            replies=[
                (i, str(e.get("req", "")), e.get("status"))
                for i, step in enumerate(trace.steps, start=1)
                for e in step.events
                if e.kind == "reply"
            ],
            deadlock=bool(extra.get("deadlock")),
        )
        model.story = _story(trace, model)
        model.marks = _marks(trace, model)
        return model

    def colours(self, req: str | None) -> tuple[str, str, str]:
        if req is not None and req in self.requests:
            return _PALETTE[self.requests.index(req) % len(_PALETTE)]
        return _UNKNOWN_COLOURS

    @property
    def primary(self) -> _Flag | None:
        return next((f for f in self.flags if f.primary), None)


def _pools(schema: Mapping[str, Any], initial: Mapping[str, Any]) -> list[_Pool]:
    """The schema's pools whose variables really are in the trace's states."""
    out: list[_Pool] = []
    for raw in schema.get("pools", []) or []:
        if not isinstance(raw, Mapping):
            continue
        try:
            pool = _Pool(
                name=str(raw["name"]),
                pages=tuple(str(p) for p in raw["pages"]),
                free=str(raw["free"]),
                holders=str(raw["holders"]),
                content=str(raw["content"]),
                slot=str(raw.get("slot") or ""),
            )
        except (KeyError, TypeError):
            continue
        if all(isinstance(initial.get(v), Mapping) for v in (pool.free, pool.holders, pool.content)):
            out.append(pool)
    return out


def _lane_of(step: Step, requests: Sequence[str]) -> str:
    """The request a step belongs to: the one its first argument names."""
    if step.args and str(step.args[0]) in requests:
        return str(step.args[0])
    return _NO_LANE


def _flags(trace: Trace) -> list[_Flag]:
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
    return [_Flag(i, pos, e, str(e.violates), k == primary) for k, (i, pos, e) in enumerate(found)]


def _pages_of(e: Event, pool: str) -> list[str]:
    """Pages of ``pool`` an event touches (a transfer's ``"P0->D1"`` counts on both sides)."""
    out: list[str] = []
    if e.kind == "transfer":
        for pair in e.get("pages", []) or []:
            src, _, dst = str(pair).partition("->")
            if e.get("src") == pool:
                out.append(src)
            if e.get("dst") == pool:
                out.append(dst)
        return out
    if e.get("pool") != pool:
        return out
    if e.get("page") is not None:
        out.append(str(e.get("page")))
    out.extend(str(p) for p in e.get("pages", []) or [])
    return out


def _writes_into(e: Event, pool: str, page: str) -> str | None:
    """How ``e`` put content into ``page`` (``"P0->D0"``), or ``None``."""
    if e.kind == "write" and e.get("pool") == pool and e.get("page") == page:
        return "write"
    if e.kind == "transfer" and e.get("dst") == pool:
        for pair in e.get("pages", []) or []:
            src, _, dst = str(pair).partition("->")
            if dst == page:
                return f"{src}->{dst}"
    return None


def _cell(state: Mapping[str, Any], var: str, key: str) -> Any:
    table = state.get(var)
    return table.get(key) if isinstance(table, Mapping) else None


def _events_before(trace: Trace, j: int, flag: _Flag) -> Sequence[Event]:
    """Step ``j``'s events, cut just before ``flag``'s event when ``j`` is its step."""
    events = trace.steps[j - 1].events
    return events[: flag.pos] if j == flag.step else events


def _story(trace: Trace, model: _Model) -> _Story | None:
    """Who wrote the page the offending read saw, who freed it, who got it next.

    Events say it best; the pool's state variables are the fallback for a
    spec whose actions change pages without emitting events.
    """
    flag = model.primary
    if flag is None or flag.event.kind != "read" or flag.pool is None or flag.page is None:
        return None
    name, page = flag.pool, flag.page
    pool = next((p for p in model.pools if p.name == name), None)
    content = flag.event.get("content")
    reader = str(flag.event.get("req", "?"))
    story = _Story(name, page, None if content is None else str(content), reader, flag.step)
    states = trace.states
    for j in range(flag.step, 0, -1):
        hit = next(
            ((h, e) for e in reversed(_events_before(trace, j, flag)) if (h := _writes_into(e, name, page))), None
        )
        if hit is not None:
            story.written, story.writer = (j, hit[0]), str(hit[1].get("req", "?"))
            break
    if story.written is None and pool is not None:
        for j in range(flag.step, 0, -1):
            if _cell(states[j], pool.content, page) != _cell(states[j - 1], pool.content, page):
                story.written, story.writer = (j, "content"), story.content
                break
    start = story.written[0] if story.written else 0
    for j in range(start + 1, flag.step + 1):
        for e in _events_before(trace, j, flag):
            if page not in _pages_of(e, name):
                continue
            if e.kind == "free":
                story.freed = (j, str(e.get("req", "?")))
            elif e.kind == "alloc" and e.get("req") == reader:
                story.given = (j, reader)
    if story.freed is None and story.given is None and pool is not None:
        for j in range(start + 1, flag.step + 1):
            before = _cell(states[j - 1], pool.holders, page) or []
            after = _cell(states[j], pool.holders, page) or []
            left = [str(h) for h in before if h not in after]
            if left and not after:
                story.freed = (j, ",".join(left))
            if reader in after and reader not in before:
                story.given = (j, reader)
    # What the reader itself put into its pages before reading: the bug is
    # usually that it filled fewer pages than it holds.
    first = story.given[0] if story.given else start + 1
    for j in range(first, flag.step + 1):
        for e in _events_before(trace, j, flag):
            if e.get("req") != reader:
                continue
            if e.kind == "write" and e.get("pool") == name and (pool is None or e.get("page") in pool.pages):
                story.filled.append((j, str(e.get("page"))))
            elif e.kind == "transfer" and e.get("dst") == name:
                story.filled.extend((j, str(pair)) for pair in e.get("pages", []) or [])
    if pool is not None:
        holders = states[flag.step].get(pool.holders)
        if isinstance(holders, Mapping):
            story.held = [p for p in pool.pages if reader in (holders.get(p) or [])]
    return story


def _marks(trace: Trace, model: _Model) -> dict[tuple[int, str, str], list[tuple[str, str]]]:
    """Per (step, pool, page): short notes and their colour, from the step's events."""
    marks: dict[tuple[int, str, str], list[tuple[str, str]]] = {}

    def add(step: int, pool: str, page: str, text: str, colour: str) -> None:
        marks.setdefault((step, pool, page), []).append((text, colour))

    for i, step in enumerate(trace.steps, start=1):
        for e in step.events:
            for pool in model.pools:
                for page in _pages_of(e, pool.name):
                    if page not in pool.pages:
                        continue
                    colour = GREY
                    if e.violates:
                        colour = RED if e.violates == trace.violation else ORANGE
                    text = e.kind
                    if e.kind == "transfer":
                        pair = next(
                            (str(x) for x in e.get("pages", []) or [] if page in str(x).split("->")), ""
                        )
                        src, _, dst = pair.partition("->")
                        text = f"sent to {dst}" if page == src and e.get("src") == pool.name else f"recv from {src}"
                    elif e.kind == "alloc":
                        text = f"alloc to {e.get('req')}"
                    elif e.kind == "free":
                        text = f"freed by {e.get('req')}"
                    elif e.kind == "read":
                        text = f"read by {e.get('req')}"
                    elif e.kind == "write":
                        text = f"written by {e.get('req')}"
                    add(i, pool.name, page, text, colour)
    return marks


# -- text helpers ------------------------------------------------------------------
def esc(text: object) -> str:
    """Escape ``text`` for a Graphviz HTML label, keeping the output ASCII."""
    return html.escape(str(text), quote=True).encode("ascii", "xmlcharrefreplace").decode("ascii")


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "{" + ",".join(_show(v) for v in value) + "}"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{_show(v)}" for k, v in value.items()) + "}"
    return str(value)


def _wrap(items: Sequence[str], width: int = _WRAP) -> list[str]:
    """Join ``items`` with two spaces into lines of about ``width`` characters."""
    lines: list[str] = []
    cur = ""
    for item in items:
        if cur and len(cur) + 2 + len(item) > width:
            lines.append(cur)
            cur = item
        else:
            cur = f"{cur}  {item}" if cur else item
    if cur:
        lines.append(cur)
    return lines


def _font(text: str, *, size: int | None = None, colour: str | None = None, bold: bool = False) -> str:
    """Already-escaped ``text`` wrapped in FONT/B tags."""
    if not text:
        return ""  # Graphviz rejects an empty <FONT></FONT> or <B></B>
    if bold:
        text = f"<B>{text}</B>"
    attrs = ""
    if size is not None:
        attrs += f' POINT-SIZE="{size}"'
    if colour is not None:
        attrs += f' COLOR="{colour}"'
    return f"<FONT{attrs}>{text}</FONT>" if attrs else text


def _owner_of(name: str) -> str:
    """``d_queue[B]`` -> ``B``; ``clock`` -> ``""``."""
    if name.endswith("]") and "[" in name:
        return name[name.index("[") + 1 : -1]
    return ""


def _var_of(name: str) -> str:
    return name.split("[", 1)[0]


# -- title -----------------------------------------------------------------------
def _headline(trace: Trace, model: _Model) -> tuple[str, str]:
    """The one-line statement of what went wrong, and its colour."""
    n = len(trace.steps)
    flag = model.primary
    if flag is not None:
        e = flag.event
        who = e.get("req", "?")
        if e.kind == "read":
            content = e.get("content")
            if content is None:
                what = f"{who} reads {e.get('page')}, which nobody ever wrote"
            elif content == who:
                what = f"{who} reads {e.get('page')}"
            else:
                what = f"{who} reads {e.get('page')}, which holds {content}'s KV"
        elif e.kind == "write":
            what = f"{who} writes {e.get('page')} in the {e.get('pool')} pool, a page it does not hold"
        else:
            what = f"{e.kind} by {who}"
        return f"{what} ({flag.invariant})", RED
    if trace.violation:
        last = f": {trace.steps[-1].call}" if trace.steps else ""
        return f"{trace.violation} is violated after step {n}{last}", RED
    if model.deadlock:
        return f"deadlock after step {n}: no action can run, but not every request is done", ORANGE
    return f"{n} step{'s' if n != 1 else ''}, no violation", "black"


def _story_lines(trace: Trace, model: _Model) -> list[str]:
    """The offending page's history, one line per step that matters."""
    story = model.story
    if story is None:
        return []
    calls = {i: s.call for i, s in enumerate(trace.steps, start=1)}
    kv = f"{story.content}'s KV" if story.content else "nothing"
    lines: list[str] = []
    if story.written is not None:
        j, how = story.written
        via = f" copies {how}" if "->" in how else ""
        by = story.writer or "?"
        if story.content and by != story.content:
            # A copy moves whatever the source page held, possibly someone else's KV.
            lines.append(f"step {j}: {story.page} gets {kv}, written by {by} ({calls[j]}{via})")
        else:
            lines.append(f"step {j}: {story.page} written by {by} ({calls[j]}{via})")
    elif story.content is None:
        lines.append(f"{story.page} was never written")
    if story.freed is not None:
        j, who = story.freed
        lines.append(f"step {j}: {who} frees {story.page} ({calls[j]}); freeing does not clear it, it still holds {kv}")
    if story.given is not None:
        j, who = story.given
        lines.append(f"step {j}: {story.page} is given to {who} ({calls[j]}) with {kv} still in it")
    if story.filled and story.page not in {how.partition("->")[2] or how for _, how in story.filled}:
        steps = sorted({j for j, _ in story.filled})
        where = ", ".join(calls[j] for j in steps)
        what = ", ".join(how for _, how in story.filled)
        n = len(story.filled)
        if len(story.held) > n:
            amount = f"only {n} of {story.reader}'s {len(story.held)} {story.pool} pages"
        else:
            amount = f"{n} page{'s' if n != 1 else ''} for {story.reader}"
        lines.append(
            f"step {', '.join(str(j) for j in steps)}: {where} fills {amount} ({what}); {story.page} is not overwritten"
        )
    lines.append(f"step {story.read_step}: {story.reader} reads {story.page} ({calls[story.read_step]})")
    return lines


def _anomaly_lines(trace: Trace, model: _Model) -> list[str]:
    """Pages whose bookkeeping is wrong at the end, and since when it has been wrong."""
    lines: list[str] = []
    states = trace.states
    n = len(trace.steps)
    if n == 0:
        return lines
    for pool in model.pools:
        for page in pool.pages:
            wrong = _anomaly(states[n], pool, page)
            if wrong is None:
                continue
            first = n
            while first > 1 and _anomaly(states[first - 1], pool, page) is not None:
                first -= 1
            if first < n:
                began = _anomaly(states[first], pool, page)
                lines.append(f"step {first}: {began} ({trace.steps[first - 1].call}, {pool.name} pool)")
            lines.append(f"after step {n}: {wrong} ({pool.name} pool)")
    return lines


def _title_label(trace: Trace, model: _Model) -> str:
    rows: list[str] = []

    def row(text: str) -> None:
        rows.append(f'<TR><TD ALIGN="LEFT" BALIGN="LEFT">{text}</TD></TR>')

    row(_font(esc(trace.spec), size=20, bold=True))
    summary = model.schema.get("summary")
    if summary:
        row(_font(esc(summary), size=13))
    params = ", ".join(f"{k}={v}" for k, v in trace.params.items())
    if params:
        row(_font(esc(f"parameters: {params}"), size=10, colour=GREY))
    if trace.violation:
        row(_font(esc("invariant violated: ") + f"<B>{esc(trace.violation)}</B>", size=14, colour=RED))
    text, colour = _headline(trace, model)
    row(_font(esc(text), size=18, colour=colour, bold=True))
    for line in _story_lines(trace, model):
        row(_font(esc(line), size=12, colour=RED))
    for line in _anomaly_lines(trace, model):
        row(_font(esc(line), size=12, colour=RED))
    for step, req, status in model.replies:
        if step == len(trace.steps) and trace.violation and str(status) == "200":
            row(_font(esc(f"...and {req}'s client gets HTTP {status} (step {step}): nothing reports the error"), size=12, colour=RED, bold=True))
    for flag in model.flags:
        if flag.primary or flag.step != len(trace.steps):
            continue
        e = flag.event
        if e.kind == "read" and e.get("content") is None:
            what = f"{e.get('req')} reads {e.get('page')}, which nobody ever wrote"
        else:
            what = f"{e.kind} by {e.get('req')} on {e.get('page')}"
        row(_font(esc(f"also: {what} ({flag.invariant})"), size=12, colour=ORANGE))
    return '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2">' + "".join(rows) + "</TABLE>"


# -- the step table ------------------------------------------------------------------
def _lane_text(trace: Trace, model: _Model, i: int, lane: str) -> str:
    """The action, its changed fields and its notable events, for step ``i``'s lane."""
    step = trace.steps[i - 1]
    before, after = trace.states[i - 1], trace.states[i]
    lines = [_font(esc(step.call), size=12, bold=True)]
    changes: list[str] = []
    for name, _old, new in changed_fields(before, after):
        var = _var_of(name)
        if var in model.hidden_vars:
            continue
        owner = _owner_of(name)
        # The lane already names the request: drop "[B]" from B's own fields.
        shown = var if owner == lane and (var in model.per_request or not model.per_request) else name
        changes.append(f"{shown}={_show(new)}")
    lines += [_font(esc(text), size=10) for text in _wrap(changes)]
    last = i == len(trace.steps)
    reads: list[str] = []
    for e in step.events:
        if e.kind == "read":
            content = e.get("content")
            note = "own KV" if content == e.get("req") else ("never written" if content is None else f"{content}'s KV!")
            text = esc(f"{e.get('page')}: {note}")
            if e.violates:
                colour = RED if e.violates == trace.violation else ORANGE
                text = _font(text, colour=colour, bold=True)
            reads.append(text)
        elif e.kind == "reply":
            # A success reply in the violating step means the client never hears of the bug.
            alarm = last and bool(trace.violation) and str(e.get("status")) == "200"
            lines.append(_font(esc(f"client gets HTTP {e.get('status')}"), size=10, colour=RED if alarm else None, bold=alarm))
        elif e.kind == "write" and e.violates:
            colour = RED if e.violates == trace.violation else ORANGE
            lines.append(_font(esc(f"writes {e.get('pool')} {e.get('page')} ({e.violates})"), size=10, colour=colour, bold=True))
    if reads:
        # Three pages per line keeps the lane narrow when a step reads many pages.
        chunks = [", ".join(reads[k : k + 3]) for k in range(0, len(reads), 3)]
        lines.insert(1, _font(esc("reads ") + ",<BR/>".join(chunks), size=11))
    return "<BR/>".join(lines)


def _anomaly(state: Mapping[str, Any], pool: _Pool, page: str) -> str | None:
    """What is wrong with a page's bookkeeping in ``state``, whatever the spec says."""
    holders = [str(h) for h in (_cell(state, pool.holders, page) or [])]
    free = _cell(state, pool.free, page) or 0
    if len(holders) > 1:
        return f"{page} is held by {' and '.join(holders)} at once"
    if holders and free:
        return f"{page} is held by {holders[0]} and also on the free list"
    if free > 1:
        return f"{page} is on the free list {free} times"
    if not holders and not free:
        return f"{page} is held by nobody and not on the free list (lost)"
    return None


def _page_cell(trace: Trace, model: _Model, i: int, pool: _Pool, page: str) -> str:
    """One page after step ``i``: holder, whose KV it holds, what the step did to it."""
    state = trace.states[i]
    holders = [str(h) for h in (_cell(state, pool.holders, page) or [])]
    free = _cell(state, pool.free, page) or 0
    raw = _cell(state, pool.content, page)
    content = None if raw is None else str(raw)
    strong, light, pale = model.colours(content)
    bg = "white" if content is None else (light if holders else pale)
    who = ",".join(holders)
    if holders and free:
        who += "+free"  # held and on the free list: double ownership
    elif not holders:
        who = "free" if free == 1 else (f"free x{free}" if free else "lost")
    # (text, size, colour, bold)
    lines: list[tuple[str, int, str | None, bool]] = [(who, 11, None if holders else GREY, bool(holders))]
    if content or holders:
        # A free page nobody wrote is just "free": keep the grid quiet where nothing happens.
        lines.append((f"KV {content}" if content else "empty", 9, strong if content else GREY, False))
    story = model.story
    in_story = story is not None and story.pool == pool.name and story.page == page and i in _story_steps(story)
    notes = model.marks.get((i, pool.name, page), [])
    severities = {c for _, c in notes}
    if in_story:
        notes = [(text, RED if colour == GREY else colour) for text, colour in notes]
    lines += [(text, 9, colour, colour != GREY) for text, colour in notes]
    border, width = "#bbbbbb", 1
    if RED in severities:
        # The offending cell: white on red, whatever the content colour.
        bg, border, width = RED, RED, 3
        lines = [(text, size, "white", True) for text, size, _, _ in lines]
    elif ORANGE in severities:
        bg, border, width = _ORANGE_PALE, ORANGE, 3
    elif in_story:
        border, width = RED, 3
    if _anomaly(state, pool, page) is not None:
        # Double ownership, double free or a lost page: wrong whatever happens next.
        border, width = RED, 3
        if bg == "white":
            bg = _RED_PALE
    body = "<BR/>".join(_font(esc(text), size=size, colour=colour, bold=bold) for text, size, colour, bold in lines)
    return f'<TD BGCOLOR="{bg}" COLOR="{border}" BORDER="{width}" CELLPADDING="3">{body}</TD>'


def _story_steps(story: _Story) -> set[int]:
    return {x[0] for x in (story.written, story.freed, story.given) if x is not None} | {story.read_step}


def _untouched(trace: Trace, model: _Model, pool: _Pool) -> list[str]:
    """Free, never-written pages of ``pool`` that nothing in the trace touches (same cell in every state, no event).

    Drawn one column each they would bury the pages that matter in a large
    pool (``page_size=1`` with 64 tokens is 64 columns), so
    :data:`FOLD_UNTOUCHED` or more of them are drawn as one column.
    """
    first = trace.states[0]
    marked = {(pool_name, page) for _, pool_name, page in model.marks}
    story = model.story
    out = []
    for page in pool.pages:
        if (pool.name, page) in marked or (story is not None and story.pool == pool.name and story.page == page):
            continue
        start = tuple(_cell(first, var, page) for var in (pool.holders, pool.free, pool.content))
        if any(tuple(_cell(s, var, page) for var in (pool.holders, pool.free, pool.content)) != start for s in trace.states[1:]):
            continue
        if start[0] or start[1] != 1 or start[2] is not None:
            continue  # only free, never-written pages are folded: one cell then says what they all are
        out.append(page)
    return out if len(out) >= FOLD_UNTOUCHED else []


def _steps_label(trace: Trace, model: _Model) -> str:
    n_steps = len(trace.steps)
    idle = {pool.name: _untouched(trace, model, pool) for pool in model.pools}
    shown = {pool.name: [p for p in pool.pages if p not in idle[pool.name]] for pool in model.pools}
    lanes = model.lanes
    rows: list[str] = []
    head = f'BGCOLOR="{_HEADER}"'
    has_pools = bool(model.pools)
    span = ' ROWSPAN="2"' if has_pools else ""
    hdr = [f"<TD {head}{span}>{_font('step', size=11, bold=True)}</TD>"]
    for lane in lanes:
        strong, light, _ = model.colours(lane)
        name = f"request {lane}" if lane in model.requests else ("action" if len(lanes) == 1 else "other")
        colour = strong if lane in model.requests else None
        hdr.append(f'<TD BGCOLOR="{light if lane in model.requests else _HEADER}"{span}>'
                   f"{_font(esc(name), size=13, bold=True, colour=colour)}</TD>")
    for pool in model.pools:
        hdr.append(f'<TD {head} COLSPAN="{len(shown[pool.name]) + bool(idle[pool.name])}">'
                   f"{_font(esc(f'{pool.name} pool'), size=12, bold=True)}<BR/>"
                   f"{_font(esc('holder / KV in the page'), size=9, colour=GREY)}</TD>")
    rows.append("<TR>" + "".join(hdr) + "</TR>")
    if has_pools:
        sub = []
        for pool in model.pools:
            sub += [f"<TD {head}>{_font(esc(p), size=11, bold=True)}</TD>" for p in shown[pool.name]]
            pages = idle[pool.name]
            if pages:
                names = ", ".join(pages) if len(pages) <= 4 else f"{pages[0]} ... {pages[-1]}"
                sub.append(f"<TD {head}>{_font(esc(f'{len(pages)} untouched pages'), size=11, bold=True)}<BR/>"
                           f"{_font(esc(names), size=9, colour=GREY)}</TD>")
        rows.append("<TR>" + "".join(sub) + "</TR>")
    for i in range(n_steps + 1):
        last = i == n_steps and i > 0
        colour = RED if last and trace.violation else (ORANGE if last and model.deadlock else None)
        cells = [f'<TD BGCOLOR="{_HEADER}">{_font(esc(str(i)), size=12, bold=True, colour=colour)}</TD>']
        if i == 0:
            cells.append(f'<TD COLSPAN="{len(lanes)}">{_font(esc("initial state"), size=11, colour=GREY)}</TD>')
        else:
            acting = model.lane_of_step[i - 1]
            for lane in lanes:
                if lane != acting:
                    cells.append("<TD> </TD>")
                    continue
                _, light, pale = model.colours(lane)
                bg = pale if lane in model.requests else "white"
                border = ""
                if last and (trace.violation or model.deadlock):
                    border = f' COLOR="{RED if trace.violation else ORANGE}" BORDER="3"'
                cells.append(f'<TD BGCOLOR="{bg}" ALIGN="LEFT" BALIGN="LEFT"{border}>'
                             f"{_lane_text(trace, model, i, lane)}</TD>")
        for pool in model.pools:
            for page in shown[pool.name]:
                cells.append(_page_cell(trace, model, i, pool, page))
            if idle[pool.name]:
                # Untouched pages keep their initial cell: say it once, in the first row.
                text = "free, never written" if i == 0 else "unchanged"
                cells.append(f'<TD COLOR="#bbbbbb">{_font(esc(text), size=9, colour=GREY)}</TD>')
        rows.append("<TR>" + "".join(cells) + "</TR>")
    return ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="4" COLOR="#bbbbbb">'
            + "".join(rows) + "</TABLE>")


# -- legend ----------------------------------------------------------------------------
def _legend_label(trace: Trace, model: _Model) -> str:
    rows: list[str] = []

    def row(text: str) -> None:
        rows.append(f'<TR><TD ALIGN="LEFT" BALIGN="LEFT" COLSPAN="2">{text}</TD></TR>')

    if model.pools:
        swatches = []
        shown = {str(_cell(state, p.content, page)) for state in trace.states for p in model.pools for page in p.pages}
        for req in model.requests:
            if req not in shown and req not in model.lanes:
                continue
            strong, light, pale = model.colours(req)
            swatches.append(
                f'<TD BGCOLOR="{light}" BORDER="1" COLOR="#bbbbbb">{_font(esc(f"KV of {req}"), size=10, colour=strong)}</TD>'
                f'<TD BGCOLOR="{pale}" BORDER="1" COLOR="#bbbbbb">{_font(esc(f"free, still KV of {req}"), size=10, colour=strong)}</TD>'
            )
        primary = model.primary
        if primary is not None:
            what = f"offending {primary.event.kind}"
            swatches.append(f'<TD BGCOLOR="{RED}" BORDER="1">{_font(esc(what), size=10, colour="white", bold=True)}</TD>')
        if model.story is not None:
            swatches.append(f'<TD BORDER="3" COLOR="{RED}">{_font(esc(f"history of {model.story.page}"), size=10)}</TD>')
        if any(not f.primary for f in model.flags):
            swatches.append(f'<TD BGCOLOR="{_ORANGE_PALE}" BORDER="3" COLOR="{ORANGE}">'
                            f'{_font(esc("other violation"), size=10)}</TD>')
        if any(_anomaly(state, p, page) for state in trace.states for p in model.pools for page in p.pages):
            swatches.append(f'<TD BGCOLOR="{_RED_PALE}" BORDER="3" COLOR="{RED}">'
                            f'{_font(esc("double-held, double-freed or lost page"), size=10)}</TD>')
        if swatches:  # an empty <TR> is a syntax error for Graphviz
            rows.append('<TR><TD ALIGN="LEFT" COLSPAN="2"><TABLE BORDER="0" CELLSPACING="4" CELLPADDING="3"><TR>'
                        + "".join(swatches) + "</TR></TABLE></TD></TR>")
        row(_font(esc("Page cell: who holds the page after the step (or free), then whose KV it contains. "
                      "Pages are not cleared when freed, so a page keeps the KV of its last writer."),
                  size=10, colour=GREY))
    if trace.steps:
        lanes = ("Each step runs in the lane of the request its action names; below the action: the fields it changed."
                 if model.requests else "Below each action: the fields it changed.")
        row(_font(esc(lanes), size=10, colour=GREY))
    actions = model.schema.get("actions")
    if isinstance(actions, Mapping):
        used = []
        for step in trace.steps:
            if step.action not in used:
                used.append(step.action)
        for name in used:
            info = actions.get(name)
            if not isinstance(info, Mapping):
                continue
            where = f" (line {info.get('line')})" if info.get("line") is not None else ""
            rows.append(
                f'<TR><TD ALIGN="LEFT">{_font(esc(name + where), size=10, bold=True)}</TD>'
                f'<TD ALIGN="LEFT">{_font(esc(info.get("doc") or ""), size=10)}</TD></TR>'
            )
    if not rows:
        row(" ")
    return '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2">' + "".join(rows) + "</TABLE>"
