"""Print one SGLang release's preflight fixtures, made by that release's own code.

``python tests/real_engines/sglang_release_fixtures.py RELEASE_DIR`` (in the
``sglang-releases`` environment, ``RELEASE_DIR`` a ``releases/<version>/``
directory of it) prints a JSON object ``{path relative to the repository: text}``:
the startup logs of the incident deployment's prefill and decode node as that
release prints them, and for 0.5.11 the ``/server_info`` answer of a default
launch.  ``preflight_fixtures.py releases`` writes them;
``test_sglang_preflight_fixtures.py`` compares them with the committed files.

What is the release's code and what stands in for the deployment:

* The ``ServerArgs`` is the release's own class, constructed with the
  deployment's arguments and resolved as a launch resolves it: by
  ``__post_init__`` up to 0.5.18, by ``resolve_once`` (``_launch_subprocesses``)
  from 0.5.19, so ``chunked_prefill_size``, ``mem_fraction_static``, the
  attention backends and the rest are what the release decides on that machine.
* The machine: the deployment ran on 8 GPUs of compute capability 9.0 with
  141 GB each (an H200's 143,771 MiB).  Torch here is a CPU build, so the GPU
  probes the resolution reads (``get_device_memory_capacity``,
  ``torch.cuda.get_device_capability``/``get_device_name``/``device_count``)
  answer with that GPU's values; ``device="cuda"`` is passed, which is what
  ``get_device()`` returns there.  Nothing else is replaced.
* The model: the incident's GLM-5.2-FP8 is a DeepSeek-sparse-attention MoE
  (``GlmMoeDsaForCausalLM``); its ``config.json`` is written into a scratch
  directory named like the hub id, so ``model_path`` prints as the deployment's.
  0.5.4 predates that architecture (and its transformers does not know it): its
  deployment is the same shape on ``zai-org/GLM-4.6-FP8`` (``Glm4MoeForCausalLM``).
* The ``server_args=`` line: the logging statement of the release's
  ``_launch_subprocesses`` (``engine.py``), taken from its syntax tree and run,
  compiled under the file's own name and lines, after the release's
  ``configure_logger``.  0.5.4 and 0.5.11 print ``server_args=ServerArgs(...)``
  (``f"{server_args=}"``), 0.5.19-0.5.21 ``resolved_dict()``, 0.5.23 the same
  through ``_server_args_for_logging``.
* The scheduler's line: the release's f-string in ``Scheduler.__init__``,
  logged with ``configure_logger(server_args, prefix=" TP0")`` as
  ``run_scheduler_process`` does on rank 0.  A Scheduler needs a GPU and a
  model, so its own numbers are given: the pool (``max_total_num_tokens``,
  measured by the deployment: 681,280 on prefill, 1,114,112 assumed on
  decode), ``max_prefill_tokens`` and ``max_running_requests`` as the tp worker
  takes them from ``ServerArgs`` (the deployment passes
  ``--max-running-requests 48``), ``context_len`` from the model config, and
  the free GPU memory after loading (9.87 GB).  ``chunked_prefill_size`` is
  read where the release reads it: ``server_args`` (0.5.4, 0.5.11) or the
  published runtime context's ``get_schedule()`` (0.5.19+).
* ``/server_info`` (0.5.11 ``http_server.server_info``): ``dataclasses.asdict``
  of the ``ServerArgs`` merged with ``Scheduler.get_init_info``'s keys, whose
  ``max_req_input_len`` is computed by the release's own ``TpModelWorker``
  statements (run from its syntax tree), plus ``version``; ``internal_states``
  needs a running tokenizer manager and is left empty.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import logging
import os
import random
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

CONTEXT = 1_048_576
PAGE = 64
POOLS = {"prefill": 681_280, "decode": 1_114_112}
MAX_RUNNING = 48
MAX_PREFILL = 16384  # ServerArgs' default; the tp worker passes it through
GPU_FREE_GB = 9.87
GPU_MIB = 143_771  # an H200 (141 GB)
GPU_CAPABILITY = (9, 0)
TP = 8
#: The newest release: its /server_info is committed too (the fixtures of a deployment on it).
LATEST = "0.5.23"

#: GLM-5.2-FP8's architecture as far as the resolution reads it (DeepSeek sparse attention, FP8 blocks).
GLM5 = {
    "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 1, "first_k_dense_replace": 3,
    "hidden_act": "silu", "hidden_size": 6144, "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048,
    "intermediate_size": 12288, "kv_lora_rank": 512, "max_position_embeddings": CONTEXT,
    "moe_intermediate_size": 2048, "n_group": 1, "n_routed_experts": 256, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 78,
    "num_key_value_heads": 64, "q_lora_rank": 2048, "qk_head_dim": 256, "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-05, "rope_theta": 1000000, "routed_scaling_factor": 2.5,
    "tie_word_embeddings": False, "topk_group": 1, "torch_dtype": "bfloat16", "v_head_dim": 256,
    "vocab_size": 154880,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}
#: The same shape for releases before GLM-5's architecture (0.5.4).
GLM46 = {
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "attention_bias": True,
    "attention_dropout": 0.0, "eos_token_id": [151329, 151336, 151338], "first_k_dense_replace": 3,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 12288,
    "max_position_embeddings": CONTEXT, "moe_intermediate_size": 1536, "n_group": 1, "n_routed_experts": 160,
    "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 96, "num_experts_per_tok": 8,
    "num_hidden_layers": 92, "num_key_value_heads": 8, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05,
    "rope_theta": 1000000, "routed_scaling_factor": 2.5, "tie_word_embeddings": False, "topk_group": 1,
    "torch_dtype": "bfloat16", "use_qk_norm": True, "vocab_size": 151552,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}


def version_tuple(version: str) -> tuple[int, ...]:
    """``0.5.11`` -> ``(0, 5, 11)`` (a ``.postN`` suffix is ignored)."""
    return tuple(int(p) for p in version.split(".")[:3])


def model_for(version: str) -> tuple[str, dict[str, Any]]:
    """The hub id and config of the deployment's model on ``version``."""
    if version_tuple(version) < (0, 5, 5):
        return "zai-org/GLM-4.6-FP8", GLM46
    return "zai-org/GLM-5.2-FP8", GLM5


