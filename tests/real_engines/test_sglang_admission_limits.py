"""Preflight's admission limit is each installed SGLang release's own ``max_req_input_len``.

Runs in ``.venvs/sglang-releases`` (``scripts/real-engines.sh sglang-releases``), where the
releases are installed side by side.  The release's own statements are executed, not imported
(importing a scheduler needs a GPU build): the assignments of ``max_req_len`` and
``max_req_input_len`` in ``TpModelWorker.__init__`` (up to 0.5.13), the statements of
``TpModelWorker.get_worker_info`` before its ``return``, and the element of the tuple it returns
that the release's ``Scheduler`` unpacks into ``self.max_req_input_len``.  The runner's pool
attributes are the number the scheduler line prints (per rank up to 0.5.20, logical from
0.5.21); ``page_interleave_shard_size`` stands in as 1 (the allocator is not page-interleaved
without ``--enable-kv-cache-sharding``), and no dLLM algorithm is configured.
"""

from __future__ import annotations

import ast
import logging
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "real_engines"))
sys.path.insert(0, str(ROOT))

import preflight_fixtures as fx  # noqa: E402

from ownership.preflight import admission, releases  # noqa: E402

RELEASES = fx.release_dirs()
pytestmark = pytest.mark.skipif(not RELEASES, reason="no SGLang release directories: scripts/real-engines.sh "
                                "sglang-releases builds them and runs these tests there")


def _method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    return None


def _unpacked_index(scheduler: ast.Module) -> int:
    """Where the Scheduler's ``(...) = self.tp_worker.get_worker_info()`` puts ``self.max_req_input_len``."""
    for node in ast.walk(scheduler):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "get_worker_info"):
            target = node.targets[0]
            assert isinstance(target, ast.Tuple)
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Attribute) and elt.attr == "max_req_input_len":
                    return i
    raise AssertionError("the scheduler does not unpack get_worker_info into max_req_input_len")


def release_limit(sglang_dir: Path, context_len: int, printed_pool: int, dcp_size: int) -> int:
    """``max_req_input_len`` as the release's own statements compute it."""
    srt = sglang_dir / "srt" / "managers"
    worker = ast.parse((srt / "tp_worker.py").read_text())
    index = _unpacked_index(ast.parse((srt / "scheduler.py").read_text()))
    runner = SimpleNamespace(max_token_pool_size=printed_pool, max_total_num_tokens=printed_pool,
                             effective_max_total_num_tokens=printed_pool, logical_max_total_num_tokens=printed_pool,
                             effective_logical_max_total_num_tokens=printed_pool, token_to_kv_pool_allocator=None,
                             dcp_size=dcp_size)
    fake = SimpleNamespace(model_config=SimpleNamespace(context_len=context_len), model_runner=runner,
                           max_total_num_tokens=printed_pool, ps=SimpleNamespace(attn_dcp_size=dcp_size),
                           dllm_algorithm=None)
    env: dict[str, Any] = {"self": fake, "page_interleave_shard_size": lambda allocator: 1,
                           "logger": logging.getLogger("release")}
    init = _method(worker, "TpModelWorker", "__init__")
    assert init is not None
    limits = [s for s in ast.walk(init) if isinstance(s, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr in ("max_req_len", "max_req_input_len") for t in s.targets)]
    exec(compile(ast.Module(limits, []), "tp_worker.py", "exec"), env)  # noqa: S102 - the release's own statements
    info = _method(worker, "TpModelWorker", "get_worker_info")
    assert info is not None and isinstance(info.body[-1], ast.Return)
    before = [s for s in info.body[:-1] if not isinstance(s, ast.Expr)]  # docstrings and calls for effect
    exec(compile(ast.Module(before, []), "tp_worker.py", "exec"), env)  # noqa: S102
    returned = info.body[-1].value
    assert isinstance(returned, ast.Tuple)
    expr = ast.Expression(returned.elts[index])
    return int(eval(compile(expr, "tp_worker.py", "eval"), env))  # noqa: S307


@pytest.mark.parametrize("version", sorted(RELEASES))
@pytest.mark.parametrize("dcp_size", [1, 2])
def test_the_admission_formula_is_the_release_s(version: str, dcp_size: int) -> None:
    key = releases.parse_version(version)
    assert key is not None
    formula = admission.formula_for(key)
    assert formula is not None, version
    for pool in (*fx.POOLS.values(), 4_096):
        for context in (fx.CONTEXT, 2_048):
            expected = release_limit(RELEASES[version] / "sglang", context, pool, dcp_size)
            assert admission.max_req_input_len(formula, context, pool, dcp_size) == expected, (version, pool, context)
