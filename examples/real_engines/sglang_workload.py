"""A scheduler loop over SGLang's real page bookkeeping, with the runtime ownership monitor on or off.

Needs SGLang 0.5.23 on a CPU torch (``scripts/real-engines.sh`` builds
``.venvs/sglang``).  The loop plays SGLang's scheduler for randomised
requests and calls the engine's own code for every page decision:

* admission (``PrefillAdder.add_one_req``): ``RadixCache.match_prefix`` on the
  prompt minus its last token, ``RadixCache.lock`` of the matched node,
  ``ReqToTokenPool.alloc``, and ``allocation.alloc_paged_token_slots_extend``
  (which evicts from the tree under memory pressure, then ``alloc_extend``);
* one prefill batch per step: a running chunked request first, then new
  requests until the step's token budget runs out (the request that does not
  fit is chunked); results are processed in batch order, as
  ``process_batch_result_prefill`` does: a request finished at prefill is
  released with ``common.release_kv_cache(checkpoint=True)``, the chunked one
  checkpointed with ``common.checkpoint_kv_cache``;
* decode: ``allocation.alloc_paged_token_slots_decode`` for the running batch;
  a request at its token limit is released with ``release_kv_cache(checkpoint=True)``;
  when memory runs out the newest running request is retracted
  (``release_kv_cache(checkpoint=False)``) and queued again;
* at the end the tree evicts everything.

The model's forward pass is replaced by :meth:`SglangMonitor.forward` (the
write of the new tokens' KV and the read of the whole row, from the real
``req_to_token`` row).  Two SGLang functions that read server-wide
configuration (``get_spec``, ``get_serving``) are given a plain
configuration while a run lasts; nothing else of SGLang is replaced.

Run ``python -m examples.real_engines.sglang_workload`` (in the SGLang
environment, from the repository root) to regenerate ``examples/logs/``.
"""

from __future__ import annotations

import os
import random
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

from examples.real_engines.sglang_import import prepare_sglang_import
from ownership.monitor.sglang import TREE, SglangMonitor

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "examples" / "logs"


@dataclass(frozen=True)
class Workload:
    """The randomised requests and the pool they run in."""

    requests: int = 2000
    seed: int = 0
    pages: int = 32  # allocatable pages (page 0, the padding page, comes on top)
    page_size: int = 4
    max_running: int = 8
    prefill_budget: int = 24  # tokens per prefill batch (SGLang's chunked_prefill_size)
    families: int = 5  # prompts share one of this many system prefixes
    prefix_tokens: tuple[int, int] = (4, 20)
    suffix_tokens: tuple[int, int] = (1, 14)
    new_tokens: tuple[int, int] = (1, 8)


@dataclass
class Stats:
    """What one run did."""

    finished: int = 0
    steps: int = 0
    events: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # process CPU time: what the benchmark compares (the machine is shared)
    prefix_hit_tokens: int = 0
    evicted_tokens: int = 0
    retractions: int = 0
    chunked: int = 0
    finished_at_prefill: int = 0


class _Kv:
    """The fields of ``schedule_batch.ReqKvInfo`` the release and checkpoint paths read.

    ``schedule_batch`` itself does not import in the pinned environment (it
    needs the OpenAI protocol package), so the request record is this stand-in.
    """

    def __init__(self) -> None:
        self.req_pool_idx: int | None = None
        self.cache_protected_len = 0
        self.cache_inserted_len = 0
        self.kv_committed_len = 0
        self.kv_allocated_len = 0
        self.swa_evict_floor = 0

    def swa_dead_lo(self, page_size: int) -> int:
        return self.cache_protected_len

    def get_evicted_seqlen(self, component_type: object) -> int:
        return 0

    @property
    def holds_kv(self) -> bool:
        return self.req_pool_idx is not None

    @property
    def is_kv_released(self) -> bool:
        return self.kv_allocated_len == 0

    def mark_kv_released(self) -> None:
        self.kv_allocated_len = 0


