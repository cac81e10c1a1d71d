"""The preflight fixtures, produced by the engines' own code (run in the engine's environment).

``python tests/real_engines/preflight_fixtures.py sglang|vllm`` (in ``.venvs/sglang`` or
``.venvs/vllm``) rewrites ``tests/data/preflight/`` and ``examples/preflight/``;
``test_sglang_preflight_fixtures.py`` and ``test_vllm_preflight_fixtures.py`` regenerate the
same text and compare it with the committed files, so they cannot drift from the engines.

What is the engine's code and what is ours:

* SGLang ``server_args=...``: a real ``ServerArgs`` (SGLang 0.5.23, the installed release),
  logged with the statement of ``entrypoints/engine.py`` (``f"server_args={...resolved_dict()}"``)
  through ``configure_logger``'s format.  0.5.20's ``ServerArgs`` cannot be imported in the
  pinned environment (it needs openai, partial_json_parser, xgrammar); its log statement is the
  same f-string (0.5.20 engine.py:276).
* SGLang's scheduler line: the f-string of ``Scheduler.__init__``, taken from the installed
  ``managers/scheduler.py`` by its syntax tree and evaluated with the deployment's numbers (a
  Scheduler cannot be built without a GPU and a model).
* SGLang ``GET /server_info``: ``build_server_info`` and ``msgspec_to_builtins`` of the installed
  release, with the keys ``http_server.server_info`` adds; the scheduler info has the keys of
  ``Scheduler.get_init_info``.
* vLLM: ``VllmConfig.__str__`` of vLLM 0.33.0 on the deployment's values and the format strings
  of ``EngineCore.__init__`` and ``update_kv_cache_capacity`` (read from the installed source).

The numbers are the incident's (SGLang issue #30233 and the postmortem): context 1,048,576,
prefill pool 681,280 tokens, page size 64, GLM-5.2-FP8 on Mooncake.  The decode pool is not
published; 1,114,112 tokens (a pool larger than the context, as decode's must have been for it
to admit the leaking prompts) is an assumption.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "preflight"
EXAMPLES = ROOT / "examples" / "preflight"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODEL = "zai-org/GLM-5.2-FP8"
CONTEXT = 1_048_576
PAGE = 64
POOLS = {"prefill": 681_280, "decode": 1_114_112}
SCHEDULER = {"chunked_prefill_size": 8192, "max_prefill_tokens": 16384, "max_running_requests": 48, "gpu_mem": 9.87}


def _fstring(source: str, needle: str) -> ast.Expression:
    """The f-string in ``source`` that contains ``needle``, as an expression to evaluate."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr) and needle in ast.unparse(node):
            return ast.fix_missing_locations(ast.Expression(node))
    raise LookupError(f"no f-string with {needle!r}")


def _log_line(message: str) -> str:
    """``message`` as SGLang's ``configure_logger`` formats it on tensor-parallel rank 0."""
    from sglang.srt.utils.common import configure_logger

    configure_logger(SimpleNamespace(log_level="info"), prefix=" TP0")
    stream = io.StringIO()
    root = logging.getLogger()
    handler = root.handlers[0]
    handler.setStream(stream)  # type: ignore[attr-defined]
    logging.getLogger("sglang.preflight").info(message)
    return stream.getvalue().rstrip("\n")


def _source(module: str) -> str:
    """A module's source text, found without importing it."""
    import importlib.util

    found = importlib.util.find_spec(module)
    assert found is not None and found.origin is not None
    return Path(found.origin).read_text()


def _functions(source: str, helpers: str, *names: str) -> dict[str, Any]:
    """The functions ``names`` of ``source``, defined over the module ``helpers``' names."""
    import importlib

    env: dict[str, Any] = dict(vars(importlib.import_module(helpers)))
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            node.returns = None
            for a in node.args.args:
                a.annotation = None
            exec(compile(ast.Module([node], []), "engine.py", "exec"), env)  # noqa: S102 - the engine's own function
    return env


def message(line: str) -> str:
    """A log line without its timestamp and source prefix, up to ``] `` (what the tests compare)."""
    return line.split("] ", 1)[1] if "] " in line else line


def server_args(role: str) -> Any:
    """The deployment's ServerArgs for one node."""
    from examples.real_engines.sglang_import import prepare_sglang_import

    prepare_sglang_import()
    from sglang.srt.server_args import ServerArgs

    return ServerArgs(model_path=MODEL, context_length=CONTEXT, page_size=PAGE, disaggregation_mode=role,
                      disaggregation_transfer_backend="mooncake", tp_size=8, trust_remote_code=True)


def scheduler_message(pool: int, scheduler_source: str) -> str:
    """The scheduler's startup line, from the f-string in its source."""
    expr = _fstring(scheduler_source, "max_total_num_tokens=")
    fake = SimpleNamespace(max_total_num_tokens=pool, max_prefill_tokens=SCHEDULER["max_prefill_tokens"],
                           max_running_requests=SCHEDULER["max_running_requests"],
                           model_config=SimpleNamespace(context_len=CONTEXT), device="cuda",
                           startup_available_gpu_memory_gb=SCHEDULER["gpu_mem"])
    env = {"self": fake, "get_schedule": lambda: SimpleNamespace(chunked_prefill_size=SCHEDULER["chunked_prefill_size"])}
    return str(eval(compile(expr, "scheduler.py", "eval"), env))  # noqa: S307 - the engine's own f-string


