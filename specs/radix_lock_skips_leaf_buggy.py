"""mini-sglang radix cache as shipped before PR #52: locking a match skips the matched node.

Models the prefix cache of mini-sglang (python/minisgl/) up to commit
2648173, the parent of the fix:

* ``scheduler/prefill.py PrefillAdder._try_allocate_one``: ``match_req``
  matches ``input_ids[:input_len - 1]`` (so the last block is always
  computed), ``cache_manager.lock(handle)``, then admits the request only if
  ``extend_len`` fits ``available_size`` (``evictable_size`` plus the free
  slots), else unlocks and leaves it pending; the matched pages are copied
  into the request's page table;
* ``scheduler/scheduler.py _prepare_batch`` -> ``scheduler/cache.py
  CacheManager.allocate``: pages for the uncached blocks, evicting from the
  tree when the free list is short (``RadixCacheManager.evict``: unlocked
  leaves); the forward writes their KV and attends over the whole table;
* ``scheduler/cache.py free_and_cache_finished_req``: ``insert_prefix``
  publishes the request's pages, the ones already in the tree go back to
  the free list, then ``lock_handle(old_handle, unlock=True)``;
* ``kvcache/radix_manager.py RadixCacheManager.lock_handle``: the loop
  moves to ``node.parent`` *before* counting, so the handle's own node is
  never locked (its ancestors and the root are).

Known bug (mini-sglang PR #52): the matched node keeps ``ref_count == 0``,
counts as evictable, and the next allocation under memory pressure evicts it
while the request that matched it still has its pages in its page table.

Simplified: every page is one block and every block its own radix node
(``RadixCacheManager`` compresses paths and splits nodes in ``_walk``;
``_split_at`` copies ``ref_count`` to the new upper node, which with this bug
can also drive an unlock below zero, caught by ``assert ref_count >= 0``;
without splits the locks here stay balanced, so ``lock_refs_nonnegative``
holds in both versions).  Eviction picks any unlocked leaf (the LRU order by
timestamp is not modelled); admission, allocation and the forward of one
request are one step (they run in one scheduler iteration); generated tokens
are not modelled, so the output length does not count toward ``extend_len``.
"""

from typing import Annotated

from ownership import Element, Enum, Optional, Ownership, Source, Spec, require, violates
from ownership.vocab.prefix import PrefixIndex

spec = Spec(
    "radix_lock_skips_leaf_buggy",
    summary="mini-sglang radix cache: lock_handle skips the matched node, eviction frees a page in use",
    models=Source(
        "mini-sglang",
        "2648173 (before PR #52)",
        where=(
            "kvcache/radix_manager.py RadixCacheManager.lock_handle, match_prefix, insert_prefix, evict",
            "scheduler/prefill.py PrefillAdder._try_allocate_one",
            "scheduler/cache.py CacheManager.allocate, free_and_cache_finished_req",
        ),
        links=("mini-sglang PR #52",),
    ),
    expect=violates("no_evict_in_use"),
)
spec.param("requests", 2, "concurrent requests modelled", min=1, max=3)
spec.param("pages", 1, "KV pool size in pages (num_pages; one block per page)", min=1, max=4)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages", prefix="K")
# Prompts: "x" (one block) and "xy" (the same first block, then one more).
radix = PrefixIndex(pool, "radix", {"x": None, "xy": "x"}, root_refs=True)
RadixNodeId = Annotated[int, radix.Node]  # the type of an action argument drawn from radix.Node
ROOT = None  # RadixCacheHandle.node for an empty match: the root node

Phase = Enum("Phase", "IDLE PENDING RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE, doc="where the request is")
spec.var("prompt", Optional(radix.Node), per=Req, init=None, doc="the prompt's last block")
spec.var("handle", Optional(radix.Node), per=Req, init=None, doc="RadixCacheHandle.node of the match (none: root)")


@spec.helper  # replaced by radix_lock_skips_leaf_fixed
def lock_handle(s, node, unlock: bool = False) -> None:
    """RadixCacheManager.lock_handle as shipped: ``node = node.parent`` comes first."""
    if unlock:
        while node != ROOT:
            node = radix.parent(s, node)  # BUG: the handle's own node is skipped
            radix.add_ref(s, node, -1)
    else:
        while node != ROOT:
            node = radix.parent(s, node)  # BUG: the handle's own node is skipped
            radix.add_ref(s, node, 1)


def extend_len(prompt, handle) -> int:
    """Blocks the forward must compute: the prompt minus the matched prefix."""
    return len(radix.path(prompt)) - len(radix.path(handle))


@spec.action
def arrive(s, r: ReqId, prompt: RadixNodeId):
    """Scheduler receives a UserMsg; PrefillManager.add_one_req queues it."""
    require(s.phase[r] == Phase.IDLE)
    s.prompt[r] = prompt
    s.phase[r] = Phase.PENDING


@spec.action
def prefill(s, r: ReqId, prompt: RadixNodeId):
    """_try_allocate_one (match, lock, admit), then _prepare_batch's allocate and the forward."""
    require(s.phase[r] == Phase.PENDING and s.prompt[r] == prompt)
    handle = radix.match(s, r, radix.parent(s, prompt))  # match_req: input_ids[:input_len - 1]
    lock_handle(s, handle)
    require(extend_len(prompt, handle) <= radix.evictable(s) + pool.available(s))  # else unlock: stays pending
    s.handle[r] = handle
    radix.alloc(s, r, prompt, handle)  # CacheManager.allocate: evicts when the free list is short
    radix.write(s, r)
    radix.read(s, r)
    s.phase[r] = Phase.RUNNING


@spec.action
def finish(s, r: ReqId):
    """free_and_cache_finished_req: insert_prefix, free the duplicates, unlock the old handle."""
    require(s.phase[r] == Phase.RUNNING)
    radix.insert(s, r, s.prompt[r])
    radix.release(s, r)
    lock_handle(s, s.handle[r], unlock=True)
    s.handle[r] = ROOT
    s.phase[r] = Phase.DONE


@spec.terminal
def nothing_in_flight(s) -> bool:
    """No request is running (pending ones wait for memory and hold nothing)."""
    return all(s.phase[r] != Phase.RUNNING for r in s.all(Req))


own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership")
radix.invariants("no_evict_in_use", "lock_refs_nonnegative", "prefix_hit_written", "prefix_read_matches",
                 "index_pages_exclusive", "free_count_at_most_one", "pages_accounted_when_idle")
