"""What every part of the DOT picture shares: colours, the model of the trace, text helpers.

:class:`DotModel` is computed once per picture from the trace and its
:class:`~ownership.core.story.Story`: lanes, pools, hidden variables and
per-cell marks.  The title (:mod:`ownership.render.dot_title`), the step
table (:mod:`ownership.render.dot_table`) and the legend
(:mod:`ownership.render.dot`) draw from it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ownership.core.events import Alloc, Free, Read, Transfer, Write
from ownership.core.schema import PageMark, TraceSchema
from ownership.core.story import (
    PageHistory,
    PoolShape,
    Story,
    Violation,
    cell,
    keepers,
    pending,
    pool_shapes,
    story_of,
    truthy,
)
from ownership.core.trace import Step, Trace, TraceKind

# -- colours -------------------------------------------------------------------
RED = "#d62728"
ORANGE = "#ff7f0e"
GREY = "#6b6b6b"
RED_PALE = "#fde0e0"
ORANGE_PALE = "#ffe8cc"
HEADER = "#efefef"
KEPT = "#3d3d3d"
"""Text of what holds a page other than a request, and of its marks (reference counts, pending operations)."""

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

FONT = "Helvetica"
WRAP = 38  # characters per line of a lane's change list
NO_LANE = "other"
FOLD_UNTOUCHED = 4
"""This many untouched pages of a pool or more are drawn as one "N untouched pages" column (fewer are drawn as they are)."""


@dataclass
class DotModel:
    """Everything the picture needs, computed once from the trace."""

    schema: TraceSchema
    requests: list[str]
    pools: list[PoolShape]
    lanes: list[str]
    lane_of_step: list[str]
    hidden_vars: set[str]
    per_request: set[str]
    story: Story
    deadlock: bool
    marks: dict[tuple[int, str, str], list[tuple[str, str]]] = field(default_factory=dict)

    @staticmethod
    def of(trace: Trace) -> DotModel:
        schema = trace.schema
        requests = [str(r) for r in schema.requests or ()]
        pools = list(pool_shapes(trace))
        lane_of_step = [_lane_of(step, requests) for step in trace.steps]
        # Requests that never act get no lane: an empty column only adds width.
        lanes = [r for r in requests if r in lane_of_step]
        if NO_LANE in lane_of_step or not lanes:
            lanes.append(NO_LANE)
        # Ghosts are the checker's bookkeeping and pool variables are drawn as
        # the page grid: neither belongs in a step's list of changed fields.
        hidden = {str(g) for g in schema.ghosts or ()}
        for p in pools:
            hidden.update((p.free, p.holders, p.content, p.slot))
            hidden.update(m.var for m in p.marks)  # drawn in the page cells
        model = DotModel(
            schema=schema,
            requests=requests,
            pools=pools,
            lanes=lanes,
            lane_of_step=lane_of_step,
            hidden_vars=hidden,
            per_request=set(str(v) for v in schema.per_request or ()),
            story=story_of(trace, pools),
            deadlock=trace.kind is TraceKind.DEADLOCK,
        )
        model.marks = _marks(trace, model)
        return model

    def colours(self, req: str | None) -> tuple[str, str, str]:
        if req is not None and req in self.requests:
            return _PALETTE[self.requests.index(req) % len(_PALETTE)]
        return _UNKNOWN_COLOURS

    @property
    def flags(self) -> tuple[Violation, ...]:
        """Every event that breaks an invariant."""
        return self.story.violations

    @property
    def primary(self) -> Violation | None:
        return self.story.primary

    @property
    def page_story(self) -> PageHistory | None:
        """The history of the page the offending read touched."""
        return self.story.page

    def in_story(self, i: int, pool: str, page: str) -> bool:
        """Whether step ``i`` of ``page`` is part of the bug story (outlined red)."""
        return self.story.focus == (pool, page) and i in self.story.focus_steps


def _lane_of(step: Step, requests: Sequence[str]) -> str:
    """The request a step belongs to: the one its first argument names."""
    if step.args and str(step.args[0]) in requests:
        return str(step.args[0])
    return NO_LANE


def _marks(trace: Trace, model: DotModel) -> dict[tuple[int, str, str], list[tuple[str, str]]]:
    """Per (step, pool, page): short notes and their colour, from the step's events."""
    marks: dict[tuple[int, str, str], list[tuple[str, str]]] = {}

    def add(step: int, pool: str, page: str, text: str, colour: str) -> None:
        marks.setdefault((step, pool, page), []).append((text, colour))

    for i, step in enumerate(trace.steps, start=1):
        for e in step.events:
            for pool in model.pools:
                for page in e.touches(pool.name):
                    if page not in pool.pages:
                        continue
                    colour = GREY
                    if e.violates:
                        colour = RED if e.violates == trace.violation else ORANGE
                    text = e.kind
                    if isinstance(e, Transfer):
                        src, dst = next(((s, d) for s, d in e.pairs() if page in (s, d)), ("", ""))
                        text = f"sent to {dst}" if page == src and e.src == pool.name else f"recv from {src}"
                    elif isinstance(e, Alloc):
                        text = f"alloc to {e.req}"
                    elif isinstance(e, Free):
                        text = f"freed by {e.req}"
                    elif isinstance(e, Read):
                        text = f"read by {e.req}"
                    elif isinstance(e, Write):
                        text = f"written by {e.req}"
                    add(i, pool.name, page, text, colour)
    return marks


