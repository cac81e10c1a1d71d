"""What the library pair tests share: explore's pinned figures and a step's events of one kind.

Whether each library spec gets its declared verdict is checked once, for every
spec in specs/, by tests/test_corpus.py and `ownership test specs/`; the
figures of the library specs with temporal properties are pinned here
(``LIVENESS_PINNED``, ``LIVENESS_LASSOS``) and checked there.
"""

from __future__ import annotations

from typing import Any

from conftest import instance
from ownership.core.result import Verdict
from ownership.engines.explore import ExploreOptions, explore

Pinned = tuple[Verdict, int, int, int, str | None]

# The library specs with temporal properties (docs/liveness.md): (spec, symmetry) ->
# (verdict, distinct states, transitions, depth, violated property).  The counts are those of the
# search of the invariants, which covers the whole reachable space before any property is decided.
LIVENESS_PINNED: dict[tuple[str, bool], Pinned] = {
    ("radix_lock_skips_leaf_fixed", True): (Verdict.PROVED, 14, 21, 6, None),
    ("radix_lock_skips_leaf_fixed", False): (Verdict.PROVED, 25, 36, 6, None),
    ("sglang_disagg_v0_5_20", True): (Verdict.PROVED, 679, 1725, 16, None),
    ("sglang_disagg_v0_5_20", False): (Verdict.PROVED, 56709, 160788, 16, None),
    ("sglang_disagg_v0_5_21", True): (Verdict.PROVED, 334, 783, 16, None),
    ("sglang_disagg_v0_5_21", False): (Verdict.PROVED, 16313, 42354, 16, None),
    ("sglang_epd_send_deregister_fixed", True): (Verdict.PROVED, 170, 360, 12, None),
    ("sglang_epd_send_deregister_fixed", False): (Verdict.PROVED, 336, 704, 12, None),
    ("sglang_pd_abort_inflight_fixed", True): (Verdict.PROVED, 396, 1092, 14, None),
    ("sglang_pd_abort_inflight_fixed", False): (Verdict.PROVED, 1507, 4180, 14, None),
    ("sglang_single_node", True): (Verdict.PROVED, 57, 92, 10, None),
    ("sglang_single_node", False): (Verdict.PROVED, 405, 696, 10, None),
    ("sglang_swa_insert_evicted_window_fixed", True): (Verdict.PROVED, 56, 74, 6, None),
    ("sglang_swa_insert_evicted_window_fixed", False): (Verdict.PROVED, 425, 560, 6, None),
    ("sglang_swa_recover_locked_full_fixed", True): (Verdict.PROVED, 53, 80, 7, None),
    ("sglang_swa_recover_locked_full_fixed", False): (Verdict.PROVED, 409, 632, 7, None),
    ("tgi_prefix_published_before_write_fixed", True): (Verdict.PROVED, 21, 29, 8, None),
    ("tgi_prefix_published_before_write_fixed", False): (Verdict.PROVED, 604, 820, 8, None),
    ("vllm_async_sched_inflight_step_fixed", True): (Verdict.PROVED, 87, 206, 12, None),
    ("vllm_async_sched_inflight_step_fixed", False): (Verdict.PROVED, 321, 760, 12, None),
    ("vllm_mooncake_failed_load_stranded_buggy", True): (Verdict.VIOLATED, 240, 658, 15, "requests_finish"),
    ("vllm_mooncake_failed_load_stranded_buggy", False): (Verdict.VIOLATED, 911, 2524, 15, "requests_finish"),
    ("vllm_mooncake_failed_load_stranded_fixed", True): (Verdict.PROVED, 370, 1174, 16, None),
    ("vllm_mooncake_failed_load_stranded_fixed", False): (Verdict.PROVED, 1387, 4540, 16, None),
    ("vllm_mooncake_transfer_id_reuse_buggy", True): (Verdict.VIOLATED, 19, 53, 6, "pages_return"),
    ("vllm_mooncake_transfer_id_reuse_buggy", False): (Verdict.VIOLATED, 61, 192, 6, "pages_return"),
    ("vllm_mooncake_transfer_id_reuse_fixed", True): (Verdict.PROVED, 25, 78, 6, None),
    ("vllm_mooncake_transfer_id_reuse_fixed", False): (Verdict.PROVED, 81, 292, 6, None),
    ("vllm_nixl_abort_timeout_fixed", True): (Verdict.PROVED, 61, 99, 10, None),
    ("vllm_nixl_abort_timeout_fixed", False): (Verdict.PROVED, 121, 196, 10, None),
    ("vllm_nixl_multi_handle_failure_fixed", True): (Verdict.PROVED, 98, 212, 10, None),
    ("vllm_nixl_multi_handle_failure_fixed", False): (Verdict.PROVED, 602, 1296, 10, None),
    ("vllm_prefix_hash_collision_fixed", True): (Verdict.PROVED, 46, 72, 6, None),
    ("vllm_prefix_hash_collision_fixed", False): (Verdict.PROVED, 353, 512, 6, None),
    ("vllm_prefix_lora_scope_fixed", True): (Verdict.PROVED, 25, 38, 6, None),
    ("vllm_prefix_lora_scope_fixed", False): (Verdict.PROVED, 177, 256, 6, None),
    ("vllm_push_abort_recv_leak_buggy", True): (Verdict.VIOLATED, 240, 658, 15, "pages_return"),
    ("vllm_push_abort_recv_leak_buggy", False): (Verdict.VIOLATED, 911, 2524, 15, "pages_return"),
    ("vllm_push_abort_recv_leak_fixed", True): (Verdict.PROVED, 621, 1923, 22, None),
    ("vllm_push_abort_recv_leak_fixed", False): (Verdict.PROVED, 2382, 7492, 22, None),
}

# Buggy spec -> (the lasso's actions, the position its loop returns to): the same with and without
# symmetry reduction (only the element it is about may differ).
LIVENESS_LASSOS: dict[str, tuple[list[str], int]] = {
    "vllm_mooncake_failed_load_stranded_buggy": (
        ["d_add_request", "d_add_request", "pull_ok", "pull_failed",
         "d_finished_recving", "d_decode", "d_add_request", "pull_ok"], 4),
    "vllm_mooncake_transfer_id_reuse_buggy": (["p_prefill", "p_prefill", "p_expire_sends", "p_prefill"], 2),
    "vllm_push_abort_recv_leak_buggy": (
        ["d_add_request", "d_add_request", "p_push", "p_gone", "d_abort",
         "d_finished_recving", "d_decode", "d_add_request", "p_push"], 5),
}


def explored(name: str, symmetry: bool = True, **params: int) -> Pinned:
    """(verdict, states, transitions, depth, violated invariant) of explore on a library spec."""
    result = explore(instance(name, **params), ExploreOptions(symmetry=symmetry))
    s = result.stats
    return result.verdict, s.states, s.transitions, s.depth, result.violated


def events(step: Any, kind: str) -> list[Any]:
    """The events of one trace step whose kind is ``kind``."""
    return [e for e in step.events if e.kind == kind]
