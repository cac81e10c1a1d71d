"""vLLM automatic prefix caching before PR #3263: the block hash leaves out the LoRA adapter.

Models automatic prefix caching (PR #2762) in the v1 block manager as it was
before PR #3263 ("Possible fix for conflict between Automated Prefix Caching
(#2762) and multi-LoRA support (#1804)", issue #3264):

* ``vllm/sequence.py Sequence.hash_of_block(logical_idx)`` hashes the
  prompt's token ids up to and including block ``logical_idx``
  (``num_hashed_tokens_of_block``), and nothing else;
* the block manager's ``allocate`` passes that hash to the GPU allocator
  (``CachedBlockAllocator.allocate(block_hash, num_hashed_tokens)``, in
  ``vllm/core/block_manager_v1.py`` in later releases), which returns the
  cached block with that hash (one more reference) or a new block
  registered under it; ``free`` drops the reference, and a block nobody
  references stays cached until the evictor reuses it.

Known bug (issue #3264: "the user probably does not want to share KV-cache
across two different LoRA adapters since the values would most likely be
different"; the PR's test ``tests/test_cache_block_hashing.py`` fails "when
subsequent requests specify different adapters"): two requests with the same
prompt under different adapters get the same block hash, so the second is
handed the KV the first computed under the other adapter's weights.

Modelled with the content-identity vocabulary: one prompt block ``p``
(identical token ids for every request), the adapter as the content's scope
(``scopes=Lora``: a page holds KV of ``p`` *under* an adapter), an exact
index (Python's ``hash`` of the token tuple is not the bug here; collisions
are the pair ``vllm_prefix_hash_collision``), and a lookup that omits the
scope.  ``no_wrong_content_read`` says no request attends over KV computed
under another adapter.  Simplified as in ``vllm_prefix_hash_collision``: a
request is one prompt block; scheduling, the forward and finishing are one
step each; the forward writes the new block before it is cached; eviction
picks any unreferenced cached block.
"""

from typing import Annotated

from ownership import Element, Enum, Optional, Ownership, Source, Spec, require, violates
from ownership.vocab.content import ContentIndex

spec = Spec(
    "vllm_prefix_lora_scope_buggy",
    summary="vLLM automatic prefix caching hashes only token ids: a request under another LoRA adapter hits the block",
    models=Source(
        "vllm",
        "v1 block manager with automatic prefix caching, before PR #3263",
        where=(
            "vllm/sequence.py Sequence.hash_of_block, num_hashed_tokens_of_block",
            "block manager allocate -> CachedBlockAllocator.allocate(block_hash, num_hashed_tokens), free",
        ),
        links=("vllm PR #3263", "vllm issue #3264", "vllm PR #2762"),
    ),
    expect=violates("no_wrong_content_read"),
)
spec.param("requests", 2, "concurrent requests modelled", min=1, max=3)
spec.param("blocks", 2, "KV blocks (num_gpu_blocks)", min=1, max=4)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]
Lora = spec.domain("Lora", 2, symmetric=True, names=["base", "sql"], doc="LoRA adapters (lora_int_id; base: none)")
LoraId = Annotated[Element, Lora]
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "blocks", prefix="K")
cache = ContentIndex(pool, "cache", ["p"], scopes=Lora)
PROMPT = 0  # the one prompt block every request has (the same token ids)

Status = Enum("Status", "IDLE RUNNING COMPUTED FINISHED")
spec.var("status", Status, per=Req, init=Status.IDLE, doc="where the request is")
spec.var("lora", Optional(Lora), per=Req, init=None, doc="the request's LoRA adapter (lora_request)")


@spec.helper
def cached_block(s, r, lora):
    """allocate(seq.hash_of_block(i)): hash((token ids)), the adapter left out; a hit or nothing."""
    return cache.lookup(s, r, PROMPT, PROMPT)


@spec.helper
def register_block(s, r, lora):
    """The new block is cached under the same hash (the adapter left out)."""
    cache.insert(s, r, PROMPT, PROMPT)


@spec.action
def schedule(s, r: ReqId, lora: LoraId):
    """The request arrives under an adapter and is allocated: a cached block with its hash, or a new one."""
    require(s.status[r] == Status.IDLE)
    s.lora[r] = lora
    if not cached_block(s, r, lora):
        cache.alloc(s, r, 1, PROMPT)  # not enabled when no block is free or evictable
    s.status[r] = Status.RUNNING


@spec.action
def forward(s, r: ReqId, lora: LoraId):
    """The model runner computes the new block under the request's adapter, caches it, attends over the blocks."""
    require(s.status[r] == Status.RUNNING and s.lora[r] == lora)
    cache.write(s, r, PROMPT, lora)
    register_block(s, r, lora)
    cache.read(s, r, lora)
    s.status[r] = Status.COMPUTED


@spec.action
def finish(s, r: ReqId):
    """free: the request drops its references; cached blocks stay cached."""
    require(s.status[r] == Status.COMPUTED)
    cache.release(s, r)
    s.status[r] = Status.FINISHED


@spec.terminal
def nothing_running(s) -> bool:
    """No request holds blocks."""
    return all(s.status[r] in (Status.IDLE, Status.FINISHED) for r in s.all(Req))


cache.invariants()
