"""mini-sglang radix cache with PR #52: locking a match starts at the matched node.

Written as the patch on top of ``radix_lock_skips_leaf_buggy``: every
declaration is shared; only ``lock_handle`` changes, exactly as in the
upstream diff (mini-sglang commit 8827b0f, ``kvcache/radix_manager.py
RadixCacheManager.lock_handle``): in both the lock and the unlock loop,
``node = node.parent`` moves from the first line of the loop body to the
last, so the handle's own node is counted before its ancestors.  The shipped
spec declares it with ``@spec.helper``, so replacing it here changes it for
both actions that call it (``prefill`` locks, ``finish`` unlocks).

Expected: safe; a matched node is locked for as long as its request runs,
so it is never evictable, and a request whose prefix is locked by others
waits for memory instead of evicting it.  On every fair path (``prefill``
and ``finish`` weakly fair, arrivals unfair) a finished request's pages go
to the radix tree or back to the pool (``pages_return``).
"""

import radix_lock_skips_leaf_buggy as base
from radix_lock_skips_leaf_buggy import ROOT, Phase, radix

from ownership import Source, safe

spec = base.spec.derive(
    "radix_lock_skips_leaf_fixed",
    summary="mini-sglang radix cache with PR #52: lock_handle counts the matched node itself",
    models=Source(
        "mini-sglang",
        "8827b0f (PR #52)",
        where=("kvcache/radix_manager.py RadixCacheManager.lock_handle",),
        links=("mini-sglang PR #52",),
    ),
    expect=safe(),
)


@spec.replace
def lock_handle(s, node, unlock: bool = False) -> None:
    """RadixCacheManager.lock_handle after PR #52: count the node, then move to its parent."""
    if unlock:
        while node != ROOT:
            radix.add_ref(s, node, -1)
            node = radix.parent(s, node)  # FIX: moved after the update
    else:
        while node != ROOT:
            radix.add_ref(s, node, 1)
            node = radix.parent(s, node)  # FIX: moved after the update


# A finished request's pages go to the radix tree or back to the pool: pages_return.  Not requests_finish:
# at pages=1 a prompt of two blocks never fits and stays pending for ever, by the model's design.
spec.fair("prefill", "weak")  # the scheduler admits a pending request once memory allows
spec.fair("finish", "weak")  # the forward ends and free_and_cache_finished_req runs; arrive stays unfair
base.own.properties("pages_return", spec=spec, ended=lambda s, r: s.phase[r] == Phase.DONE)


# `while node == ROOT` never ends when called on the root (its parent is the root again): the
# action never returns, so there is no state to check.  `ownership mutate` reports it as timed out.
_ENDLESS = "the loop never ends on the root node, so the action never returns (no wrong verdict: a hang)"
# Without its +line offset the id names both loops (lock and unlock).
spec.accept_mutant("lock_handle flip-compare: while node != ROOT: => while node == ROOT:", reason=_ENDLESS)
