"""The README's commands and example spec work as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
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
    assert res.stdout.startswith("VIOLATED  no_foreign_read  in abort_frees_early")
    assert (tmp_path / "ce" / "trace.svg").exists()
    res = CliRunner().invoke(app, ["test", str(tmp_path)])
    assert res.exit_code == 0, res.output


def test_readme_quick_start_puts_ownership_on_path_for_every_later_command() -> None:
    import shlex

    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    assert blocks[0] == "python3 -m venv .venv && . .venv/bin/activate && pip install -q .\n"
    assert blocks[1] == "ownership check specs/sglang_disagg_v0_5_19.py\n"
    assert blocks[2] == "pip install -q '.[test]' && python -m pytest\n"
    # After the quick start each command is one the active environment provides, never a path into it.
    for block in blocks[1:]:
        for line in block.replace("\\\n", " ").splitlines():
            for command in line.split("&&"):
                assert shlex.split(command, comments=True)[0] in {"ownership", "pip", "python"}, line
    for line in re.findall(r"^\$ (.*)$", README, re.M):
        assert line.startswith("ownership "), line
    assert README.count(".venv/bin/") == 2  # the activation, and the line saying to repeat it in a new shell


@pytest.mark.slow
def test_readme_adapter_runs_and_catches_a_seeded_bug(tmp_path: Path) -> None:
    import importlib.util
    import shutil
    import sys

    import pytest

    block = README.split("<!-- readme-mbt: this block is checked by tests/test_readme.py -->", 1)[1]
    code = re.search(r"```python\n(.*?)```", block, re.S)
    assert code is not None
    example = ROOT / "examples" / "paged_allocator"
    for name in ("allocator.py", "allocator_spec.py"):
        shutil.copy(example / name, tmp_path / name)
    (tmp_path / "readme_adapter.py").write_text(code.group(1))
    sys.path.insert(0, str(tmp_path))
    try:
        spec = importlib.util.spec_from_file_location("readme_adapter", tmp_path / "readme_adapter.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["readme_adapter"] = module
        spec.loader.exec_module(module)
        module.test_allocator_follows_its_contract()

        class Buggy(module.PagedAllocatorAdapter):  # type: ignore[name-defined,misc]
            def setup(self) -> None:
                self.impl = module.PagedAllocator(4, defects=["double_free_on_finish"])

        from ownership.testing import assert_conforms

        with pytest.raises(AssertionError, match=r"after finish\(A\): ref_cnt is \[-1, 0, 0, 0\]"):
            assert_conforms(Buggy, max_examples=150, seed=0)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("allocator", None)
        sys.modules.pop("readme_adapter", None)


def _readme_command(start: str) -> list[str]:
    """The README's shell command starting with ``start``, as argv (continuation lines joined)."""
    import shlex

    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            if line.startswith(start):
                return shlex.split(line)[1:]
    raise AssertionError(f"no command starting {start!r} in README.md")


def _as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from a scratch folder that sees the checkout's specs/ and examples/ (so nothing is written into it)."""
    for name in ("specs", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)


def test_readme_preflight_command_names_committed_files() -> None:
    argv = _readme_command("ownership preflight")
    for flag in ("--prefill", "--decode"):
        assert (ROOT / argv[argv.index(flag) + 1]).is_file()


@pytest.mark.slow
def test_readme_preflight_command_works_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _as_written(tmp_path, monkeypatch)
    res = CliRunner().invoke(app, _readme_command("ownership preflight"))
    assert res.exit_code == 1, res.output
    shown = README.split("## Before you deploy", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    for line in shown.splitlines():
        if line.strip() != "..." and not line.endswith("...)"):
            assert line in res.stdout.splitlines(), line
    assert "remedy: or restart both nodes with --context-length 681280 (checked: SAFE, " in res.stdout


@pytest.mark.slow
def test_readme_pool_versus_context_command_works_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _as_written(tmp_path, monkeypatch)
    argv = _readme_command("ownership check specs/sglang_disagg_v0_5_19.py --free prefill_pool_tokens")
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 1, res.output
    assert "cases by domain size" in res.stdout
    assert ("unsafe exactly when prompt_tokens >= prefill_max_req_input_len and prompt_tokens < "
            "decode_max_req_input_len") in res.stdout


def test_readme_what_you_see_is_the_main_checks_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line of the excerpt is a line of the real output, in order (the timing aside), root cause and picks too."""
    _as_written(tmp_path, monkeypatch)
    res = CliRunner().invoke(app, _readme_command("ownership check specs/sglang_disagg_v0_5_19.py"))
    assert res.exit_code == 1, res.output
    shown = README.split("## What you see", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    untimed = [re.sub(r", [\d.]+s$", "", ln.rstrip()) for ln in res.stdout.splitlines()]
    at = 0
    for line in shown.splitlines():
        if line == "  ...":
            continue
        line = re.sub(r", [\d.]+s$", "", line)
        assert line in untimed[at:], f"not in the output (in this order): {line!r}"
        at = untimed.index(line, at) + 1
    assert "       (root cause)" in shown and "root cause, step 2: arrive(B, 6)" in shown
    assert "chose D1 (decode page for slot 0)," in shown
