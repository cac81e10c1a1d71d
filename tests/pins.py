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

# The library pairs whose bug is a temporal property (docs/liveness.md): (spec, symmetry) ->
# (verdict, distinct states, transitions, depth, violated property).  The counts are those of the
# search of the invariants, which covers the whole reachable space before any property is decided.
LIVENESS_PINNED: dict[tuple[str, bool], Pinned] = {
    ("vllm_mooncake_failed_load_stranded_buggy", True): (Verdict.VIOLATED, 240, 658, 15, "requests_finish"),
    ("vllm_mooncake_failed_load_stranded_buggy", False): (Verdict.VIOLATED, 911, 2524, 15, "requests_finish"),
    ("vllm_mooncake_failed_load_stranded_fixed", True): (Verdict.PROVED, 370, 1174, 16, None),
    ("vllm_mooncake_failed_load_stranded_fixed", False): (Verdict.PROVED, 1387, 4540, 16, None),
    ("vllm_mooncake_transfer_id_reuse_buggy", True): (Verdict.VIOLATED, 19, 53, 6, "pages_return"),
    ("vllm_mooncake_transfer_id_reuse_buggy", False): (Verdict.VIOLATED, 61, 192, 6, "pages_return"),
    ("vllm_mooncake_transfer_id_reuse_fixed", True): (Verdict.PROVED, 25, 78, 6, None),
    ("vllm_mooncake_transfer_id_reuse_fixed", False): (Verdict.PROVED, 81, 292, 6, None),
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
