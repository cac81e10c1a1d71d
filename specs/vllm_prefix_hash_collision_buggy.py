"""vLLM v1 prefix caching before PR #12621: predictable block hashes let a crafted prompt hit another prompt's block.

Models the v1 KV cache manager's prefix caching as of the parent of PR #12621
("[Core] Improve hash collision avoidance in prefix caching", advisory
GHSA-rm76-4mrf-v9r8):

* ``vllm/v1/core/kv_cache_utils.py hash_request_tokens`` hashes a request's
  full blocks in a chain; ``hash_block_tokens(parent_block_hash,
  curr_block_token_ids, extra_keys)`` is Python's builtin
  ``hash((parent_block_hash, token_ids, extra_keys))``, and the first block's
  parent is ``None``;
* ``vllm/v1/core/kv_cache_manager.py KVCacheManager.get_computed_blocks``
  looks each hash up in ``cached_block_hash_to_block`` (``_get_cached_block``)
  and hands the cached blocks to the request; ``allocate_slots`` allocates
  the rest (evicting cached blocks nobody references, ``_get_new_blocks``)
  and ``_cache_full_blocks`` registers the new full blocks under their hash;
  ``free`` drops the request's references (cached blocks stay cached).

Known bug (the advisory: "Prefix caching makes use of Python's built-in
hash() function.  As of Python 3.12, the behavior of hash(None) has changed
to be a predictable constant value ... someone could intentionally populate
the cache using a prompt known to collide with another prompt in use"): ints
and tuples of ints hash without a per-process seed, so with a constant
``hash(None)`` every block hash is computable offline and a prompt can be
crafted whose block hash equals another prompt's.  The lookup key also holds
the block's own token ids (``BlockHashType``), so the collision that matters
is in the parent chain: two prompts whose first blocks differ (``x``, ``y``)
but collide, followed by the same block ``z``, give the second blocks the same
lookup key, and the request with prompt ``yz`` is handed the KV of ``xz``.

Modelled with the content-identity vocabulary: the content keys are the two
prefixes ``xz`` and ``yz`` (the block ``z`` after each first block; the first
blocks are never hit, their token ids differ), the index is keyed by a hash
whose value for each prefix is any value at all (``collide=True``: every
collision a crafted prompt can produce), and ``no_wrong_content_read`` says
no request reads a block holding another prefix's KV.  A second request with
the *same* prompt reads the first one's block legitimately (a shared read,
not a wrong one).  Simplified: a request is one prompt block plus nothing
else; scheduling, the forward and finishing are one step each, and the
forward writes the new block before ``_cache_full_blocks`` publishes it
(upstream registers it at allocation, for the step that computes it);
eviction picks any unreferenced cached block (the LRU order is not modelled).
"""

from typing import Annotated

from ownership import Element, Enum, Optional, Ownership, Source, Spec, require, violates
from ownership.vocab.content import ContentIndex

spec = Spec(
    "vllm_prefix_hash_collision_buggy",
    summary="vLLM v1 prefix caching hashes blocks with builtin hash() from hash(None): a crafted prompt collides",
    models=Source(
        "vllm",
        "v1 engine before PR #12621",
        where=(
            "vllm/v1/core/kv_cache_utils.py hash_block_tokens, hash_request_tokens",
            "vllm/v1/core/kv_cache_manager.py KVCacheManager.get_computed_blocks, _get_cached_block",
            "vllm/v1/core/kv_cache_manager.py KVCacheManager.allocate_slots, _cache_full_blocks, free",
        ),
        links=("vllm PR #12621", "GHSA-rm76-4mrf-v9r8", "vllm PR #15297"),
    ),
    expect=violates("no_wrong_content_read"),
)
spec.param("requests", 2, "concurrent requests modelled", min=1, max=3)
spec.param("blocks", 2, "KV blocks (num_gpu_blocks)", min=1, max=4)
spec.param("hashes", 2, "distinct block-hash values", min=1, max=3)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "blocks", prefix="K")
# The second block z after two different first blocks: two prefixes, two contents.
cache = ContentIndex(pool, "cache", ["xz", "yz"], hashes="hashes", collide=True)
PromptId = Annotated[int, cache.Key]

Status = Enum("Status", "IDLE RUNNING COMPUTED FINISHED")
spec.var("status", Status, per=Req, init=Status.IDLE, doc="where the request is")
spec.var("prompt", Optional(cache.Key), per=Req, init=None, doc="the request's prompt prefix")


@spec.helper
def block_hash(s, prompt):
    """hash_block_tokens: builtin hash() of (parent hash, token ids, extra keys); hash(None) is a constant."""
    return cache.hash(s, prompt, collide=True)


@spec.action
def schedule(s, r: ReqId, prompt: PromptId):
    """The request arrives and is scheduled: get_computed_blocks, then allocate_slots for a miss."""
    require(s.status[r] == Status.IDLE)
    s.prompt[r] = prompt
    h = block_hash(s, prompt)  # hash_request_tokens
    if not cache.lookup(s, r, h, prompt):  # _get_cached_block(block_hash)
        cache.alloc(s, r, 1, prompt)  # allocate_slots: None (stays waiting) when no block is free
    s.status[r] = Status.RUNNING


@spec.action
def forward(s, r: ReqId, prompt: PromptId):
    """The model runner computes the new block, _cache_full_blocks registers it, attention reads the blocks."""
    require(s.status[r] == Status.RUNNING and s.prompt[r] == prompt)
    cache.write(s, r, prompt)
    cache.insert(s, r, block_hash(s, prompt), prompt)
    cache.read(s, r)
    s.status[r] = Status.COMPUTED


@spec.action
def finish(s, r: ReqId):
    """KVCacheManager.free: the request drops its blocks; cached blocks stay cached."""
    require(s.status[r] == Status.COMPUTED)
    cache.release(s, r)
    s.status[r] = Status.FINISHED


@spec.terminal
def nothing_running(s) -> bool:
    """No request holds blocks."""
    return all(s.status[r] in (Status.IDLE, Status.FINISHED) for r in s.all(Req))


cache.invariants()