def _stand_in_for_the_gpus() -> None:
    """The deployment's GPUs answer the probes a CPU torch cannot (see the module docstring)."""
    import torch

    torch.cuda.get_device_capability = lambda *a, **k: GPU_CAPABILITY  # type: ignore[assignment]
    torch.cuda.get_device_name = lambda *a, **k: "NVIDIA H200"  # type: ignore[assignment]
    torch.cuda.device_count = lambda: TP  # type: ignore[assignment]


def _gpu_memory_everywhere() -> None:
    """Every loaded SGLang module's ``get_device_memory_capacity`` answers with the deployment's GPU."""
    from sglang.srt.utils import common

    original = common.get_device_memory_capacity
    for name, module in list(sys.modules.items()):
        if name.startswith("sglang") and getattr(module, "get_device_memory_capacity", None) is original:
            module.get_device_memory_capacity = lambda device=None: GPU_MIB  # type: ignore[attr-defined]


def _statement(path: Path, function: str | None, needle: str) -> ast.Module:
    """The ``logger.info(...)`` statement (in ``function``, if named) whose source contains ``needle``.

    Compiled under the file's name, it keeps the line numbers it has in the release.
    """
    tree = ast.parse(path.read_text(), str(path))
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
              and n.name == function] if function else [tree]
    for scope in scopes:
        for stmt in ast.walk(scope):
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                    and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "info" \
                    and needle in ast.unparse(stmt):
                return ast.Module([stmt], [])
    raise LookupError(f"{path}: no logger.info with {needle!r} in {function or 'the module'}")


