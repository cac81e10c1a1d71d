"""vLLM v1 BlockPool: reference counts, the free block queue and the prefix cache.

Models ``vllm/v1/core/block_pool.py`` ``BlockPool`` and the queue it owns,
``vllm/v1/core/kv_cache_utils.py`` ``FreeKVCacheBlockQueue`` (vLLM 0.33.0),
as the code documents them:

* ``__init__``: the free queue starts ordered by block ID; block 0 is popped
  at once and becomes the null block, whose ``ref_cnt`` is "not maintained"
  and which is never pooled.  The spec models the usable blocks only
  (``B1 .. B{num_gpu_blocks-1}``); the null block is never handed out,
  and ``free_blocks``/``touch`` skip it;
* ``get_new_blocks(n)``: ``ValueError`` when fewer than ``n`` blocks are
  free; else pop ``n`` blocks off the head of the queue, evict each one's
  prefix-cache entry (``_maybe_evict_cached_block``), ``assert ref_cnt == 0``
  and take one reference.  "We do not check block cache in this function";
* ``touch(blocks)``: a prefix-cache hit takes one more reference; "ref_cnt=0
  means this block is in the free list (i.e. eviction candidate), so remove
  it";
* ``free_blocks(ordered_blocks)``: drop one reference; a block that reaches 0
  goes back to the queue: blocks without a hash at the *front* ("LIFO reuse
  of non-cached blocks"), cached blocks at the *back* ("FIFO reuse of cached
  blocks for LRU eviction behavior");
* ``cache_full_blocks``: a full block a request holds gets its block hash and
  is entered in ``cached_block_hash_to_block`` (duplicates are kept: "we
  don't de-duplicate the blocks in the cache");
* ``get_cached_block``: "If there are duplicated blocks, we return the first
  block in the cache";
* ``evict_blocks``: drop blocks' prefix-cache entries by ID, held or not;
* ``reset_prefix_cache``: clear every hash, only when no block is in use.

The contract on callers is the guard of each action: ``free_blocks`` only on
a block the caller holds (``ref_cnt > 0``), ``cache_full_blocks`` only on a
held block without a hash, ``touch`` only on a block ``get_cached_block``
returned.  ``BlockPool`` itself checks none of them; ``docs/real-engines.md``
shows what happens when a caller breaks them.

Simplified:

* one block per ``free_blocks``/``touch``/``cache_full_blocks`` call (the
  callers pass lists; a list is these calls in its order);
* a block hash is one of ``hashes`` opaque values (the real one chains the
  parent's hash, the tokens and extra keys); one KV cache group;
* ``get_cached_block`` may return any cached block with the hash, a superset
  of "the first in the cache";
* prefix caching is on, no KV events, no metrics, no partial-block entries,
  no ``unpin_blocks``;
* ``max_refs`` bounds the references one block can take (the number of
  requests sharing it), to keep the state space finite.

Expected: safe.  The queue holds exactly the unreferenced blocks, in an
order the engine defines, and no reference count goes negative.
"""

from typing import Annotated

from ownership import Optional, Source, Spec, require, safe

spec = Spec(
    "vllm_block_pool",
    summary="vLLM v1 BlockPool: ref counts, LRU free block queue, prefix-cache hits and eviction",
    models=Source(
        "vLLM",
        "0.33.0",
        where=(
            "vllm/v1/core/block_pool.py BlockPool.get_new_blocks, free_blocks, touch, cache_full_blocks, "
            "get_cached_block, _maybe_evict_cached_block, evict_blocks, reset_prefix_cache",
            "vllm/v1/core/kv_cache_utils.py FreeKVCacheBlockQueue.popleft_n, remove, prepend_n, append_n",
            "vllm/v1/core/block_pool.py BlockHashToBlockMap",
        ),
    ),
    expect=safe(),
)

# The upper bounds admit the pools of recorded runs (``ownership validate``); checks use small values.
spec.param("num_gpu_blocks", 4, "BlockPool(num_gpu_blocks=...), the null block included", min=2, max=1024)
spec.param("hashes", 2, "distinct block hashes (prefix contents) modelled", min=1, max=1024)
spec.param("max_refs", 2, "most references one block takes (requests sharing it)", min=1, max=1024)

