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

The bug story comes from :mod:`ownership.core.story`; the shared model and
helpers live in :mod:`ownership.render.dot_model`, the title in
:mod:`ownership.render.dot_title`, the table in
:mod:`ownership.render.dot_table`; this module assembles them and draws the
legend.
"""

from __future__ import annotations

from ownership.core.story import cell
from ownership.core.trace import Trace
from ownership.render.dot_model import (
    FONT,
    GREY,
    ORANGE,
    ORANGE_PALE,
    RED,
    RED_PALE,
    DotModel,
    anomaly,
    esc,
    font,
)
from ownership.render.dot_table import steps_label
from ownership.render.dot_title import title_label


def trace_to_dot(trace: Trace) -> str:
    """DOT source for a picture of ``trace``; deterministic, ASCII only."""
    model = DotModel.of(trace)
    title = title_label(trace, model)
    table = steps_label(trace, model)
    legend = _legend_label(trace, model)
    lines = [
        "digraph counterexample {",
        f'  graph [rankdir=TB, nodesep=0.2, ranksep=0.25, bgcolor="white", fontname="{FONT}"];',
        f'  node [shape=plaintext, margin=0, fontname="{FONT}"];',
        "  edge [style=invis];",
        f"  title [label=<{title}>];",
        f"  steps [label=<{table}>];",
        f"  legend [label=<{legend}>];",
        "  title -> steps -> legend;",
        "}",
    ]
    return "\n".join(lines) + "\n"


# -- legend ----------------------------------------------------------------------------
_ROLE_MEANS = {
    "keeper": "holds the page for something other than a request (neither free nor lost)",
    "count": "a count",
    "pending": "an outstanding operation, and whose",
    "flag": "set on the page",
}


def _marks_legend(model: DotModel) -> str:
    """One sentence naming each mark drawn in the cells and the variable it shows."""
    parts = []
    for pool in model.pools:
        for m in pool.marks:
            parts.append(f"'{m.label}' ({m.var}): {_ROLE_MEANS[m.role]}")
    return ("Also in a cell: " + "; ".join(dict.fromkeys(parts)) + ".") if parts else ""


def _legend_label(trace: Trace, model: DotModel) -> str:
    rows: list[str] = []

    def row(text: str) -> None:
        rows.append(f'<TR><TD ALIGN="LEFT" BALIGN="LEFT" COLSPAN="2">{text}</TD></TR>')

    if model.pools:
        swatches = []
        shown = {str(cell(state, p.content, page)) for state in trace.states for p in model.pools for page in p.pages}
        shown |= {str(h) for state in trace.states for p in model.pools if not p.content for page in p.pages
                  for h in cell(state, p.holders, page) or []}
        for req in model.requests:
            if req not in shown and req not in model.lanes:
                continue
            strong, light, pale = model.colours(req)
            if not any(p.content for p in model.pools):
                # Blocks carry no content label: a colour says who holds the block.
                swatches.append(f'<TD BGCOLOR="{light}" BORDER="1" COLOR="#bbbbbb">'
                                f'{font(esc(f"held by {req} alone"), size=10, colour=strong)}</TD>')
                continue
            swatches.append(
                f'<TD BGCOLOR="{light}" BORDER="1" COLOR="#bbbbbb">{font(esc(f"KV of {req}"), size=10, colour=strong)}</TD>'
                f'<TD BGCOLOR="{pale}" BORDER="1" COLOR="#bbbbbb">{font(esc(f"free, still KV of {req}"), size=10, colour=strong)}</TD>'
            )
        primary = model.primary
        if primary is not None:
            what = f"offending {primary.event.kind}"
            swatches.append(f'<TD BGCOLOR="{RED}" BORDER="1">{font(esc(what), size=10, colour="white", bold=True)}</TD>')
        if model.story.focus is not None and model.story.focus_steps:
            swatches.append(f'<TD BORDER="3" COLOR="{RED}">{font(esc(f"history of {model.story.focus[1]}"), size=10)}</TD>')
        if any(not f.primary for f in model.flags):
            swatches.append(f'<TD BGCOLOR="{ORANGE_PALE}" BORDER="3" COLOR="{ORANGE}">'
                            f'{font(esc("other violation"), size=10)}</TD>')
        if any(anomaly(state, p, page) for state in trace.states for p in model.pools for page in p.pages):
            swatches.append(f'<TD BGCOLOR="{RED_PALE}" BORDER="3" COLOR="{RED}">'
                            f'{font(esc("double-held, double-freed or lost page"), size=10)}</TD>')
        if swatches:  # an empty <TR> is a syntax error for Graphviz
            rows.append('<TR><TD ALIGN="LEFT" COLSPAN="2"><TABLE BORDER="0" CELLSPACING="4" CELLPADDING="3"><TR>'
                        + "".join(swatches) + "</TR></TABLE></TD></TR>")
        if any(p.content for p in model.pools):
            row(font(esc("Page cell: who holds the page after the step (or free), then whose KV it contains. "
                          "Pages are not cleared when freed, so a page keeps the KV of its last writer."),
                      size=10, colour=GREY))
        if any(not p.content for p in model.pools):
            row(font(esc("Block cell: which requests reference the block after the step (or free), "
                          "then its reference count."), size=10, colour=GREY))
        marks = _marks_legend(model)
        if marks:
            row(font(esc(marks), size=10, colour=GREY))
    if trace.steps:
        # Grey lines under an action are its picks: say so only where a step chose something.
        below = "what it chose (grey), then the fields it changed" if any(s.chose for s in trace.steps) \
            else "the fields it changed"
        lanes = (f"Each step runs in the lane of the request its action names; below the action: {below}."
                 if model.requests else f"Below each action: {below}.")
        row(font(esc(lanes), size=10, colour=GREY))
    used: list[str] = []
    for step in trace.steps:
        if step.action not in used:
            used.append(step.action)
    for name in used:
        info = model.schema.actions.get(name)
        if info is None:
            continue
        where = f" (line {info.line})" if info.line is not None else ""
        rows.append(
            f'<TR><TD ALIGN="LEFT">{font(esc(name + where), size=10, bold=True)}</TD>'
            f'<TD ALIGN="LEFT">{font(esc(info.doc or ""), size=10)}</TD></TR>'
        )
    if not rows:
        row(" ")
    return '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2">' + "".join(rows) + "</TABLE>"
