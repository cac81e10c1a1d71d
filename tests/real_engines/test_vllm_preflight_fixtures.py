"""The committed vLLM preflight fixture is what vLLM 0.33.0's own code prints (no drift).

Runs in ``.venvs/vllm`` (``scripts/real-engines.sh``); skipped where vLLM is not installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "real_engines"))
sys.path.insert(0, str(ROOT))
pytest.importorskip("vllm", reason="vLLM is not installed: scripts/real-engines.sh runs this in .venvs/vllm")

import preflight_fixtures as fx  # noqa: E402


def test_the_vllm_log_is_the_engine_s_lines() -> None:
    rel = "tests/data/preflight/vllm-node.log"
    fresh = fx.vllm_files()[rel].splitlines()
    committed = (ROOT / rel).read_text().splitlines()
    assert [fx.message(x) for x in committed] == [fx.message(x) for x in fresh]


def test_vllm_refuses_to_start_with_a_pool_below_max_model_len() -> None:
    """What the NOT COVERED verdict says about vLLM: check_enough_kv_cache_memory raises, naming max_model_len."""
    from vllm.v1.core.kv_cache_planning import _check_enough_kv_cache_memory

    with pytest.raises(ValueError, match=r"max seq len \(1048576\)"):
        _check_enough_kv_cache_memory(100, lambda: 200, 1_048_576, lambda mem: 681_280)
    _check_enough_kv_cache_memory(200, lambda: 200, 1_048_576, lambda mem: 1_048_576)  # enough: no error