# Block i of the spec is block_id i + 1: block 0 is the null block.
Block = spec.domain(
    "Block",
    lambda p: p.num_gpu_blocks - 1,
    ordered=True,  # the free queue is ordered by position, ties by block ID
    names=lambda i: f"B{i + 1}",
    doc="usable KV cache blocks (KVCacheBlock), block_id = index + 1",
)
BlockId = Annotated[int, Block]  # the type of an action argument drawn from Block
Hash = spec.domain(
    "Hash", "hashes", symmetric=True, names=lambda i: f"h{i}", doc="block hash values (BlockHashWithGroupId)"
)
HashId = Annotated[int, Hash]  # the type of an action argument drawn from Hash
NumBlocks = spec.values("NumBlocks", lambda p: [1, 2])
NumBlocksId = Annotated[int, NumBlocks]  # the type of an action argument drawn from NumBlocks

spec.var("ref_cnt", int, per=Block, init=0, doc="KVCacheBlock.ref_cnt")
spec.var(
    "block_hash",
    Optional(Hash),
    per=Block,
    init=None,
    doc="KVCacheBlock.block_hash; a block with a hash is in cached_block_hash_to_block",
)
spec.var(
    "in_free_queue",
    bool,
    per=Block,
    init=True,
    doc="the block is linked into free_block_queue (prev/next_free_block set)",
)
spec.var(
    "free_pos",
    int,
    per=Block,
    init=0,
    doc="position in free_block_queue (head = 0); ties, as in the initial queue, go by block ID",
)


# -- FreeKVCacheBlockQueue ------------------------------------------------------
def free_queue(s) -> list[int]:
    """FreeKVCacheBlockQueue.get_all_free_blocks: the queue, head (next to evict) first."""
    queued = [b for b in s.all(Block) if s.in_free_queue[b]]
    return sorted(queued, key=lambda b: (s.free_pos[b], b))


def _relink(s, order: list[int]) -> None:
    """Store ``order`` as the queue (what the prev/next_free_block pointers encode)."""
    for b in s.all(Block):
        s.in_free_queue[b] = False
        s.free_pos[b] = 0
    for i, b in enumerate(order):
        s.in_free_queue[b] = True
        s.free_pos[b] = i


def get_num_free_blocks(s) -> int:
    """BlockPool.get_num_free_blocks: free_block_queue.num_free_blocks."""
    return sum(1 for b in s.all(Block) if s.in_free_queue[b])


def popleft_n(s, n: int) -> list[int]:
    """FreeKVCacheBlockQueue.popleft_n: the first ``n`` blocks leave the queue."""
    order = free_queue(s)
    _relink(s, order[n:])
    return order[:n]


def remove(s, block: int) -> None:
    """FreeKVCacheBlockQueue.remove: unlink a block from the middle of the queue."""
    _relink(s, [b for b in free_queue(s) if b != block])


def prepend_n(s, blocks: list[int]) -> None:
    """FreeKVCacheBlockQueue.prepend_n: put blocks at the front (reused first)."""
    _relink(s, blocks + free_queue(s))


def append_n(s, blocks: list[int]) -> None:
    """FreeKVCacheBlockQueue.append_n: put blocks at the back (evicted last)."""
    _relink(s, free_queue(s) + blocks)


# -- BlockPool ------------------------------------------------------------------
def _maybe_evict_cached_block(s, block: int) -> None:
    """BlockPool._maybe_evict_cached_block: drop the block's prefix-cache entry, if any."""
    s.block_hash[block] = None  # _remove_cached_block_hashes + block.reset_hash()


@spec.action
def get_new_blocks(s, num_blocks: NumBlocksId):
    """BlockPool.get_new_blocks: pop blocks off the queue head, evicting their cache entries."""
    require(num_blocks <= get_num_free_blocks(s))  # else: ValueError("Cannot get ... free blocks")
    ret = popleft_n(s, num_blocks)
    for block in ret:
        _maybe_evict_cached_block(s, block)
        # assert block.ref_cnt == 0 (the invariant free_queue_holds_unreferenced_blocks)
        s.ref_cnt[block] += 1


