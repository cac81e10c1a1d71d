"""The spec library's locator, and the commands that read the library from any directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import ownership
from conftest import ROOT, SPECS
from ownership import library
from ownership.cli import app
from ownership.preflight import releases, verdict


def test_the_library_is_the_one_of_the_running_package() -> None:
    # From the checkout its specs/; when the tests import an installed copy, the one inside it.
    package = Path(ownership.__file__).resolve().parent
    expected = SPECS.resolve() if package == (ROOT / "ownership").resolve() else package / "specs"
    assert library.library_dir() == expected
    assert library.library_spec("sglang_disagg_v0_5_19.py") == expected / "sglang_disagg_v0_5_19.py"
    assert sorted(p.name for p in expected.glob("*.py")) == sorted(p.name for p in SPECS.glob("*.py"))


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


def test_list_library_from_an_empty_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["list", "--library"])
    assert res.exit_code == 0, res.output
    assert f"sglang_disagg_v0_5_19  ({library.library_dir() / 'sglang_disagg_v0_5_19.py'})" in res.stdout
    assert res.stdout.count("  expect:  ") == len(list(SPECS.glob("*.py")))


def test_library_and_a_folder_together_is_a_usage_error() -> None:
    for command in ("list", "test"):
        res = CliRunner().invoke(app, [command, "--library", str(ROOT / "specs")])
        assert res.exit_code == 2, res.output
        assert res.output.startswith("error[OWN013]: --library and the folder "), res.output
        assert len(res.output.strip().splitlines()) == 1


def test_list_without_a_folder_still_reads_specs_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["list"])
    assert res.exit_code == 2 and "error[OWN013]: specs: not a directory" in res.output, res.output


def test_installed_library_specs_are_spec_code_not_the_checkers() -> None:
    # Error locations and guard explanations skip the checker's own frames; installed, the
    # library sits inside the package folder and its frames must still count as the spec's.
    package = Path(ownership.__file__).parent
    assert library.is_checker_code(str(package / "lang" / "successors.py"))
    assert library.is_checker_code(str(package / "vocab" / "pool.py"))
    assert not library.is_checker_code(str(package / "specs" / "vllm_block_pool.py"))
    assert library.is_checker_code(str(package / "specsheet.py"))  # a module merely named alike is ours
    assert not library.is_checker_code(str(SPECS / "vllm_block_pool.py"))
    assert not library.is_checker_code("spec.py")  # relative: a spec in the working directory
