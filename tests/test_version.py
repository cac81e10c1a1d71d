"""``ownership --version``: the distribution name and the running code's version, fast."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest
from typer.testing import CliRunner

import ownership
from conftest import ROOT
from ownership import distribution
from ownership.cli import app


def test_version_prints_the_distribution_name_and_version() -> None:
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]
    assert first.startswith(f"kv-ownership {ownership.__version__}")


def test_the_distribution_name_and_version_come_from_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["name"] == distribution.DIST_NAME
    # One version: pyproject reads it from the code, so an installed distribution and the tree agree.
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ownership.__version__"}
    assert project["project"]["scripts"] == {"ownership": "ownership.cli:main"}


def test_the_line_says_where_the_code_runs_from_when_metadata_disagrees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distribution, "installed_version", lambda: None)
    assert distribution.version_line().startswith(f"kv-ownership {ownership.__version__} (not installed; running from ")
    monkeypatch.setattr(distribution, "installed_version", lambda: "0.0.9")
    line = distribution.version_line()
    assert "the installed distribution is 0.0.9" in line and line.startswith(f"kv-ownership {ownership.__version__} ")
    monkeypatch.setattr(distribution, "installed_version", lambda: ownership.__version__)
    assert distribution.version_line() == f"kv-ownership {ownership.__version__}"


def test_version_is_fast_and_loads_no_solver() -> None:
    code = ("import sys\nfrom ownership.cli import main\nsys.argv = ['ownership', '--version']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print('z3' in sys.modules, 'hypothesis' in sys.modules, code)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT)})
    lines = out.stdout.splitlines()
    assert lines[0].startswith("kv-ownership ")
    assert lines[-1] == "False False 0"
