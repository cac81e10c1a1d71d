"""docs/library.md lists every library spec with its summary, source and expected verdict, as the spec says."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownership.lang.loader import load_spec

ROOT = Path(__file__).parent.parent
SPECS = sorted((ROOT / "specs").glob("*.py"))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_library_spec_has_a_true_row(path: Path) -> None:
    spec = load_spec(path)
    rows = [line for line in (ROOT / "docs" / "library.md").read_text().splitlines()
            if line.startswith(f"| [`{path.stem}`]")]
    assert len(rows) == 1, f"docs/library.md has no row for {path.stem}"
    cells = [c.strip() for c in rows[0].strip("|").split(" | ")]
    assert cells[1] == spec.summary
    assert spec.models is not None and cells[2] == f"{spec.models.engine} {spec.models.version}"
    assert spec.expect is not None and cells[4] == spec.expect.describe()


def test_no_row_names_a_spec_that_is_gone() -> None:
    names = {p.stem for p in SPECS}
    for line in (ROOT / "docs" / "library.md").read_text().splitlines():
        if line.startswith("| [`"):
            assert line.split("`")[1] in names, line
