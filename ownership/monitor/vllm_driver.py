"""vLLM's real v1 ``Scheduler`` on the CPU, driven by a seeded synthetic workload.

``build_scheduler`` constructs ``vllm.v1.core.sched.scheduler.Scheduler`` with its
real ``KVCacheManager`` and ``BlockPool`` (one full-attention KV cache group,
prefix caching on, chunked prefill), much as vLLM's own scheduler tests do, but
without a model: the model config is a stand-in carrying the few attributes the
scheduler reads, because inspecting a real model architecture imports the
model code and its GPU dependencies.  ``run`` plays the engine loop --
``add_request``, ``schedule``, a synthetic ``ModelRunnerOutput`` (one sampled
token per request whose prefill is done), ``update_from_output``, and aborts via
``finish_requests(..., FINISHED_ABORTED)`` -- with prompts drawn from a few
shared prefixes so that prefix-cache hits, eviction and, under a small block
budget, preemption all happen.

vLLM is imported inside the functions, never at module import.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any


@dataclass(frozen=True)
class SchedulerShape:
    """The scheduler's size: blocks, tokens per block, batch limits."""

    num_blocks: int = 48
    block_size: int = 4
    max_num_seqs: int = 6
    max_num_batched_tokens: int = 64
    max_model_len: int = 256
    policy: str = "fcfs"  # or "priority": preemption then picks the lowest-priority running request


@dataclass(frozen=True)
class Workload:
    """A seeded stream of requests: prompts are a shared prefix plus a private suffix."""

    seed: int = 0
    requests: int = 500
    prefixes: int = 6
    prefix_tokens: tuple[int, int] = (4, 40)
    suffix_tokens: tuple[int, int] = (0, 20)
    output_tokens: tuple[int, int] = (1, 24)
    arrivals_per_step: float = 0.4  # chance that a request arrives before a step
    abort: float = 0.02  # chance per step that one live request is aborted
    vocab: int = 1000
    priorities: int = 1  # request priorities drawn from 0..priorities-1 (used by the priority policy)
    max_steps: int = 200_000


@dataclass
class RunStats:
    """What a run did, counted from the scheduler's own outputs."""

    steps: int = 0
    added: int = 0
    aborted: int = 0
    finished: int = 0
    preemptions: int = 0
    scheduled_tokens: int = 0
    seconds: float = 0.0  # wall clock
    cpu_seconds: float = 0.0  # this process's CPU time: steadier than the wall clock on a shared machine


def build_scheduler(shape: SchedulerShape = SchedulerShape()) -> Any:
    """A real vLLM v1 ``Scheduler`` of this shape (needs vLLM installed)."""
    import torch
    from vllm.config import CacheConfig, DeviceConfig, SchedulerConfig, VllmConfig
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    init_none_hash(sha256)  # deterministic block hashes (the default seeds them at random)
    scheduler_config = SchedulerConfig(
        max_num_seqs=shape.max_num_seqs,
        max_num_batched_tokens=shape.max_num_batched_tokens,
        max_model_len=shape.max_model_len,
        enable_chunked_prefill=True,
        is_encoder_decoder=False,
        policy=shape.policy,
    )
    cache_config = CacheConfig(block_size=shape.block_size, enable_prefix_caching=True)
    cache_config.num_gpu_blocks = shape.num_blocks
    config = VllmConfig(scheduler_config=scheduler_config, cache_config=cache_config, device_config=DeviceConfig(device="cpu"))
    # The attributes of ModelConfig that Scheduler and StructuredOutputManager read, for a
    # decoder-only text model without a tokenizer.
    model = SimpleNamespace(
        uses_mrope=False, is_encoder_decoder=False, max_model_len=shape.max_model_len, runner_type="generate",
        is_diffusion=False, supports_multimodal_inputs=False, return_sampling_mask=False,
        skip_tokenizer_init=True, multimodal_config=None, get_vocab_size=lambda: 1 << 16,
    )
    object.__setattr__(config, "model_config", model)
    group = KVCacheGroupSpec(["layer"], FullAttentionSpec(block_size=shape.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32))
    kv_cache_config = KVCacheConfig(num_blocks=shape.num_blocks, kv_cache_tensors=[], kv_cache_groups=[group])
    return Scheduler(
        vllm_config=config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=StructuredOutputManager(config),
        block_size=shape.block_size,
    )


def make_request(scheduler: Any, req_id: str, prompt: list[int], max_tokens: int, priority: int = 0) -> Any:
    """A vLLM ``Request`` for ``scheduler``'s block size, generating exactly ``max_tokens`` tokens."""
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher
    from vllm.v1.request import Request

    block_size = scheduler.kv_cache_manager.coordinator.single_type_managers[0].block_size
    return Request(request_id=req_id, prompt_token_ids=prompt, pooling_params=None, priority=priority,
                   sampling_params=SamplingParams(max_tokens=max_tokens, ignore_eos=True),
                   block_hasher=get_request_block_hasher(block_size, sha256))


def step(scheduler: Any, sample: Callable[[], int], scheduled: Callable[[Any], None] | None = None) -> tuple[Any, Any]:
    """One engine step: ``schedule()``, a model output sampling one token (``sample()``) per
    request whose prompt is fully computed, ``update_from_output``.  Returns both outputs.
    ``scheduled(output)``, if given, runs between scheduling and the model output."""
    from vllm.v1.outputs import ModelRunnerOutput

    output = scheduler.schedule()
    if scheduled is not None:
        scheduled(output)
    req_ids = list(output.num_scheduled_tokens)
    sampled = []
    for rid in req_ids:
        request = scheduler.requests[rid]
        sampled.append([sample()] if request.num_computed_tokens >= request.num_tokens else [])
    runner_output = ModelRunnerOutput(req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)},
                                      sampled_token_ids=sampled)
    return output, scheduler.update_from_output(output, runner_output)


def run(scheduler: Any, workload: Workload = Workload()) -> RunStats:
    """Drive ``scheduler`` through ``workload`` until every request has finished or been aborted."""
    from vllm.v1.request import RequestStatus

    rng = random.Random(workload.seed)
    prefixes = [[rng.randrange(1, workload.vocab) for _ in range(rng.randint(*workload.prefix_tokens))]
                for _ in range(workload.prefixes)]
    stats = RunStats()
    started, started_cpu = time.perf_counter(), time.process_time()

    def sample() -> int:
        return rng.randrange(1, workload.vocab)

    while stats.steps < workload.max_steps:
        idle = not scheduler.has_requests()
        if stats.added < workload.requests and (idle or rng.random() < workload.arrivals_per_step):
            prompt = list(rng.choice(prefixes)) + [sample() for _ in range(rng.randint(*workload.suffix_tokens))]
            scheduler.add_request(make_request(scheduler, f"r{stats.added}", prompt,
                                               rng.randint(*workload.output_tokens), rng.randrange(workload.priorities)))
            stats.added += 1
        elif idle:
            break
        live = [rid for rid, r in scheduler.requests.items() if not r.is_finished()]
        if live and rng.random() < workload.abort:
            stats.aborted += len(scheduler.finish_requests(rng.choice(sorted(live)), RequestStatus.FINISHED_ABORTED))
        output, engine_outputs = step(scheduler, sample)
        stats.steps += 1
        stats.preemptions += len(output.preempted_req_ids or ())
        stats.scheduled_tokens += output.total_num_scheduled_tokens
        for outputs in engine_outputs.values():
            stats.finished += sum(1 for o in outputs.outputs if o.finish_reason is not None)
    stats.seconds = time.perf_counter() - started
    stats.cpu_seconds = time.process_time() - started_cpu
    return stats
