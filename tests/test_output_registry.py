"""Output formats declare themselves: a CI report format or a counterexample file is one registry row.

`--report FMT=FILE` reads the report registry, so a new row is usable from
the command line with nothing else changed; the counterexample folder's
files come from the trace-format registry.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS
from ownership.cli import app
from ownership.render.ci import writing
from ownership.render.ci.writing import REPORT_FORMATS, ReportFormat

SPEC = str(CORPUS / "toy_double_free.py")


def _check(*args: str) -> object:
    return CliRunner().invoke(app, ["check", SPEC, "--no-progress", *args])


def test_report_flag_writes_what_the_named_flag_writes(tmp_path: Path) -> None:
    _check("--out", str(tmp_path / "a"), "--junit", str(tmp_path / "flag.xml"))
    _check("--out", str(tmp_path / "b"), "--report", f"junit={tmp_path / 'generic.xml'}",
           "--report", f"json={tmp_path / 'r.json'}")
    cases = lambda p: re.findall(r'<testcase [^>]*name="([^"]+)"[^>]*>\s*<(\w+)', p.read_text())  # noqa: E731
    assert cases(tmp_path / "generic.xml") == cases(tmp_path / "flag.xml") != []
    assert json.loads((tmp_path / "r.json").read_text())["specs"][0]["spec"] == "toy_double_free"


@pytest.mark.parametrize(("item", "words"), [("xml=out.xml", "unknown format 'xml' (formats: junit, sarif, json)"),
                                             ("junit", "write FORMAT=FILE"), ("junit=", "write FORMAT=FILE")])
def test_a_bad_report_item_is_a_usage_error(item: str, words: str) -> None:
    res = _check("--report", item)
    assert res.exit_code == 2, res.output  # type: ignore[attr-defined]
    assert "error[OWN013]" in res.output and words in res.output  # type: ignore[attr-defined]


def test_a_new_report_format_is_one_registry_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    row = ReportFormat("count", "--count", ".txt", "the number of runs",
                       lambda runs, command, root: f"{command}: {len(runs)} run(s)\n")
    monkeypatch.setattr(writing, "REPORT_FORMATS", {**REPORT_FORMATS, "count": row})
    res = _check("--out", str(tmp_path / "o"), "--report", f"count={tmp_path / 'n.txt'}")
    assert res.exit_code == 1, res.output  # type: ignore[attr-defined]
    assert (tmp_path / "n.txt").read_text() == "check: 1 run(s)\n"


def test_the_counterexample_folder_holds_the_registrys_files(tmp_path: Path) -> None:
    from ownership.render.files import TRACE_FORMATS

    _check("--out", str(tmp_path), "--format", "png")
    assert {p.name for p in tmp_path.iterdir()} == {f.file for f in TRACE_FORMATS if not f.picture or f.name == "png"}