# -- text helpers ------------------------------------------------------------------
def esc(text: object) -> str:
    """Escape ``text`` for a Graphviz HTML label, keeping the output ASCII."""
    return html.escape(str(text), quote=True).encode("ascii", "xmlcharrefreplace").decode("ascii")


def show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "{" + ",".join(show(v) for v in value) + "}"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{show(v)}" for k, v in value.items()) + "}"
    return str(value)


def wrap(items: Sequence[str], width: int = WRAP) -> list[str]:
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


def font(text: str, *, size: int | None = None, colour: str | None = None, bold: bool = False) -> str:
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


def owner_of(name: str) -> str:
    """``d_queue[B]`` -> ``B``; ``clock`` -> ``""``."""
    if name.endswith("]") and "[" in name:
        return name[name.index("[") + 1 : -1]
    return ""


def var_of(name: str) -> str:
    return name.split("[", 1)[0]


def keeper_text(mark: PageMark, value: Any) -> str:
    """A ``keeper`` mark's value as a holder: ``cached``, ``cached x``, ``handle x2``, ``pinned by J0,J1``."""
    if value is True:
        return mark.label
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int):
        return mark.label if value == 1 else f"{mark.label} x{value}"
    if isinstance(value, list):
        return f"{mark.label} by {','.join(str(v) for v in value)}"
    return f"{mark.label} {value}"


def mark_lines(state: Mapping[str, Any], prev: Mapping[str, Any] | None, pool: PoolShape, page: str,
               *, skip_keepers: bool = False) -> list[str]:
    """What the pool's marks say about ``page`` in ``state``, one short line each, in declaration order.

    ``keeper``: who else holds it (``cached x``); ``count``: ``rc=2`` (drawn
    while non-zero, and in the step it drops to zero); ``pending``: the
    operation and whose it is (``rdma write in flight (A)``); ``flag``: its
    label while true.  ``skip_keepers`` leaves out keepers already drawn as
    the page's holder.
    """
    out: list[str] = []
    for m in pool.marks:
        if m.role == "keeper":
            value = cell(state, m.var, page)
            if not skip_keepers and truthy(value):
                out.append(keeper_text(m, value))
        elif m.role == "count":
            value = cell(state, m.var, page)
            if truthy(value) or (prev is not None and truthy(cell(prev, m.var, page))):
                out.append(f"{m.label}={show(value)}")
        elif m.role == "pending":
            out += [f"{m.label} ({who})" for who in pending(state, m, page)]
        elif m.role == "flag" and truthy(cell(state, m.var, page)):
            out.append(m.label)
    return [text for text in out if text]


def anomaly(state: Mapping[str, Any], pool: PoolShape, page: str) -> str | None:
    """What is wrong with a page's bookkeeping in ``state``, whatever the spec says.

    A page held by a ``keeper`` mark (a cache, a tree) is not lost; a page of
    a pool that counts references may have several holders; a count below
    zero is always wrong.
    """
    holders = [str(h) for h in (cell(state, pool.holders, page) or [])]
    free = cell(state, pool.free, page) or 0
    kept = keepers(state, pool, page)
    if len(holders) > 1 and not pool.shared:
        return f"{page} is held by {' and '.join(holders)} at once"
    if holders and free:
        return f"{page} is held by {holders[0]} and also on the free list"
    if kept and free:
        return f"{page} is {keeper_text(*kept[0])} and also on the free list"
    if free > 1:
        return f"{page} is on the free list {free} times"
    counted = False  # a positive reference count: something references the page, so it is not lost
    for m in pool.marks:
        value = cell(state, m.var, page)
        if m.role == "count" and isinstance(value, int) and not isinstance(value, bool):
            if value < 0:
                return f"{page} has {m.label}={value}, below zero"
            counted = counted or value > 0
    if not holders and not free and not kept and not counted:
        return f"{page} is held by nobody and not on the free list (lost)"
    return None
