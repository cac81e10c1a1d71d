"""SGLang SWA radix cache with PR #22470: a block whose SWA KV is all evicted is freed, not inserted.

Written as the patch on top of ``sglang_swa_insert_evicted_window_buggy``;
only the new-node case of ``SWARadixCache._insert_helper`` changes, as in
the defensive half of the upstream diff (python/sglang/srt/mem_cache/
swa_radix_cache.py): when ``swa_evicted_seqlen == total_prefix_length +
len(key)``, ``token_to_kv_pool_allocator.free(value)`` returns the
request's remaining pages and no node is created ("leaf nodes must not be
tombstone").

Expected: safe; ``ownership prove`` proves it for executions of any length.
"""

import sglang_swa_insert_evicted_window_buggy as base
from sglang_swa_insert_evicted_window_buggy import Phase, X, tree

from ownership import Source, safe

spec = base.spec.derive(
    "sglang_swa_insert_evicted_window_fixed",
    summary="SGLang SWA radix cache with PR #22470: a block with no SWA KV left is freed instead of inserted",
    models=Source(
        "SGLang",
        "PR #22470",
        where=("mem_cache/swa_radix_cache.py SWARadixCache._insert_helper (case 3: free value, no node)",),
        links=("sglang PR #22470",),
    ),
    expect=safe(),
)


@spec.replace
def insert_new_node(s, r) -> None:
    """_insert_helper after PR #22470: every SWA token evicted: free the value and create no node."""
    if s.swa_evicted[r]:  # FIX: swa_evicted_seqlen == total_prefix_length + len(key)
        tree.free(s, r)
        return
    tree.hand_off(s, r, X)


# What the fix is for, on every fair path: a finished request's pages go to the tree or back to the pool
# (pages_return), and a running request finishes (requests_finish).  The engine's own steps are weakly
# fair (the window passing, finishing); prefill (the arrival) and evict (memory pressure) stay unfair.
for _step in ("window_passes", "finish"):
    spec.fair(_step, "weak")
base.own.properties("pages_return", "requests_finish", spec=spec,
                    ended=lambda s, r: s.phase[r] == Phase.DONE,
                    started=lambda s, r: s.phase[r] != Phase.IDLE)
