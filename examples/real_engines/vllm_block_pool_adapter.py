"""Drive vLLM's real ``BlockPool`` in lock step with ``specs/vllm_block_pool.py``.

Needs vLLM 0.33.0 and a CPU torch (``scripts/real-engines.sh`` builds such an
environment); vLLM is imported only in :meth:`VllmBlockPoolAdapter.setup`,
so this module imports without it.

Each adapter method is one call of the ``BlockPool`` API, made the way
vLLM's own callers make it (``KVCacheManager`` and the single-type managers):
lists of ``KVCacheBlock`` objects, block hashes from ``hash_block_tokens``
chained from ``NONE_HASH``, KV cache group 0.  Spec block ``i`` is
``block_id`` ``i + 1``; block 0 is the pool's null block.

Run it:  ``ownership mbt specs/vllm_block_pool.py --adapter
examples.real_engines.vllm_block_pool_adapter:VllmBlockPoolAdapter``
(from the repository root, inside the vLLM environment).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from ownership.testing import Adapter, Rejected

#: Tokens per block.  Only the hashes depend on it.
BLOCK_SIZE = 4


class VllmBlockPoolAdapter(Adapter):
    """``vllm.v1.core.block_pool.BlockPool`` with prefix caching, against ``specs/vllm_block_pool.py``."""

    spec = "../../specs/vllm_block_pool.py"
    params = {"num_gpu_blocks": 4, "hashes": 2, "max_refs": 2}
    # get_new_blocks raises ValueError when too few blocks are free; the
    # internal asserts (cache_full_blocks on a cached block, get_new_blocks on
    # a referenced block) are the only other checks BlockPool makes.
    rejected = (ValueError, AssertionError)
    # Only the guards that are the engine's contract: a request for more
    # blocks than are free.  (The spec's other guards bound the model.)
    probe_disabled = frozenset({"get_new_blocks"})

    pool: Any
    hashes: list[bytes]

    def setup(self) -> None:
        """A fresh ``BlockPool(num_gpu_blocks, enable_caching=True)`` and the block hashes."""
        from vllm.utils.hashing import sha256
        from vllm.v1.core import kv_cache_utils
        from vllm.v1.core.block_pool import BlockPool

        # Deterministic block hashes (the engine does this at startup).
        kv_cache_utils.init_none_hash(sha256)
        self.pool = BlockPool(
            num_gpu_blocks=self.params["num_gpu_blocks"], enable_caching=True, hash_block_size=BLOCK_SIZE
        )
        # Hash h is the hash of a first block whose tokens are all h.
        self.hashes = [
            kv_cache_utils.hash_block_tokens(sha256, kv_cache_utils.NONE_HASH, [h] * BLOCK_SIZE)
            for h in range(self.params["hashes"])
        ]

    # -- one method per spec action ----------------------------------------------
    def get_new_blocks(self, num_blocks: int) -> None:
        """``BlockPool.get_new_blocks(num_blocks)`` (the spec pops the queue head: no picks)."""
        self.pool.get_new_blocks(num_blocks)

    def free_blocks(self, block: int) -> None:
        """``BlockPool.free_blocks([block])``."""
        self.pool.free_blocks([self.pool.blocks[block + 1]])

    def touch_cached_block(self, block_hash: int) -> list[int]:
        """``get_cached_block(hash, [0])`` then ``touch`` on the block it returns; returns that block."""
        hit = self.pool.get_cached_block(self.hashes[block_hash], [0])
        if hit is None:
            raise Rejected(f"get_cached_block(h{block_hash}) missed")
        self.pool.touch(hit)
        return [hit[0].block_id - 1]

    def cache_full_blocks(self, block: int, block_hash: int) -> None:
        """``cache_full_blocks`` for a request whose only full block is ``block``, with hash ``block_hash``."""
        request = SimpleNamespace(block_hashes=[self.hashes[block_hash]])
        self.pool.cache_full_blocks(
            request=request,
            blocks=[self.pool.blocks[block + 1]],
            num_cached_blocks=0,
            num_full_blocks=1,
            block_size=BLOCK_SIZE,
            kv_cache_group_id=0,
        )

    def evict_blocks(self, block: int) -> None:
        """``BlockPool.evict_blocks({block_id})``."""
        self.pool.evict_blocks({block + 1})

    def reset_prefix_cache(self) -> None:
        """``BlockPool.reset_prefix_cache()`` (returns False when blocks are in use)."""
        # Its "Failed to reset prefix cache" warning is the expected outcome here, many times a run.
        logger = logging.getLogger("vllm.v1.core.block_pool")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            self.pool.reset_prefix_cache()
        finally:
            logger.setLevel(level)

    # -- observation -----------------------------------------------------------------
    def _hash_name(self, key: bytes | None) -> str | None:
        """The spec's name (``h0``, ``h1``, ...) of a real block hash: Hash is a symmetric domain, so names, not numbers."""
        if key is None:
            return None
        from vllm.v1.core.kv_cache_utils import get_block_hash

        return f"h{self.hashes.index(get_block_hash(key))}"

    def observe(self) -> dict[str, object]:
        """Reference counts, the free queue in order, hashes, the prefix-cache map, the null block."""
        from vllm.v1.core.kv_cache_utils import make_block_hash_with_group_id

        blocks = self.pool.blocks[1:]
        cache_map = {}
        for h, block_hash in enumerate(self.hashes):
            key = make_block_hash_with_group_id(block_hash, 0)
            cache_map[f"h{h}"] = sorted(
                b.block_id - 1 for b in blocks if self.pool.cached_block_hash_to_block.contain(key, b.block_id)
            )
        null = self.pool.null_block
        return {
            "ref_cnt": [b.ref_cnt for b in blocks],
            "free_queue": [b.block_id - 1 for b in self.pool.free_block_queue.get_all_free_blocks()],
            "num_free_blocks": self.pool.get_num_free_blocks(),
            "block_hash": [self._hash_name(b.block_hash) for b in blocks],
            "cached_block_hash_to_block": cache_map,
            "null_block": (null.block_id, null.is_null, null.prev_free_block is None),
        }

    def expected(self, s: Any) -> dict[str, object]:
        """The same, from the spec state."""
        n = len(s.ref_cnt)
        queued = [b for b in range(n) if s.in_free_queue[b]]
        queue = sorted(queued, key=lambda b: (s.free_pos[b], b))  # specs/vllm_block_pool.py free_queue()
        return {
            "ref_cnt": [s.ref_cnt[b] for b in range(n)],
            "free_queue": queue,
            "num_free_blocks": len(queue),
            # The adapter's view gives references as ints: hash h is the spec's h{h}.
            "block_hash": [None if s.block_hash[b] is None else f"h{s.block_hash[b]}" for b in range(n)],
            "cached_block_hash_to_block": {
                f"h{h}": [b for b in range(n) if s.block_hash[b] == h] for h in range(self.params["hashes"])
            },
            "null_block": (0, True, True),
        }


class VllmBlockPoolDoubleFreeProbe(VllmBlockPoolAdapter):
    """Also sends ``free_blocks`` for blocks the caller does not hold (``ref_cnt == 0``): a double free.

    The spec forbids it; ``BlockPool.free_blocks`` does not check, so the
    model-based run reports "spec forbids, implementation accepted" (see
    ``docs/real-engines.md``).
    """

    probe_disabled = frozenset({"get_new_blocks", "free_blocks"})
