"""The JSON results file (``--json``): per spec the verdict, stop reason, coverage, statistics and files.

A safe verdict qualified by a warning is marked ``vacuous`` with its ``warnings``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ownership.render.ci.records import Mode, SpecRun
from ownership.render.ci.sarif import WARNING_RULES
from ownership.render.ci.shared import _kind, _tool_version, _violating_event

RESULTS_FORMAT = "ownership-results"
RESULTS_VERSION = 1


def results_json(runs: Sequence[SpecRun], *, command: Mode = "check") -> dict[str, Any]:
    """Machine-readable results: per spec the verdict, stop reason, coverage, statistics and files."""
    specs = [_run_json(run) for run in runs]
    summary = {k: 0 for k in ("passed", "failed", "inconclusive", "skipped", "error")}
    for s in specs:
        summary[s["status"]] += 1
    return {
        "format": RESULTS_FORMAT,
        "version": RESULTS_VERSION,
        "tool": {"name": "ownership", "version": _tool_version()},
        "command": command,
        "ok": summary["failed"] == summary["inconclusive"] == summary["error"] == 0,
        "summary": summary,
        "specs": specs,
    }


def _run_json(run: SpecRun) -> dict[str, Any]:
    out: dict[str, Any] = {"spec": run.spec, "path": run.path, "status": run.status}
    if run.mode == "test":
        out["expect"] = run.expect.describe() if run.expect is not None else None
    if run.error is not None:
        out["error"] = run.error
        return out
    if run.result is None:
        out["skipped"] = run.skipped
        return out
    r = run.result
    out.update(
        engine=r.engine,
        verdict=r.verdict.name,
        stop_reason=r.stop_reason.name,
        stop_reason_text=r.stop_reason.value,
        coverage_kind=_kind(r),
        coverage=r.coverage(),
        notes=list(r.notes),
        params=dict(r.params),
        violated=r.violated,
        stats=r.stats.to_json(),
        invariants=[{"name": o.invariant, "status": o.status.value, "message": o.message} for o in run.outcomes],
        properties=list(r.properties),
    )
    if r.extremum is not None:
        out["extremum"] = {"param": r.extremum[0], "value": r.extremum[1]}
    out["actions"] = [a.to_json() for a in r.actions]
    out["vacuous"] = r.vacuous
    out["qualifier"] = r.qualifier() if r.safe else ""
    out["warnings"] = [
        {"code": w.code.label, "rule": WARNING_RULES.get(w.code, ("spec-warning", ""))[0], "subject": w.subject,
         "message": " ".join(w.message.split()), "file": w.file, "line": w.line}
        for w in r.vacuity()
    ]
    if r.trace is not None:
        loc = run.violation_location
        out["trace"] = {
            "steps": len(r.trace),
            "last_action": r.trace.steps[-1].call if r.trace.steps else None,
            "location": {"file": loc.file, "line": loc.line} if loc is not None else None,
            "event": _violating_event(r),
            "files": list(run.files),
            **({"loop": r.trace.loop, "since": r.trace.since, "subject": r.trace.subject}
               if r.trace.loop is not None else {}),
        }
    else:
        out["trace"] = None
    return out
