"""Terminal output: verdict headline, coverage, and the trace as a table of steps."""

from __future__ import annotations

import dataclasses
import re
import shlex
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ownership.core.events import (
    Alloc,
    CacheRelease,
    CopyFailed,
    DeadlineExpired,
    Decref,
    Demote,
    Deregistered,
    Event,
    Evict,
    Free,
    FreeDeferred,
    HandleSettled,
    HandOff,
    JobDone,
    PrefixHit,
    PrefixRead,
    Publish,
    Read,
    Reply,
    SpecEvent,
    Transfer,
    Write,
    WriteInFlight,
    WritePosted,
)
from ownership.core.result import ActionCoverage, CheckResult, CoverageKind, Measure, Verdict
from ownership.core.story import story_of
from ownership.core.trace import Trace, TraceKind, changed_fields
from ownership.core.verdicts import headline
from ownership.errors import SpecWarning

if TYPE_CHECKING:
    from ownership.analysis.explain.diagnosis import Condition, Diagnosis, NecessaryAction

WIDTH = 100


def format_value(value: Any) -> str:
    """A state value as the tables print it (``none``, ``yes``/``no``, ``{A,B}``)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return "{" + ",".join(str(v) for v in value) + "}"
    return str(value)


def vacuous_status_lines(result: CheckResult, allow_vacuous: bool) -> list[str]:
    """The lines under a vacuous safe verdict: its exit status, and the ways to change it."""
    if allow_vacuous:
        text = "vacuous, accepted by --allow-vacuous: exit 0"
    else:
        dead = [a.name for a in result.dead_actions()]
        fix = f"make {', '.join(dead)} fire or declare {'it' if len(dead) == 1 else 'them'} may_be_dead (above)" \
            if dead else "fix the warnings above"
        text = f"vacuous is not a pass: exit 3 (inconclusive); {fix}, or pass --allow-vacuous to exit 0"
    return textwrap.wrap(text, width=WIDTH, initial_indent="  ", subsequent_indent="    ")


def warning_line(w: SpecWarning) -> str:
    """``warning[OWN070]: specs/x.py:12: message``, the path relative to the working directory."""
    where = ""
    if w.file is not None:
        shown = display_path(w.file)
        where = f"{shown}:{w.line}: " if w.line is not None else f"{shown}: "
    return f"warning[{w.code.label}]: {where}{' '.join(w.message.split())}"


def _count(a: ActionCoverage) -> str:
    enabled = "-" if a.enabled_states is None else f"{a.enabled_states:,}"
    if a.enabled_states is not None and a.measured is Measure.SAMPLED and a.enabled_states:
        enabled = ">=" + enabled  # Hypothesis asks preconditions lazily: a lower bound
    text = f"{a.name} {enabled}/{a.transitions:,}"
    if not a.fired:
        if a.may_be_dead is not None:
            text += " (may be dead)"
        else:
            text += " (never fired)" if a.complete or a.measured is Measure.SAMPLED else " (not seen to fire)"
    return text


def actions_line(result: CheckResult) -> str:
    """``actions fired (exact; states enabled/transitions): prefill 12/30, decode 3/3, ...``."""
    if not result.actions:
        return ""
    first = result.actions[0]
    if first.measured is Measure.SAMPLED:
        how = "sampled"
    elif first.measured is Measure.EXACT and first.complete:
        # A solver engine counts no states itself: its exact counts come from a separate search.
        solver = result.coverage_kind in (CoverageKind.BOUNDED, CoverageKind.PROOF)
        how = "exact, by a separate search of every reachable state" if solver and not result.stats.states else "exact"
    elif first.measured is Measure.EXACT:
        how = f"exact over the {first.states:,} state{'' if first.states == 1 else 's'} expanded"
    else:
        how = f"bounded search of {first.states:,} states to depth {first.depth}"
    return f"actions fired ({how}; states enabled/transitions): " + ", ".join(_count(a) for a in result.actions)


_SHOWN = (Reply, Alloc, Free, Transfer, HandOff, CacheRelease, JobDone, HandleSettled, Deregistered, DeadlineExpired)
"""Events shown even when they break nothing: pages changing hands, replies, outcomes and expiries."""


def describe_event(ev: Event) -> str | None:
    """One line for the events a reader cares about: every event that breaks an invariant, replies, pages moving.

    A violating event always gets a line, ending ``<-- invariant``, whatever
    its kind (a spec's own events too); of the others, those in
    :data:`_SHOWN` (pages changing hands, replies, an operation's outcome,
    a deregistration, an expired deadline).
    """
    text = _what(ev)
    if ev.violates:
        # The step's verdict: never left out, and always naming what it breaks.
        if not text:
            shown = ", ".join(f"{k} {_shown(v)}" for k, v in ev.payload())
            text = f"{ev.kind}: {shown}" if shown else ev.kind
        return f"{text}  <-- {ev.violates}"
    if isinstance(ev, _SHOWN):
        return text
    return None


def _what(ev: Event) -> str | None:
    """The event in words, for the kinds the vocabulary declares (``None`` for a spec's own)."""
    if isinstance(ev, Read):
        held = f"{ev.content}'s KV" if ev.content else "nothing ever written"
        return f"{ev.req} reads {ev.page}, which holds {held}"
    if isinstance(ev, Write):
        return f"{ev.req} writes {ev.page} without owning it" if ev.violates else f"{ev.req} writes {ev.page}"
    if isinstance(ev, Reply):
        return f"client of {ev.req} gets HTTP {ev.status}"
    if isinstance(ev, Alloc):
        return f"{ev.req} takes {ev.pool} pages {', '.join(ev.pages)} (page-table order)"
    if isinstance(ev, Free):
        count = f" (refcount {ev.refcount})" if ev.refcount else ""
        users = f", still used by {', '.join(ev.still_used_by)}" if ev.still_used_by else ""
        error = f": {ev.error}" if ev.error else ""
        return f"{ev.req} returns {ev.pool} pages {', '.join(ev.pages)} to the free list{count}{users}{error}"
    if isinstance(ev, Transfer):
        return f"KV of {ev.req} copied {ev.src}->{ev.dst}: {', '.join(ev.pages) or 'no pages'}"
    if isinstance(ev, Decref):
        return f"{ev.req} drops a reference to {ev.page} (refcount {ev.refcount})"
    if isinstance(ev, PrefixHit):
        return f"{ev.req}'s prefix hit on {ev.node} maps {ev.page}, which holds {_prefix_kv(ev.kv)}"
    if isinstance(ev, PrefixRead):
        return f"{ev.req} reads the shared prefix {ev.node} in {ev.page}, which holds {_prefix_kv(ev.kv)}"
    if isinstance(ev, Publish):
        return f"{ev.req} publishes {ev.page} as the cached {ev.node}"
    if isinstance(ev, Evict):
        users = f" while {', '.join(ev.in_use_by)} still map{'s' if len(ev.in_use_by) == 1 else ''} it" \
            if ev.in_use_by else ""
        return f"{ev.req} evicts {ev.node}, freeing {ev.page}{users}"
    if isinstance(ev, WritePosted):
        return f"{ev.channel} write of {ev.req}'s KV posted into {ev.pool} pages {', '.join(ev.pages)}"
    if isinstance(ev, WriteInFlight):
        return f"{ev.page} is freed while {ev.req}'s write into it is still in flight"
    if isinstance(ev, FreeDeferred):
        return f"{ev.req} finishes; its {ev.pool} pages {', '.join(ev.pages)} are held until the transfer is fenced"
    if isinstance(ev, CopyFailed):
        return f"copy of {ev.req} from {ev.src} to {ev.dst} fails: {ev.reason}"
    if isinstance(ev, Demote):
        return f"{ev.req} is demoted from {ev.src} to {ev.dst}: {ev.note}"
    if isinstance(ev, HandleSettled):
        return f"{ev.req}'s operation {ev.handle} ends {ev.outcome}"
    if isinstance(ev, DeadlineExpired):
        return f"deadline {ev.deadline} of {ev.req} passes" if ev.req else f"deadline {ev.deadline} passes"
    if isinstance(ev, CacheRelease):
        users = f" while {', '.join(ev.in_use_by)} still map{'s' if len(ev.in_use_by) == 1 else ''} them" \
            if ev.in_use_by else ""
        return f"cache node {ev.node} returns {', '.join(ev.pages)} to the free list{users}"
    return _from_docstring(ev)


def _from_docstring(ev: Event) -> str | None:
    """A declared event said by the first line of its class docstring, each ````field```` replaced by its value.

    The vocabulary documents every event kind that way (``"``req``'s operation
    ``handle`` is posted"``), so a kind added to it reads well in the table
    without a case here.  ``None`` for a spec's own events (their payload is shown).
    """
    if isinstance(ev, SpecEvent):
        return None
    doc = (type(ev).__doc__ or "").strip().splitlines()
    if not doc:
        return None
    values = {f.name: getattr(ev, f.name) for f in dataclasses.fields(ev)}

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            return name  # a code name or a constant in the sentence, not a field
        v = values[name]
        return ", ".join(map(str, v)) if isinstance(v, tuple) else ("none" if v is None else str(v))

    def fields_in(text: str) -> bool:
        return any(name in values for name in re.findall(r"``([^`]+)``", text))

    # Asides that name no field explain the kind, not this event: a parenthesis goes, or keeps
    # only its field; of the clauses, the first stays and the others only if they name a field.
    def aside(m: re.Match[str]) -> str:
        inner = m.group(1)
        return f" ({inner.split(':')[0].strip()})" if fields_in(inner.split(":")[0]) else ""

    sentence = re.sub(r" ?\(([^()]*)\)", aside, doc[0].rstrip("."))
    first, *rest = re.split(r"(?<=[:;]) ", sentence)
    kept = first + "".join(" " + c for c in rest if fields_in(c))
    return re.sub(r"``([^`]+)``", value, kept.rstrip(":;"))


def _prefix_kv(kv: str | None) -> str:
    return "no prefix's KV" if kv in (None, "-", "") else f"the KV of {kv}"


def violation_sentence(trace: Trace) -> str:
    """The event that breaks the invariant, in words (``B reads D0, which holds A's KV``), or ``""``."""
    final = story_of(trace).final
    desc = describe_event(final.event) if final is not None else None
    return desc.split("  <--")[0] if desc else ""


def _shown(value: Any) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


def _blank(value: Any) -> Any:
    """A value no real cell holds, so every cell shows up as changed from it."""
    if isinstance(value, Mapping):
        return {k: _blank(v) for k, v in value.items()}
    return object()


def wrap_items(items: Sequence[str], width: int) -> list[str]:
    """``items`` joined with ``", "`` into lines of at most ``width`` characters, broken between items only.

    An item longer than ``width`` gets a line of its own (a label is read whole).
    """
    lines: list[str] = []
    for k, item in enumerate(items):
        text = item + ("," if k < len(items) - 1 else "")
        if lines and len(lines[-1]) + 1 + len(text) <= width:
            lines[-1] += " " + text
        else:
            lines.append(text)
    return lines


def trace_table(trace: Trace, *, ghosts: Iterable[str] = ()) -> list[str]:
    """The trace as numbered steps with what each step chose and the fields it changed.

    Page-pool bookkeeping (free counts, holders, slots) is summarised by the
    step's alloc/free events instead of cell by cell; content changes stay.
    The root-cause step of the trace's story (:func:`story_of`, which the
    picture and the HTML report read too) is marked under its action, and
    the table ends with the story's line for it.
    """
    lines = [f"  {'#':>3}  {'action':<32} changes"]
    if trace.kind is TraceKind.CTI:
        # The start of a counterexample to induction is arbitrary: show all of it.
        cells = [f"{name}={format_value(v)}" for name, _old, v in changed_fields({k: _blank(v) for k, v in trace.initial.items()}, trace.initial)]
        wrapped = textwrap.wrap(", ".join(cells), width=WIDTH - 40) or [""]
        lines.append(f"  {0:>3}  {'(start: satisfies every invariant)':<32} {wrapped[0]}")
        lines.extend(f"  {'':>3}  {'':<32} {w}" for w in wrapped[1:])
    else:
        lines.append(f"  {0:>3}  {'(initial state)':<32}")
    if trace.kind is TraceKind.LASSO and trace.loop == 0 and trace.steps:
        lines.append(_loop_marker(trace))
    hidden = set(ghosts)
    for pool in trace.schema.pools or ():
        # A page pool's holders and free counts change only by alloc/free events, which the table lists; a
        # block table's (no content variable) change when a table is copied or its window moves: kept.
        if pool.content is not None:
            hidden.update(v for v in (pool.free, pool.holders, pool.slot) if v is not None)
    story = story_of(trace)
    cause = story.named_cause
    prev: Mapping[str, Any] = trace.initial
    for i, step in enumerate(trace.steps, start=1):
        changes = [
            f"{name}: {format_value(a)}->{format_value(b)}"
            for name, a, b in changed_fields(prev, step.state)
            if name.split("[")[0] not in hidden
        ]
        # What the step's s.choose calls decided comes first: the changes follow from it.
        body = wrap_items(step.chose, WIDTH - 40)
        body += textwrap.wrap(", ".join(changes), width=WIDTH - 40) if changes else []
        body = body or [""]  # events start on the line under the call, as the table always drew them
        body += [f"! {d}" if ev.violates else f"> {d}" for ev in step.events if (d := describe_event(ev))]
        # The root-cause row says so under its action, as the picture's step column and the report's do.
        column = [step.call, "(root cause)"] if i == cause else [step.call]
        for k in range(max(len(body), len(column))):
            left = column[k] if k < len(column) else ""
            right = body[k] if k < len(body) else ""
            lines.append(f"  {i if k == 0 else '':>3}  {left:<32} {right}")
        prev = step.state
        if trace.kind is TraceKind.LASSO and i == trace.loop and i < len(trace.steps):
            lines.append(_loop_marker(trace))
    if trace.kind is TraceKind.LASSO:
        lines.append(_loop_end(trace))
    beat = story.cause_beat if cause is not None else None
    if beat is not None:
        lines.extend(textwrap.wrap(f"root cause, step {beat.step}: {beat.text}", width=WIDTH,
                                   initial_indent="  ", subsequent_indent="    "))
    return lines


def _loop_marker(trace: Trace) -> str:
    first, last = (trace.loop or 0) + 1, len(trace.steps)
    span = f"step {first}" if first == last else f"steps {first}-{last}"
    return f"  {'':>3}  {'-- loop: ' + span + ' repeat for ever':<32}"


def _loop_end(trace: Trace) -> str:
    """The line under a lasso's last step: where it goes back to, or that it stays."""
    since = f"; {trace.violation} is broken from state {trace.since} on" if trace.since is not None else ""
    if trace.loop == len(trace.steps):
        return f"  {'':>3}  -- no action can run here: the path stays in this state for ever{since}"
    return f"  {'':>3}  -- back to state {trace.loop}, and round again for ever{since}"


def reproduce_command(
    spec_path: str,
    params: Mapping[str, int],
    defaults: Mapping[str, int],
    extra: Sequence[str] = (),
) -> str:
    """The one-line command that reruns a check with the same settings."""
    parts = ["ownership", "check", spec_path]
    for k, v in params.items():
        if defaults.get(k) != v:
            parts += ["--param", f"{k}={v}"]
    parts += list(extra)
    return " ".join(shlex.quote(p) for p in parts)


def result_report(
    result: CheckResult, *, invariant_doc: str = "", ghosts: Iterable[str] = (), derived: Iterable[Any] = ()
) -> list[str]:
    """Everything ``ownership check`` prints for one spec, verdict first.

    ``derived`` are the spec's parameter formulas, shown with their values
    next to an extreme parameter value (they usually explain the boundary).
    """
    lines = [headline(result)]
    if invariant_doc and result.verdict is Verdict.VIOLATED:
        lines.append("  " + invariant_doc.splitlines()[0])
    lines.extend(textwrap.wrap(result.coverage(), width=WIDTH, initial_indent="  ", subsequent_indent="  "))
    memory = result.stats.memory_line()
    if memory is not None:  # what storing the states cost: the figure to size a larger run by
        lines.append(f"  ({memory})")
    for note in result.notes:
        lines.append(f"  ({note})")
    for w in result.vacuity():
        lines.extend(textwrap.wrap(warning_line(w), width=WIDTH, initial_indent="  ", subsequent_indent="    "))
    if result.extremum is not None:
        name, value = result.extremum
        lines.append(f"  {name} = {value:,}")
        params = dict(result.trace.params) if result.trace is not None else {}
        for d in derived:
            try:
                lines.append(f"    where {d.name} = {d.formula} = {d.evaluate(params):,}")
            except Exception:  # noqa: BLE001 - a formula over parameters the trace lacks
                continue
    if result.trace is not None:
        kind = {
            TraceKind.COUNTEREXAMPLE: "counterexample",
            TraceKind.DEADLOCK: "deadlock",
            TraceKind.CTI: "counterexample to induction (its first state satisfies every invariant but may be unreachable)",
            TraceKind.LASSO: "lasso (a path that goes round for ever)",
        }[result.trace.kind]
        shortest = f" (shortest: {result.shortest})" if result.shortest else ""
        lines.append("")
        n = len(result.trace)
        lines.append(f"  {kind[0].upper() + kind[1:]}: {n} step{'' if n == 1 else 's'}{shortest}, replayed through the spec")
        lines.extend(trace_table(result.trace, ghosts=ghosts))
    fired = actions_line(result)
    if fired:
        if result.trace is not None:
            lines.append("")
        lines.extend(textwrap.wrap(fired, width=WIDTH, initial_indent="  ", subsequent_indent="    "))
    if result.reproduction:
        lines.append("")
        lines.append("  Hypothesis' reproduction (paste into Python; raises at the failing step):")
        lines.extend("    " + ln for ln in result.reproduction.splitlines())
    return lines


def _condition_text(c: Condition) -> str:
    return c.text + (" [unread]" if c.unchecked else "")


def display_path(path: str) -> str:
    """``path`` relative to the working directory when it lies inside it, else as given."""
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


def _where(a: NecessaryAction) -> str:
    if not a.file:
        return "(source unknown)"
    return f"{display_path(a.file)}:{a.line}"


def _focus_conditions(a: NecessaryAction) -> list[Condition]:
    """What to say about a necessary action in one line: its unread conditions, then how its code branched."""
    first = list(a.first_unchecked)
    if not first:
        return list(a.conditions)
    return first + [c for c in a.conditions if c.kind == "branch"]


def explain_headline(d: Diagnosis) -> str:
    """One sentence: what every path to the violation passes through (``--explain``'s first line)."""
    if d.initial_violates:
        return f"the initial state already violates {d.invariant}: no action is needed to reach it"
    if not d.violating_states:
        return f"no state violating {d.invariant} within the explored graph: nothing to explain"
    if not d.necessary:
        if not d.cuts:
            return f"no action, and no pair of actions, is on every path to {d.invariant}"
        pairs = "; ".join(f"{a} or {b}" for a, b in d.cuts)
        return f"no single action is on every path to {d.invariant}; every path passes through one of each pair: {pairs}"
    parts = []
    for a in d.missing_checks or d.necessary:
        doc = f" [{a.doc.rstrip('.')}]" if a.doc else ""
        conds = _focus_conditions(a)
        parts.append(f"{a.signature}{doc}" + (f" with {', '.join(c.text for c in conds)}" if conds else "")
                     + "".join(f"; {_again(call)}" for call in a.other_calls))
    return f"every path to {d.invariant} passes through: " + "; ".join(parts)


def _again(call: tuple[Condition, ...]) -> str:
    """A further step of the same action every path takes, with its own conditions (never joined to the first's)."""
    return "and again with " + ", ".join(c.text for c in call) if call else "and again"


def fix_line(d: Diagnosis) -> str:
    """``likeliest fix first: <action> (<why>)``: the first of :attr:`Diagnosis.fix_points`, and why it ranks first."""
    from ownership.analysis.explain.wording import fix_reason

    first = d.fix_points[0]
    return f"likeliest fix first: {first.signature} ({fix_reason(first, d.necessary)})"


def explain_report(d: Diagnosis) -> list[str]:
    """The ``--explain`` section printed under a counterexample: necessary actions, conditions, source lines."""
    lines = ["", f"  Explanation: what every path to {d.invariant} has in common"]
    lines.extend(textwrap.wrap(f"({d.coverage()})", width=WIDTH, initial_indent="    ", subsequent_indent="     "))
    lines.extend(textwrap.wrap(explain_headline(d), width=WIDTH, initial_indent="    ", subsequent_indent="      "))
    if not d.necessary:
        return lines
    if d.missing_checks:
        lines.append("    no step on the way to the violation reads these fields; a check on them there blocks every path:")
        for a in d.missing_checks:
            lines.append(f"      {_where(a)}  {a.source}")
            for c in _focus_conditions(a):
                doc = f"  ({c.doc})" if c.doc and len(c.fields) == 1 else ""
                lines.append(f"        {c.text}{doc}")
    lines.extend(textwrap.wrap(fix_line(d), width=WIDTH, initial_indent="    ", subsequent_indent="      "))
    lines.append(
        f"    all {len(d.necessary)} actions every path takes, in path order, with the conditions every path meets "
        "there ([unread]: no step on the way reads it):"
    )
    for a in d.necessary:
        conds = "; ".join(_condition_text(c) for c in a.conditions) or "(any step of it)"
        lines.extend(textwrap.wrap(
            f"{a.signature:<30} {_where(a)}: {conds}", width=WIDTH, initial_indent="      ", subsequent_indent=" " * 37,
        ))
        # Each further step of the action on its own line: its conditions never hold with the first step's.
        for call in a.other_calls:
            again = "; ".join(_condition_text(c) for c in call) or "(any step of it)"
            lines.extend(textwrap.wrap(
                f"and again with: {again}", width=WIDTH, initial_indent=" " * 37, subsequent_indent=" " * 39,
            ))
    return lines
