"""The preflight fixtures, produced by the engines' own code (run in the engine's environment).

``python tests/real_engines/preflight_fixtures.py releases|vllm`` (in
``.venvs/sglang-releases`` or ``.venvs/vllm``) rewrites ``tests/data/preflight/`` and
``examples/preflight/``; ``test_sglang_preflight_fixtures.py`` and
``test_vllm_preflight_fixtures.py`` regenerate the same text and compare it with the committed
files, so they cannot drift from the engines.

* SGLang (``releases``): ``sglang_release_fixtures.py`` runs once per release installed in the
  environment's ``releases/<version>/``, each in a process of its own, and prints that release's
  startup logs of the deployment's two nodes (``tests/data/preflight/releases/<version>/``); the
  newest release's ``/server_info`` of each node (``server-info-{prefill,decode}.json``) and
  0.5.11's of a default launch (``releases/0.5.11/server-info-default-*.json``).  The incident's
  logs (``incident-{prefill,decode}.log`` in ``tests/data/preflight/`` and
  ``examples/preflight/``) are 0.5.11's, the release the incident ran.  That module's docstring
  says what is the release's code and what stands in for the deployment's GPUs and model.
* vLLM: ``VllmConfig.__str__`` of vLLM 0.33.0 on the deployment's values, and the two logging
  statements (``EngineCore.__init__``'s and ``update_kv_cache_capacity``'s), taken from their
  files' syntax trees and run compiled under the files' own names and lines, so the records carry
  the ``[core.py:139]`` and ``[kv_cache_utils.py:1147]`` a real start prints, in the
  ``EngineCore`` process (``decorate_logs``), through vLLM's default logging configuration.

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


def message(line: str) -> str:
    """A log line without its timestamp and source prefix, up to ``] `` (what the tests compare)."""
    return line.split("] ", 1)[1] if "] " in line else line


def _logging_statement(path: Path, needle: str) -> Any:
    """The ``logger.<level>(...)`` call of ``path`` whose format contains ``needle``, compiled at its own lines."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str) and needle in a.value
                for a in node.value.args):
            return compile(ast.Module([node], []), str(path), "exec")
    raise LookupError(f"{path}: no logging call with {needle!r}")


def vllm_files() -> dict[str, str]:
    """The vLLM fixture: the two startup lines of an aggregated vLLM 0.33.0 node."""
    import vllm
    from vllm.config.vllm import VllmConfig
    from vllm.logger import _configure_vllm_root_logger, init_logger, set_vllm_process_name
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.engine import core

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

    class _Config:
        """What the two statements read of the VllmConfig: its text and the numbers of the KV line."""

        def __str__(self) -> str:
            return config_text

    config = _Config()
    pool = POOLS["decode"]  # a pool that holds one max_model_len request: vLLM refuses to start otherwise
    _configure_vllm_root_logger()  # the default configuration (VLLM_CONFIGURE_LOGGING=1), as the server sets it
    set_vllm_process_name("EngineCore")  # decorate_logs() in run_engine_core: the process's name (utils.py:289)
    stream = io.StringIO()
    logging.getLogger("vllm").handlers[0].setStream(stream)  # type: ignore[attr-defined]
    init = _logging_statement(Path(core.__file__), "Initializing a V1 LLM engine")
    exec(init, {"logger": init_logger("vllm.v1.engine.core"), "VLLM_VERSION": vllm.__version__,  # noqa: S102
                "vllm_config": config})
    kv = _logging_statement(Path(kv_cache_utils.__file__), "KV cache size")
    exec(kv, {"logger": init_logger("vllm.v1.core.kv_cache_utils"), "pools": "GPU", "num_tokens": pool,  # noqa: S102
              "max_model_len": CONTEXT, "max_concurrency": pool / CONTEXT})
    lines = stream.getvalue().splitlines()
    return {"tests/data/preflight/vllm-node.log": "\n".join(lines) + "\n"}


#: The release whose logs are the incident's (SGLang issue #30233 ran 0.5.11).
INCIDENT_RELEASE = "0.5.11"


def release_dirs() -> dict[str, Path]:
    """The SGLang releases installed side by side in this environment (``releases/<version>/``)."""
    import os

    base = Path(os.environ.get("OWNERSHIP_SGLANG_RELEASES", Path(sys.prefix) / "releases"))
    if not base.is_dir():
        return {}
    found = [d for d in base.iterdir() if (d / "sglang").is_dir()]
    return {d.name: d for d in sorted(found, key=lambda d: tuple(int(p) for p in d.name.split(".")[:3]))}


def release_files(version: str, release_dir: Path) -> dict[str, str]:
    """One release's fixtures, made in a fresh interpreter with that release first on ``sys.path``."""
    import subprocess

    driver = Path(__file__).with_name("sglang_release_fixtures.py")
    done = subprocess.run([sys.executable, str(driver), str(release_dir)], capture_output=True, text=True,
                          check=False, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"SGLang {version}: {driver.name} failed:\n{done.stderr[-4000:]}")
    files: dict[str, str] = json.loads(done.stdout)
    for role in POOLS:
        info = files.get(f"tests/data/preflight/releases/{version}/server-info-{role}.json")
        if info is not None:  # the newest release's: the server-info fixtures the readers' tests use
            files[f"tests/data/preflight/server-info-{role}.json"] = files.pop(
                f"tests/data/preflight/releases/{version}/server-info-{role}.json")
    if version == INCIDENT_RELEASE:
        for role in POOLS:
            text = files[f"tests/data/preflight/releases/{version}/{role}.log"]
            files[f"tests/data/preflight/incident-{role}.log"] = text
            files[f"examples/preflight/incident-{role}.log"] = text
    return files


def releases_files() -> dict[str, str]:
    """The fixtures of every release installed here."""
    out: dict[str, str] = {}
    for version, path in release_dirs().items():
        out.update(release_files(version, path))
    return out


def main() -> None:
    """Rewrite the committed fixtures of the engine named on the command line."""
    which = sys.argv[1:]
    files = releases_files() if which == ["releases"] else vllm_files()
    for rel, text in files.items():
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print("wrote", rel)


if __name__ == "__main__":
    main()
