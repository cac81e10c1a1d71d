"""The package as pip installs it: what reads the spec library works from an empty directory.

The rest of the suite imports ``ownership`` from the checkout, where
``specs/`` sits beside the package; these tests build the wheel, install it
into a fresh virtual environment and run its ``ownership`` command from a
folder that holds nothing, as a user of the distribution would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT, SPECS

pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "setup.py", "README.md", "ownership", "specs")
"""What the build reads, copied (so no build/ folder is left in the checkout and no stale one is packaged)."""


def _run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the checkout must not be importable
    # The dependencies' programs (graphviz-pure draws the pictures) are where this interpreter's are.
    env["PATH"] = os.pathsep.join([env.get("PATH", ""), sysconfig.get_path("scripts")])
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _ok(argv: list[str], cwd: Path | None = None) -> str:
    res = _run(argv, cwd)
    assert res.returncode == 0, f"{argv}: {res.stdout}{res.stderr}"
    return res.stdout


def _library(venv: Path, cwd: Path) -> str:
    """The installed library's folder, asked from ``cwd`` (``python -c`` imports from its working directory first)."""
    folder = _ok([str(venv / "bin" / "python"), "-c", "import ownership.library as l; print(l.library_dir())"], cwd).strip()
    assert Path(folder).is_relative_to(venv), folder  # the installed copy, not a checkout's specs/
    return folder


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel built from this checkout installed (no editable link)."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if not (ROOT / name).exists():
            continue
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    dist = tmp / "dist"
    _ok([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(src)])
    (wheel,) = dist.glob("*.whl")
    env = tmp / "venv"
    _ok([sys.executable, "-m", "venv", "--without-pip", str(env)])
    python = str(env / "bin" / "python")
    _ok([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--quiet", str(wheel)])
    # The dependencies are this interpreter's, named after the install (so pip never saw another
    # kv-ownership) by plain path lines (so that environment's .pth files, an editable install's
    # among them, do not run): the environment's own site-packages comes first on sys.path.
    site = _ok([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site) / "_test_dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    return env


def test_the_library_is_installed_inside_the_package(venv: Path, tmp_path: Path) -> None:
    code = "import ownership, ownership.library as l; print(ownership.__file__); print(l.library_dir())"
    res = _run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    package, folder = (Path(line) for line in res.stdout.splitlines())
    assert package.is_relative_to(venv) and Path(folder) == package.parent / "specs"
    assert sorted(p.name for p in folder.glob("*.py")) == sorted(p.name for p in SPECS.glob("*.py"))


def test_preflight_from_an_empty_directory(venv: Path, tmp_path: Path) -> None:
    logs = ROOT / "examples" / "preflight"
    res = _run([str(venv / "bin" / "ownership"), "preflight", "--prefill", str(logs / "incident-prefill.log"),
                "--decode", str(logs / "incident-decode.log"), "--version", "0.5.19", "--no-check-remedy"], cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.startswith("UNSAFE: do not deploy: ") and "\n  sglang 0.5.19 prefill/decode" in res.stdout, res.stdout
    assert f"ownership check {venv}" in res.stdout  # the reproduce line names the installed spec


def test_ownership_test_of_the_installed_library(venv: Path, tmp_path: Path) -> None:
    res = _run([str(venv / "bin" / "ownership"), "test", "--library"], cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"specs: {len(list(SPECS.glob('*.py')))} passed, 0 failed" in res.stdout
    assert list(tmp_path.iterdir()) == []  # test writes nothing without --out


def test_the_readme_check_of_the_installed_spec(venv: Path, tmp_path: Path) -> None:
    folder = _library(venv, tmp_path)
    res = _run([str(venv / "bin" / "ownership"), "check", f"{folder}/sglang_disagg_v0_5_19.py"], cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.startswith("VIOLATED  no_foreign_read  in sglang_disagg_v0_5_19"), res.stdout
    assert "Counterexample: 15 steps" in res.stdout
    assert (tmp_path / "counterexamples" / "sglang_disagg_v0_5_19" / "trace.svg").stat().st_size > 0


def test_validate_names_the_guard_line_of_an_installed_spec(venv: Path, tmp_path: Path) -> None:
    # Installed, the library is inside the package; a rejected line must still be explained at the
    # spec's own guard, not as "no choice of the action is possible here".
    folder = _library(venv, tmp_path)
    res = _run([str(venv / "bin" / "ownership"), "validate", f"{folder}/vllm_block_pool.py",
                str(ROOT / "examples" / "logs" / "vllm-seeded.jsonl")], cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.startswith("REJECTED  vllm_block_pool"), res.stdout
    assert re.search(rf"guard false: .*\({re.escape(folder)}/vllm_block_pool\.py:\d+\)", res.stdout), res.stdout
