"""The JUnit XML report (``--junit``): a test suite per spec, a test case per invariant.

A violation is a ``<failure>`` whose text is the trace table; a safe verdict
qualified by a warning carries ``vacuity`` and ``warning.N`` properties, and
its test cases are a ``VACUOUS`` failure under ``ownership test``, a
``VACUOUS`` error (inconclusive, exit 3) under ``check`` and ``prove``, and
pass with the warning in ``system-out`` under ``--allow-vacuous``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from ownership.core.expectation import Status
from ownership.render.ci.records import Location, Mode, SpecRun
from ownership.render.ci.shared import _kind, _report_text, _warning_text


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
            memory = r.stats.memory_line()
            if memory is not None:  # what storing the states cost (explore)
                pairs.append(("memory", memory))
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
                    kind = "VACUOUS" if run.result.vacuous else run.result.verdict.name  # check's exit 3 either way
                    ET.SubElement(case, "error", message=outcome.message, type=kind)
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
