"""A validation result in words (the command's stdout) and as JSON (``--json``)."""

from __future__ import annotations

import json
from typing import Any

from ownership.validate.search import ValidationResult

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


def text_report(r: ValidationResult) -> list[str]:
    """What ``ownership validate`` prints."""
    params = ", ".join(f"{k}={v}" for k, v in r.params.items())
    gap = ", ".join(r.internal) or "none"
    if r.rejection is None:
        lines = [f"VALIDATED  {r.spec}  {r.log}: all {r.events} events explained",
                 f"  {r.kept_max} configurations kept at most, {r.kept_final} at the end, {r.seconds:.2f}s"]
    else:
        j = r.rejection
        head = "REJECTED" if r.verdict == "REJECTED" else "UNKNOWN"
        at = f" ({j.step} of the event)" if j.step else ""
        lines = [f"{head}  {r.spec}  {r.log}:{j.line}: no behaviour of the spec explains seq {j.seq}{at}",
                 f"  event: {json.dumps(j.event)}"]
        if r.verdict != "REJECTED":
            lines.append(f"  (inconclusive: configurations were dropped at line {r.truncated_at} to stay within "
                         "--max-configs; one of them might have explained it)")
        lines.append(f"  {j.configs} configuration(s) before it (including up to the allowed internal steps); "
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
