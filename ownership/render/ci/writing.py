"""Writing the requested CI reports to their files, also when a spec error stops the command."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ownership.errors import Code, OwnershipError
from ownership.render.ci.junit import junit_xml
from ownership.render.ci.records import Mode, SpecRun, error_run
from ownership.render.ci.results import results_json
from ownership.render.ci.sarif import sarif_log


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
