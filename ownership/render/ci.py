"""Reports for CI: JUnit XML, SARIF 2.1.0 and a JSON summary of checks.

The data is a list of :class:`SpecRun` records, one per spec checked: the
engine's :class:`~ownership.core.result.CheckResult` plus what the reports
need from the spec (where its actions and invariants are defined) and the
counterexample files written.  The writers only read them.

* **JUnit** (``--junit``): one test suite per spec, one test case per
  invariant; a violation is a ``<failure>`` whose text is the trace table.
* **SARIF** (``--sarif``): each violation is a result located at the spec
  line of the action whose step breaks the invariant (the trace's last step),
  with the whole trace as a code flow, so code-scanning pages annotate it.
* **JSON** (``--json``): verdict, stop reason, coverage, statistics, per-action
  firings, warnings and the files written, per spec.

A safe verdict qualified by a warning (an action that never fired, a function
that looks like an unregistered action, an allocation larger than its pool)
is marked in each: ``vacuous``/``warnings`` in JSON, a ``vacuity`` and
``warning.N`` properties (and, under ``ownership test``, a ``VACUOUS``
failure) in JUnit, a ``warning``-level result in SARIF.

Pass/fail per invariant comes from :mod:`ownership.core.expectation`, the
same decision ``ownership test`` and the pytest plugin make.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ownership.core.expectation import (
    DEADLOCK,
    InvariantOutcome,
    Status,
    invariant_outcomes,
    judge,
)
from ownership.core.result import CheckResult, Verdict
from ownership.errors import Code, OwnershipError, SpecWarning
from ownership.spec.model import Derived, Expect, Spec

Mode = Literal["check", "test", "prove"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
RESULTS_FORMAT = "ownership-results"
RESULTS_VERSION = 1
SRCROOT = "%SRCROOT%"


@dataclass(frozen=True)
class Location:
    """A file and line in spec source (``line`` is 1-based)."""

    file: str | None
    line: int | None


@dataclass(frozen=True)
class SpecRun:
    """One spec's check as the reports need it.

    ``result`` is ``None`` when the spec was not checked: ``skipped`` then
    says why (``ownership test`` skips specs with no ``expect=``), or
    ``error`` holds the one-line error that stopped it.
    """

    spec: str
    path: str
    mode: Mode = "check"
    result: CheckResult | None = None
    expect: Expect | None = None
    spec_location: Location = Location(None, None)
    actions: Mapping[str, Location] = field(default_factory=dict)
    invariants: Mapping[str, Location] = field(default_factory=dict)
    invariant_docs: Mapping[str, str] = field(default_factory=dict)
    ghosts: tuple[str, ...] = ()
    derived: tuple[Derived, ...] = ()
    files: tuple[str, ...] = ()
    skipped: str | None = None
    error: str | None = None
    error_location: Location = Location(None, None)

    @property
    def outcomes(self) -> tuple[InvariantOutcome, ...]:
        """One outcome per invariant (empty for a skipped or failed-to-load spec)."""
        if self.result is None:
            return ()
        return invariant_outcomes(self.result, self.expect if self.mode == "test" else None)

    @property
    def status(self) -> str:
        """``passed``, ``failed``, ``inconclusive``, ``skipped`` or ``error`` for the spec as a whole."""
        if self.error is not None:
            return "error"
        if self.result is None:
            return "skipped"
        if self.mode == "test" and self.expect is not None:
            return "passed" if judge(self.expect, self.result).ok else "failed"
        if self.result.verdict is Verdict.VIOLATED:
            return "failed"
        if self.result.verdict is Verdict.UNKNOWN:
            return "inconclusive"
        return "passed"

    @property
    def violation_location(self) -> Location | None:
        """Where the violation happens: the action of the trace's last step, else the invariant."""
        result = self.result
        if result is None or result.violated is None or result.trace is None:
            return None
        if result.trace.steps:
            loc = self.actions.get(result.trace.steps[-1].action)
            if loc is not None and loc.file is not None:
                return loc
        return self.invariants.get(result.violated) or self.spec_location


