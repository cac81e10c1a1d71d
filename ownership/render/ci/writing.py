"""The CI report formats, one registry row each, and writing the requested reports, also when a spec error stops the command.

A report format is a :class:`ReportFormat`: its name (what ``--report
NAME=PATH`` says), the flag that also asks for it (``--junit FILE``), the file
extension it is usually given, and the function that renders every spec's
run as the file's text.  Adding a format is a module that renders it and a
row of :data:`REPORT_FORMATS`: the command line, ``reporting`` and the error
path read the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ownership.errors import Code, OwnershipError
from ownership.render.ci.junit import junit_xml
from ownership.render.ci.records import Mode, SpecRun, error_run
from ownership.render.ci.results import results_json
from ownership.render.ci.sarif import sarif_log


@dataclass(frozen=True)
class ReportFormat:
    """One CI report format (see the module docstring)."""

    name: str
    flag: str
    """The option that asks for it alone (``--report NAME=PATH`` asks for any)."""
    extension: str
    help: str
    text: Callable[[Sequence[SpecRun], Mode, Path | None], str]
    """``(runs, command, root) -> the file's text``; ``root`` is the folder paths in the report are relative to."""


REPORT_FORMATS: Mapping[str, ReportFormat] = {f.name: f for f in (
    ReportFormat("junit", "--junit", ".xml", "a JUnit XML report",
                 lambda runs, command, root: junit_xml(runs, command=command)),
    ReportFormat("sarif", "--sarif", ".sarif", "a SARIF 2.1.0 log",
                 lambda runs, command, root: json.dumps(sarif_log(runs, command=command, root=root), indent=1) + "\n"),
    ReportFormat("json", "--json", ".json", "the results as JSON",
                 lambda runs, command, root: json.dumps(results_json(runs, command=command), indent=1) + "\n"),
)}
"""Every CI report format, by name."""


def write_reports(runs: Sequence[SpecRun], *, command: Mode, reports: Mapping[str, Path],
                  root: Path | None = None) -> list[Path]:
    """Write each requested report (``reports``: format name -> path; parent folders created); the paths written."""
    written: list[Path] = []
    for name, path in reports.items():
        body = REPORT_FORMATS[name].text(runs, command, root)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        except OSError as exc:  # the CLI checked the path up front; this is a full disk or a race
            raise OwnershipError(Code.OUTPUT_PATH, f"cannot write report: {exc.strerror or exc}", str(path)) from None
        written.append(path)
    return written


@contextmanager
def reporting(runs: list[SpecRun], *, command: Mode, reports: Mapping[str, Path]) -> Iterator[None]:
    """Write the requested reports when the block ends, also when a spec error stops it.

    A user error (a spec that does not load, a bad option) is recorded as an
    ``error`` entry before the reports are written, then re-raised, so CI
    still gets reports that name the broken spec.
    """
    try:
        yield
    except OwnershipError as exc:
        if reports:
            runs.append(error_run(None, exc, mode=command))
            write_reports(runs, command=command, reports=reports)
        raise
    write_reports(runs, command=command, reports=reports)
