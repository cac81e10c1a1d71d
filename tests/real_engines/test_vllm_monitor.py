"""The runtime ownership monitor on vLLM's real v1 scheduler (vLLM 0.33.0, CPU).

``ownership.monitor.vllm`` instruments the real ``Scheduler``, ``KVCacheManager``
and ``BlockPool``; ``ownership.monitor.vllm_driver`` drives them with synthetic
requests and model outputs.  The released code must keep the monitor silent over
a long seeded workload; with the defect of vllm-project/vllm#4764 put back into
``BlockPool`` (a block reused from the free queue keeps its prefix-cache index
entry) the monitor must stop at the prefix hit on the overwritten block.

The tests that drive vLLM skip when vLLM is not installed (scripts/real-engines.sh
runs them in .venvs/vllm); the replays of the committed example logs need only
this package.  ``python tests/real_engines/test_vllm_monitor.py logs`` rewrites
examples/logs/vllm-*.jsonl; ``... bench`` times the workload with and without
the monitor.
"""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ownership.monitor import OwnershipViolation, apply, monitor_from_header

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "examples" / "logs"
SKIP_REASON = "vLLM is not installed: scripts/real-engines.sh builds .venvs/vllm with it and runs these tests there"

# The committed logs: small enough to read.  The clean one has prefix hits, preemptions and an
# abort; the seeded one is the default workload under the seeded bug, up to the violation.
LOG_SHAPE = {"num_blocks": 10, "block_size": 4, "max_num_seqs": 3, "max_num_batched_tokens": 32}
LOG_WORKLOAD = {"seed": 0, "requests": 12, "prefixes": 2, "prefix_tokens": (6, 14), "suffix_tokens": (0, 6),
                "output_tokens": (2, 12), "abort": 0.03}
SEEDED_WORKLOAD = {"seed": 0, "requests": 600}


@pytest.fixture(scope="module")
def vllm() -> ModuleType:
    """The vllm package, or a skip saying it is not installed."""
    return pytest.importorskip("vllm", reason=SKIP_REASON)


class Counting:
    """Forwards every event to a monitor and counts the kinds."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.kinds: Counter[str] = Counter()

    def __getattr__(self, kind: str) -> Any:
        method = getattr(self.inner, kind)

        def forward(*args: Any, **kwargs: Any) -> Any:
            self.kinds[kind] += 1
            return method(*args, **kwargs)
        return forward


@contextmanager
def stale_prefix_index() -> Iterator[None]:
    """vllm-project/vllm#4764's defect, put back into v1's ``BlockPool``.

    There (block manager v2) a block popped from the evictor for reuse stayed in
    the cached-blocks index, so a later lookup of its old prefix still found it
    after its new owner had overwritten it.  v1 does that cleanup in
    ``BlockPool._maybe_evict_cached_block`` (called by ``get_new_blocks`` for each
    block it hands out): the seeded version resets the block's own hash, as the
    fix's neighbour code does, but leaves ``cached_block_hash_to_block`` as it is.
    """
    from vllm.v1.core.block_pool import BlockPool

    released = BlockPool.__dict__["_maybe_evict_cached_block"]

    def forget_hash_keep_index(self: Any, block: Any) -> bool:
        self.cached_block_hashes_by_block.pop(block.block_id, None)
        had_hash = block.block_hash is not None
        block.reset_hash()
        return had_hash

    BlockPool._maybe_evict_cached_block = forget_hash_keep_index
    try:
        yield
    finally:
        BlockPool._maybe_evict_cached_block = released


def _reuse_scenario(scheduler: Any, tables: dict[str, list[int]]) -> None:
    """A finishes (its 3 full blocks stay cached); B then needs every block, A's included; C
    asks for A's prompt again.  ``tables`` receives the block table vLLM first gave each request."""
    from ownership.monitor.vllm_driver import make_request, step

    manager = scheduler.kv_cache_manager

    def note_tables(output: Any) -> None:
        for req_id in output.num_scheduled_tokens:
            tables.setdefault(req_id, list(manager.get_block_ids(req_id)[0]))

    def run_until_gone(req_id: str) -> None:
        for _ in range(50):
            step(scheduler, lambda: 7, note_tables)
            if req_id not in scheduler.requests:
                return
        raise AssertionError(f"request {req_id} did not finish")

    prompt_a = list(range(100, 113))  # 13 tokens: 3 full blocks of 4 and one partial
    scheduler.add_request(make_request(scheduler, "A", prompt_a, max_tokens=1))
    run_until_gone("A")
    usable = manager.block_pool.get_num_free_blocks()  # B's prompt and its one output token need them all
    scheduler.add_request(make_request(scheduler, "B", list(range(500, 500 + 4 * usable - 1)), max_tokens=1))
    run_until_gone("B")
    scheduler.add_request(make_request(scheduler, "C", prompt_a, max_tokens=1))
    run_until_gone("C")


REUSE_SHAPE = {"num_blocks": 10, "block_size": 4, "max_num_seqs": 4, "max_num_batched_tokens": 64}


