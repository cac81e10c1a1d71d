"""vLLM's real ``BlockPool`` (vLLM 0.33.0) against ``specs/vllm_block_pool.py``.

The tests that drive vLLM are skipped when vLLM is not installed;
``scripts/real-engines.sh`` builds an environment with it and runs them
there (and fails if any is skipped).  Tests named ``test_upstream_*``
document upstream behaviour that departs from the contract the spec states:
they assert what vLLM 0.33.0 does today, so an upstream fix makes them fail,
and ``docs/real-engines.md`` must then be updated with them.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from ownership.core.result import Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.lang.instance import Instance

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # examples.real_engines.* (the adapters) import from the repository root

SKIP_REASON = "vLLM is not installed: scripts/real-engines.sh builds .venvs/vllm with it and runs these tests there"
BLOCK_SIZE = 4
MBT = {"max_examples": 60, "steps": 30, "seed": 0}


def _spec_module() -> ModuleType:
    """specs/vllm_block_pool.py as a module (its helpers are needed to patch an action)."""
    loader = importlib.util.spec_from_file_location("vllm_block_pool_spec", ROOT / "specs" / "vllm_block_pool.py")
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


# -- the spec alone (no engine needed) ------------------------------------------------------
def test_spec_without_the_free_blocks_contract_lets_ref_cnt_go_negative() -> None:
    """free_blocks exactly as BlockPool runs it (no ref_cnt check): the spec's invariant breaks."""
    m = _spec_module()
    unchecked = m.spec.derive("vllm_block_pool_unchecked_free", summary="free_blocks without its contract")

    Block = m.Block

    @unchecked.replace
    def free_blocks(s: Any, block: Block) -> None:  # type: ignore[valid-type]
        """BlockPool.free_blocks([block]) as written: no check that the caller holds the block."""
        s.ref_cnt[block] -= 1
        if s.ref_cnt[block] == 0:
            if s.block_hash[block] == None:  # noqa: E711
                m.prepend_n(s, [block])
            else:
                m.append_n(s, [block])

    result = explore(Instance(unchecked), ExploreOptions())
    assert result.verdict is Verdict.VIOLATED and result.violated == "ref_cnt_never_negative"
    assert result.trace is not None
    assert [step.call for step in result.trace.steps] == ["free_blocks(B1)"]


# -- the real BlockPool -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def vllm() -> ModuleType:
    """The vllm package, or a skip saying it is not installed."""
    return pytest.importorskip("vllm", reason=SKIP_REASON)


@pytest.fixture
def new_pool(vllm: ModuleType) -> Callable[[int], Any]:
    """``new_pool(n)``: a fresh ``BlockPool(n, enable_caching=True)`` with deterministic hashes."""
    from vllm.utils.hashing import sha256
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.core.block_pool import BlockPool

    kv_cache_utils.init_none_hash(sha256)
    return lambda n: BlockPool(num_gpu_blocks=n, enable_caching=True, hash_block_size=BLOCK_SIZE)


def _cache(pool: Any, block: Any, tokens: list[int]) -> bytes:
    """cache_full_blocks for a one-block request with ``tokens``; returns the block hash."""
    from vllm.utils.hashing import sha256
    from vllm.v1.core import kv_cache_utils

    block_hash = kv_cache_utils.hash_block_tokens(sha256, kv_cache_utils.NONE_HASH, tokens)
    pool.cache_full_blocks(SimpleNamespace(block_hashes=[block_hash]), [block], 0, 1, BLOCK_SIZE, 0)
    return block_hash


def test_block_pool_conforms_to_the_spec(vllm: ModuleType) -> None:
    from examples.real_engines.vllm_block_pool_adapter import VllmBlockPoolAdapter
    from ownership.testing import assert_conforms

    assert_conforms(VllmBlockPoolAdapter, **MBT)


def test_block_pool_refuses_more_blocks_than_are_free(vllm: ModuleType) -> None:
    """The one contract BlockPool checks: the probe of get_new_blocks past the free count is refused."""
    from examples.real_engines.vllm_block_pool_adapter import VllmBlockPoolAdapter
    from ownership.testing import MBTOptions, run_mbt

    assert "get_new_blocks" in VllmBlockPoolAdapter.probe_disabled
    result = run_mbt(VllmBlockPoolAdapter, MBTOptions(**MBT))
    assert result.verdict is not Verdict.VIOLATED, result


def test_upstream_model_based_run_finds_the_unchecked_double_free(vllm: ModuleType) -> None:
    """Documents upstream behaviour: free_blocks accepts a block whose ref_cnt is already 0.

    The run also sends free_blocks for blocks nobody holds; BlockPool takes
    them without complaint, so the run reports a disagreement, shrunk to a
    short trace that ends in the double free.
    """
    from examples.real_engines.vllm_block_pool_adapter import VllmBlockPoolDoubleFreeProbe
    from ownership.testing import assert_conforms

    with pytest.raises(AssertionError) as failure:
        assert_conforms(VllmBlockPoolDoubleFreeProbe, **MBT)
    report = str(failure.value)
    print(report)  # the shrunk trace, for docs/real-engines.md (pytest -s)
    assert "free_blocks(" in report
    assert "accepted" in report


def test_upstream_double_free_drives_ref_cnt_negative_until_an_allocation_asserts(
    new_pool: Callable[[int], Any],
) -> None:
    """Documents upstream behaviour: BlockPool.free_blocks does not check ref_cnt.

    The second free takes ref_cnt to -1 and leaves the block queued; only the
    ``assert block.ref_cnt == 0`` in get_new_blocks notices, when the block is
    next popped (and ``python -O`` removes that assert).
    """
    pool = new_pool(4)
    [block] = pool.get_new_blocks(1)
    pool.free_blocks([block])
    pool.free_blocks([block])  # the caller no longer holds it
    assert block.ref_cnt == -1
    assert pool.get_num_free_blocks() == 3
    assert pool.free_block_queue.get_all_free_blocks()[0] is block  # LIFO: the uncached block is next
    with pytest.raises(AssertionError):
        pool.get_new_blocks(1)
    # popleft_n already unlinked it: the pool now counts 2 free blocks and the block is nowhere.
    assert pool.get_num_free_blocks() == 2
    assert block not in pool.free_block_queue.get_all_free_blocks() and block.ref_cnt == -1


def test_upstream_double_free_then_prefix_hit_gives_one_block_two_owners(new_pool: Callable[[int], Any]) -> None:
    """Documents upstream behaviour: a double free of a cached block, then a prefix hit on it.

    touch() removes a block from the free queue only when its ref_cnt is 0;
    at -1 it leaves it queued and counts the hit as ref_cnt 0.  The next
    get_new_blocks hands the same block to a new request (its assert sees
    ref_cnt 0) while the request that hit the prefix still reads it: two
    owners, one reference, no error.
    """
    pool = new_pool(4)
    [block] = pool.get_new_blocks(1)
    block_hash = _cache(pool, block, [7] * BLOCK_SIZE)
    pool.free_blocks([block])  # cached: goes to the back of the queue
    pool.free_blocks([block])  # double free
    hit = pool.get_cached_block(block_hash, [0])
    assert hit == [block]
    pool.touch(hit)  # a second request reuses the cached prefix
    assert block.ref_cnt == 0 and block in pool.free_block_queue.get_all_free_blocks()
    fresh = pool.get_new_blocks(3)  # a third request takes every free block
    assert block in fresh and block.ref_cnt == 1
    assert block.block_hash is None  # evicted from the prefix cache under the reader
