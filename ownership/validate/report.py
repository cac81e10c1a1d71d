"""A validation result in words (the command's stdout) and as JSON (``--json``)."""

from __future__ import annotations

import json
from typing import Any

from ownership.validate.search import Rejection, ValidationResult

JSON_FORMAT = "ownership-validate"
JSON_VERSION = 1


def _cells(value: Any, prefix: str) -> list[str]:
    """``ref_cnt[B1]=1``: a variable of a named state, flattened to cells."""
    if isinstance(value, dict):
        out: list[str] = []
        for k, v in value.items():
            out.extend(_cells(v, f"{prefix}[{k}]" if "[" not in prefix else f"{prefix[:-1]}, {k}]"))
        return out
    shown = "-" if value is None else ("{" + ", ".join(map(str, value)) + "}" if isinstance(value, list) else str(value))
    return [f"{prefix}={shown}"]


def state_lines(described: dict[str, Any], initial: dict[str, Any] | None = None, indent: str = "      ") -> list[str]:
    """A configuration as lines: one per variable, then the id bindings.

    With ``initial`` (the spec's initial state), a variable shows only the
    cells that differ from it: a pool of 47 pages and 16 requests has 752
    reference counts, of which a few are not 0.
    """
    lines = []
    for name, value in described["state"].items():
        cells = _cells(value, name)
        if initial is not None and name in initial:
            start = set(_cells(initial[name], name))
            changed = [c for c in cells if c not in start]
            if not changed:
                cells = [f"{name}: as initially"]
            elif len(changed) < len(cells):
                cells = [*changed, "(the rest as initially)"]
        lines.append(indent + "  ".join(cells))
    for what in ("requests", "content"):
        if what in described:
            bound = described[what]
            shown = ", ".join(f"{k} -> {e}" for k, e in bound.items()) or "none bound"
            lines.append(f"{indent}{what}: {shown}")
    return lines


def event_sentence(event: dict[str, Any]) -> str:
    """The rejected event in the engine's words: its kind, pages, request, node and source line."""
    kind = event.get("event", "?")
    pages = event.get("pages") or []
    text = f"{kind} of page{'' if len(pages) == 1 else 's'} {', '.join(map(str, pages)) or '(none)'}"
    if event.get("src_pages"):
        text += f" from {event.get('src_node', '?')} pages {', '.join(map(str, event['src_pages']))}"
    if event.get("req") is not None:
        text += f" by request {event['req']}"
    if event.get("node") is not None:
        text += f" on node {event['node']}"
    if event.get("at"):
        text += f", logged at {event['at']}"
    return text


def spec_names(j: Rejection) -> str:
    """The log's ids of the rejected step as the spec names them: ``page 10 is B10, content ecf9... is h8``.

    The reasons name spec elements; this line ties them to the engine's ids.
    The bindings are those of the first configuration shown (an id not bound
    yet is new at this event: a candidate binds it).
    """
    event = j.event
    pages = event.get("pages") or []
    content = event.get("content") or []
    first = j.states[0] if j.states else {}
    parts = []
    page = j.step.removeprefix("page ")
    if j.page_element:
        parts.append(f"page {page} is {j.page_element}")
    req = event.get("req")
    if req is not None and "requests" in first:
        parts.append(f"request {req} is {first['requests'].get(req, 'new here')}")
    if page.isdigit() and int(page) in pages and len(content) == len(pages) and "content" in first:
        key = content[pages.index(int(page))]
        parts.append(f"content {key} is {first['content'].get(key, 'new here')}")
    return ", ".join(parts)


def _why_lines(j: Rejection) -> list[str]:
    """Why every candidate action failed, each distinct reason once (the states it held in, when several are shown)."""
    held: dict[tuple[str, str], list[int]] = {}
    for c in j.candidates:
        held.setdefault((c.action, c.reason), []).append(c.state + 1)
    several = len(j.states) > 1
    items = []
    for (action, reason), states in held.items():
        where = f" (state{'' if len(states) == 1 else 's'} {', '.join(map(str, states))})" if several else ""
        items.append(reason if action == "-" else f"{action}: {reason}{where}")
    if not items:
        return ["  why: no action of the spec is a candidate for this event"]
    if len(items) == 1:
        return [f"  why: {items[0]}"]
    return ["  why (every candidate failed):", *(f"    {item}" for item in items)]


def text_report(r: ValidationResult, *, verbose: bool = False) -> list[str]:
    """What ``ownership validate`` prints: the verdict, then for a rejection why, then the event.

    The reason leads; the spec states before the rejected line (often
    thousands of characters of cells) are shown only with ``verbose``.
    """
    params = ", ".join(f"{k}={v}" for k, v in r.params.items())
    gap = ", ".join(r.internal) or "none"
    if r.rejection is None:
        lines = [f"VALIDATED  {r.spec}  {r.log}: all {r.events} events explained",
                 f"  {r.kept_max} configurations kept at most, {r.kept_final} at the end, {r.seconds:.2f}s"]
    else:
        j = r.rejection
        head = "REJECTED" if r.verdict == "REJECTED" else "UNKNOWN"
        at = f" ({j.step} of the event)" if j.step else ""
        lines = [f"{head}  {r.spec}  {r.log}:{j.line}: no behaviour of the spec explains seq {j.seq}{at}"]
        lines.extend(_why_lines(j))
        lines.append(f"  event: {event_sentence(j.event)}")
        names = spec_names(j)
        if names:
            lines.append(f"  in the spec: {names}")
        if r.verdict != "REJECTED":
            lines.append(f"  (inconclusive: configurations were dropped at line {r.truncated_at} to stay within "
                         "--max-configs; one of them might have explained it)")
        configs = f"{j.configs} configuration{'' if j.configs == 1 else 's'}"
        if not verbose:
            lines.append(f"  {configs} of the spec before it (with the allowed internal steps); "
                         f"-v shows {'its state' if len(j.states) == 1 else f'the first {len(j.states)}'} and the raw event")
        else:
            lines.append(f"  raw event: {json.dumps(j.event)}")
            lines.append(f"  {configs} before it (including up to the allowed internal steps); "
                         f"showing {len(j.states)}:")
            for i, st in enumerate(j.states, start=1):
                lines.append(f"    state {i}:")
                lines.extend(state_lines(st, j.initial))
            lines.append("  candidates:")
            for c in j.candidates:
                lines.append(f"    [state {c.state + 1}] {c.action}: {c.reason}")
            if not j.candidates:
                lines.append("    (none)")
    lines.append(f"  params: {params}; internal (unlogged) actions: {gap}")
    lines.extend(f"  ({n})" for n in r.notes)
    return lines


def json_report(r: ValidationResult, max_gap: int) -> dict[str, Any]:
    """The ``--json`` document (``format``: ``ownership-validate``, ``version`` 1)."""
    out: dict[str, Any] = {
        "format": JSON_FORMAT, "version": JSON_VERSION, "verdict": r.verdict, "spec": r.spec, "log": r.log,
        "events": r.events, "params": r.params, "max_gap": max_gap, "internal_actions": list(r.internal),
        "configurations": {"max": r.kept_max, "final": r.kept_final, "truncated_at": r.truncated_at},
        "seconds": round(r.seconds, 4), "notes": list(r.notes), "rejection": None,
    }
    if r.rejection is not None:
        j = r.rejection
        out["rejection"] = {
            "line": j.line, "seq": j.seq, "event": j.event, "step": j.step or None, "configurations": j.configs,
            "states": list(j.states),
            "candidates": [{"state": c.state, "action": c.action, "reason": c.reason} for c in j.candidates],
        }
    return out
