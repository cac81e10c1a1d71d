"""The step table of the DOT picture: one row per step, lanes per request, a column per page.

A step's action sits in the lane of the request its first argument names,
with what its ``s.choose`` calls picked, the per-request fields it changed
and its reads and replies.  Each page
cell shows who holds the page after the step and whose KV it contains,
coloured by the KV's owner; the offending event is filled red, secondary
violations orange, and the cells of the page's history are outlined red.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from ownership.core.events import Read, Reply, Write
from ownership.core.story import PoolShape, cell, keepers
from ownership.core.trace import Trace, TraceKind, changed_fields
from ownership.render.dot_model import (
    FOLD_UNTOUCHED,
    GREY,
    HEADER,
    KEPT,
    ORANGE,
    ORANGE_PALE,
    RED,
    RED_PALE,
    WRAP,
    DotModel,
    anomaly,
    esc,
    font,
    keeper_text,
    mark_lines,
    owner_of,
    show,
    var_of,
    wrap,
)
from ownership.render.text import describe_event, wrap_items


def _lane_text(trace: Trace, model: DotModel, i: int, lane: str) -> str:
    """The action, its changed fields and its notable events, for step ``i``'s lane."""
    step = trace.steps[i - 1]
    before, after = trace.states[i - 1], trace.states[i]
    lines = [font(esc(step.call), size=12, bold=True)]
    # What the step's s.choose calls decided, under the call: the changes below follow from it.
    lines += [font(esc(text), size=10, colour=GREY) for text in wrap_items(step.chose, WRAP)]
    changes: list[str] = []
    for name, _old, new in changed_fields(before, after):
        var = var_of(name)
        if var in model.hidden_vars:
            continue
        owner = owner_of(name)
        # The lane already names the request: drop "[B]" from B's own fields.
        shown = var if owner == lane and (var in model.per_request or not model.per_request) else name
        changes.append(f"{shown}={show(new)}")
    lines += [font(esc(text), size=10) for text in wrap(changes)]
    last = i == len(trace.steps)
    reads: list[str] = []
    for e in step.events:
        if isinstance(e, Read):
            content = e.content
            note = "own KV" if content == e.req else ("never written" if content is None else f"{content}'s KV!")
            text = esc(f"{e.page}: {note}")
            if e.violates:
                colour = RED if e.violates == trace.violation else ORANGE
                text = font(text, colour=colour, bold=True)
            reads.append(text)
        elif isinstance(e, Reply):
            # A success reply in the violating step means the client never hears of the bug.
            alarm = last and bool(trace.violation) and str(e.status) == "200" or bool(e.violates)
            said = f"client gets HTTP {e.status}" + (f" ({e.violates})" if e.violates else "")
            lines.append(font(esc(said), size=10, colour=RED if alarm else None, bold=alarm))
        elif isinstance(e, Write) and e.violates:
            colour = RED if e.violates == trace.violation else ORANGE
            lines.append(font(esc(f"writes {e.pool} {e.page} ({e.violates})"), size=10, colour=colour, bold=True))
        elif e.violates:
            # Every other violating event (a prefix hit, a free racing a write, a spec's own) is said in its lane too.
            colour = RED if e.violates == trace.violation else ORANGE
            desc = (describe_event(e) or e.kind).split("  <--")[0]
            lines += [font(esc(text), size=10, colour=colour, bold=True)
                      for text in textwrap.wrap(f"{desc} ({e.violates})", width=WRAP + 8)]
    if reads:
        # Three pages per line keeps the lane narrow when a step reads many pages.
        chunks = [", ".join(reads[k : k + 3]) for k in range(0, len(reads), 3)]
        lines.insert(1, font(esc("reads ") + ",<BR/>".join(chunks), size=11))
    return "<BR/>".join(lines)



def _page_cell(trace: Trace, model: DotModel, i: int, pool: PoolShape, page: str) -> str:
    """One page after step ``i``: holder, whose KV it holds, its marks, what the step did to it."""
    state = trace.states[i]
    prev = trace.states[i - 1] if i > 0 else None
    holders = [str(h) for h in (cell(state, pool.holders, page) or [])]
    free = cell(state, pool.free, page) or 0
    kept = keepers(state, pool, page)
    raw = cell(state, pool.content, page) if pool.content else None
    content = None if raw is None else str(raw)
    if pool.content:
        strong, light, pale = model.colours(content)
        bg = "white" if content is None else (light if holders or kept else pale)
    else:
        # No content label (a block table's blocks): colour by the one holder, grey when shared.
        strong, light, pale = model.colours(holders[0] if len(holders) == 1 else None)
        bg = light if len(holders) == 1 else (HEADER if holders else "white")
    who = ",".join(holders)
    if holders and free:
        who += "+free"  # held and on the free list: double ownership
    elif not holders and kept:
        who = keeper_text(*kept[0]) + ("+free" if free else "")
    elif not holders:
        who = "free" if free == 1 else (f"free x{free}" if free else "lost")
    # (text, size, colour, bold)
    lines: list[tuple[str, int, str | None, bool]] = [
        (who, 11, None if holders else (KEPT if kept else GREY), bool(holders or kept))
    ]
    if pool.content and (content or holders or kept):
        # A free page nobody wrote is just "free": keep the grid quiet where nothing happens.
        lines.append((f"KV {content}" if content else "empty", 9, strong if content else GREY, False))
    lines += [(text, 9, KEPT, False) for text in mark_lines(state, prev, pool, page, skip_keepers=not holders)]
    in_story = model.in_story(i, pool.name, page)
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
        bg, border, width = ORANGE_PALE, ORANGE, 3
    elif in_story:
        border, width = RED, 3
    if anomaly(state, pool, page) is not None:
        # Double ownership, double free or a lost page: wrong whatever happens next.
        border, width = RED, 3
        if bg == "white":
            bg = RED_PALE
    if trace.kind is TraceKind.LASSO and i == len(trace.steps) and trace.subject in holders:
        # A lasso of a request's property: the pages it still holds when the loop closes never come back.
        border, width = RED, 3
        lines.append(("never returned", 9, RED, True))
    body = "<BR/>".join(font(esc(text), size=size, colour=colour, bold=bold) for text, size, colour, bold in lines)
    return f'<TD BGCOLOR="{bg}" COLOR="{border}" BORDER="{width}" CELLPADDING="3">{body}</TD>'



