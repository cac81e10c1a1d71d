"""The committed counterexamples are what the current code produces.

Regenerate them with:

    ownership check specs/NAME.py --out counterexamples/NAME

(from the repository root) for every folder ``counterexamples/NAME``.  This
test fails when one is stale.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from ownership.cli import app

COMMITTED = sorted(p.parent.name for p in (ROOT / "counterexamples").glob("*/trace.json"))


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_counterexample_is_fresh(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the trace records the spec path as given on the command line
    res = CliRunner().invoke(app, ["check", f"specs/{name}.py", "--out", str(tmp_path)])
    assert res.exit_code == 1, res.output
    committed = ROOT / "counterexamples" / name
    for file in ("trace.json", "trace.itf.json", "trace.dot"):
        assert (committed / file).read_text() == (tmp_path / file).read_text(), (
            f"counterexamples/{name}/{file} is stale: regenerate it (see this test's docstring)"
        )
    svg = (committed / "trace.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    if name == "sglang_disagg_v0_5_19":
        assert "which holds A&#39;s KV" in svg or "which holds A's KV" in svg


def test_the_incident_counterexample_is_committed() -> None:
    assert "sglang_disagg_v0_5_19" in COMMITTED
