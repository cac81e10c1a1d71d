"""SGLang HiCache write-back eviction after PR #27108: demote only once the host copy is committed.

Written as the patch on ``sglang_hicache_demote_without_copy_buggy``
(compare with the upstream diff of SGLang PR #27108,
``UnifiedRadixCache._evict_device_leaf``)::

    written = self.write_backup(node, write_back=True)
    if written == 0:
        return
    self.writing_check(write_back=True)
    self._evict_to_host(node, tracker)

A node whose backup failed stays on device (this eviction frees nothing;
the caller moves on to other leaves).  Expected: safe, for executions of any
length (``ownership prove``).
"""


import sglang_hicache_demote_without_copy_buggy as base
from sglang_hicache_demote_without_copy_buggy import Node, NodeId, device, evict_to_host, host, tiers, write_backup

from ownership import Source, require, safe

spec = base.spec.derive(
    "sglang_hicache_demote_without_copy_fixed",
    summary="SGLang HiCache write_back after PR #27108: a node is demoted only after its host copy is committed",
    models=Source(
        "SGLang",
        "0.5.13",
        where=("mem_cache/unified_radix_cache.py UnifiedRadixCache._evict_device_leaf",),
        links=("sglang PR #27108", "sglang PR #27865 (cherry-pick to release/v0.5.13)"),
    ),
    expect=safe(),
)


@spec.replace
def evict_device_leaf(s, n: NodeId):
    """_evict_device_leaf (write_back): back up, and demote only if the backup was committed (FIX)."""
    require(s.in_tree[n] and not s.evicted[n])
    if not tiers.holds(s, n, host):  # not node.backuped
        if not write_backup(s, n):  # FIX: written == 0 -> return, the node stays on device
            return
    evict_to_host(s, n)


# -- helper invariants for `ownership prove` (true in every reachable state; they make the proof inductive) --
tiers.invariants("index_matches_content", "pages_accounted", spec=spec, helper=True)


@spec.invariant(helper=True)
def tree_matches_tiers(s) -> bool:
    """A node outside the tree has no pages; an evicted one exactly its host copy; else one device page."""
    for n in s.all(Node):
        on_device, on_host = tiers.count(s, n, device), tiers.count(s, n, host)
        if not s.in_tree[n]:
            if on_device != 0 or on_host != 0 or s.evicted[n] or s.host_lock_ref[n] != 0:
                return False
        elif s.evicted[n]:
            if on_device != 0 or on_host != 1:
                return False
        elif on_device != 1 or on_host > 1:
            return False
        if s.host_lock_ref[n] < 0 or s.host_lock_ref[n] > 1 or (s.host_lock_ref[n] == 1 and on_host == 0):
            return False
    return True


spec.accept_mutant(
    "evict_device_leaf drop-call: evict_to_host(s, n) => pass",
    reason="an eviction that frees nothing is what the fix itself does when the backup fails; "
    "never demoting only fails to relieve memory pressure, which the model does not bound",
)