# -- the released code ----------------------------------------------------------------------
def test_released_scheduler_keeps_the_monitor_silent_over_a_long_workload(vllm: ModuleType) -> None:
    """600 requests over shared prefixes, ~1500 steps with preemptions and aborts: no violation."""
    from ownership.monitor.vllm import instrument, monitor_for
    from ownership.monitor.vllm_driver import Workload, build_scheduler, run

    scheduler = build_scheduler()
    sink = Counting(monitor_for(scheduler))
    with instrument(scheduler, sink):
        stats = run(scheduler, Workload(seed=0, requests=600))
    assert stats.added == 600 and stats.finished + stats.aborted == 600
    assert stats.steps > 1000 and stats.preemptions > 50 and stats.aborted > 10
    assert sink.kinds["share"] > 100 and sink.kinds["cache"] > 100  # prefix hits did happen
    assert sink.kinds["finish"] == 600
    assert not sink.inner.held_by("r0") and sink.inner.seq > 10_000


def test_released_scheduler_is_silent_under_priority_preemption(vllm: ModuleType) -> None:
    """Priority scheduling preempts requests already scheduled in the same step: still silent."""
    from ownership.monitor.vllm import instrument, monitor_for
    from ownership.monitor.vllm_driver import SchedulerShape, Workload, build_scheduler, run

    scheduler = build_scheduler(SchedulerShape(policy="priority"))
    monitor = monitor_for(scheduler)
    with instrument(scheduler, monitor):
        stats = run(scheduler, Workload(seed=1, requests=300, priorities=4))
    assert stats.preemptions > 30 and stats.finished + stats.aborted == 300


def test_released_scheduler_reuse_scenario_is_silent(vllm: ModuleType) -> None:
    """The scenario the seeded bug breaks, on the released code: B's allocation evicts A's cache
    entries, so C finds no hit and computes its prompt afresh."""
    from ownership.monitor.vllm import instrument, monitor_for
    from ownership.monitor.vllm_driver import SchedulerShape, build_scheduler

    scheduler = build_scheduler(SchedulerShape(**REUSE_SHAPE))
    sink = Counting(monitor_for(scheduler))
    tables: dict[str, list[int]] = {}
    with instrument(scheduler, sink):
        _reuse_scenario(scheduler, tables)
    assert set(tables["A"]) <= set(tables["B"])  # B really did reuse A's blocks
    assert sink.kinds["share"] == 0 and sink.kinds["finish"] == 3


def test_instrumentation_is_removed_after_the_block(vllm: ModuleType) -> None:
    from ownership.monitor.vllm import instrument, monitor_for
    from ownership.monitor.vllm_driver import build_scheduler

    scheduler = build_scheduler()
    pool = scheduler.kv_cache_manager.block_pool
    with instrument(scheduler, monitor_for(scheduler)):
        assert "get_new_blocks" in vars(pool)
    assert "get_new_blocks" not in vars(pool) and "schedule" not in vars(scheduler)


# -- the seeded upstream bug ----------------------------------------------------------------
def test_seeded_stale_index_is_caught_at_the_prefix_hit_on_the_reused_block(vllm: ModuleType) -> None:
    """With vllm#4764's defect, C's lookup of A's prompt finds A's old blocks, which B has since
    been given and overwritten: the monitor stops at C's share of the first of them."""
    from ownership.monitor.vllm import instrument, monitor_for
    from ownership.monitor.vllm_driver import SchedulerShape, build_scheduler

    scheduler = build_scheduler(SchedulerShape(**REUSE_SHAPE))
    monitor = monitor_for(scheduler)
    tables: dict[str, list[int]] = {}
    with stale_prefix_index(), instrument(scheduler, monitor), pytest.raises(OwnershipViolation) as caught:
        _reuse_scenario(scheduler, tables)
    violation = caught.value
    assert violation.invariant == "no_wrong_cache_hit" and violation.req == "C"
    assert violation.event["event"] == "share" and violation.event["at"].startswith("vllm/v1/core/block_pool.py:")
    assert violation.page == violation.event["pages"][0]
    assert violation.page in tables["A"] and violation.page in tables["B"] and "C" not in tables
    # The page is one vLLM gave A and then B (B wrote it last), and vLLM's index still maps a
    # hash to it that the block itself no longer carries.
    assert monitor.content(violation.page) is not None and violation.writer is not None
    assert violation.writer.startswith("request B")
    pool = scheduler.kv_cache_manager.block_pool
    stale = [key for key, blocks in pool.cached_block_hash_to_block._cache.items()
             if violation.page in ({blocks.block_id} if not isinstance(blocks, dict) else set(blocks))
             and pool.blocks[violation.page].block_hash != key]
    assert stale, "the violating page should be a stale index entry"


def test_seeded_stale_index_is_caught_in_the_random_workload(vllm: ModuleType) -> None:
    from ownership.monitor.vllm import instrument, monitor_for
    from ownership.monitor.vllm_driver import Workload, build_scheduler, run

    scheduler = build_scheduler()
    monitor = monitor_for(scheduler)
    with stale_prefix_index(), instrument(scheduler, monitor), pytest.raises(OwnershipViolation) as caught:
        run(scheduler, Workload(seed=0, requests=600))
    violation = caught.value
    assert violation.invariant == "no_wrong_cache_hit" and violation.event["event"] == "share"
    assert violation.writer is not None and not violation.writer.startswith(f"request {violation.req} ")