class _Capture:
    """Collects what the root handler (installed by the release's ``configure_logger``) writes."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def run(self, code: Any, env: dict[str, Any]) -> None:
        stream = io.StringIO()
        handler = logging.getLogger().handlers[0]
        old = handler.setStream(stream)  # type: ignore[attr-defined]
        try:
            exec(code, env)  # noqa: S102 - the release's own logging statement
        finally:
            handler.setStream(old)  # type: ignore[attr-defined]
        self.lines.extend(stream.getvalue().splitlines())


def _server_args(version: str, role: str, *, default_launch: bool = False) -> Any:
    from sglang.srt.server_args import ServerArgs

    model, _ = model_for(version)
    kwargs: dict[str, Any] = {"model_path": model, "disaggregation_mode": role,
                              "disaggregation_transfer_backend": "mooncake", "tp_size": TP,
                              "trust_remote_code": True, "device": "cuda"}
    if not default_launch:
        kwargs.update(context_length=CONTEXT, page_size=PAGE, max_running_requests=MAX_RUNNING)
    random.seed(0)  # the random_seed a launch draws: the same each time the fixtures are made
    sa = ServerArgs(**kwargs)
    if hasattr(sa, "resolve_once"):  # 0.5.19+: the launcher resolves (engine.py _launch_subprocesses)
        sa.resolve_once()
    return sa


def _scheduler_line(sglang_dir: Path, sa: Any, pool: int, capture: _Capture) -> None:
    from sglang.srt.utils.common import configure_logger

    scheduler = sglang_dir / "srt" / "managers" / "scheduler.py"
    code = compile(_statement(scheduler, None, "chunked_prefill_size="), str(scheduler), "exec")
    fake = SimpleNamespace(max_total_num_tokens=pool, max_prefill_tokens=sa.max_prefill_tokens,
                           max_running_requests=min(MAX_RUNNING, pool), server_args=sa,
                           model_config=SimpleNamespace(context_len=CONTEXT), device="cuda",
                           startup_available_gpu_memory_gb=GPU_FREE_GB)
    env: dict[str, Any] = {"self": fake, "server_args": sa, "avail_mem": GPU_FREE_GB,
                           "logger": logging.getLogger("sglang.srt.managers.scheduler")}
    try:
        from sglang.srt.runtime_context import get_schedule, publish
    except ImportError:  # before 0.5.19 the line reads server_args
        pass
    else:
        publish(sa, role="scheduler")
        env["get_schedule"] = get_schedule
    configure_logger(sa, prefix=" TP0")
    capture.run(code, env)


def _server_args_line(sglang_dir: Path, sa: Any, capture: _Capture) -> None:
    from sglang.srt.utils.common import configure_logger

    engine = sglang_dir / "srt" / "entrypoints" / "engine.py"
    code = compile(_statement(engine, "_launch_subprocesses", "server_args="), str(engine), "exec")
    env: dict[str, Any] = {"server_args": sa, "logger": logging.getLogger("sglang.srt.entrypoints.engine")}
    if "_server_args_for_logging" in engine.read_text():  # 0.5.23: the dict with watermark secrets redacted
        from sglang.srt.sampling.watermarking.core import redact_watermark_secrets

        env["_server_args_for_logging"] = lambda args: redact_watermark_secrets(args.resolved_dict())
    configure_logger(sa)
    capture.run(code, env)


def _max_req_input_len(sglang_dir: Path, context_len: int, pool: int) -> int:
    """``max_req_input_len`` as the release's ``TpModelWorker.__init__`` computes it (its own statements)."""
    worker = sglang_dir / "srt" / "managers" / "tp_worker.py"
    tree = ast.parse(worker.read_text())
    stmts = [s for s in ast.walk(tree) if isinstance(s, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr in ("max_req_len", "max_req_input_len") for t in s.targets)]
    fake = SimpleNamespace(model_config=SimpleNamespace(context_len=context_len),
                           model_runner=SimpleNamespace(max_token_pool_size=pool, max_total_num_tokens=pool),
                           max_total_num_tokens=pool)
    env: dict[str, Any] = {"self": fake}
    exec(compile(ast.Module(stmts, []), str(worker), "exec"), env)  # noqa: S102 - the release's own statements
    return int(fake.max_req_input_len)


