"""The title of the DOT picture: what went wrong, in words, and the page's history.

Spec, summary and parameters; the violated invariant; a one-line headline
(``B reads D0, which holds A's KV``); the bug story of
:mod:`ownership.core.story` one line per step that matters, the root-cause
step's line in bold and named as such; pages whose bookkeeping is wrong; and
whether the client was told all was fine.
"""

from __future__ import annotations

from ownership.core.events import Read, Write
from ownership.core.trace import Trace, TraceKind
from ownership.render.dot_model import GREY, ORANGE, RED, DotModel, anomaly, esc, font


def _symptom_text(trace: Trace, model: DotModel) -> str:
    """The story's last beat (the offending event in words), without the call the story line adds."""
    story = model.story
    beat = story.beats[-1] if story.beats else None
    if beat is None or beat.step != story.symptom or beat.step is None:
        return ""
    call = f" ({trace.steps[beat.step - 1].call})"
    return beat.text[: -len(call)] if beat.text.endswith(call) else beat.text


def _headline(trace: Trace, model: DotModel) -> tuple[str, str]:
    """The one-line statement of what went wrong, and its colour."""
    n = len(trace.steps)
    flag = model.primary
    if flag is not None:
        e = flag.event
        if isinstance(e, Read):
            if e.content is None:
                what = f"{e.req} reads {e.page}, which nobody ever wrote"
            elif e.content == e.req:
                what = f"{e.req} reads {e.page}"
            else:
                what = f"{e.req} reads {e.page}, which holds {e.content}'s KV"
        elif isinstance(e, Write):
            what = f"{e.req} writes {e.page} in the {e.pool} pool, a page it does not hold"
        else:
            what = _symptom_text(trace, model) or f"{e.kind} by {e.get('req', '?')}"
        return f"{what} ({flag.invariant})", RED
    if trace.kind is TraceKind.LASSO:
        who = f" for {trace.subject}" if trace.subject else ""
        if trace.loop == n:
            return f"{trace.violation} is broken{who}: after step {n} nothing can run, and the path stays", RED
        return (f"{trace.violation} is broken{who}: steps {(trace.loop or 0) + 1}-{n} repeat for ever "
                f"(a fair loop back to state {trace.loop})"), RED
    if trace.violation:
        last = f": {trace.steps[-1].call}" if trace.steps else ""
        return f"{trace.violation} is violated after step {n}{last}", RED
    if model.deadlock:
        return f"deadlock after step {n}: no action can run, but not every request is done", ORANGE
    return f"{n} step{'s' if n != 1 else ''}, no violation", "black"


def _story_lines(trace: Trace, model: DotModel) -> list[tuple[str, bool]]:
    """The bug story, one line per step that matters, and whether the line is the root cause."""
    story = model.story
    lines: list[tuple[str, bool]] = []
    marked = False
    for beat in story.beats:
        if beat.step is None:
            lines.append((beat.text, False))
            continue
        # The first line at the root-cause step names it (a story of one line is the headline's own step).
        cause = not marked and beat.step == story.named_cause
        marked = marked or cause
        lines.append(((f"root cause, step {beat.step}: " if cause else f"step {beat.step}: ") + beat.text, cause))
    return lines


def _anomaly_lines(trace: Trace, model: DotModel) -> list[str]:
    """Pages whose bookkeeping is wrong at the end, and since when it has been wrong."""
    lines: list[str] = []
    states = trace.states
    n = len(trace.steps)
    if n == 0:
        return lines
    for pool in model.pools:
        for page in pool.pages:
            wrong = anomaly(states[n], pool, page)
            if wrong is None:
                continue
            first = n
            while first > 1 and anomaly(states[first - 1], pool, page) is not None:
                first -= 1
            if first < n:
                began = anomaly(states[first], pool, page)
                lines.append(f"step {first}: {began} ({trace.steps[first - 1].call}, {pool.name} pool)")
            lines.append(f"after step {n}: {wrong} ({pool.name} pool)")
    return lines


def title_label(trace: Trace, model: DotModel) -> str:
    """The title node's HTML label."""
    rows: list[str] = []

    def row(text: str) -> None:
        rows.append(f'<TR><TD ALIGN="LEFT" BALIGN="LEFT">{text}</TD></TR>')

    row(font(esc(trace.spec), size=20, bold=True))
    summary = model.schema.summary
    if summary:
        row(font(esc(summary), size=13))
    params = ", ".join(f"{k}={v}" for k, v in trace.params.items())
    if params:
        row(font(esc(f"parameters: {params}"), size=10, colour=GREY))
    if trace.violation:
        label = "temporal property broken: " if trace.kind is TraceKind.LASSO else "invariant violated: "
        row(font(esc(label) + f"<B>{esc(trace.violation)}</B>", size=14, colour=RED))
    text, colour = _headline(trace, model)
    row(font(esc(text), size=18, colour=colour, bold=True))
    for line, cause in _story_lines(trace, model):
        row(font(esc(line), size=12, colour=RED, bold=cause))
    for line in _anomaly_lines(trace, model):
        row(font(esc(line), size=12, colour=RED))
    for step, reply in model.story.replies:
        if step == len(trace.steps) and trace.violation and str(reply.status) == "200":
            row(font(esc(f"...and {reply.req}'s client gets HTTP {reply.status} (step {step}): nothing reports the error"),
                     size=12, colour=RED, bold=True))
    for flag in model.flags:
        if flag.primary or flag.step != len(trace.steps):
            continue
        e = flag.event
        if isinstance(e, Read) and e.content is None:
            what = f"{e.req} reads {e.page}, which nobody ever wrote"
        else:
            what = f"{e.kind} by {e.get('req')} on {e.get('page')}"
        row(font(esc(f"also: {what} ({flag.invariant})"), size=12, colour=ORANGE))
    return '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2">' + "".join(rows) + "</TABLE>"