class _Req:
    """The fields of ``schedule_batch.Req`` that ``release_kv_cache`` and ``RadixCache.checkpoint`` read."""

    def __init__(self, rid: str, prompt: list[int], max_new: int) -> None:
        self.rid = rid
        self.origin_input_ids = array("q", prompt)
        self.output_ids: list[int] = []
        self.full_untruncated_fill_ids = array("q", prompt)
        self.max_new = max_new
        self.kv = _Kv()
        self.extra_key = None
        self.cache_salt = None
        self.priority = None
        self.lock: Any = None
        self.last_node: Any = None
        self.finished_reason: str | None = None
        self.finished_len = None
        self.skip_radix_cache_insert = False
        self.extend_end = 0
        self.prefix_len = 0

    def finished(self) -> bool:
        return self.finished_reason is not None

    def refresh_fill_ids(self) -> None:
        self.full_untruncated_fill_ids = array("q", list(self.origin_input_ids) + self.output_ids)

    def owned_kv_len(self) -> int:
        return self.kv.kv_committed_len


@contextmanager
def sglang_runtime(debug_memory_pool: bool = False) -> Iterator[SimpleNamespace]:
    """The SGLang modules, with a plain server configuration for the two functions that read one."""
    prepare_sglang_import()
    import torch
    from sglang.srt.mem_cache import allocation, common
    from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator
    from sglang.srt.mem_cache.base_prefix_cache import EvictParams, MatchPrefixParams
    from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
    from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

    saved = common.get_spec, common.get_serving, os.environ.get("SGLANG_DEBUG_MEMORY_POOL")
    common.get_spec = lambda: SimpleNamespace(speculative_algorithm=None)  # type: ignore[assignment]
    common.get_serving = lambda: SimpleNamespace(strip_thinking_cache=False)  # type: ignore[assignment]
    os.environ["SGLANG_DEBUG_MEMORY_POOL"] = "1" if debug_memory_pool else "0"
    try:
        yield SimpleNamespace(torch=torch, allocation=allocation, common=common, RadixCache=RadixCache,
                              RadixKey=RadixKey, ReqToTokenPool=ReqToTokenPool, EvictParams=EvictParams,
                              MatchPrefixParams=MatchPrefixParams, Allocator=PagedTokenToKVPoolAllocator)
    finally:
        common.get_spec, common.get_serving = saved[0], saved[1]
        if saved[2] is None:
            os.environ.pop("SGLANG_DEBUG_MEMORY_POOL", None)
        else:
            os.environ["SGLANG_DEBUG_MEMORY_POOL"] = saved[2]


