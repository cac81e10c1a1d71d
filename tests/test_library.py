"""The spec library's locator: the installed library, or a checkout's specs/."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SPECS
from ownership import library
from ownership.preflight import releases, verdict


def test_from_a_checkout_the_library_is_its_specs_folder() -> None:
    assert library.library_dir() == SPECS.resolve()
    assert library.library_spec("sglang_disagg_v0_5_19.py") == SPECS.resolve() / "sglang_disagg_v0_5_19.py"


def test_preflight_reads_the_release_table_from_the_library() -> None:
    assert verdict.SPECS == library.library_dir()
    for row in releases.SGLANG_DISAGG:
        assert library.library_spec(row.spec).is_file(), row.spec


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, installed: bool, checkout: bool) -> Path:
    """A package folder ``root/ownership`` with the library inside it, beside it, both or neither."""
    root = tmp_path / "root"
    pkg = root / "ownership"
    pkg.mkdir(parents=True)
    if installed:
        (pkg / "specs").mkdir()
    if checkout:
        (root / "pyproject.toml").write_text("[project]\n")
        (root / "specs").mkdir()
    monkeypatch.setattr(library, "_PACKAGE", pkg)
    return root


def test_an_installed_library_is_the_one_inside_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _package(tmp_path, monkeypatch, installed=True, checkout=True)
    assert library.library_dir() == root / "ownership" / "specs"


def test_a_source_tree_without_an_installed_copy_reads_its_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _package(tmp_path, monkeypatch, installed=False, checkout=True)
    assert library.library_dir() == root / "specs"


def test_a_specs_folder_beside_an_installed_package_is_not_the_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _package(tmp_path, monkeypatch, installed=False, checkout=False)
    (root / "specs").mkdir()  # site-packages/specs of another distribution: no pyproject.toml beside it
    assert library.library_dir() == root / "ownership" / "specs"  # where it should be, so errors name that
