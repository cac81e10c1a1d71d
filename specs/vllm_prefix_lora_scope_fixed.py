"""vLLM automatic prefix caching with PR #3263: the block hash includes the LoRA adapter.

Written as the patch on top of ``vllm_prefix_lora_scope_buggy``.  PR #3263
makes ``Sequence.hash_of_block`` return ``hash((hashed_tokens,
self.lora_int_id))``, so blocks computed under different adapters have
different hashes and are cached separately; a request is handed only blocks
of its own adapter.  Both helpers that use the hash are replaced: the lookup
and the registration of a new block.

Besides the base spec's invariants the fix is checked for the change itself,
``cached_under_own_adapter``: every cached block is registered under the
adapter its KV was computed with.

Expected: safe; every block a request attends over holds its prompt's KV
computed under its own adapter, and two requests under one adapter still
share the block.
"""

import vllm_prefix_lora_scope_buggy as base
from vllm_prefix_lora_scope_buggy import Status

from ownership import Source, safe

spec = base.spec.derive(
    "vllm_prefix_lora_scope_fixed",
    summary="vLLM automatic prefix caching with PR #3263: the LoRA id is part of the block hash",
    models=Source(
        "vllm",
        "PR #3263",
        where=("vllm/sequence.py Sequence.hash_of_block: hash((hashed_tokens, self.lora_int_id))",),
        links=("vllm PR #3263", "vllm issue #3264"),
    ),
    expect=safe(),
)


@spec.replace
def cached_block(s, r, lora):
    """FIX: hash((token ids, lora_int_id)): only a block of the request's own adapter is a hit."""
    return base.cache.lookup(s, r, base.PROMPT, base.PROMPT, lora)


@spec.replace
def register_block(s, r, lora):
    """FIX: the new block is cached under a hash that includes the adapter."""
    base.cache.insert(s, r, base.PROMPT, base.PROMPT, lora)


@spec.invariant
def cached_under_own_adapter(s) -> bool:
    """FIX: a cached block is registered under the adapter its KV was computed with (the hash includes lora_int_id)."""
    return all(not s.cache_published[p] or s.cache_entry_scope[p] == s.cache_scope[p] for p in s.all(base.pool.Page))


spec.accept_mutant(
    "register_block drop-call: base.cache.insert(s, r, base.PROMPT, base.PROMPT, lora) => pass",
    reason="never registering a computed block loses every cache hit (each request computes its own block), "
    "which is no ownership fault: nothing is shared, so nothing can be read under the wrong adapter; that "
    "the fix still caches one block per adapter is a reachability property, checked by "
    "tests/test_lib_content.py::test_vllm_lora_fix_keeps_one_cached_block_per_adapter",
)


# On every fair path a finished request has dropped its blocks, cached or not (pages_return), and a
# scheduled request finishes (requests_finish): the forward and finishing are weakly fair, arrivals unfair.
spec.fair("forward", "weak")
spec.fair("finish", "weak")
base.own.properties("pages_return", "requests_finish", spec=spec,
                    ended=lambda s, r: s.status[r] == Status.FINISHED,
                    started=lambda s, r: s.status[r] != Status.IDLE)