def _def_line(file: str | None, line: int | None) -> int | None:
    """The ``def`` line of a function whose code starts at ``line`` (its first decorator)."""
    if file is None or line is None:
        return line
    try:
        lines = Path(file).read_text(encoding="utf-8").splitlines()
    except OSError:
        return line
    for i in range(line - 1, min(len(lines), line + 20)):
        if lines[i].lstrip().startswith(("def ", "async def ")):
            return i + 1
    return line


def spec_run(
    spec: Spec,
    path: str | Path,
    result: CheckResult,
    *,
    mode: Mode = "check",
    files: Iterable[str | Path] = (),
) -> SpecRun:
    """The record of one checked spec; in ``test`` mode its declared ``expect=`` decides pass/fail."""
    return SpecRun(
        spec=spec.name,
        path=str(path),
        mode=mode,
        result=result,
        expect=spec.expect,
        spec_location=Location(spec.file, spec.line),
        actions={n: Location(a.file, _def_line(a.file, a.line)) for n, a in spec.actions.items()},
        invariants={n: Location(i.file, _def_line(i.file, i.line)) for n, i in spec.invariants.items()},
        invariant_docs={n: i.doc for n, i in spec.invariants.items()},
        ghosts=tuple(v.name for v in spec.vars.values() if v.ghost),
        derived=tuple(spec.derived_values.values()),
        files=tuple(str(f) for f in files),
    )


def skipped_run(spec: Spec, path: str | Path, reason: str, *, mode: Mode = "test") -> SpecRun:
    """The record of a spec that was loaded but not checked, and why."""
    return SpecRun(
        spec=spec.name,
        path=str(path),
        mode=mode,
        spec_location=Location(spec.file, spec.line),
        invariants={n: Location(i.file, _def_line(i.file, i.line)) for n, i in spec.invariants.items()},
        invariant_docs={n: i.doc for n, i in spec.invariants.items()},
        skipped=reason,
    )


def error_run(path: str | Path | None, exc: OwnershipError, *, mode: Mode = "check") -> SpecRun:
    """The record of a spec whose check stopped with a user error (a broken spec, a bad option)."""
    where = path if path is not None else exc.file
    name = Path(where).stem if where is not None else "(no spec)"
    return SpecRun(
        spec=name,
        path=str(where) if where is not None else "",
        mode=mode,
        error=exc.one_line(),
        error_location=Location(exc.file, exc.line),
    )


# -- shared text -------------------------------------------------------------


def _report_text(run: SpecRun) -> str:
    from ownership.render.text import result_report

    result = run.result
    assert result is not None
    lines = result_report(
        result,
        invariant_doc=run.invariant_docs.get(result.violated or "", ""),
        ghosts=run.ghosts,
        derived=run.derived,
    )
    if run.files:
        lines += ["", "  wrote " + ", ".join(run.files)]
        trace_json = next((f for f in run.files if f.endswith("trace.json")), None)
        if trace_json is not None:
            lines.append(f"  replay: ownership replay {trace_json}")
    return "\n".join(lines) + "\n"


def _violating_event(result: CheckResult) -> str | None:
    """The sentence for the event that breaks the invariant (``B reads D0, which holds A's KV``)."""
    from ownership.render.text import violation_sentence

    return (violation_sentence(result.trace) or None) if result.trace is not None else None


def _tool_version() -> str:
    try:
        from importlib.metadata import version

        return version("ownership")
    except Exception:  # noqa: BLE001 - running from a source tree that is not installed
        from ownership import __version__

        return __version__


# -- JUnit XML ---------------------------------------------------------------


