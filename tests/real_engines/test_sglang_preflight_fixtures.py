"""The committed SGLang preflight fixtures are what SGLang's own code prints (no drift).

Runs in ``.venvs/sglang`` (``scripts/real-engines.sh``); skipped where SGLang is not installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "real_engines"))
sys.path.insert(0, str(ROOT))
from examples.real_engines.sglang_import import prepare_sglang_import  # noqa: E402

prepare_sglang_import()  # before importorskip: importing sglang needs it on a CPU torch
pytest.importorskip("sglang", reason="SGLang is not installed: scripts/real-engines.sh runs this in .venvs/sglang")

import preflight_fixtures as fx  # noqa: E402

#: Keys that change from run to run (none in the fixtures' values), compared by presence only.
VOLATILE = ("startup_time",)


@pytest.fixture(scope="module")
def produced() -> dict[str, str]:
    return fx.sglang_files()


def test_the_startup_logs_are_the_engine_s_lines(produced: dict[str, str]) -> None:
    for role in ("prefill", "decode"):
        for rel in (f"tests/data/preflight/incident-{role}.log", f"examples/preflight/incident-{role}.log"):
            committed = (ROOT / rel).read_text().splitlines()
            fresh = produced[rel].splitlines()
            assert [fx.message(x) for x in committed] == [fx.message(x) for x in fresh], rel


def test_the_server_info_documents_are_the_engine_s(produced: dict[str, str]) -> None:
    for role in ("prefill", "decode"):
        rel = f"tests/data/preflight/server-info-{role}.json"
        committed, fresh = json.loads((ROOT / rel).read_text()), json.loads(produced[rel])
        assert committed.keys() == fresh.keys()
        assert {k: v for k, v in committed.items() if k not in VOLATILE} == {
            k: v for k, v in fresh.items() if k not in VOLATILE}


def test_the_scheduler_line_is_the_same_f_string_in_0_5_20_to_0_5_22() -> None:
    """The fixture comes from the installed 0.5.23's f-string; the vulnerable releases print the same line."""
    installed = fx.scheduler_message(681_280, fx._source("sglang.srt.managers.scheduler"))
    assert installed.startswith("max_total_num_tokens=681280, ") and ", context_len=1048576, " in installed
    # Where the unpacked older sources are on this machine, compare with them (no skip: real-engines.sh fails on one).
    for version in ("0.5.20", "0.5.21", "0.5.22"):
        src = Path(f"/tmp/wheels/src/{version}/sglang/srt/managers/scheduler.py")
        if src.exists():
            assert fx.scheduler_message(681_280, src.read_text()) == installed, version


def test_preflight_reads_what_the_engine_printed(produced: dict[str, str], tmp_path: Path) -> None:
    from ownership.preflight import read_node

    for name, text in produced.items():
        path = tmp_path / Path(name).name
        path.write_text(text)
        node = read_node(path)
        role = "prefill" if "prefill" in name else "decode"
        assert (node.role, node.context_len, node.pool_tokens, node.page_size) == (role, fx.CONTEXT, fx.POOLS[role], fx.PAGE)
        assert node.transfer_backend == "mooncake"
