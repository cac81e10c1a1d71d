"""The runtime ownership monitor on SGLang 0.5.23's real allocator, radix tree and release paths.

The scheduler loop is ``examples/real_engines/sglang_workload.py``.  Skipped
when SGLang is not installed; ``scripts/real-engines.sh`` runs these in
``.venvs/sglang`` (and fails if any is skipped).  Tests named
``test_upstream_*`` assert what SGLang itself does (or does not) notice.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ownership.monitor import OwnershipViolation, apply, monitor_from_header

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # examples.real_engines.*

SKIP_REASON = "SGLang is not installed: scripts/real-engines.sh builds .venvs/sglang with it and runs these tests there"


@pytest.fixture(scope="module")
def wl() -> ModuleType:
    """The workload module, once SGLang imports (else a skip)."""
    if importlib.util.find_spec("sglang") is not None:
        from examples.real_engines.sglang_import import prepare_sglang_import

        prepare_sglang_import()
    pytest.importorskip("sglang", reason=SKIP_REASON)
    import examples.real_engines.sglang_workload as workload

    return workload


@pytest.fixture(scope="module")
def defects(wl: ModuleType) -> ModuleType:
    """The defects that can be put back (imported once the workload is)."""
    import examples.real_engines.sglang_defects as module

    return module


def _events(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def test_a_long_randomised_workload_is_silent_and_its_log_replays_clean(wl: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "sglang-2000.jsonl"
    stats, s = wl.run(wl.Workload(requests=2000, seed=0), log=log)
    print(f"{stats.events} events in {stats.seconds:.2f}s: {stats.events / stats.seconds:,.0f} events/s ({stats})")
    assert stats.finished == 2000
    # the run exercised what the monitor is for: prefix hits, chunked prefill, eviction, retraction
    assert stats.prefix_hit_tokens > 0 and stats.chunked > 0 and stats.evicted_tokens > 0 and stats.retractions > 0
    # at the end every page is back on the engine's free list and the monitor agrees nobody holds one
    ps = s.allocator.page_size
    assert s.allocator.available_size() == 32 * ps
    assert sorted(s.allocator.get_all_free_pages().tolist()) == list(range(1, 33))
    assert all(not s.sm.monitor.holders(p) for p in range(33))
    header, events = _events(log)
    assert header["engine"] == "sglang" and header["nodes"] == {"gpu": {"pages": 33, "page_size": 4, "reserved": [0]}}
    assert len(events) == stats.events and {e["event"] for e in events} == {
        "alloc", "share", "write", "cache", "read", "free", "finish"}
    again = monitor_from_header(header)
    for e in events:
        apply(again, e)
    assert again.seq == stats.events and again.violations == []


def test_the_monitor_changes_nothing_the_engine_does(wl: ModuleType) -> None:
    on, s_on = wl.run(wl.Workload(requests=300, seed=5))
    off, s_off = wl.run(wl.Workload(requests=300, seed=5), monitored=False)
    assert (on.steps, on.prefix_hit_tokens, on.evicted_tokens, on.retractions, on.chunked) == (
        off.steps, off.prefix_hit_tokens, off.evicted_tokens, off.retractions, off.chunked)
    assert s_on.allocator.get_all_free_pages().tolist() == s_off.allocator.get_all_free_pages().tolist()


def _last_free_before(events: list[dict[str, Any]], seq: int, page: int) -> dict[str, Any]:
    return next(e for e in reversed(events[:seq - 1]) if page in e.get("pages", ()) and e["event"] in ("free", "alloc"))


def test_a_double_free_of_the_last_decode_slot_is_caught_at_the_second_free(
        wl: ModuleType, defects: ModuleType, tmp_path: Path) -> None:
    """The reintroduced double free (the defect class of sglang-jax#982): the release frees a slot freed already."""
    log = tmp_path / "double-free.jsonl"
    with pytest.raises(OwnershipViolation) as caught:
        wl.run(wl.Workload(requests=2000, seed=0), log=log, bug=defects.double_free_of_the_last_decode_slot)
    v = caught.value
    print(v)
    assert v.invariant == "no_foreign_free" and v.event["event"] == "free"
    _, events = _events(log)
    assert events[-1] == v.event
    # the page's previous event is the same request's first free of it: nothing was allocated in between
    before = _last_free_before(events, v.seq, v.page)
    assert before["event"] == "free" and before["req"] == v.req
    assert before["at"].startswith("sglang/srt/mem_cache/allocator/paged.py")
    assert v.writer is not None and v.writer.startswith(f"request {v.req} ")


def test_upstream_the_double_free_goes_unnoticed_without_the_debug_pool(wl: ModuleType, defects: ModuleType) -> None:
    """Without the monitor and without SGLANG_DEBUG_MEMORY_POOL the run ends with pages on the free list twice."""
    stats, s = wl.run(wl.Workload(requests=300, seed=0), monitored=False, bug=defects.double_free_of_the_last_decode_slot)
    free = s.allocator.get_all_free_pages().tolist()
    assert stats.finished == 300 and len(free) > len(set(free))
    with pytest.raises(AssertionError):  # SGLANG_DEBUG_MEMORY_POOL=1: the allocator's duplicate check fires
        wl.run(wl.Workload(requests=300, seed=0), monitored=False, bug=defects.double_free_of_the_last_decode_slot,
               debug_memory_pool=True)


def test_a_row_left_on_freed_duplicates_after_a_checkpoint_is_caught_at_the_first_read(
        wl: ModuleType, defects: ModuleType, tmp_path: Path) -> None:
    """The reintroduced stale row (the defect sgl-project/mini-sglang#142 fixes): checkpoint frees, does not remap."""
    log = tmp_path / "no-remap.jsonl"
    with pytest.raises(OwnershipViolation) as caught:
        wl.run(wl.Workload(requests=2000, seed=0), log=log, bug=defects.checkpoint_without_remapping_the_row)
    v = caught.value
    print(v)
    assert v.event["event"] == "read" and v.invariant in ("no_foreign_read", "no_unowned_access")
    _, events = _events(log)
    # the reader freed that page itself in a checkpoint (RadixCache._insert_cache's free of its duplicates) and has
    # not read since: the first read after the defect is where it is caught
    freed = next(e for e in reversed(events[:v.seq - 1]) if e["event"] == "free" and v.page in e["pages"]
                 and e["req"] == v.req and "note" not in e)
    assert freed["at"].startswith("sglang/srt/mem_cache/allocator/paged.py")
    assert not any(e["event"] == "read" and e["req"] == v.req for e in events[freed["seq"]:v.seq - 1])


def test_upstream_the_stale_row_goes_unnoticed_even_with_the_debug_pool(wl: ModuleType, defects: ModuleType) -> None:
    """SGLang's own checks (SGLANG_DEBUG_MEMORY_POOL=1 included) see nothing wrong: the free list stays consistent."""
    stats, s = wl.run(wl.Workload(requests=2000, seed=0), monitored=False, bug=defects.checkpoint_without_remapping_the_row,
                      debug_memory_pool=True)
    assert stats.finished == 2000
    assert sorted(s.allocator.get_all_free_pages().tolist()) == list(range(1, 33))


def test_the_committed_example_logs_are_what_the_workload_writes(wl: ModuleType, tmp_path: Path) -> None:
    written = wl.write_example_logs(tmp_path)
    for name in ("sglang-clean.jsonl", "sglang-seeded.jsonl"):
        assert (tmp_path / name).read_bytes() == (wl.LOGS / name).read_bytes(), \
            f"examples/logs/{name} is stale: run python -m examples.real_engines.sglang_workload"
    assert written["sglang-clean.jsonl"][1] == []
    first = written["sglang-seeded.jsonl"][1][0]
    assert (first.invariant, first.event["event"]) == ("no_foreign_free", "free")


def test_uninstall_gives_the_engine_its_own_methods_back(wl: ModuleType) -> None:
    from ownership.monitor.sglang import SglangMonitor

    with wl.sglang_runtime() as sg:
        allocator = sg.Allocator(8 * 4, 4, sg.torch.int64, "cpu", None, False)
        tree = sg.RadixCache.create_simulated(mock_allocator=allocator, page_size=4)
        sm = SglangMonitor.create(allocator, tree)
        assert "alloc" in vars(allocator) and "evict" in vars(tree)
        with pytest.raises(RuntimeError, match="acting"):
            allocator.alloc(4)  # nobody said which request allocates
        sm.uninstall()
        assert "alloc" not in vars(allocator) and "evict" not in vars(tree)
        assert allocator.available_size() == 8 * 4 and sm.monitor.seq == 0  # the refused call took nothing
        assert allocator.alloc(4) is not None and sm.monitor.seq == 0


def test_a_lock_dropped_after_a_checkpoint_is_caught_at_the_requests_next_read(
        wl: ModuleType, defects: ModuleType, tmp_path: Path) -> None:
    """The reintroduced lock/unlock asymmetry: the running request reads a path it no longer holds a lock on."""
    log = tmp_path / "dropped-lock.jsonl"
    with pytest.raises(OwnershipViolation) as caught:
        wl.run(wl.Workload(requests=2000, seed=0), log=log, bug=defects.checkpoint_that_releases_its_new_lock)
    v = caught.value
    print(v)
    assert (v.invariant, v.event["event"]) == ("no_unowned_access", "read")
    _, events = _events(log)
    # the reader's last event on that page was the unlock (dec_lock_ref's free) right after its checkpoint's lock
    last = next(e for e in reversed(events[:v.seq - 1]) if e["req"] == v.req and v.page in e.get("pages", ()))
    assert last["event"] == "free" and last["at"].startswith("sglang/srt/mem_cache/radix_cache.py")


def test_upstream_the_dropped_lock_shows_only_once_the_free_list_is_corrupt(wl: ModuleType, defects: ModuleType) -> None:
    """SGLang has no check that a running request's path stays locked; what it sees is the damage, later.

    Without the debug pool the run finishes with pages on the free list
    several times; with it, the allocator's duplicate check fires once a
    page evicted under the request comes back through its next checkpoint.
    """
    stats, s = wl.run(wl.Workload(requests=300, seed=0), monitored=False,
                      bug=defects.checkpoint_that_releases_its_new_lock)
    free = s.allocator.get_all_free_pages().tolist()
    assert stats.finished == 300 and len(free) > len(set(free))
    with pytest.raises(AssertionError):
        wl.run(wl.Workload(requests=300, seed=0), monitored=False, bug=defects.checkpoint_that_releases_its_new_lock,
               debug_memory_pool=True)
