"""vLLM v1 prefix caching with a collision-resistant block hash: a hit is always the prompt's own prefix.

Written as the patch on top of ``vllm_prefix_hash_collision_buggy``.  PR
#12621 seeds the chain with ``hash('None')`` instead of ``hash(None)``
(randomised per process, as ``hash(None)`` was before Python 3.12), so an
attacker can no longer compute a colliding prompt offline; PR #15297 adds
``--prefix-caching-hash-algo sha256`` (``hash_block_tokens`` hashes the
pickled tuple with SHA-256 and ``NONE_HASH`` is ``os.urandom(32)`` unless
``PYTHONHASHSEED`` is set), SHA-256 by default since v0.10.2.  The model
takes the hash as injective (``collide=False``): the assumption that no
collision can be found, which a seeded builtin ``hash()`` makes unpredictable
and SHA-256 makes infeasible, not impossible.

Besides the base spec's invariants the fix is checked for the assumption
itself, ``block_hashes_distinct``: no two prefixes ever share a block hash,
so a hash function that could collide fails at the collision, before any
request reads the wrong block.

Expected: safe; every block a request reads holds its own prompt's prefix,
whoever computed it, and no cached or shared block is written.
"""

import vllm_prefix_hash_collision_buggy as base
from vllm_prefix_hash_collision_buggy import Status

from ownership import Source, safe

spec = base.spec.derive(
    "vllm_prefix_hash_collision_fixed",
    summary="vLLM v1 prefix caching with a collision-resistant block hash (PR #12621, sha256 since PR #15297)",
    models=Source(
        "vllm",
        "v1 engine with PR #12621 and PR #15297 (sha256 default since v0.10.2)",
        where=("vllm/v1/core/kv_cache_utils.py hash_block_tokens (NONE_HASH seed, sha256)",),
        links=("vllm PR #12621", "GHSA-rm76-4mrf-v9r8", "vllm PR #15297"),
    ),
    expect=safe(),
)


@spec.replace
def block_hash(s, prompt):
    """FIX: a seeded, collision-resistant hash: distinct prefixes never share a block hash."""
    return base.cache.hash(s, prompt, collide=False)


@spec.invariant
def block_hashes_distinct(s) -> bool:
    """FIX: distinct prefixes never share a block hash (the collision resistance the fix relies on)."""
    hashes = s.cache_hash
    return all(
        hashes[a] == None or hashes[a] != hashes[b]  # noqa: E711 - also runs on solver terms
        for a in s.all(base.cache.Key) for b in s.all(base.cache.Key) if a != b
    )


# On every fair path a finished request has dropped its blocks, cached or not (pages_return), and a
# scheduled request finishes (requests_finish): the forward and finishing are weakly fair, arrivals unfair.
spec.fair("forward", "weak")
spec.fair("finish", "weak")
base.own.properties("pages_return", "requests_finish", spec=spec,
                    ended=lambda s, r: s.status[r] == Status.FINISHED,
                    started=lambda s, r: s.status[r] != Status.IDLE)