def junit_xml(runs: Sequence[SpecRun], *, command: Mode = "check") -> str:
    """A JUnit XML report: a test suite per spec, a test case per invariant.

    A failed invariant carries the report with the trace table as the
    failure's text; an invariant the run did not decide (it stopped at another
    violation) is skipped with the reason; an inconclusive run (a state or
    time limit) and a spec that could not be checked are errors.
    """
    root = ET.Element("testsuites", name=f"ownership {command}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for run in runs:
        suite = ET.SubElement(root, "testsuite", name=run.spec)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        classname = f"ownership.{run.spec}"
        seconds = run.result.stats.seconds if run.result is not None else 0.0
        if run.result is not None:
            props = ET.SubElement(suite, "properties")
            r = run.result
            pairs = [
                ("spec_path", run.path),
                ("engine", r.engine),
                ("verdict", r.verdict.name),
                ("stop_reason", r.stop_reason.name),
                ("coverage_kind", _kind(r)),
                ("coverage", r.coverage()),
                *((f"param.{k}", str(v)) for k, v in r.params.items()),
            ]
            if run.mode == "test" and run.expect is not None:
                pairs.append(("expect", run.expect.describe()))
            if r.actions:
                from ownership.render.text import actions_line

                pairs.append(("actions", actions_line(r)))
            warnings = r.vacuity()
            if r.vacuous:
                pairs.append(("vacuity", r.qualifier()))
            pairs += [(f"warning.{k}", _warning_text(w)) for k, w in enumerate(warnings, start=1)]
            for name, value in pairs:
                ET.SubElement(props, "property", name=name, value=value)
        if run.error is not None:
            case = ET.SubElement(suite, "testcase", classname=classname, name="load", file=run.path)
            ET.SubElement(case, "error", message=run.error, type="OwnershipError").text = run.error + "\n"
            counts["tests"] += 1
            counts["errors"] += 1
        elif run.result is None:
            for inv in run.invariants or {"(spec)": Location(None, None)}:
                case = ET.SubElement(suite, "testcase", classname=classname, name=inv, file=run.path)
                ET.SubElement(case, "skipped", message=run.skipped or "not checked")
                counts["tests"] += 1
                counts["skipped"] += 1
        else:
            report = None
            for outcome in run.outcomes:
                loc = run.invariants.get(outcome.invariant)
                attrs = {"classname": classname, "name": outcome.invariant, "file": run.path}
                if loc is not None and loc.line is not None and loc.file is not None and _same_file(loc.file, run.path):
                    attrs["line"] = str(loc.line)
                case = ET.SubElement(suite, "testcase", attrs)
                counts["tests"] += 1
                if outcome.status is Status.FAILED:
                    counts["failures"] += 1
                    kind = run.result.verdict.name
                    if outcome.invariant != run.result.violated and run.result.vacuity():
                        kind = "VACUOUS"  # failed by `ownership test` for a warning, not a violation
                    failure = ET.SubElement(case, "failure", message=outcome.message, type=kind)
                    if outcome.invariant == run.result.violated:
                        report = report or _report_text(run)
                        failure.text = report
                    else:
                        failure.text = outcome.message + "\n"
                elif outcome.status is Status.UNDECIDED:
                    counts["skipped"] += 1
                    ET.SubElement(case, "skipped", message=outcome.message)
                elif outcome.status is Status.INCONCLUSIVE:
                    counts["errors"] += 1
                    ET.SubElement(case, "error", message=outcome.message, type=run.result.verdict.name)
                else:
                    out = outcome.message
                    if outcome.invariant == run.result.violated:  # an expected violation: keep its trace
                        out = _report_text(run)
                    ET.SubElement(case, "system-out").text = out if out.endswith("\n") else out + "\n"
        for key, count in counts.items():
            suite.set(key, str(count))
            totals[key] += count
        suite.set("time", f"{seconds:.3f}")
        if run.path:
            suite.set("file", run.path)
        total_time += seconds
    for key, count in totals.items():
        root.set(key, str(count))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:  # pragma: no cover - unreadable paths
        return False


# -- SARIF 2.1.0 -------------------------------------------------------------


def _artifact(file: str, root: Path) -> dict[str, Any]:
    """An artifactLocation: relative to ``%SRCROOT%`` when under ``root``, else an absolute file URI."""
    p = Path(file).resolve()
    try:
        rel = p.relative_to(root)
    except ValueError:
        return {"uri": p.as_uri()}
    return {"uri": urllib.parse.quote(rel.as_posix()), "uriBaseId": SRCROOT}


def _physical(loc: Location, root: Path) -> dict[str, Any] | None:
    if loc.file is None:
        return None
    phys: dict[str, Any] = {"artifactLocation": _artifact(loc.file, root)}
    if loc.line is not None and loc.line >= 1:
        phys["region"] = {"startLine": loc.line}
    return phys


def _rule(name: str, doc: str, level: str = "error") -> dict[str, Any]:
    if name == DEADLOCK:
        doc = "Requests are pending and no action can run."
    first = doc.splitlines()[0] if doc else f"Invariant {name} holds in every reachable state."
    return {
        "id": name,
        "name": name,
        "shortDescription": {"text": first},
        "fullDescription": {"text": doc or first},
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["ownership", "model-checking"]},
    }


