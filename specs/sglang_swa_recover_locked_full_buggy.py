"""SGLang SWA radix cache before PR #29352: recovering a tombstone frees Full KV a running request still reads.

Models the hybrid sliding-window (SWA) prefix cache of SGLang
(python/sglang/srt/mem_cache/) before PR #29352 ("[bug2] skip swa recovery
on locked full kv", split 3/5 of PR #29349):

* ``allocator`` ``SWATokenToKVPoolAllocator``: every token has a full-attention
  page and a sliding-window page (``full_to_swa_index_mapping``); ``alloc``
  takes both, ``free`` returns both, ``free_swa`` only the window half;
* ``managers/scheduler.py`` ``process_batch_result_prefill`` ->
  ``swa_radix_cache.py SWARadixCache.cache_unfinished_req``: after a prefill
  the request's pages are inserted into the tree (the insert hands them off:
  no free), re-matched, and the request locks the node it now reads
  (``inc_lock_ref``: ``full_lock_ref`` and ``swa_lock_ref``);
* ``SWARadixCache.dec_swa_lock_only``: once the request's decode has moved
  past the sliding window, its SWA lock goes; a leaf whose ``swa_lock_ref``
  drops to 0 has its SWA pages freed (``free_swa``) and becomes a
  ``swa_tombstone``, while its Full KV stays locked by the request;
* ``SWARadixCache._match_prefix_helper``: a match stops before a tombstone
  (fewer than ``sliding_window_size`` tokens since it), so the next request
  with the same prefix computes it again;
* ``SWARadixCache._insert_helper``, Branch 1 (``swa_evicted_seqlen <=
  total_prefix_length``): inserting over a tombstoned node "recovers" it:
  ``token_to_kv_pool_allocator.free(node.value[:prefix_len])`` frees the
  node's Full pages and the node takes the incoming request's pages;
* ``SWARadixCache.cache_finished_req``: ``dec_lock_ref`` (``skip_swa`` once
  the SWA lock went) and the request's slot is released.

Known bug (PR #29352, "Bug 2: SWA recovery could overwrite locked Full KV"):
the recovery frees the tombstone's Full pages without checking
``full_lock_ref``.  The request that locked them is still decoding and its
``req_to_token`` row still maps them; the allocator hands them to the next
request.  The checked invariant ``no_release_in_use`` fails at the insert
(3 steps: A prefills and is cached, A's window passes and the leaf is
tombstoned, B computes the same prefix and its insert frees A's Full page).

Simplified: the prompt is one block (one page in each pool, one tree node
``x``); decode tokens are not modelled (a request's decode only moves its
window past the prompt), so ``cache_finished_req`` inserts nothing new; a
match either takes the whole block or nothing; eviction picks the node
whenever nothing locks it (the LRU order and memory pressure are not
modelled); prefill, ``cache_unfinished_req`` and the re-match are one step,
as they run in one scheduler iteration.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.cache import Cache, overwrite_row
from ownership.vocab.paired import PairedCaches

spec = Spec(
    "sglang_swa_recover_locked_full_buggy",
    summary="SGLang SWA radix cache: recovering a tombstone frees the Full KV a running request still reads",
    models=Source(
        "SGLang",
        "before PR #29352",
        where=(
            "mem_cache/swa_radix_cache.py SWARadixCache._insert_helper (tombstone Branch 1)",
            "mem_cache/swa_radix_cache.py SWARadixCache.dec_swa_lock_only, cache_unfinished_req, cache_finished_req",
            "mem_cache/swa_memory_pool.py SWATokenToKVPoolAllocator.alloc, free, free_swa",
        ),
        links=("sglang PR #29352", "sglang PR #29349"),
    ),
    expect=violates("no_release_in_use"),
)
spec.param("requests", 2, "concurrent requests modelled", min=1, max=3)
spec.param("full_pages", 2, "full-attention KV pool size in pages", min=1, max=3)
spec.param("swa_pages", 2, "sliding-window KV pool size in pages", min=1, max=3)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
own = Ownership(spec, requests=Req)
full_pool = own.pool("full", "full_pages", prefix="F")
swa_pool = own.pool("swa", "swa_pages", prefix="S")
full = Cache(full_pool, "full_tree", ["x"])  # TreeNode.value: the Full pages of the prompt block
swa = Cache(swa_pool, "swa_tree", full.Node)  # the same nodes' SWA pages (none for a swa_tombstone)
tree = PairedCaches(full, swa)
X = 0  # the prompt's only node

Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE, doc="where the request is")
spec.var("locked", bool, per=Req, init=False, doc="the request holds its Full lock on the node (req.last_node)")
spec.var("swa_locked", bool, per=Req, init=False, doc="the request holds its SWA lock (swa_prefix_lock_released is false)")


@spec.helper  # replaced by sglang_swa_recover_locked_full_fixed
def recover_tombstone(s, r) -> None:
    """_insert_helper Branch 1 as shipped: free the tombstone's Full pages, the node takes the request's."""
    full.release(s, X)  # BUG: token_to_kv_pool_allocator.free(node.value) while full_lock_ref > 0
    tree.hand_off(s, r, X)  # node.value = value; swa_tombstone = False


def insert(s, r) -> None:
    """SWARadixCache.insert of a request that computed the block (prev_prefix_len 0)."""
    if not full.cached(s, X):
        tree.hand_off(s, r, X)  # _add_new_node: the request's pages become the node's value
    elif swa.tombstoned(s, X):
        recover_tombstone(s, r)
    else:
        tree.free(s, r)  # the node has the block: the request's duplicate pages are freed


@spec.action
def prefill(s, r: ReqId):
    """Match (stops before a tombstone) or compute the block, then cache_unfinished_req: insert, re-match, lock."""
    require(s.phase[r] == Phase.IDLE)
    if not tree.matchable(s, X):
        tree.alloc(s, r, 1)  # alloc_token_slots: a Full page and its SWA page
        full_pool.write(s, r, full_pool.pages_of(s, r))
        swa_pool.write(s, r, swa_pool.pages_of(s, r))
        insert(s, r)
    if tree.matchable(s, X):  # match_prefix + inc_lock_ref(new_last_node); no match: it keeps its own pages
        tree.match(s, r, X)
        overwrite_row(s, full_pool, r, 0, 1)  # req_to_token_pool.write(new_indices): the row names the tree's pages
        overwrite_row(s, swa_pool, r, 0, 1)
        s.locked[r] = True
        s.swa_locked[r] = True
    s.phase[r] = Phase.RUNNING


@spec.action
def window_passes(s, r: ReqId):
    """dec_swa_lock_only: the decode left the window; a leaf whose SWA lock drops to 0 is tombstoned."""
    require(s.phase[r] == Phase.RUNNING and s.swa_locked[r])
    swa.unmatch(s, r, X)
    s.swa_locked[r] = False
    if not swa.locked(s, X):
        swa.tombstone(s, X)  # free_swa(node.value); swa_tombstone = True (the Full KV stays locked)


@spec.action
def finish(s, r: ReqId):
    """cache_finished_req: nothing new to insert; dec_lock_ref (skip_swa once released); the slot goes."""
    require(s.phase[r] == Phase.RUNNING)
    if s.locked[r]:
        full.unmatch(s, r, X)
        s.locked[r] = False
    if s.swa_locked[r]:
        swa.unmatch(s, r, X)
        s.swa_locked[r] = False
    tree.free(s, r)  # pages the tree did not take (none when the insert succeeded) go back
    full.drop(s, r)  # req_to_token_pool.free(req_pool_idx): the row's mappings go
    swa.drop(s, r)
    s.phase[r] = Phase.DONE


@spec.action
def evict(s):
    """SWARadixCache.evict: an unlocked leaf's Full and SWA pages go back (a tombstone's Full pages only)."""
    tree.evict(s, X)


@spec.terminal
def nothing_running(s) -> bool:
    """No request is running."""
    return all(s.phase[r] != Phase.RUNNING for r in s.all(Req))


own.invariants("no_double_ownership", "no_unowned_write")
tree.invariants()
