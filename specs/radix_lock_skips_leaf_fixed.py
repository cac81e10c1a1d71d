"""mini-sglang radix cache with PR #52: locking a match starts at the matched node.

Written as the patch on top of ``radix_lock_skips_leaf_buggy``: every
declaration is shared; only ``lock_handle`` changes, exactly as in the
upstream diff (mini-sglang commit 8827b0f, ``kvcache/radix_manager.py
RadixCacheManager.lock_handle``): in both the lock and the unlock loop,
``node = node.parent`` moves from the first line of the loop body to the
last, so the handle's own node is counted before its ancestors.  The two
actions that call it (``prefill`` locks, ``finish`` unlocks) are replaced by
copies that call the fixed function.

Expected: safe; a matched node is locked for as long as its request runs,
so it is never evictable, and a request whose prefix is locked by others
waits for memory instead of evicting it.
"""

import radix_lock_skips_leaf_buggy as base
from radix_lock_skips_leaf_buggy import ROOT, Phase, Req, extend_len, pool, radix

from ownership import Source, require, safe

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


@spec.replace
def prefill(s, r: Req, prompt: radix.Node):
    """_try_allocate_one (match, lock, admit), then _prepare_batch's allocate and the forward."""
    require(s.phase[r] == Phase.PENDING and s.prompt[r] == prompt)
    handle = radix.match(s, r, radix.parent(s, prompt))  # match_req: input_ids[:input_len - 1]
    lock_handle(s, handle)  # the fixed lock_handle
    require(extend_len(prompt, handle) <= radix.evictable(s) + pool.available(s))  # else unlock: stays pending
    s.handle[r] = handle
    radix.alloc(s, r, prompt, handle)  # CacheManager.allocate: evicts when the free list is short
    radix.write(s, r)
    radix.read(s, r)
    s.phase[r] = Phase.RUNNING


@spec.replace
def finish(s, r: Req):
    """free_and_cache_finished_req: insert_prefix, free the duplicates, unlock the old handle."""
    require(s.phase[r] == Phase.RUNNING)
    radix.insert(s, r, s.prompt[r])
    radix.release(s, r)
    lock_handle(s, s.handle[r], unlock=True)  # the fixed lock_handle
    s.handle[r] = ROOT
    s.phase[r] = Phase.DONE
