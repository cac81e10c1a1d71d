"""The design-review report: one self-contained HTML file for a set of checked specs.

:func:`render_report` turns :class:`SpecSection` records (a spec, its
results per engine, the pictures of their counterexamples and, for a
violation, the :class:`~ownership.analysis.explain.diagnosis.Diagnosis`) into a single
HTML page with inline CSS and inline SVG: no script, font, stylesheet or image
is fetched from anywhere, so the file can be mailed, attached to a review or
opened offline.  For each spec it shows the summary and the code it models,
the parameters, each engine's verdict with what it covered, and for each
violation the picture, the step table, the source of every action the trace
takes (with line numbers) and the command that reproduces it.

Like the other renderers it only reads data: running engines and the
diagnosis is the caller's job (:mod:`ownership.session.report`).  The module
is one page's markup and its stylesheet, a few lines over 400.
"""

from __future__ import annotations

import html
import inspect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ownership.core.result import CheckResult
from ownership.core.story import story_of
from ownership.core.trace import Trace, changed_fields
from ownership.core.verdicts import headline
from ownership.errors import OwnershipError
from ownership.render.dot import trace_to_dot
from ownership.render.text import (
    describe_event,
    display_path,
    explain_headline,
    fix_line,
    format_value,
    violation_sentence,
)

if TYPE_CHECKING:
    from ownership.analysis.explain.diagnosis import Diagnosis
    from ownership.lang.model import Spec


@dataclass(frozen=True)
class EngineRun:
    """One engine's result on one spec, with what the report shows next to it."""

    result: CheckResult
    reproduce: str
    """The command line that reruns this check."""
    svg: str | None = None
    """The counterexample's picture as inline ``<svg>`` markup (see :func:`svg_markup`)."""
    svg_error: str = ""
    """Why there is no picture although there is a trace (no renderer, renderer failed)."""


@dataclass(frozen=True)
class SpecSection:
    """Everything the report says about one spec."""

    spec: Spec
    spec_path: str
    params: Mapping[str, int]
    runs: tuple[EngineRun, ...]
    diagnosis: Diagnosis | None = None
    diagnosis_note: str = ""
    """Why there is no diagnosis for a violation (a deadlock, a failed build of the graph)."""
    extra_notes: tuple[str, ...] = field(default_factory=tuple)


def svg_markup(trace: Trace) -> tuple[str | None, str]:
    """The trace's picture as ``<svg>`` markup to inline, or ``(None, why not)``.

    Drawn by :func:`~ownership.render.dot.trace_to_dot` and the configured
    Graphviz renderer; the XML prolog, doctype and comments are dropped so
    the markup can sit inside HTML.
    """
    from ownership.render.graphviz_bin import render

    try:
        data = render(trace_to_dot(trace), "svg").decode("utf-8", "replace")
    except OwnershipError as exc:
        return None, exc.one_line()
    start = data.find("<svg")
    if start < 0:
        return None, "the renderer produced no <svg> element"
    body = re.sub(r"<!--.*?-->", "", data[start:], flags=re.S)
    return body.strip(), ""


# -- pieces --------------------------------------------------------------------

