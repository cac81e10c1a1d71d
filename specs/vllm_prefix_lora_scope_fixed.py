"""vLLM automatic prefix caching with PR #3263: the block hash includes the LoRA adapter.

Written as the patch on top of ``vllm_prefix_lora_scope_buggy``.  PR #3263
makes ``Sequence.hash_of_block`` return ``hash((hashed_tokens,
self.lora_int_id))``, so blocks computed under different adapters have
different hashes and are cached separately; a request is handed only blocks
of its own adapter.  Both helpers that use the hash are replaced: the lookup
and the registration of a new block.

Expected: safe; every block a request attends over holds its prompt's KV
computed under its own adapter, and two requests under one adapter still
share the block.
"""

import vllm_prefix_lora_scope_buggy as base

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
