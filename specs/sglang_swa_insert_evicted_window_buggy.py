"""SGLang SWA radix cache before PR #22470: a block whose SWA KV was evicted is inserted as a live node.

Models the hybrid sliding-window (SWA) prefix cache of SGLang
(python/sglang/srt/mem_cache/) before PR #22470 ("Fix SWA eviction
boundary and page-align chunked prefill"), with ``page_size >
sliding_window_size``:

* ``SWATokenToKVPoolAllocator``: every token has a full-attention page and
  a sliding-window page; ``alloc`` takes both, ``free`` returns both (the
  SWA half through ``full_to_swa_index_mapping``), ``free_swa`` only the SWA
  half;
* ``SWARadixCache._evict_swa`` during decode: the request's SWA pages
  below ``pre_len - sliding_window``, page-aligned, go back (``free_swa``)
  and ``req.swa_evicted_seqlen`` advances; with a page larger than the
  window the frontier can reach ``page_floor(seq_len)``, so every page of
  the block about to be inserted is already out of the SWA pool;
* ``SWARadixCache.cache_finished_req`` -> ``insert(..., swa_evicted_seqlen)``
  -> ``_insert_helper``: a block the tree lacks becomes a new node
  (``_add_new_node``: the request's pages are handed to it, no free); a
  block it has already frees the request's duplicates;
* ``match_prefix`` / ``inc_lock_ref`` / ``dec_lock_ref`` and ``evict`` as in
  ``sglang_swa_recover_locked_full_buggy``.

Known bug (PR #22470): ``_insert_helper`` had no case for
``swa_evicted_seqlen == total_length`` (every SWA token of the new part
evicted) and fell through to ``_add_new_node(swa_tombstone=False)``: the
tree gets a live node without SWA KV, which "inflated swa_evictable_size_,
caused negative usage, and led to potential double-free on subsequent tree
eviction".  The checked invariant ``window_held_unless_tombstone`` fails at
the insert (3 steps: prefill, the window passes the block, finish).

Simplified: the prompt is one block (one page in each pool, one tree node
``x``); decode tokens are not modelled, so the request's window leaving the
block is one step; the preventive half of the fix (one more page of margin
in ``_evict_swa``, so the frontier stops short of the insert boundary) is
not modelled: the fixed spec is the defensive half, in ``_insert_helper``.
Eviction picks the node whenever nothing locks it.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.cache import Cache
from ownership.vocab.paired import PairedCaches

spec = Spec(
    "sglang_swa_insert_evicted_window_buggy",
    summary="SGLang SWA radix cache: a block whose SWA pages were evicted during decode is inserted as a live node",
    models=Source(
        "SGLang",
        "before PR #22470",
        where=(
            "mem_cache/swa_radix_cache.py SWARadixCache._insert_helper (swa_evicted_seqlen == total_length)",
            "mem_cache/swa_radix_cache.py SWARadixCache._evict_swa, cache_finished_req, _add_new_node",
            "mem_cache/swa_memory_pool.py SWATokenToKVPoolAllocator.alloc, free, free_swa",
        ),
        links=("sglang PR #22470",),
    ),
    expect=violates("window_held_unless_tombstone"),
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
swa = Cache(swa_pool, "swa_tree", full.Node)  # the same node's SWA pages
tree = PairedCaches(full, swa)
X = 0  # the prompt's only node

Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE, doc="where the request is")
spec.var("locked", bool, per=Req, init=False, doc="the request matched the node and holds its locks")
spec.var("swa_evicted", bool, per=Req, init=False, doc="req.swa_evicted_seqlen covers the whole block")


@spec.helper  # replaced by sglang_swa_insert_evicted_window_fixed
def insert_new_node(s, r) -> None:
    """_insert_helper for a block the tree lacks, as shipped: always _add_new_node(swa_tombstone=False)."""
    tree.hand_off(s, r, X)  # BUG: the request's SWA page for the block is already back in the SWA pool


@spec.action
def prefill(s, r: ReqId):
    """match_prefix (+ inc_lock_ref on a hit) or compute the block into a Full page and its SWA page."""
    require(s.phase[r] == Phase.IDLE)
    if tree.matchable(s, X):
        tree.match(s, r, X)
        s.locked[r] = True
    else:
        tree.alloc(s, r, 1)
        full_pool.write(s, r, full_pool.pages_of(s, r))
        swa_pool.write(s, r, swa_pool.pages_of(s, r))
    s.phase[r] = Phase.RUNNING


@spec.action
def window_passes(s, r: ReqId):
    """_evict_swa: the frontier (page_floor(seq_len) when page_size > window) passes the request's block."""
    require(s.phase[r] == Phase.RUNNING and not s.locked[r] and not s.swa_evicted[r])
    tree.free_window(s, r, 1)  # free_swa(req_to_token[.., :frontier]); swa_evicted_seqlen = frontier
    s.swa_evicted[r] = True


@spec.action
def finish(s, r: ReqId):
    """cache_finished_req: insert the block (a new node, or free the duplicates), then dec_lock_ref."""
    require(s.phase[r] == Phase.RUNNING)
    if s.locked[r]:
        full.unmatch(s, r, X)
        swa.unmatch(s, r, X)
        s.locked[r] = False
    elif not full.cached(s, X):
        insert_new_node(s, r)
    else:
        tree.free(s, r)  # the tree has the block: free(value[:prefix_len]) (both halves the request still has)
    full.drop(s, r)
    swa.drop(s, r)
    s.phase[r] = Phase.DONE


@spec.action
def evict(s):
    """SWARadixCache.evict: an unlocked leaf's Full and SWA pages go back."""
    tree.evict(s, X)


@spec.terminal
def nothing_running(s) -> bool:
    """No request is running."""
    return all(s.phase[r] != Phase.RUNNING for r in s.all(Req))


own.invariants("no_double_ownership", "no_unowned_write")
tree.invariants()