def _untouched(trace: Trace, model: DotModel, pool: PoolShape) -> list[str]:
    """Free, never-written, unmarked pages of ``pool`` that nothing in the trace touches (same cell in every state, no event).

    Drawn one column each they would bury the pages that matter in a large
    pool (``page_size=1`` with 64 tokens is 64 columns), so
    :data:`FOLD_UNTOUCHED` or more of them are drawn as one column.
    """
    marked = {(pool_name, page) for _, pool_name, page in model.marks}

    def looks(state: Mapping[str, Any], page: str) -> tuple[Any, ...]:
        return (repr(cell(state, pool.holders, page)), cell(state, pool.free, page),
                repr(cell(state, pool.content, page)), tuple(mark_lines(state, None, pool, page)))

    out = []
    for page in pool.pages:
        if (pool.name, page) in marked or model.story.focus == (pool.name, page):
            continue
        start = looks(trace.states[0], page)
        if any(looks(s, page) != start for s in trace.states[1:]):
            continue
        if start != (repr([]), 1, repr(None), ()) and start != (repr(None), 1, repr(None), ()):
            continue  # only free, never-written, unmarked pages are folded: one cell then says what they all are
        out.append(page)
    return out if len(out) >= FOLD_UNTOUCHED else []


def steps_label(trace: Trace, model: DotModel) -> str:
    """The step table node's HTML label."""
    n_steps = len(trace.steps)
    idle = {pool.name: _untouched(trace, model, pool) for pool in model.pools}
    shown = {pool.name: [p for p in pool.pages if p not in idle[pool.name]] for pool in model.pools}
    lanes = model.lanes
    rows: list[str] = []
    head = f'BGCOLOR="{HEADER}"'
    has_pools = bool(model.pools)
    span = ' ROWSPAN="2"' if has_pools else ""
    hdr = [f"<TD {head}{span}>{font('step', size=11, bold=True)}</TD>"]
    for lane in lanes:
        strong, light, _ = model.colours(lane)
        name = f"request {lane}" if lane in model.requests else ("action" if len(lanes) == 1 else "other")
        colour = strong if lane in model.requests else None
        hdr.append(f'<TD BGCOLOR="{light if lane in model.requests else HEADER}"{span}>'
                   f"{font(esc(name), size=13, bold=True, colour=colour)}</TD>")
    for pool in model.pools:
        hdr.append(f'<TD {head} COLSPAN="{len(shown[pool.name]) + bool(idle[pool.name])}">'
                   f"{font(esc(f'{pool.name} pool'), size=12, bold=True)}<BR/>"
                   f"{font(esc('holder / KV in the page' if pool.content else 'holders / references'), size=9, colour=GREY)}</TD>")
    rows.append("<TR>" + "".join(hdr) + "</TR>")
    if has_pools:
        sub = []
        for pool in model.pools:
            sub += [f"<TD {head}>{font(esc(p), size=11, bold=True)}</TD>" for p in shown[pool.name]]
            pages = idle[pool.name]
            if pages:
                names = ", ".join(pages) if len(pages) <= 4 else f"{pages[0]} ... {pages[-1]}"
                sub.append(f"<TD {head}>{font(esc(f'{len(pages)} untouched pages'), size=11, bold=True)}<BR/>"
                           f"{font(esc(names), size=9, colour=GREY)}</TD>")
        rows.append("<TR>" + "".join(sub) + "</TR>")
    for i in range(n_steps + 1):
        last = i == n_steps and i > 0
        colour = RED if last and trace.violation else (ORANGE if last and model.deadlock else None)
        number = font(esc(str(i)), size=12, bold=True, colour=colour)
        if trace.kind is TraceKind.LASSO and trace.loop is not None and i > trace.loop:
            number += "<BR/>" + font(esc("loop"), size=8, colour=RED, bold=True)
        if i == model.story.named_cause:
            number += "<BR/>" + font(esc("root"), size=8, colour=RED, bold=True) + "<BR/>" \
                + font(esc("cause"), size=8, colour=RED, bold=True)
        cells = [f'<TD BGCOLOR="{HEADER}">{number}</TD>']
        if i == 0:
            cells.append(f'<TD COLSPAN="{len(lanes)}">{font(esc("initial state"), size=11, colour=GREY)}</TD>')
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
                cells.append(f'<TD COLOR="#bbbbbb">{font(esc(text), size=9, colour=GREY)}</TD>')
        rows.append("<TR>" + "".join(cells) + "</TR>")
    return ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="4" COLOR="#bbbbbb">'
            + "".join(rows) + "</TABLE>")