def _server_info(sa: Any, pool: int) -> str:
    """``GET /server_info`` as 0.5.23's ``http_server.server_info`` builds it from the resolved record.

    ``max_req_input_len`` is ``TpModelWorker.get_worker_info``'s
    ``min(context_len - 1, kv_capacity - 1) - 5`` (0.5.23 ``tp_worker.py:568-574``;
    ``kv_capacity`` is the pool at ``attn_dcp_size`` 1, no dllm block), computed
    here because they are locals of a method that needs a model runner.
    """
    from sglang.srt.sampling.watermarking.core import redact_watermark_secrets
    from sglang.srt.utils.common import build_server_info
    from sglang.srt.utils.msgspec_utils import msgspec_to_builtins

    info = {"status": "ready", "max_total_num_tokens": pool, "max_req_input_len": min(CONTEXT - 1, pool - 1) - 5,
            "startup_time": 0.0}
    doc = msgspec_to_builtins(redact_watermark_secrets({**build_server_info(sa, info), "startup_time": 0.0,
                                                         "internal_states": [], "version": LATEST,
                                                         "frontend": "python"}))
    return json.dumps(doc, indent=2, default=str) + "\n"


def produce(release_dir: Path) -> dict[str, str]:
    """Every fixture of the release installed in ``release_dir``."""
    sys.path.insert(0, str(release_dir))
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from examples.real_engines.sglang_import import prepare_sglang_import

    prepare_sglang_import()
    _stand_in_for_the_gpus()
    import sglang
    import sglang.srt.server_args  # noqa: F401 - loads the modules whose probes are answered below

    for late in ("sglang.srt.arg_groups.pipeline", "sglang.srt.arg_groups.kv_shard_hook"):
        try:
            __import__(late)
        except ImportError:
            pass
    _gpu_memory_everywhere()
    version = sglang.__version__
    sglang_dir = Path(sglang.__file__).parent
    out: dict[str, str] = {}
    model, config = model_for(version)
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / model).mkdir(parents=True)
        (Path(scratch) / model / "config.json").write_text(json.dumps(config, indent=2))
        here = os.getcwd()
        os.chdir(scratch)  # model_path names the scratch copy, as a hub id resolved to a local snapshot
        try:
            for role, pool in POOLS.items():
                capture = _Capture()
                sa = _server_args(version, role)
                _server_args_line(sglang_dir, sa, capture)
                _scheduler_line(sglang_dir, sa, pool, capture)
                out[f"tests/data/preflight/releases/{version}/{role}.log"] = "\n".join(capture.lines) + "\n"
                if version == LATEST:
                    out[f"tests/data/preflight/releases/{version}/server-info-{role}.json"] = _server_info(sa, pool)
                if version == "0.5.11":
                    default = _server_args(version, role, default_launch=True)
                    info = {"status": "ready", "max_total_num_tokens": pool,
                            "max_req_input_len": _max_req_input_len(sglang_dir, CONTEXT, pool)}
                    doc = {**dataclasses.asdict(default), **info, "internal_states": [], "version": version}
                    out[f"tests/data/preflight/releases/{version}/server-info-default-{role}.json"] = json.dumps(
                        doc, indent=2, default=str) + "\n"
        finally:
            os.chdir(here)
    return out


if __name__ == "__main__":
    json.dump(produce(Path(sys.argv[1]).resolve()), sys.stdout)
