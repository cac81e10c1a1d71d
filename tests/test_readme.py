"""The README's commands and example spec work as written."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from conftest import ROOT
from ownership.cli import app

README = (ROOT / "README.md").read_text()


def test_readme_example_spec_finds_its_bug(tmp_path: Path) -> None:
    block = README.split("<!-- readme-spec: this block is checked by tests/test_readme.py -->", 1)[1]
    code = re.search(r"```python\n(.*?)```", block, re.S)
    assert code is not None
    spec = tmp_path / "abort.py"
    spec.write_text(code.group(1))
    res = CliRunner().invoke(app, ["check", str(spec), "--out", str(tmp_path / "ce")])
    assert res.exit_code == 1, res.output
    assert res.output.startswith("VIOLATED  no_foreign_read  in abort_frees_early")
    assert (tmp_path / "ce" / "trace.svg").exists()
    res = CliRunner().invoke(app, ["test", str(tmp_path)])
    assert res.exit_code == 0, res.output


def test_readme_names_the_two_commands() -> None:
    assert ".venv/bin/ownership check specs/sglang_disagg_v0_5_21.py" in README
    assert ".venv/bin/python -m pytest" in README