EXPECTATION_RULE = "unmet-expectation"

WARNING_RULES: dict[Code, tuple[str, str]] = {
    Code.DEAD_ACTION: ("vacuous-action", "Every action of a spec fires in some checked state; one that never fires "
                       "makes a safe verdict vacuous for it (declare may_be_dead if intended)."),
    Code.UNREGISTERED_ACTION: ("unregistered-action", "A function shaped like an action is registered with "
                               "@spec.action (or is a helper, invariant or terminal predicate)."),
    Code.ALLOC_EXCEEDS_POOL: ("alloc-exceeds-pool", "An allocation asks for no more pages than its pool has."),
    Code.NOTHING_ENABLED: ("nothing-enabled", "Some action is enabled in the initial state (else nothing ever runs)."),
}
"""SARIF rule id and description of each warning (anything else: ``spec-warning``)."""


def _warning_text(w: SpecWarning) -> str:
    from ownership.render.text import warning_line

    return warning_line(w)


def sarif_log(runs: Sequence[SpecRun], *, command: Mode = "check", root: Path | None = None) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one result per violation.

    The result is located at the ``def`` line of the action whose step
    breaks the invariant (the last step of the trace; the invariant itself
    when the initial state breaks it), relative to ``root`` (default: the
    current directory) as ``%SRCROOT%``.  The trace is attached as a code
    flow, the invariant's definition as a related location.  In ``test`` mode
    a violation the spec declares (``expect=violates(X)``) is a note with an
    in-source suppression, and a declared verdict that was not met is a
    ``unmet-expectation`` result at the spec's declaration.
    """
    base = (root or Path.cwd()).resolve()
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    notifications: list[dict[str, Any]] = []
    sampled: list[dict[str, Any]] = []

    def rule_index(name: str, doc: str, level: str = "error") -> int:
        if name not in rules:
            rules[name] = _rule(name, doc, level)
        return list(rules).index(name)

    for run in runs:
        if run.error is not None:
            note: dict[str, Any] = {"level": "error", "message": {"text": run.error}}
            phys = _physical(run.error_location, base)
            if phys is not None:
                note["locations"] = [{"physicalLocation": phys}]
            notifications.append(note)
            continue
        result = run.result
        if result is None:
            continue
        if result.sampled and result.violated is None:
            # No result entry would read as "clean": say that this pass is only a sample.
            sampled.append({
                "level": "warning",
                "message": {"text": f"{run.spec}: NO VIOLATION FOUND (sampled) by {result.engine}, not a proof: "
                                    f"{result.coverage()}"},
            })
        expected_violation = run.mode == "test" and run.expect is not None and run.expect.violates == result.violated
        if result.violated is not None:
            results.append(_violation_result(run, result, base, expected_violation, rule_index))
        for w in result.vacuity():
            results.append(_warning_result(run, result, w, base, rule_index))
        if run.mode == "test" and run.expect is not None:
            verdict = judge(run.expect, result)
            if not verdict.ok and (result.violated is None or verdict.reason):
                idx = rule_index(EXPECTATION_RULE, "A spec's declared verdict (expect=) is what the check finds.")
                text = f"{run.spec}: expected {verdict.expected}, got {verdict.got}"
                text += f" ({verdict.reason})" if verdict.reason else f" ({result.coverage()})"
                entry: dict[str, Any] = {
                    "ruleId": EXPECTATION_RULE,
                    "ruleIndex": idx,
                    "level": "error",
                    "message": {"text": text},
                    "partialFingerprints": {"ownershipExpectation/v1": _fingerprint(run.spec, verdict.expected)},
                }
                phys = _physical(run.spec_location, base)
                if phys is not None:
                    entry["locations"] = [{"physicalLocation": phys}]
                results.append(entry)
    invocation: dict[str, Any] = {"executionSuccessful": not notifications}
    if notifications or sampled:
        invocation["toolExecutionNotifications"] = notifications + sampled
    invocation["properties"] = {
        "verdicts": [
            {"spec": run.spec, "verdict": run.result.verdict.name, "coverageKind": _kind(run.result)}
            for run in runs if run.result is not None
        ]
    }
    driver: dict[str, Any] = {
        "name": "ownership",
        "version": _tool_version(),
        "semanticVersion": _tool_version(),
        "rules": list(rules.values()),
    }
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "invocations": [invocation],
                "originalUriBaseIds": {SRCROOT: {"uri": base.as_uri().rstrip("/") + "/"}},
                "automationDetails": {"id": f"ownership/{command}/"},
                "results": results,
            }
        ],
    }


def _warning_result(run: SpecRun, result: CheckResult, w: SpecWarning, base: Path, rule_index: Any) -> dict[str, Any]:
    """A SARIF result of level ``warning`` for a vacuity warning, at the line it names."""
    rule, doc = WARNING_RULES.get(w.code, ("spec-warning", "A spec raises no warnings."))
    idx = rule_index(rule, doc, level="warning")
    entry: dict[str, Any] = {
        "ruleId": rule,
        "ruleIndex": idx,
        "level": "warning",
        "message": {"text": f"{run.spec}: {' '.join(w.message.split())} ({result.engine} says "
                            f"{result.verdict.name}; {w.code.label})"},
        "partialFingerprints": {"ownershipWarning/v1": _fingerprint(run.spec, rule, w.subject)},
        "properties": {"spec": run.spec, "engine": result.engine, "verdict": result.verdict.name,
                       "code": w.code.label, "subject": w.subject},
    }
    phys = _physical(Location(w.file, w.line), base)
    if phys is None:
        phys = _physical(run.spec_location, base)
    if phys is not None:
        entry["locations"] = [{"physicalLocation": phys}]
    return entry


def _kind(result: CheckResult) -> str:
    """``exhaustive``, ``bounded``, ``sampled`` or ``proof``: what a pass of this engine can claim."""
    return result.coverage_kind.value if result.coverage_kind is not None else "exhaustive"


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _violation_result(run: SpecRun, result: CheckResult, base: Path, expected: bool, rule_index: Any) -> dict[str, Any]:
    bad = result.violated or ""
    trace = result.trace
    idx = rule_index(bad, run.invariant_docs.get(bad, ""))
    what = "deadlocks" if bad == DEADLOCK else f"violates {bad}"
    if trace is not None and trace.steps:
        last = trace.steps[-1]
        text = f"{run.spec} {what} at step {len(trace)} of {len(trace)}: {last.call}"
    else:
        text = f"{run.spec} {what} in the initial state"
    event = _violating_event(result)
    if event:
        text += f": {event}"
    text += f" ({result.engine}; {result.coverage()})"
    trace_json = next((f for f in run.files if f.endswith("trace.json")), None)
    if trace_json is not None:
        text += f". Replay: ownership replay {trace_json}"
    if expected:
        text += ". The spec declares this violation (expect=violates)."
    entry: dict[str, Any] = {
        "ruleId": bad,
        "ruleIndex": idx,
        "level": "note" if expected else "error",
        "message": {"text": text},
    }
    loc = run.violation_location
    phys = _physical(loc, base) if loc is not None else None
    if phys is not None:
        location: dict[str, Any] = {"physicalLocation": phys}
        if trace is not None and trace.steps:
            action = trace.steps[-1].action
            location["logicalLocations"] = [
                {"name": action, "fullyQualifiedName": f"{run.spec}.{action}", "kind": "function"}
            ]
        entry["locations"] = [location]
    inv_loc = run.invariants.get(bad)
    inv_phys = _physical(inv_loc, base) if inv_loc is not None else None
    if inv_phys is not None:
        entry["relatedLocations"] = [{"id": 1, "physicalLocation": inv_phys, "message": {"text": f"invariant {bad}"}}]
    if trace is not None and trace.steps:
        flow_locations = []
        for i, step in enumerate(trace.steps, start=1):
            step_loc = run.actions.get(step.action)
            step_phys = _physical(step_loc, base) if step_loc is not None else None
            tfl: dict[str, Any] = {"executionOrder": i, "location": {"message": {"text": f"{i}. {step.call}"}}}
            if step_phys is not None:
                tfl["location"]["physicalLocation"] = step_phys
            flow_locations.append(tfl)
        entry["codeFlows"] = [
            {
                "message": {"text": f"{len(trace)}-step counterexample, replayed through the spec"},
                "threadFlows": [{"locations": flow_locations}],
            }
        ]
    last_action = trace.steps[-1].action if trace is not None and trace.steps else ""
    entry["partialFingerprints"] = {"ownershipViolation/v1": _fingerprint(run.spec, bad, last_action)}
    props: dict[str, Any] = {
        "spec": run.spec,
        "engine": result.engine,
        "verdict": result.verdict.name,
        "coverage_kind": _kind(result),
        "params": dict(result.params),
    }
    if trace is not None:
        props["steps"] = len(trace)
    if run.files:
        props["files"] = list(run.files)
    entry["properties"] = props
    if expected:
        entry["suppressions"] = [{"kind": "inSource", "justification": f"the spec declares expect=violates({bad!r})"}]
    return entry


# -- JSON --------------------------------------------------------------------


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
        stats={
            "states": r.stats.states,
            "transitions": r.stats.transitions,
            "depth": r.stats.depth,
            "seconds": round(r.stats.seconds, 6),
        },
        invariants=[{"name": o.invariant, "status": o.status.value, "message": o.message} for o in run.outcomes],
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
        }
    else:
        out["trace"] = None
    return out


# -- writing -----------------------------------------------------------------


def write_reports(
    runs: Sequence[SpecRun],
    *,
    command: Mode,
    junit: Path | None = None,
    sarif: Path | None = None,
    json_path: Path | None = None,
    root: Path | None = None,
) -> list[Path]:
    """Write each requested report (parent folders created); returns the paths written."""
    written: list[Path] = []
    for path, text in (
        (junit, lambda: junit_xml(runs, command=command)),
        (sarif, lambda: json.dumps(sarif_log(runs, command=command, root=root), indent=1) + "\n"),
        (json_path, lambda: json.dumps(results_json(runs, command=command), indent=1) + "\n"),
    ):
        if path is None:
            continue
        body = text()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        except OSError as exc:  # the CLI checked the path up front; this is a full disk or a race
            raise OwnershipError(Code.OUTPUT_PATH, f"cannot write report: {exc.strerror or exc}", str(path)) from None
        written.append(path)
    return written


@contextmanager
def reporting(
    runs: list[SpecRun],
    *,
    command: Mode,
    junit: Path | None = None,
    sarif: Path | None = None,
    json_path: Path | None = None,
) -> Iterator[None]:
    """Write the requested reports when the block ends, also when a spec error stops it.

    A user error (a spec that does not load, a bad option) is recorded as an
    ``error`` entry before the reports are written, then re-raised, so CI
    still gets reports that name the broken spec.
    """
    try:
        yield
    except OwnershipError as exc:
        if junit or sarif or json_path:
            runs.append(error_run(None, exc, mode=command))
            write_reports(runs, command=command, junit=junit, sarif=sarif, json_path=json_path)
        raise
    write_reports(runs, command=command, junit=junit, sarif=sarif, json_path=json_path)