@spec.action
def free_blocks(s, block: BlockId):
    """BlockPool.free_blocks([block]): drop a reference; at 0 the block rejoins the queue."""
    require(s.ref_cnt[block] > 0)  # contract: the caller holds the block
    s.ref_cnt[block] -= 1
    if s.ref_cnt[block] == 0:
        if s.block_hash[block] == None:  # noqa: E711
            prepend_n(s, [block])  # LIFO reuse of non-cached blocks
        else:
            append_n(s, [block])  # FIFO reuse of cached blocks (LRU eviction)


@spec.action
def touch_cached_block(s, block_hash: HashId):
    """get_cached_block(hash) then touch([block]): a prefix-cache hit takes a reference."""
    cached = [b for b in s.all(Block) if s.block_hash[b] == block_hash]
    require(all(s.ref_cnt[b] < s.params.max_refs for b in cached))  # bound of the model, not of the engine
    block = s.choose(cached, label="block get_cached_block returns", domain=Block)  # a miss: nothing to touch
    if s.ref_cnt[block] == 0:
        remove(s, block)  # an eviction candidate comes off the free queue
    s.ref_cnt[block] += 1


@spec.action
def cache_full_blocks(s, block: BlockId, block_hash: HashId):
    """BlockPool.cache_full_blocks: a held, now full block is entered in the prefix cache."""
    require(s.ref_cnt[block] > 0)  # contract: a block of the request being cached
    require(s.block_hash[block] == None)  # noqa: E711 - a full block is cached once (else an assert)
    s.block_hash[block] = block_hash  # set_block_hash + cached_block_hash_to_block.insert


@spec.action
def evict_blocks(s, block: BlockId):
    """BlockPool.evict_blocks({block_id}): drop the prefix-cache entry; references and queue stay."""
    _maybe_evict_cached_block(s, block)


@spec.action
def reset_prefix_cache(s):
    """BlockPool.reset_prefix_cache: clear every hash, only when no block is in use."""
    if get_num_free_blocks(s) != s.size(Block):
        return  # "Failed to reset prefix cache because some blocks are not freed yet"
    for b in s.all(Block):
        s.block_hash[b] = None


# -- what the pool relies on ----------------------------------------------------
@spec.invariant
def ref_cnt_never_negative(s) -> bool:
    """No block's reference count drops below zero."""
    return all(s.ref_cnt[b] >= 0 for b in s.all(Block))


@spec.invariant
def free_queue_holds_unreferenced_blocks(s) -> bool:
    """A block is in the free queue exactly when its ref_cnt is 0 (get_new_blocks asserts it)."""
    return all(s.in_free_queue[b] == (s.ref_cnt[b] == 0) for b in s.all(Block))


@spec.terminal
def nothing_held(s) -> bool:
    """No block is referenced: every request gave its blocks back (the pool can always get here)."""
    return all(s.ref_cnt[b] == 0 for b in s.all(Block))


# -- reading event logs of real runs (``ownership validate``, docs/validate.md) -----------------
# A log's node is the BlockPool: its page ids are block ids (block 0, the null block, is reserved),
# its content keys are block hashes, and every usable block can hold a distinct one.  A log's
# requests are not modelled (the pool counts references, not who holds them).
spec.log_ids(
    pages=Block,
    content=Hash,
    params=lambda node: {"num_gpu_blocks": node.pages, "hashes": node.usable, "max_refs": 1024},
    # evict_blocks (a KV connector's invalid blocks) and reset_prefix_cache (an explicit reset)
    # are not part of scheduling; every call the scheduler makes is logged.
    internal=(),
)
# A list call is these calls in its order (the module docstring); alloc must take exactly the
# logged blocks off the head of the free queue, a hit must touch exactly the logged block.
spec.logs("alloc", "get_new_blocks", per_page=True, args={"num_blocks": 1}, changes="ref_cnt")
spec.logs("share", "touch_cached_block", per_page=True, args={"block_hash": "content"}, changes="ref_cnt")
spec.logs("cache", "cache_full_blocks", per_page=True, args={"block": "page", "block_hash": "content"})
spec.logs("free", "free_blocks", per_page=True, args={"block": "page"})
# Writes and reads change nothing the pool tracks; the block must be referenced by someone.
spec.logs("write", per_page=True, where=lambda s, e: s.ref_cnt[e.page] > 0)
spec.logs("read", per_page=True, where=lambda s, e: s.ref_cnt[e.page] > 0)
spec.logs("finish")