def requests_of(w: Workload) -> list[tuple[list[int], int]]:
    """(prompt token ids, max new tokens) per request, from the seed."""
    rng = random.Random(w.seed)
    families = [[rng.randrange(1, 30000) for _ in range(rng.randint(*w.prefix_tokens))] for _ in range(w.families)]
    out = []
    for _ in range(w.requests):
        fam = families[rng.randrange(w.families)]
        cut = rng.randint(len(fam) // 2, len(fam))  # some share only part of the system prefix
        prompt = fam[:cut] + [rng.randrange(1, 30000) for _ in range(rng.randint(*w.suffix_tokens))]
        out.append((prompt, rng.randint(*w.new_tokens)))
    return out


def _pages(tokens: int, page_size: int) -> int:
    return -(-tokens // page_size)


class _Scheduler:
    """One run's engine objects and queues."""

    def __init__(self, w: Workload, sg: SimpleNamespace, monitored: bool, log: str | Path | IO[str] | None,
                 raise_on_violation: bool) -> None:
        torch = sg.torch
        self.w, self.sg, self.torch = w, sg, torch
        ps = w.page_size
        self.allocator = sg.Allocator(w.pages * ps, ps, torch.int64, "cpu", None, False)
        self.tree = sg.RadixCache.create_simulated(mock_allocator=self.allocator, page_size=ps)
        self.pool = sg.ReqToTokenPool(w.max_running + 2, 128, "cpu", False)
        self.tree.req_to_token_pool = self.pool
        self.sm = SglangMonitor.create(
            self.allocator, self.tree, log=log, raise_on_violation=raise_on_violation,
            source=f"examples/real_engines/sglang_workload.py {w}") if monitored else None
        evict = self.tree.evict  # counted in both modes (an instance attribute over the monitor's wrapper, if any)

        def counting_evict(params: Any) -> Any:
            result = evict(params)
            self.stats.evicted_tokens += result.num_tokens_evicted or 0
            return result
        self.tree.evict = counting_evict
        self.rng = random.Random(w.seed + 1)
        self.waiting: deque[_Req] = deque()
        self.running: list[_Req] = []
        self.chunked: _Req | None = None
        self.stats = Stats()

    def acting(self, *rids: str) -> Any:
        return self.sm.acting(*rids) if self.sm is not None else nullcontext()

    def forward(self, r: _Req, start: int) -> None:
        if self.sm is not None:
            n = r.kv.kv_committed_len
            tokens = (list(r.origin_input_ids) + r.output_ids)[:n]
            self.sm.forward(r.rid, self.pool.req_to_token[r.kv.req_pool_idx], tokens, start)

    def room(self) -> int:
        return self.allocator.available_size() + self.tree.evictable_size()

    # -- prefill ---------------------------------------------------------------------------------
    def admit(self, r: _Req, budget: int) -> int:
        """Matches, locks and allocates the request's next chunk; returns the tokens taken (0: not admitted)."""
        sg, torch, ps = self.sg, self.torch, self.w.page_size
        tokens = list(r.origin_input_ids)
        first = not r.kv.holds_kv
        if first:
            key = sg.RadixKey(array("q", tokens[:-1]))  # at least one token is computed
            match = self.tree.match_prefix(sg.MatchPrefixParams(key=key))
            prefix = match.device_prefix_len
            with self.acting(r.rid):
                r.lock = self.tree.lock(match.last_device_node)
            r.last_node = match.last_device_node
        else:
            prefix = r.kv.kv_committed_len
        extend = min(len(tokens) - prefix, budget)
        need = (_pages(prefix + extend, ps) - _pages(prefix, ps)) * ps
        if self.room() < need + ps * (len(self.running) + 1):
            if first:
                with self.acting(r.rid):
                    self.tree.unlock(r.lock)
                r.lock = None
            return 0
        if first:
            self.pool.alloc([r])
            row = r.kv.req_pool_idx
            self.pool.write((row, slice(0, prefix)), self.tree.path_device_indices(r.last_node)[:prefix].to(torch.int32))
            r.kv.cache_protected_len = prefix
            self.stats.prefix_hit_tokens += prefix
        row = r.kv.req_pool_idx
        seq = prefix + extend
        rows, p_t, s_t = torch.tensor([row]), torch.tensor([prefix]), torch.tensor([seq])
        last_loc = sg.allocation.get_last_loc_torch(self.pool.req_to_token, rows, p_t)
        with self.acting(r.rid):
            out = sg.allocation.alloc_paged_token_slots_extend(self.tree, p_t, p_t, s_t, s_t, last_loc, extend)
        self.pool.write((row, slice(prefix, seq)), out.to(torch.int32))
        r.kv.kv_allocated_len = r.kv.kv_committed_len = r.extend_end = seq
        self.forward(r, prefix)
        return extend

    def prefill_step(self) -> None:
        batch: list[_Req] = []
        budget = self.w.prefill_budget
        if self.chunked is not None:
            taken = self.admit(self.chunked, budget)
            if taken:
                batch.append(self.chunked)
                budget -= taken
        while self.waiting and budget > 0 and len(self.running) + len(batch) < self.w.max_running:
            r = self.waiting[0]
            if self.chunked is not None and len(r.origin_input_ids) - 1 > budget:
                break  # one chunked request at a time
            taken = self.admit(r, budget)
            if not taken:
                break
            self.waiting.popleft()
            batch.append(r)
            budget -= taken
        common = self.sg.common
        for r in batch:  # process_batch_result_prefill, in batch order
            if r.kv.kv_committed_len < len(r.origin_input_ids):
                if self.chunked is not r:
                    self.stats.chunked += 1
                self.chunked = r
                with self.acting(r.rid):
                    common.checkpoint_kv_cache(r, self.tree)
                continue
            if self.chunked is r:
                self.chunked = None
            r.output_ids.append(self.rng.randrange(1, 30000))
            if len(r.output_ids) >= r.max_new:
                self.stats.finished_at_prefill += 1
                self.release(r)
            else:
                self.running.append(r)

    # -- decode ----------------------------------------------------------------------------------
    def decode_step(self) -> None:
        sg, torch, ps = self.sg, self.torch, self.w.page_size
        while self.running:
            need = sum(1 for r in self.running if r.kv.kv_committed_len % ps == 0)
            if self.room() >= need * ps:
                break
            self.retract(self.running.pop())
        if not self.running:
            return
        batch = self.running
        rows = torch.tensor([r.kv.req_pool_idx for r in batch])
        committed = torch.tensor([r.kv.kv_committed_len for r in batch])
        last_loc = self.pool.req_to_token[rows, committed - 1].to(torch.int64)
        seq = committed + 1
        with self.acting(*(r.rid for r in batch)):
            out = sg.allocation.alloc_paged_token_slots_decode(self.tree, seq, seq, last_loc)
        done = []
        for r, loc in zip(batch, out.tolist(), strict=True):
            n = r.kv.kv_committed_len
            self.pool.write((r.kv.req_pool_idx, n), loc)
            r.kv.kv_committed_len = r.kv.kv_allocated_len = n + 1
            self.forward(r, n)
            if len(r.output_ids) >= r.max_new:
                done.append(r)
            else:
                r.output_ids.append(self.rng.randrange(1, 30000))
        for r in done:
            self.running.remove(r)
            self.release(r)

    def release(self, r: _Req) -> None:
        r.finished_reason = "length"
        with self.acting(r.rid):
            self.sg.common.release_kv_cache(r, self.tree, checkpoint=True)
        if self.sm is not None:
            self.sm.finish(r.rid)
        self.stats.finished += 1

    def retract(self, r: _Req) -> None:
        with self.acting(r.rid):
            self.sg.common.release_kv_cache(r, self.tree, checkpoint=False)
        if self.sm is not None:
            self.sm.finish(r.rid)
        self.stats.retractions += 1
        self.waiting.appendleft(_Req(r.rid + "'", list(r.origin_input_ids), r.max_new))

    # -- the loop --------------------------------------------------------------------------------------
    def run(self) -> Stats:
        for i, (prompt, max_new) in enumerate(requests_of(self.w)):
            self.waiting.append(_Req(f"r{i}", prompt, max_new))
        start, cpu = time.perf_counter(), time.process_time()
        while self.waiting or self.running or self.chunked is not None:
            self.stats.steps += 1
            if self.stats.steps > 50 * self.w.requests + 1000:
                raise RuntimeError("the scheduler loop makes no progress")
            self.prefill_step()
            self.decode_step()
        with self.acting(TREE):
            self.tree.evict(self.sg.EvictParams(num_tokens=self.tree.evictable_size()))
        self.stats.seconds = time.perf_counter() - start
        self.stats.cpu_seconds = time.process_time() - cpu
        if self.sm is not None:
            self.sm.monitor.finish(TREE)
            self.stats.events = self.sm.monitor.seq
            self.sm.monitor.close()
        return self.stats


def run(w: Workload, *, monitored: bool = True, log: str | Path | IO[str] | None = None,
        bug: Callable[[SimpleNamespace, Any], Any] | None = None, debug_memory_pool: bool = False,
        raise_on_violation: bool = True) -> tuple[Stats, Any]:
    """Runs the workload; returns its stats and the scheduler (its allocator, tree and monitor).

    ``bug(sg, scheduler)`` may put a defect back into the engine before the
    loop starts and return a callable that takes it out again.
    """
    with sglang_runtime(debug_memory_pool) as sg:
        s = _Scheduler(w, sg, monitored, log, raise_on_violation)
        undo = bug(sg, s) if bug is not None else None
        try:
            return s.run(), s
        finally:
            if s.sm is not None:
                s.sm.monitor.close()
            if callable(undo):
                undo()


# -- the committed example logs --------------------------------------------------------------------
#: The small run whose logs are committed: once clean, once with a defect put back.
LOG_WORKLOAD = Workload(requests=24, seed=3, pages=12, max_running=4)


def write_example_logs(folder: Path = LOGS) -> dict[str, tuple[Stats, list[Any]]]:
    """Regenerates ``sglang-clean.jsonl`` and ``sglang-seeded.jsonl``: stats and violations per file.

    The seeded run puts back ``sglang_defects.double_free_of_the_last_decode_slot`` and
    runs to the end with violations collected, not raised, so its log goes on
    past the first violation (what the engine does with a corrupted free list).
    """
    from examples.real_engines.sglang_defects import double_free_of_the_last_decode_slot

    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, tuple[Stats, list[Any]]] = {}
    for name, bug in (("sglang-clean.jsonl", None), ("sglang-seeded.jsonl", double_free_of_the_last_decode_slot)):
        stats, s = run(LOG_WORKLOAD, log=folder / name, bug=bug, raise_on_violation=False)
        out[name] = stats, list(s.sm.monitor.violations)
    return out


if __name__ == "__main__":
    for name, (stats, violations) in write_example_logs().items():
        first = f", first: {violations[0]}" if violations else ""
        print(f"{name}: {stats.events} events, {len(violations)} violations{first}")