_CSS = """
:root { --fg:#1d2430; --muted:#5b6575; --line:#dde2ea; --bg:#f6f7fa; --card:#fff;
  --red:#c62828; --red-bg:#fdecea; --green:#1b7f3b; --green-bg:#e6f4ea; --amber:#8a5a00; --amber-bg:#fff4d6;
  --grey:#4a5160; --grey-bg:#eceff3; --blue:#2f62c9; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
  font:15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header.top { background:#1d2430; color:#fff; padding:22px 32px; }
header.top h1 { margin:0 0 4px; font-size:22px; font-weight:600; }
header.top p { margin:0; color:#c5ccd8; font-size:13px; }
main { max-width:1240px; margin:0 auto; padding:24px 32px 48px; }
nav.toc { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 18px; margin-bottom:24px; }
nav.toc ul { margin:6px 0 0; padding:0; list-style:none; }
nav.toc li { margin:4px 0; }
nav.toc a { color:var(--blue); text-decoration:none; }
section.spec { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:22px 26px;
  margin-bottom:28px; box-shadow:0 1px 2px rgba(20,30,50,.04); }
section.spec > h2 { margin:0 0 6px; font-size:20px; display:flex; flex-wrap:wrap; gap:10px; align-items:center; }
h3 { font-size:16px; margin:22px 0 8px; }
h4 { font-size:14px; margin:18px 0 6px; color:var(--grey); text-transform:uppercase; letter-spacing:.04em; }
.summary { font-size:16px; margin:0 0 12px; }
.muted { color:var(--muted); }
.badge { display:inline-block; padding:2px 10px; border-radius:999px; font-size:12px; font-weight:700;
  letter-spacing:.04em; vertical-align:middle; border:1px solid transparent; }
.badge.VIOLATED { color:var(--red); background:var(--red-bg); border-color:#f5c2c0; }
.badge.PROVED { color:var(--green); background:var(--green-bg); border-color:#b9e0c5; }
.badge.BOUNDED_OK { color:var(--amber); background:var(--amber-bg); border-color:#f1d48a; }
.badge.VACUOUS { color:var(--amber); background:var(--amber-bg); border-color:#f1d48a; }
.badge.UNKNOWN { color:var(--grey); background:var(--grey-bg); border-color:#d3d8e0; }
.badge.engine { color:var(--grey); background:#fff; border-color:var(--line); font-weight:600; }
table { border-collapse:collapse; width:100%; font-size:13.5px; margin:6px 0 10px; }
th, td { text-align:left; vertical-align:top; padding:6px 10px; border-bottom:1px solid var(--line); }
th { background:#f0f2f6; font-weight:600; color:var(--grey); }
tbody tr:nth-child(even) td { background:#fafbfc; }
table.kv th { width:190px; background:transparent; }
td.num { text-align:right; font-variant-numeric:tabular-nums; color:var(--muted); width:36px; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size:12.5px; }
code { background:#f0f2f6; padding:1px 5px; border-radius:4px; }
pre { background:#f7f8fb; border:1px solid var(--line); border-radius:6px; padding:10px 12px; overflow:auto; margin:6px 0 12px; }
pre.cmd { background:#1d2430; color:#e8ecf3; border-color:#1d2430; }
.violation { border-left:4px solid var(--red); background:var(--red-bg); padding:10px 14px; border-radius:6px; margin:10px 0; }
.violation .violation-headline { margin:0; font-size:17px; color:var(--red); }
.violation p { margin:4px 0 0; }
ol.story { margin:6px 0 0; padding-left:22px; color:var(--red); }
.cause { color:var(--red); font-weight:700; }
.coverage { margin:4px 0 0; }
.notes { margin:4px 0 0; padding-left:18px; color:var(--muted); font-size:13px; }
.figure { border:1px solid var(--line); border-radius:8px; padding:10px; overflow:auto; background:#fff; margin:8px 0 14px; }
.figure svg { display:block; max-width:100%; height:auto; margin:0 auto; }
td.changes { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size:12px; }
.ev { display:block; color:var(--muted); }
.ev.bad { color:var(--red); font-weight:600; }
tr.last td { background:var(--red-bg) !important; }
.src { border:1px solid var(--line); border-radius:6px; margin:8px 0 14px; overflow:hidden; }
.src .title { background:#f0f2f6; padding:5px 10px; font-size:13px; color:var(--grey); }
.src table { margin:0; font-size:12.5px; }
.src td { border:0; padding:0 10px; white-space:pre; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.src td.ln { width:48px; text-align:right; color:#9aa3b2; user-select:none; border-right:1px solid var(--line); }
.src tr.hl td { background:#fff4d6 !important; }
.diag { border-left:4px solid var(--amber); background:#fffaf0; padding:10px 14px; border-radius:6px; margin:10px 0; }
.diag p { margin:4px 0; }
.cond.unread { color:var(--red); font-weight:600; }
.diag ul { margin:4px 0 6px; padding-left:20px; }
.diag li { margin:6px 0; }
table.necessary td:nth-child(1) { width:22%; } table.necessary td:nth-child(3) { width:18%; }
table.necessary td:nth-child(4) { width:32%; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size:12px; }
footer { text-align:center; color:var(--muted); font-size:12px; padding:12px; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _anchor(name: str) -> str:
    return "spec-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)


def _badge(result: CheckResult) -> str:
    """The verdict as a coloured badge; a vacuous safe verdict is amber, never green.

    It keeps its word (``PROVED (vacuous)``), as the terminal headline does,
    and its title lists what the verdict did not see.
    """
    name = result.verdict.name
    if result.vacuous:
        why = "; ".join(result.vacuity_phrases())
        return f'<span class="badge VACUOUS" title="{_e(why)}">{name} (vacuous)</span>'
    return f'<span class="badge {name}">{name}</span>'


def _rel(path: str | None) -> str:
    return display_path(path) if path else "(unknown file)"


def _source_block(title: str, fn: Any, highlight: Iterable[int] = ()) -> str:
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return f'<div class="src"><div class="title">{_e(title)}</div><p class="muted">source not available</p></div>'
    marked = set(highlight)
    rows = []
    for k, text in enumerate(lines):
        n = first + k
        cls = ' class="hl"' if n in marked else ""
        rows.append(f'<tr{cls}><td class="ln">{n}</td><td>{_e(text.rstrip())}</td></tr>')
    return f'<div class="src"><div class="title">{_e(title)}</div><table>{"".join(rows)}</table></div>'


def _steps_table(trace: Trace, hidden: set[str]) -> str:
    story = story_of(trace)
    cause = story.named_cause
    rows = ['<tr><td class="num">0</td><td class="mono">(initial state)</td><td class="changes"></td></tr>']
    prev: Mapping[str, Any] = trace.initial
    last = len(trace.steps)
    for i, step in enumerate(trace.steps, start=1):
        # What the step's s.choose calls decided, before the changes that follow from it (as the terminal table).
        changes = [_e(" ".join(step.chose))] if step.chose else []
        changes += [
            f"{_e(name)}: {_e(format_value(a))} &rarr; {_e(format_value(b))}"
            for name, a, b in changed_fields(prev, step.state)
            if name.split("[")[0] not in hidden
        ]
        events = []
        for ev in step.events:
            desc = describe_event(ev)
            if desc:
                events.append(
                    f'<span class="ev{" bad" if ev.violates else ""}">{"! " if ev.violates else "&gt; "}{_e(desc)}</span>'
                )
        cls = ' class="last"' if i == last and trace.violation else ""
        tag = ' <span class="cause">root cause</span>' if i == cause else ""
        if trace.loop is not None and i > trace.loop:
            tag += ' <span class="cause">loop</span>'  # the steps that repeat for ever
        rows.append(
            f'<tr{cls}><td class="num">{i}</td><td class="mono">{_e(step.call)}{tag}</td>'
            f'<td class="changes">{"<br>".join(changes)}{"".join(events)}</td></tr>'
        )
        prev = step.state
    if trace.loop is not None:
        back = ("nothing can run here: the path stays in this state for ever" if trace.loop == last
                else f"back to state {trace.loop}, and round again for ever")
        rows.append(f'<tr><td class="num"></td><td class="mono" colspan="2">&mdash; {_e(back)}</td></tr>')
    return (
        '<table class="steps"><thead><tr><th>#</th><th>action</th><th>changes and events</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _story_html(trace: Trace) -> str:
    """The bug story, one item per step that matters, the root-cause step named and in bold."""
    story = story_of(trace)
    if len(story.beats) < 2:
        return ""  # one beat is the headline's own sentence
    items = []
    marked = False
    for beat in story.beats:
        text = _e(beat.text) if beat.step is None else f"step {beat.step}: {_e(beat.text)}"
        if not marked and beat.step is not None and beat.step == story.named_cause:
            marked = True
            text = f'<strong class="cause">root cause, {text}</strong>'
        items.append(f"<li>{text}</li>")
    return f'<ol class="story">{"".join(items)}</ol>'


def _hidden_fields(spec: Spec, trace: Trace) -> set[str]:
    # As in the terminal table: ghosts and the pools' bookkeeping are summarised by events.
    hidden = {v.name for v in spec.vars.values() if v.ghost}
    for pool in trace.schema.pools or ():
        if pool.content is not None:  # block tables' holders change without events (see text.trace_table)
            hidden.update(v for v in (pool.free, pool.holders, pool.slot) if v is not None)
    return hidden


def _diagnosis_html(d: Diagnosis) -> str:
    parts = [
        f'<div class="diag"><p><strong>{_e(explain_headline(d))}</strong></p>',
        f'<p class="muted">{_e(d.coverage())}</p>',
    ]
    if d.missing_checks:
        parts.append(
            "<p>Where a check is missing: every violating path takes these steps under these conditions, and no step "
            'on the way reads the fields marked <span class="cond unread">unread</span>; a check on them there '
            "blocks every path.</p><ul>"
        )
        for a in d.missing_checks:
            shown = [c for c in a.conditions if c.kind == "branch"] + list(a.first_unchecked)
            items = "; ".join(
                f'<span class="cond{" unread" if c.unchecked else ""}">{_e(c.text)}</span>'
                + (f' <span class="muted">({_e(c.doc)})</span>' if c.doc and len(c.fields) == 1 else "")
                for c in shown
            )
            parts.append(
                f'<li><code>{_e(a.signature)}</code> <span class="muted">{_e(_rel(a.file))}:{a.line}</span>'
                f" &mdash; {_e(a.doc)}<br>{items}</li>"
            )
        parts.append("</ul>")
    if d.necessary:
        parts.append(f"<p>{_e(fix_line(d))}</p>")
    parts.append("</div>")
    if d.necessary:
        rows = []
        for a in d.necessary:
            conds = (
                "<br>".join(
                    f'<span class="cond{" unread" if c.unchecked else ""}">{_e(c.text)}{" (unread)" if c.unchecked else ""}</span>'
                    for c in a.conditions
                )
                or '<span class="muted">any step of it</span>'
            )
            for call in a.other_calls:  # a further step of the action: its own conditions, never joined to these
                again = "; ".join(_e(c.text) for c in call) or "any step of it"
                conds += f'<br><span class="muted">and again with:</span> {again}'
            star = " &#9888;" if a.first_unchecked else ""
            rows.append(
                f'<tr><td class="mono">{_e(a.signature)}{star}</td><td>{_e(a.doc)}</td>'
                f'<td class="mono">{_e(_rel(a.file))}:{a.line}</td><td>{conds}</td></tr>'
            )
        parts.append(
            '<table class="necessary"><thead><tr><th>every path takes</th><th>models</th><th>source</th>'
            f"<th>conditions every path meets there</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(parts)


def _run_html(section: SpecSection, run: EngineRun) -> str:
    r = run.result
    spec = section.spec
    qualifier = r.qualifier() if r.safe else ""
    out = [
        f'<h3><span class="badge engine">{_e(r.engine)}</span> {_badge(r)}'
        + (f" <strong>({_e(qualifier)})</strong>" if qualifier else "") + "</h3>",
        f'<p class="coverage">{_e(r.coverage())}</p>',
    ]
    if r.notes:
        out.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in r.notes) + "</ul>")
    from ownership.render.text import actions_line, warning_line

    warnings = r.vacuity()
    if warnings:
        out.append('<ul class="notes">' + "".join(f"<li><strong>{_e(warning_line(w))}</strong></li>" for w in warnings)
                   + "</ul>")
    if r.actions:
        out.append(f'<p class="coverage">{_e(actions_line(r))}</p>')
    trace = r.trace
    if trace is not None:
        doc = (
            spec.invariants[r.violated].doc.splitlines()[0]
            if r.violated in spec.invariants and spec.invariants[r.violated].doc
            else ""
        )
        what = violation_sentence(trace)
        out.append(
            '<div class="violation">'
            f'<p class="violation-headline">{_e(headline(r))}</p>'
            + (f"<p><strong>{_e(what)}</strong></p>" if what else "")
            + (f'<p class="muted">{_e(doc)}</p>' if doc else "")
            + _story_html(trace)
            + f'<p class="muted">{len(trace)} steps, replayed through the spec</p></div>'
        )
        out.append("<h4>Trace</h4>")
        if run.svg:
            out.append(f'<div class="figure">{run.svg}</div>')
        else:
            out.append(f'<p class="muted">picture not drawn: {_e(run.svg_error or "no renderer")}</p>')
        out.append("<h4>Steps</h4>")
        out.append(_steps_table(trace, _hidden_fields(spec, trace)))
        out.append("<h4>Spec source of each action taken</h4>")
        branch_lines = {
            c.line for a in (section.diagnosis.necessary if section.diagnosis else ()) for c in a.conditions if c.line
        }
        for name in dict.fromkeys(s.action for s in trace.steps):
            act = spec.actions.get(name)
            if act is None:
                continue
            title = f"{name} - {_rel(act.file)}:{act.line}" + (f" - {act.doc.splitlines()[0]}" if act.doc else "")
            out.append(_source_block(title, act.fn, branch_lines))
    out.append("<h4>Reproduce</h4>")
    out.append(f'<pre class="cmd">{_e(run.reproduce)}</pre>')
    return "".join(out)


def _section_html(section: SpecSection) -> str:
    spec = section.spec
    badges = " ".join(
        f'{_badge(r.result)}<span class="muted" style="font-size:12px">{_e(r.result.engine)}</span>'
        for r in section.runs
    )
    out = [f'<section class="spec" id="{_anchor(spec.name)}">', f"<h2>{_e(spec.name)} {badges}</h2>"]
    if spec.summary:
        out.append(f'<p class="summary">{_e(spec.summary)}</p>')
    rows = [f'<tr><th>spec file</th><td class="mono">{_e(section.spec_path)}</td></tr>']
    if spec.models is not None:
        m = spec.models
        rows.append(f"<tr><th>models</th><td>{_e((m.engine + ' ' + m.version).strip())}</td></tr>")
        if m.where:
            rows.append(
                "<tr><th>code modelled</th><td>" + "<br>".join(f"<code>{_e(w)}</code>" for w in m.where) + "</td></tr>"
            )
        if m.links:
            rows.append(f"<tr><th>references</th><td>{_e(', '.join(m.links))}</td></tr>")
    if spec.expect is not None:
        rows.append(f"<tr><th>expected verdict</th><td>{_e(spec.expect.describe())}</td></tr>")
    rows.append(
        f"<tr><th>invariants</th><td>{_e(', '.join(n for n, i in spec.invariants.items() if not i.helper))}</td></tr>"
    )
    out.append(f'<table class="kv">{"".join(rows)}</table>')
    out.append("<h4>Parameters</h4>")
    prow = []
    for name, p in spec.params.items():
        value = section.params.get(name, p.default)
        changed = "" if value == p.default else f' <span class="muted">(default {p.default})</span>'
        prow.append(
            f'<tr><td class="mono">{_e(name)}</td><td class="mono">{_e(value)}{changed}</td><td>{_e(p.doc)}</td></tr>'
        )
    out.append(
        '<table class="params"><thead><tr><th>parameter</th><th>value</th><th>meaning</th></tr></thead>'
        f"<tbody>{''.join(prow) or '<tr><td colspan=3>(none)</td></tr>'}</tbody></table>"
    )
    if section.diagnosis is not None or section.diagnosis_note:
        out.append("<h4>Diagnosis: what every path to the violation has in common</h4>")
        out.append(
            _diagnosis_html(section.diagnosis)
            if section.diagnosis is not None
            else f'<p class="muted">{_e(section.diagnosis_note)}</p>'
        )
    for note in section.extra_notes:
        out.append(f'<p class="muted">{_e(note)}</p>')
    for run in section.runs:
        out.append(_run_html(section, run))
    out.append("</section>")
    return "".join(out)


def render_report(sections: Sequence[SpecSection], *, title: str = "ownership design review", command: str = "") -> str:
    """The whole report as one HTML document (UTF-8 text, nothing external)."""
    toc = "".join(
        f'<li><a href="#{_anchor(s.spec.name)}">{_e(s.spec.name)}</a> '
        + " ".join(_badge(r.result) for r in s.runs)
        + (f' <span class="muted">{_e(s.spec.summary)}</span>' if s.spec.summary else "")
        + "</li>"
        for s in sections
    )
    worst = min((r.result.verdict for s in sections for r in s.runs), default=None)
    subtitle = f"{len(sections)} spec{'s' if len(sections) != 1 else ''}"
    if worst is not None:
        subtitle += f"; worst verdict {worst.name}"
    vacuous = sum(r.result.vacuous for s in sections for r in s.runs)
    if vacuous:
        subtitle += f"; {vacuous} vacuous (an action never fired: not a pass)"
    if command:
        subtitle += f'; generated by <code style="background:#2b3444;color:#e8ecf3">{_e(command)}</code>'
    body = "".join(_section_html(s) for s in sections)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f'<header class="top"><h1>{_e(title)}</h1><p>{subtitle}</p></header>'
        f'<main><nav class="toc"><strong>Specs</strong><ul>{toc}</ul></nav>{body}</main>'
        "<footer>Verdicts state what was covered; every counterexample was replayed through the spec's concrete semantics.</footer>"
        "</body></html>\n"
    )
