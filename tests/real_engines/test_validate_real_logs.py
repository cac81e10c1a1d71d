"""``ownership validate`` on logs of fresh runs of the real engines (vLLM 0.33.0, SGLang 0.5.23, CPU).

Each test runs an engine under the runtime monitor, writes the event log and
validates it: a clean run must be a behaviour of the specs that read its
engine's logs, a seeded defect must be rejected at the line where the monitor
flags it.  Test names carry the engine, so ``scripts/real-engines.sh`` runs
this file with ``-k <engine>`` in each engine's environment; elsewhere the
tests skip (the committed logs are validated in the main suite,
``tests/test_validate.py``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ownership.monitor import OwnershipViolation
from ownership.session.validate import validate

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # examples.real_engines.*
VLLM_SPEC = ROOT / "specs" / "vllm_block_pool.py"
CONTRACT = ROOT / "examples" / "validate" / "event_contract.py"


def _lines(log: Path) -> int:
    return len(log.read_text(encoding="utf-8").splitlines()) - 1


# -- SGLang ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sglang_workload() -> ModuleType:
    """examples/real_engines/sglang_workload.py, once SGLang imports (else a skip)."""
    if importlib.util.find_spec("sglang") is not None:
        from examples.real_engines.sglang_import import prepare_sglang_import

        prepare_sglang_import()
    pytest.importorskip("sglang", reason="SGLang is not installed: scripts/real-engines.sh runs this in .venvs/sglang")
    import examples.real_engines.sglang_workload as workload

    return workload


def test_sglang_clean_run_is_validated(sglang_workload: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "sglang.jsonl"
    stats, _ = sglang_workload.run(sglang_workload.Workload(requests=150, seed=5), log=log)
    r = validate(CONTRACT, log)
    assert r.verdict == "VALIDATED", r.rejection
    assert r.events == _lines(log) > 1000 and stats.finished == 150


@pytest.mark.parametrize("bug", ["double_free_of_the_last_decode_slot", "checkpoint_without_remapping_the_row",
                                 "checkpoint_that_releases_its_new_lock"])
def test_sglang_seeded_run_is_rejected_at_the_monitors_line(sglang_workload: ModuleType, tmp_path: Path,
                                                            bug: str) -> None:
    """Each defect examples/real_engines/sglang_defects.py puts back: rejected where the monitor stops."""
    import examples.real_engines.sglang_defects as defects

    log = tmp_path / f"{bug}.jsonl"
    with pytest.raises(OwnershipViolation) as caught:
        sglang_workload.run(sglang_workload.Workload(requests=2000, seed=0), log=log, bug=getattr(defects, bug))
    r = validate(CONTRACT, log)
    j = r.rejection
    assert r.verdict == "REJECTED" and j is not None
    assert (j.seq, j.line) == (caught.value.seq, caught.value.seq + 1) and j.event == caught.value.event


# -- vLLM --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vllm_monitor_tests() -> ModuleType:
    """tests/real_engines/test_vllm_monitor.py (its seeded defect), once vLLM imports (else a skip)."""
    pytest.importorskip("vllm", reason="vLLM is not installed: scripts/real-engines.sh runs this in .venvs/vllm")
    path = Path(__file__).with_name("test_vllm_monitor.py")
    spec = importlib.util.spec_from_file_location("vllm_monitor_tests", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _vllm_run(log: Path, seeded: Any, requests: int) -> OwnershipViolation | None:
    from ownership.monitor.vllm import instrument, monitor_for
    from ownership.monitor.vllm_driver import Workload, build_scheduler, run

    scheduler = build_scheduler()
    monitor = monitor_for(scheduler, log=log, source="tests/real_engines/test_validate_real_logs.py")
    try:
        with monitor, seeded(), instrument(scheduler, monitor):
            run(scheduler, Workload(seed=0, requests=requests))
    except OwnershipViolation as v:
        return v
    return None


def test_vllm_clean_run_is_validated_by_the_block_pool_and_the_contract(vllm_monitor_tests: ModuleType,
                                                                        tmp_path: Path) -> None:
    """The block pool spec holds the run to vLLM's free-queue order; the contract to the ownership rules."""
    log = tmp_path / "vllm.jsonl"
    assert _vllm_run(log, vllm_monitor_tests._nothing, 120) is None
    for spec in (VLLM_SPEC, CONTRACT):
        r = validate(spec, log)
        assert r.verdict == "VALIDATED", (spec.name, r.rejection)
        assert r.events == _lines(log) > 1000


def test_vllm_seeded_run_is_rejected_at_the_monitors_line(vllm_monitor_tests: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "vllm-seeded.jsonl"
    v = _vllm_run(log, vllm_monitor_tests.stale_prefix_index, 600)
    assert v is not None
    for spec in (VLLM_SPEC, CONTRACT):
        j = validate(spec, log).rejection
        assert j is not None and (j.seq, j.line) == (v.seq, v.seq + 1), spec.name
        assert j.event["event"] == "share"