# -- the committed example logs ---------------------------------------------------------------
def _log(seeded: bool) -> str:
    """The example log's text, produced by a fresh run."""
    from ownership.monitor.vllm import instrument, monitor_for
    from ownership.monitor.vllm_driver import SchedulerShape, Workload, build_scheduler, run

    shape = SchedulerShape() if seeded else SchedulerShape(**LOG_SHAPE)
    workload = Workload(**SEEDED_WORKLOAD) if seeded else Workload(**LOG_WORKLOAD)  # type: ignore[arg-type]
    scheduler = build_scheduler(shape)
    buffer = io.StringIO()
    what = (f"BlockPool._maybe_evict_cached_block seeded with vllm-project/vllm#4764's defect (a reused block "
            f"stays in the prefix-cache index), {shape}, {workload}" if seeded else f"released code, {shape}, {workload}")
    monitor = monitor_for(scheduler, log=buffer,
                          source=f"tests/real_engines/test_vllm_monitor.py: vLLM's v1 Scheduler on the CPU, {what}")
    try:
        with monitor, (stale_prefix_index() if seeded else _nothing()), instrument(scheduler, monitor):
            run(scheduler, workload)
    except OwnershipViolation:
        if not seeded:
            raise
    return buffer.getvalue()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@pytest.mark.parametrize("name", ["vllm-clean", "vllm-seeded"])
def test_committed_example_log_is_what_a_run_writes(vllm: ModuleType, name: str) -> None:
    """examples/logs/<name>.jsonl equals a fresh run's log (rewrite: ``python <this file> logs``)."""
    committed = (LOGS / f"{name}.jsonl").read_text(encoding="utf-8")
    assert _log(seeded=name.endswith("seeded")) == committed


def _replay(lines: Sequence[str]) -> tuple[Any, OwnershipViolation | None]:
    monitor = monitor_from_header(json.loads(lines[0]))
    for line in lines[1:]:
        try:
            apply(monitor, json.loads(line))
        except OwnershipViolation as violation:
            return monitor, violation
    return monitor, None


def test_clean_example_log_replays_without_a_violation() -> None:
    lines = (LOGS / "vllm-clean.jsonl").read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["engine"] == "vllm" and header["nodes"]["gpu"]["reserved"] == [0]
    kinds = Counter(json.loads(line)["event"] for line in lines[1:])
    assert {"alloc", "share", "write", "cache", "read", "free", "finish"} <= set(kinds)
    assert 100 <= len(lines) <= 1000
    _, violation = _replay(lines)
    assert violation is None


def test_seeded_example_log_replays_to_the_violation_on_its_last_line() -> None:
    lines = (LOGS / "vllm-seeded.jsonl").read_text(encoding="utf-8").splitlines()
    _, violation = _replay(lines)
    assert violation is not None and violation.invariant == "no_wrong_cache_hit"
    last = json.loads(lines[-1])
    assert violation.seq == last["seq"] and last["event"] == "share" and violation.req == last["req"]
    assert violation.writer is not None and not violation.writer.startswith(f"request {violation.req} ")


# -- python tests/real_engines/test_vllm_monitor.py logs|bench ------------------------------
def _bench(requests: int = 600, rounds: int = 5) -> None:
    """The same seeded run with the scheduler alone, instrumented with a no-op sink, with the
    monitor, and with the monitor writing its log; best of ``rounds`` in process CPU time."""
    from ownership.monitor.vllm import instrument, monitor_for
    from ownership.monitor.vllm_driver import Workload, build_scheduler, run

    class Discard:
        def __getattr__(self, kind: str) -> Any:
            return lambda *args, **kwargs: None

    times: dict[str, list[float]] = {"scheduler alone": [], "no-op sink": [], "monitor": [], "monitor + log": []}
    for _ in range(rounds):
        for what in times:
            scheduler = build_scheduler()
            sink = (Discard() if what == "no-op sink" else
                    monitor_for(scheduler, log=io.StringIO() if what == "monitor + log" else None))
            with instrument(scheduler, sink) if what != "scheduler alone" else _nothing():
                stats = run(scheduler, Workload(requests=requests))
            times[what].append(stats.cpu_seconds)
    base = min(times["scheduler alone"])
    print(f"{requests} requests, {stats.steps} steps; best of {rounds}, CPU seconds:")
    for what, seconds in times.items():
        print(f"  {what:16} {min(seconds):.3f} s  x{min(seconds) / base:.2f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["logs"]:
        LOGS.mkdir(parents=True, exist_ok=True)
        for seeded in (False, True):
            path = LOGS / f"vllm-{'seeded' if seeded else 'clean'}.jsonl"
            path.write_text(_log(seeded), encoding="utf-8")
            print(path, len(path.read_text(encoding="utf-8").splitlines()), "lines")
    elif sys.argv[1:] == ["bench"]:
        _bench()
    else:
        sys.exit("usage: test_vllm_monitor.py logs|bench")
