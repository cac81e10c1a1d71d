"""Each SGLang release's admission limit, ``max_req_input_len``, as its own code computes it.

A prompt of at least ``max_req_input_len`` tokens is rejected (or, with
``--allow-auto-truncate``, cut to that length) by ``validate_input_length``.
The scheduler takes the number from ``TpModelWorker.get_worker_info``; it is
not printed at startup, so preflight computes it from what the scheduler's
startup line does print (``max_total_num_tokens=..., context_len=...``) and
the node's server arguments, the way each release does.  The rows below were
read from each release's wheel (python/sglang/srt/; line numbers are that
release's).  Where a release's formula needs a number no log prints (the
page-interleave shard size, a diffusion model's block size) the node is not
covered unless its ``/server_info`` reports ``max_req_input_len`` itself.

Hybrid sliding-window (SWA) models: from 0.5.7 the pool term is the
full-attention pool (``max_token_pool_size``, later
``effective_max_total_num_tokens``), which the scheduler line does not print;
the formulas below read the printed pool and so hold for models without
sliding-window layers (every model the library's specs are checked
against), and preflight says so in the limit's description.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``max_req_input_len = max_req_len - INPUT_RESERVE`` in every release read (0.4.5 to 0.5.23).
INPUT_RESERVE = 5


@dataclass(frozen=True)
class Formula:
    """How releases ``first``..``last`` compute ``max_req_input_len`` from the printed numbers."""

    first: tuple[int, int, int, int]
    last: tuple[int, int, int, int]
    pool_term: str
    """The pool term in the release's own words."""
    where: str
    """The lines it was read from (``managers/tp_worker.py`` unless said otherwise)."""
    times_dcp: bool = False
    """The printed pool is per rank and the limit multiplies it by the decode-context-parallel size."""
    sharded: bool = False
    """The limit multiplies by the page-interleave shard size (``--enable-kv-cache-sharding``) and subtracts a
    diffusion model's block size (``--dllm-algorithm``), neither of which any log prints."""


_LAST = 999
FORMULAS: tuple[Formula, ...] = (
    Formula((0, 4, 5, 0), (0, 5, 6, 2), "max_total_num_tokens",
            "tp_worker.py:118-122 (0.4.5), :293-297 (0.5.4), :306-310 (0.5.6.post2)"),
    Formula((0, 5, 7, 0), (0, 5, 15, 1), "max_token_pool_size (= max_total_num_tokens without sliding-window layers)",
            "tp_worker.py:327-331 (0.5.7), :302-306 (0.5.11), :448-458 (0.5.14); "
            "model_executor/model_runner.py:2171-2176 (0.5.11)"),
    Formula((0, 5, 16, 0), (0, 5, 16, _LAST), "effective_max_total_num_tokens (= max_total_num_tokens without "
            "sliding-window layers)", "tp_worker.py:482-492; model_executor/model_runner.py:1056-1061"),
    Formula((0, 5, 17, 0), (0, 5, 20, _LAST), "effective_max_total_num_tokens * dcp_size",
            "tp_worker.py:509-521 (0.5.17), :526-537 (0.5.18), :542-556 (0.5.19, 0.5.20)", times_dcp=True),
    Formula((0, 5, 21, 0), (0, 5, 23, _LAST), "effective_logical_max_total_num_tokens (printed; includes dcp_size) "
            "* page_interleave_shard_size, less the dLLM block",
            "tp_worker.py:538-550 (0.5.21), :543-555 (0.5.22), :550-574 (0.5.23); "
            "mem_cache/kv_cache_configurator.py:406-415 (0.5.23)", sharded=True),
)


def formula_for(version: tuple[int, ...]) -> Formula | None:
    """The formula of ``version`` (a :func:`ownership.preflight.releases.parse_version` key), or None."""
    key = (tuple(version) + (0, 0, 0, 0))[:4]
    return next((f for f in FORMULAS if f.first <= key <= f.last), None)


def max_req_input_len(formula: Formula, context_len: int, printed_pool: int, dcp_size: int = 1) -> int:
    """``min(context_len - 1, pool - 1) - 5`` with the release's pool term."""
    pool = printed_pool * (dcp_size if formula.times_dcp else 1)
    return min(context_len - 1, pool - 1) - INPUT_RESERVE
