"""SGLang SWA radix cache with PR #29352: a tombstone whose Full KV is locked keeps it and adopts the SWA.

Written as the patch on top of ``sglang_swa_recover_locked_full_buggy``;
only the tombstone recovery of ``SWARadixCache._insert_helper`` (Branch 1)
changes, as in the upstream diff (python/sglang/srt/mem_cache/
swa_radix_cache.py): when ``node.full_lock_ref > 0``,
``_recover_tombstone_keeping_locked_full`` keeps ``node.value`` (the locked
Full pages), re-points the node's full-to-SWA mapping at the incoming
request's fresh SWA pages (``set_full_to_swa_mapping``) and frees only the
incoming, redundant Full pages (``full_attn_allocator.free``); the node is
no tombstone any more.  An unlocked tombstone is recovered as before.

Expected: safe; ``ownership prove`` proves it for executions of any length.
"""

import sglang_swa_recover_locked_full_buggy as base
from sglang_swa_recover_locked_full_buggy import Phase, X, full, full_pool, swa, tree

from ownership import Source, safe

spec = base.spec.derive(
    "sglang_swa_recover_locked_full_fixed",
    summary="SGLang SWA radix cache with PR #29352: recovery keeps locked Full KV and adopts the incoming SWA",
    models=Source(
        "SGLang",
        "PR #29352",
        where=("mem_cache/swa_radix_cache.py SWARadixCache._insert_helper, _recover_tombstone_keeping_locked_full",),
        links=("sglang PR #29352",),
    ),
    expect=safe(),
)


@spec.replace
def recover_tombstone(s, r) -> None:
    """_insert_helper Branch 1 after PR #29352: a locked node keeps its Full pages and takes the SWA ones."""
    if full.locked(s, X):  # FIX: node.full_lock_ref > 0
        swa.hand_off(s, r, X)  # set_full_to_swa_mapping(node.value, swa_value); swa_tombstone = False
        full_pool.free(s, r)  # full_attn_allocator.free(incoming_full): only the redundant Full pages
        return
    full.release(s, X)
    tree.hand_off(s, r, X)


spec.accept_mutant(
    "recover_tombstone+7 drop-call: tree.hand_off(s, r, X) => pass",
    reason="the unlocked recovery then inserts nothing: the request keeps its own pages and frees them when it "
    "finishes, so the cache only loses a reusable block (a missed hit, no page in two places or in use when freed)",
)


# What the fix is for, on every fair path: a finished request's pages go to the tree or back to the pool
# (pages_return), and a running request finishes (requests_finish).  The engine's own steps are weakly
# fair (the window passing, finishing); prefill (the arrival) and evict (memory pressure) stay unfair.
for _step in ("window_passes", "finish"):
    spec.fair(_step, "weak")
base.own.properties("pages_return", "requests_finish", spec=spec,
                    ended=lambda s, r: s.phase[r] == Phase.DONE,
                    started=lambda s, r: s.phase[r] != Phase.IDLE)