def sglang_files() -> dict[str, str]:
    """Every SGLang fixture file's text by path relative to the repository."""
    from examples.real_engines.sglang_import import prepare_sglang_import

    prepare_sglang_import()
    import sglang
    from sglang.srt.utils.common import build_server_info
    from sglang.srt.utils.msgspec_utils import msgspec_to_builtins

    sched_src = _source("sglang.srt.managers.scheduler")
    engine_src = _source("sglang.srt.entrypoints.engine")  # not importable here (uvloop): read, not imported
    log_fmt = _fstring(engine_src, "server_args=")
    env = _functions(engine_src, "sglang.srt.sampling.watermarking.core", "_server_args_for_logging")
    out: dict[str, str] = {}
    for role, pool in POOLS.items():
        sa = server_args(role)
        args_line = str(eval(compile(log_fmt, "engine.py", "eval"), {**env, "server_args": sa}))  # noqa: S307
        lines = [_log_line(args_line), _log_line(scheduler_message(pool, sched_src))]
        text = "\n".join(lines) + "\n"
        out[f"tests/data/preflight/incident-{role}.log"] = text
        out[f"examples/preflight/incident-{role}.log"] = text
        limit = min(CONTEXT - 1, pool - 1) - 5  # Scheduler.get_init_info's max_req_input_len (tp_worker.py get_worker_info)
        info = {"status": "ready", "max_total_num_tokens": pool, "max_req_input_len": limit, "startup_time": 0.0}
        doc = msgspec_to_builtins({**build_server_info(sa, info), "startup_time": 0.0, "internal_states": [],
                                   "version": sglang.__version__, "frontend": "python"})
        out[f"tests/data/preflight/server-info-{role}.json"] = json.dumps(doc, indent=2, default=str) + "\n"
    return out


def vllm_files() -> dict[str, str]:
    """The vLLM fixture: the two startup lines of an aggregated vLLM 0.33.0 node."""
    import vllm
    from vllm.config.vllm import VllmConfig
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.engine import core

    def fmt(source: str, needle: str) -> str:
        """The %-format string literal containing ``needle`` (adjacent literals are one constant)."""
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and needle in node.value:
                return node.value
        raise LookupError(needle)

    init = fmt(Path(core.__file__).read_text(), "Initializing a V1 LLM engine")
    kv = fmt(Path(kv_cache_utils.__file__).read_text(), "KV cache size")
    ns = SimpleNamespace
    model = ns(model=MODEL, tokenizer=MODEL, skip_tokenizer_init=False, tokenizer_mode="auto", revision=None,
               tokenizer_revision=None, trust_remote_code=True, dtype="torch.bfloat16", max_model_len=CONTEXT,
               quantization="fp8", quantization_config=None, enforce_eager=False, seed=0, served_model_name=MODEL,
               pooler_config=None)
    cfg = ns(model_config=model, speculative_config=None, load_config=ns(download_dir=None, load_format="auto"),
             parallel_config=ns(tensor_parallel_size=8, pipeline_parallel_size=1, data_parallel_size=1,
                                decode_context_parallel_size=1, dcp_comm_backend="ag_rs", disable_custom_all_reduce=False),
             aux_output_config=None, cache_config=ns(cache_dtype="auto", enable_prefix_caching=True),
             device_config=ns(device="cuda"), structured_outputs_config=None, observability_config=None,
             scheduler_config=ns(enable_chunked_prefill=True), compilation_config=None, kernel_config=None)
    config_text = VllmConfig.__str__(cfg)  # type: ignore[arg-type]
    pool = POOLS["decode"]  # a pool that holds one max_model_len request: vLLM refuses to start otherwise
    from vllm.logger import _configure_vllm_root_logger, init_logger

    _configure_vllm_root_logger()  # the default configuration (VLLM_CONFIGURE_LOGGING=1), as the server sets it
    stream = io.StringIO()
    logging.getLogger("vllm").handlers[0].setStream(stream)  # type: ignore[attr-defined]
    init_logger("vllm.v1.engine.core").info(init, vllm.__version__, config_text)
    init_logger("vllm.v1.core.kv_cache_utils").info(kv, "GPU", f"{pool:,}", f"{CONTEXT:,}", pool / CONTEXT)
    lines = stream.getvalue().splitlines()
    return {"tests/data/preflight/vllm-node.log": "\n".join(lines) + "\n"}


def main() -> None:
    """Rewrite the committed fixtures of the engine named on the command line."""
    files = sglang_files() if sys.argv[1:] == ["sglang"] else vllm_files()
    for rel, text in files.items():
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print("wrote", rel)


if __name__ == "__main__":
    main()
