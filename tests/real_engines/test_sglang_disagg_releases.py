"""The committed 0.5.19 counterexample replayed against the real queues of SGLang 0.5.20 and 0.5.21.

``counterexamples/sglang_disagg_v0_5_19/trace.json`` is the model's 15-step leak: A runs, then a
too-long prompt B, rejected by prefill and accepted by decode, reads A's stale KV.  Each release
runs in its own interpreter (``sglang_disagg_releases_driver.py``, a subprocess with the
release's ``--no-deps --target`` directory first on ``sys.path``) and the trace's actions drive
its real ``PrefillBootstrapQueue``, ``DecodePreallocQueue`` and fake transfer backend on a CPU
(the driver's docstring lists what is real and what stands in).

The releases live in the environment ``scripts/real-engines.sh sglang-releases`` builds
(``<venv>/releases/<version>/``); elsewhere these tests are skipped, and that script fails if
any is.  The spec-side claims they check are in ``specs/sglang_disagg_v0_5_20.py`` and
``specs/sglang_disagg_v0_5_21.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("sglang_disagg_releases_driver.py")
TRACE = ROOT / "counterexamples" / "sglang_disagg_v0_5_19" / "trace.json"
RELEASES = Path(os.environ.get("OWNERSHIP_SGLANG_RELEASES", Path(sys.prefix) / "releases"))
SKIP_REASON = ("the SGLang 0.5.20/0.5.21 release directories are not here: "
               "scripts/real-engines.sh sglang-releases builds them and runs these tests there")


def _replay(version: str, *flags: str) -> dict[str, Any]:
    """The driver's report for one release (a fresh interpreter: two SGLang versions cannot share one)."""
    target = RELEASES / version
    if not (target / "sglang").is_dir():
        pytest.skip(SKIP_REASON)
    proc = subprocess.run([sys.executable, str(DRIVER), str(target), str(TRACE), *flags],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["release"] == version and report["sglang_file"].startswith(str(target))
    return report


@pytest.fixture(scope="module")
def v20() -> dict[str, Any]:
    return _replay("0.5.20")


@pytest.fixture(scope="module")
def v21() -> dict[str, Any]:
    return _replay("0.5.21")


def _step(report: dict[str, Any], n: int) -> dict[str, Any]:
    step: dict[str, Any] = report["steps"][n - 1]
    assert step["step"] == n
    return step


def test_the_trace_is_the_leak_it_replays() -> None:
    trace = json.loads(TRACE.read_text())
    assert trace["violation"] == "no_foreign_read"
    assert [s["action"] for s in trace["steps"]][-4:] == [
        "prefill_forward", "prefill_send", "decode_pop_transferred", "decode_forward"]
    assert trace["steps"][1]["args"] == ["B", trace["params"]["prompt_tokens"]]


def test_the_real_queues_are_constructed_on_a_cpu(v20: dict[str, Any], v21: dict[str, Any]) -> None:
    for report in (v20, v21):
        assert report["construction"] == {"PrefillBootstrapQueue": "FakeKVManager",
                                          "DecodeTransferQueue": "constructed",
                                          "DecodePreallocQueue": "FakeKVManager"}


def test_both_releases_reject_b_on_prefill_only_and_decode_reserves_the_whole_prompt(
        v20: dict[str, Any], v21: dict[str, Any]) -> None:
    for report in (v20, v21):
        b = _step(report, 2)
        assert (b["prefill_rejected"], b["decode_rejected"]) == (True, False)
        assert b["prefill_to_finish"] == "FINISH_ABORT" and b["finished_after_reject"] is False
        assert (b["prefill_input_len"], b["decode_input_len"]) == (1, 6)  # the one-token stub vs the full prompt
        assert b["decode_queued"] is True  # decode's own Req carries no rejection: no door applies
        reserve = _step(report, 10)
        assert reserve["enabled"] and reserve["reserved_pages"] == 3 and reserve["to_finish_seen_by_decode"] is None


def test_0_5_20_admits_b_forwards_it_then_retires_it_unsent(v20: dict[str, Any]) -> None:
    b = _step(v20, 2)
    assert b["prefill_queued"] and b["prefill_has_sender"] and b["is_unadmitted_reject"] is None
    boot = _step(v20, 11)
    assert boot["enabled"] and boot["sender_num_pages"] == 1 and boot["metadata_buffer_index"] >= 0
    assert _step(v20, 12)["wrote_tokens"] == 1
    send = _step(v20, 13)
    assert send["sent"] is False and send["retired_by__retire_aborted_prefill_result"] is True
    assert send["sender_poll"] == "Failed" and send["finished_reason"] == "FINISH_ABORT"
    stop = _step(v20, 14)
    assert stop["action"] == "decode_pop_transferred" and stop["enabled"] is False
    assert len(v20["steps"]) == 14  # B's decode forward, the stale read, never comes


def test_0_5_21_retires_b_at_the_prefill_door(v21: dict[str, Any]) -> None:
    b = _step(v21, 2)
    assert b["is_unadmitted_reject"] is True and b["retired"] == ["prefill:B"]
    assert (b["prefill_queued"], b["prefill_has_sender"], b["prefill_finished_reason"]) == (False, False, "FINISH_ABORT")
    assert _step(v21, 1)["is_unadmitted_reject"] is False and _step(v21, 1)["prefill_queued"]
    stop = _step(v21, 11)
    assert stop["action"] == "prefill_pop_bootstrapped" and stop["enabled"] is False
    assert len(v21["steps"]) == 11


def test_a_and_its_own_kv_pass_through_both_releases(v20: dict[str, Any], v21: dict[str, Any]) -> None:
    for report in (v20, v21):
        read = _step(report, 8)
        assert read["kv_owner_per_token"] == ["A", "A"] and read["foreign"] == [] and read["unwritten"] == 0


def test_control_with_0_5_19s_send_the_same_queues_hand_b_a_stale_page() -> None:
    # Without the abort fork (0.5.19 prefill.py:797 sends every finished result) the replay runs to the
    # end on the real 0.5.20 queues and allocators, and B's attention reads a token A wrote.
    report = _replay("0.5.20", "--send-aborted")
    assert report["send_aborted"] is True and len(report["steps"]) == 15
    send = _step(report, 13)
    assert send["sent"] and send["sent_tokens"] == 1 and send["decode_reserved_tokens"] == 6
    assert _step(report, 14)["receiver_poll"] == "Success"
    read = _step(report, 15)
    assert read["foreign"] == ["A"] and read["kv_owner_per_token"][0] == "B" and read["unwritten"] >= 1