# -- mutants this model cannot tell from the real thing (``ownership mutate``) ------------------
# The model has no block contents, so a block that keeps or gets the wrong hash is a state it
# also reaches legitimately; giving it contents needs a ghost variable (and more states).
_NO_CONTENT = ("the model has no block contents: a block with a stale or wrong hash is a state the model "
               "also reaches by caching that block; catching it needs a ghost variable of contents")
# The guards marked `contract` are the callers' side (see the module docstring): BlockPool checks
# none of them, and docs/real-engines.md shows what breaking one does to the real engine.
_CONTRACT = "a caller contract BlockPool does not check (module docstring); breaking it is shown in docs/real-engines.md"
_ORDER = ("the free queue's order is the eviction policy (which cached prefix goes first), "
          "not a safety property: every order keeps the ref counts and the queue's membership right")
for _mutant, _reason in (
    ('get_new_blocks delete-require: require(num_blocks <= get_num_free_blocks(s)) # else: ValueError("Cannot get ... '
     'free blocks") => pass # else: ValueError("Cannot get ... free blocks")',
     "popleft_n of more blocks than are queued returns the whole queue: the model has no caller that "
     "counts what it got (the engine raises ValueError instead)"),
    ("get_new_blocks drop-call: _maybe_evict_cached_block(s, block) => pass", _NO_CONTENT),
    ("free_blocks negate-if: if s.block_hash[block] == None: # noqa: E711 => "
     "if not (s.block_hash[block] == None): # noqa: E711", _ORDER),
    ("free_blocks flip-compare: if s.block_hash[block] == None: # noqa: E711 => "
     "if s.block_hash[block] != None: # noqa: E711", _ORDER),
    ("touch_cached_block flip-compare: cached = [b for b in s.all(Block) if s.block_hash[b] == block_hash] => "
     "cached = [b for b in s.all(Block) if s.block_hash[b] != block_hash]", _NO_CONTENT),
    ("touch_cached_block delete-require: require(all(s.ref_cnt[b] < s.params.max_refs for b in cached)) # bound of "
     "the model, not of the engine => pass # bound of the model, not of the engine",
     "max_refs only keeps the model finite: without it reference counts are unbounded and no search ends"),
    ("cache_full_blocks delete-require: require(s.ref_cnt[block] > 0) # contract: a block of the request being "
     "cached => pass # contract: a block of the request being cached", _CONTRACT),
    ("cache_full_blocks flip-compare: require(s.ref_cnt[block] > 0) # contract: a block of the request being "
     "cached => require(s.ref_cnt[block] <= 0) # contract: a block of the request being cached", _CONTRACT),
    ("cache_full_blocks delete-require: require(s.block_hash[block] == None) # noqa: E711 - a full block is cached "
     "once (else an assert) => pass # noqa: E711 - a full block is cached once (else an assert)", _CONTRACT),
    ("evict_blocks drop-call: _maybe_evict_cached_block(s, block) => pass",
     "evict_blocks only drops cache entries; without it a hash stays until get_new_blocks or reset drop it, "
     "and no block's references or queue membership change"),
    ("reset_prefix_cache negate-if: if get_num_free_blocks(s) != s.size(Block): => "
     "if not (get_num_free_blocks(s) != s.size(Block)):", _NO_CONTENT),
    ("reset_prefix_cache flip-compare: if get_num_free_blocks(s) != s.size(Block): => "
     "if get_num_free_blocks(s) == s.size(Block):", _NO_CONTENT),
):
    spec.accept_mutant(_mutant, reason=_reason)
