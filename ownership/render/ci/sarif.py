"""The SARIF 2.1.0 log (``--sarif``) for code-scanning pages.

Each violation is a result located at the spec line of the action whose step
breaks the invariant (the trace's last step), with the whole trace as a code
flow; a safe verdict qualified by a warning is a ``warning``-level result.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ownership.core.expectation import DEADLOCK, judge
from ownership.core.result import CheckResult
from ownership.core.trace import TraceKind
from ownership.core.verdicts import verdict_words
from ownership.distribution import DIST_NAME
from ownership.errors import Code, SpecWarning
from ownership.render.ci.records import Location, Mode, SpecRun
from ownership.render.ci.shared import _kind, _tool_version, _violating_event

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


SRCROOT = "%SRCROOT%"


PACKAGE_DIRS = frozenset({"site-packages", "dist-packages"})
"""Folders of installed packages: code there is never the repository's, even under the root."""


def _artifact(file: str, root: Path) -> dict[str, Any] | None:
    """An artifactLocation relative to ``%SRCROOT%``, or ``None`` for a file that is not the repository's.

    Code scanning resolves every URI against the repository, so a file outside
    ``root``, or inside an installed package (a ``.venv`` under the root
    included), has no location there: absolute or site-packages paths are
    rejected or annotate nothing.
    """
    p = Path(file).resolve()
    try:
        rel = p.relative_to(root)
    except ValueError:
        return None
    if PACKAGE_DIRS.intersection(rel.parts):
        return None
    return {"uri": urllib.parse.quote(rel.as_posix()), "uriBaseId": SRCROOT}


def _physical(loc: Location, root: Path) -> dict[str, Any] | None:
    if loc.file is None:
        return None
    artifact = _artifact(loc.file, root)
    if artifact is None:
        return None
    phys: dict[str, Any] = {"artifactLocation": artifact}
    if loc.line is not None and loc.line >= 1:
        phys["region"] = {"startLine": loc.line}
    return phys


HELP_URI = f"https://pypi.org/project/{DIST_NAME}/"
"""Where a rule's ``helpUri`` points: the project's page (its README: specs, verdicts, replaying traces)."""

_INVARIANT_HELP = (
    "The model checker found an execution of the spec's actions that breaks this invariant. The result's "
    "code flow is that execution, step by step, located at each action's definition; its last step is where "
    "the invariant breaks. Replay it with `ownership replay <trace.json>` (the message names the file) and fix "
    "the protocol, or the spec if it models the code wrongly."
)


def _rule(name: str, doc: str, level: str = "error", *, invariant: bool = True) -> dict[str, Any]:
    if name == DEADLOCK:
        doc = "Requests are pending and no action can run."
    first = doc.splitlines()[0] if doc else f"Invariant {name} holds in every reachable state."
    full = " ".join((doc or first).split())
    help_text = f"{full}\n\n{_INVARIANT_HELP}" if invariant else full
    help_md = f"**{name}**: {full}\n\n{_INVARIANT_HELP}" if invariant else f"**{name}**: {full}"
    return {
        "id": name,  # no "name": SARIF asks that a name equal to the id be omitted
        "shortDescription": {"text": first},
        "fullDescription": {"text": full},
        "help": {"text": help_text, "markdown": help_md},
        "helpUri": HELP_URI,
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

    def rule_index(name: str, doc: str, level: str = "error", *, invariant: bool = True) -> int:
        if name not in rules:
            rules[name] = _rule(name, doc, level, invariant=invariant)
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
                "message": {"text": f"{run.spec}: {verdict_words(result)} by {result.engine}, not a proof: "
                                    f"{result.coverage()}"},
            })
        expected_violation = run.mode == "test" and run.expect is not None and run.expect.violates == result.violated
        if result.violated is not None:
            results.append(_violation_result(run, result, base, expected_violation, rule_index))
        for w in result.vacuity():
            results.append(_warning_result(run, result, w, base, rule_index))
        if run.mode == "test" and run.expect is not None:
            verdict = judge(run.expect, result)
            # A violation the spec does not expect is its own result; this one is every other unmet verdict.
            if not verdict.ok and (result.violated is None or result.violated == run.expect.violates):
                idx = rule_index(EXPECTATION_RULE, "A spec's declared verdict (expect=) is what the check finds.",
                                 invariant=False)
                text = f"{run.spec}: expected {verdict.expected}, got {verdict.got}"
                text += f"; {verdict.reason}" if verdict.reason else f"; {result.coverage()}"
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
        "informationUri": HELP_URI,
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
    idx = rule_index(rule, doc, level="warning", invariant=False)
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


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _violation_result(run: SpecRun, result: CheckResult, base: Path, expected: bool, rule_index: Any) -> dict[str, Any]:
    bad = result.violated or ""
    trace = result.trace
    idx = rule_index(bad, run.invariant_docs.get(bad, ""))
    what = "deadlocks" if bad == DEADLOCK else f"violates {bad}"
    if trace is not None and trace.kind is TraceKind.LASSO:
        who = f" for {trace.subject}" if trace.subject else ""
        goes = ("then nothing can run and it stays there for ever" if trace.loop == len(trace)
                else f"then steps {(trace.loop or 0) + 1}-{len(trace)} repeat for ever")
        text = f"{run.spec} breaks {bad}{who} on a fair path: {trace.loop} steps to state {trace.loop}, {goes}"
    elif trace is not None and trace.steps:
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
    if phys is None:  # the action is library code (or outside the repository): annotate the spec instead
        phys = _physical(run.spec_location, base)
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
    related = f"invariant {bad}"
    if inv_phys is None and inv_loc is not None and inv_loc.file is not None:
        # A library invariant (installed package): the spec that uses it stands in for its definition.
        inv_phys = _physical(run.spec_location, base)
        related += f" (defined in the ownership library, {Path(inv_loc.file).name})"
    if inv_phys is not None:
        entry["relatedLocations"] = [{"id": 1, "physicalLocation": inv_phys, "message": {"text": related}}]
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
