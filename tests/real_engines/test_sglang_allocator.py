"""SGLang's real paged allocator and radix cache (SGLang 0.5.23) against ``specs/sglang_paged_allocator.py``.

The tests that drive SGLang are skipped when SGLang is not installed;
``scripts/real-engines.sh`` builds an environment with it and runs them
there (and fails if any is skipped).  Tests named ``test_upstream_*``
document upstream behaviour that departs from the contract the spec states:
they assert what SGLang 0.5.23 does today, so an upstream fix makes them
fail, and ``docs/real-engines.md`` must then be updated with them.
"""

from __future__ import annotations

import importlib.util
import sys
from array import array
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ownership.core.result import Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.lang.instance import Instance

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # examples.real_engines.* (the adapters) import from the repository root

SKIP_REASON = "SGLang is not installed: scripts/real-engines.sh builds .venvs/sglang with it and runs these tests there"
PAGE_SIZE = 2
MBT = {"max_examples": 60, "steps": 30, "seed": 0}


def _spec_module() -> ModuleType:
    """specs/sglang_paged_allocator.py as a module (its helpers are needed to patch an action)."""
    loader = importlib.util.spec_from_file_location(
        "sglang_paged_allocator_spec", ROOT / "specs" / "sglang_paged_allocator.py"
    )
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


# -- the spec alone (no engine needed) ------------------------------------------------------
def test_spec_without_the_dec_lock_ref_lets_eviction_take_a_running_prefix() -> None:
    """A release that forgets unlock: the spec's invariants catch what that does to other requests."""
    m = _spec_module()
    leaky = m.spec.derive("sglang_paged_allocator_no_unlock", summary="release without unlock")
    Req = m.Req

    @leaky.replace
    def release_without_checkpoint(s: Any, r: Req) -> None:  # type: ignore[valid-type]
        """release_kv_cache(checkpoint=False) without the unlock."""
        m.require(s.phase[r] == m.Phase.RUNNING)
        for d in s.all(m.Slot):
            if d >= s.protected[r]:
                m.free(s, s.row[r, d])
            s.row[r, d] = None
        s.protected[r] = 0
        s.last_node[r] = None
        s.phase[r] = m.Phase.IDLE

    result = explore(Instance(leaky), ExploreOptions())
    assert result.verdict is Verdict.VIOLATED and result.violated == "lock_ref_counts_running_requests"


def test_spec_releasing_a_checkpointed_row_again_breaks_page_ownership() -> None:
    """Freeing the protected prefix too (a row the tree already owns): every_page_in_one_place breaks."""
    m = _spec_module()
    greedy = m.spec.derive("sglang_paged_allocator_frees_prefix", summary="release frees the protected prefix")
    Req = m.Req

    @greedy.replace
    def release_without_checkpoint(s: Any, r: Req) -> None:  # type: ignore[valid-type]
        """release_kv_cache(checkpoint=False) freeing from 0 instead of cache_protected_len."""
        m.require(s.phase[r] == m.Phase.RUNNING)
        for d in s.all(m.Slot):
            m.free(s, s.row[r, d])
            s.row[r, d] = None
        m.dec_lock_ref(s, s.last_node[r])
        s.protected[r] = 0
        s.last_node[r] = None
        s.phase[r] = m.Phase.IDLE

    result = explore(Instance(greedy), ExploreOptions())
    assert result.verdict is Verdict.VIOLATED and result.violated == "every_page_in_one_place"


# -- the real allocator and radix cache -------------------------------------------------------
@pytest.fixture(scope="module")
def sglang() -> ModuleType:
    """The sglang package, or a skip saying it is not installed."""
    if importlib.util.find_spec("sglang") is not None:
        from examples.real_engines.sglang_import import prepare_sglang_import

        prepare_sglang_import()
    return pytest.importorskip("sglang", reason=SKIP_REASON)


@pytest.fixture
def new_allocator(sglang: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``new_allocator(pages, debug=...)``: a PagedTokenToKVPoolAllocator with page 0 as padding."""
    import torch
    from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator

    def make(pages: int, *, debug: bool) -> Any:
        monkeypatch.setenv("SGLANG_DEBUG_MEMORY_POOL", "1" if debug else "0")  # read by the constructor
        return PagedTokenToKVPoolAllocator(pages * PAGE_SIZE, PAGE_SIZE, torch.int64, "cpu", None, False)

    return make


def _tree(allocator: Any) -> Any:
    from sglang.srt.mem_cache.radix_cache import RadixCache

    return RadixCache.create_simulated(mock_allocator=allocator, page_size=PAGE_SIZE)


def _key(tokens: list[int]) -> Any:
    from sglang.srt.mem_cache.radix_cache import RadixKey

    return RadixKey(array("q", tokens))


@pytest.mark.parametrize(
    "adapter", ["SglangAllocatorAdapter", "SglangAllocatorSortedAdapter", "SglangAllocatorDebugAdapter"]
)
def test_allocator_and_radix_cache_conform_to_the_spec(sglang: ModuleType, adapter: str) -> None:
    import examples.real_engines.sglang_allocator_adapter as adapters
    from ownership.testing import assert_conforms

    assert_conforms(getattr(adapters, adapter), **MBT)


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_upstream_model_based_run_finds_the_unchecked_double_release(sglang: ModuleType, debug: bool) -> None:
    """Documents upstream behaviour: the allocator and the tree accept a request's row released twice.

    The run also re-sends a release for a request that was already released
    (the stale row and lock a second release path would hold).  Under
    ``release_kv_cache`` the engine takes it, with or without
    ``SGLANG_DEBUG_MEMORY_POOL=1``, so the run reports a disagreement.
    """
    import examples.real_engines.sglang_allocator_adapter as adapters
    from ownership.testing import assert_conforms

    adapter = adapters.SglangDoubleReleaseProbeDebug if debug else adapters.SglangDoubleReleaseProbe
    with pytest.raises(AssertionError) as failure:
        assert_conforms(adapter, **MBT)
    report = str(failure.value)
    print(report)  # the shrunk trace, for docs/real-engines.md (pytest -s)
    assert "release_with" in report or "release_without" in report
    assert "accepted" in report


def test_upstream_double_free_puts_a_page_on_the_free_list_twice(new_allocator: Callable[..., Any]) -> None:
    """Documents upstream behaviour: without SGLANG_DEBUG_MEMORY_POOL, free() does not look for duplicates.

    The page goes on the free list twice and two later allocations get the
    same token slots: two requests write their KV into one page.
    """
    import torch

    allocator = new_allocator(3, debug=False)
    slots = allocator.alloc(PAGE_SIZE)
    allocator.free(slots)
    allocator.free(slots)  # the second release of the same row
    page = int(slots[0]) // PAGE_SIZE
    assert allocator.get_all_free_pages().tolist().count(page) == 2
    assert allocator.available_size() == 4 * PAGE_SIZE  # a 3-page pool reports 4 free pages
    first, second = allocator.alloc(PAGE_SIZE), allocator.alloc(PAGE_SIZE)
    assert torch.equal(first, second)


def test_upstream_free_group_hides_a_double_free_but_not_a_double_free_segment(
    new_allocator: Callable[..., Any],
) -> None:
    """Documents upstream behaviour: inside a free group, free() deduplicates and free_segment() does not."""
    allocator = new_allocator(3, debug=False)
    slots = allocator.alloc(PAGE_SIZE)
    page = int(slots[0]) // PAGE_SIZE
    allocator.free_group_begin()
    allocator.free(slots)
    allocator.free(slots)
    allocator.free_group_end()
    assert allocator.get_all_free_pages().tolist().count(page) == 1  # torch.unique over the whole group

    allocator = new_allocator(3, debug=False)
    slots = allocator.alloc(PAGE_SIZE)
    allocator.free_group_begin()
    allocator.free_segment(slots, start_pos=0)
    allocator.free_segment(slots, start_pos=0)
    allocator.free_group_end()
    assert allocator.get_all_free_pages().tolist().count(page) == 2


def test_upstream_debug_memory_pool_raises_after_the_duplicate_is_in(new_allocator: Callable[..., Any]) -> None:
    """Documents upstream behaviour: with SGLANG_DEBUG_MEMORY_POOL=1 the duplicate check runs after the free.

    free() raises AssertionError, but the page is already on the free list
    twice; a caller that catches the error keeps a corrupt free list.
    """
    allocator = new_allocator(3, debug=True)
    assert allocator.debug_mode
    slots = allocator.alloc(PAGE_SIZE)
    allocator.free(slots)
    with pytest.raises(AssertionError):
        allocator.free(slots)
    page = int(slots[0]) // PAGE_SIZE
    assert allocator.get_all_free_pages().tolist().count(page) == 2


def test_upstream_debug_memory_pool_misses_freeing_a_page_the_tree_owns(new_allocator: Callable[..., Any]) -> None:
    """Documents upstream behaviour: the debug check only looks for duplicates within the free list.

    A row the radix tree took over (release with checkpoint) is freed again:
    no page is on the free list twice, so even with SGLANG_DEBUG_MEMORY_POOL=1
    nothing is raised; the next allocation hands out pages that the tree
    still serves as a cached prefix.
    """
    from sglang.srt.mem_cache.base_prefix_cache import InsertParams, MatchPrefixParams

    allocator = new_allocator(3, debug=True)
    tree = _tree(allocator)
    prompt = [11, 12, 21, 22]
    row = allocator.alloc(len(prompt))
    tree.insert(InsertParams(key=_key(prompt), value=row.clone()))  # the tree now owns the row's pages
    allocator.free(row)  # a second release path frees the row anyway: no error
    reused = allocator.alloc(len(prompt))
    assert sorted(reused.tolist()) == sorted(row.tolist())
    match = tree.match_prefix(MatchPrefixParams(key=_key(prompt)))
    assert match.device_prefix_len == len(prompt)  # still served as this prompt's KV
    assert sorted(tree.path_device_indices(match.last_device_node).tolist()) == sorted(reused.tolist())


def test_upstream_double_unlock_leaves_a_locked_prefix_evictable(new_allocator: Callable[..., Any]) -> None:
    """Documents upstream behaviour: RadixCache.dec_lock_ref does not stop at 0.

    A second unlock takes lock_ref to -1; the next request's lock brings it
    back to 0 only, so the node stays evictable while that request reads it,
    and evict() frees its pages.
    """
    from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams

    allocator = new_allocator(3, debug=True)
    tree = _tree(allocator)
    prompt = [11, 12, 21, 22]
    tree.insert(InsertParams(key=_key(prompt), value=allocator.alloc(len(prompt))))
    node = tree.match_prefix(MatchPrefixParams(key=_key(prompt))).last_device_node
    lock = tree.lock(node)
    tree.unlock(lock)
    tree.unlock(lock)  # released twice
    assert node.lock_ref == -1
    tree.lock(node)  # another request's prefix hit pins the node ...
    assert node.lock_ref == 0 and tree.protected_size() == 0  # ... but it is not protected
    evicted = tree.evict(EvictParams(num_tokens=len(prompt)))
    assert evicted.num_tokens_evicted == len(prompt)
    assert tree.match_prefix(MatchPrefixParams(key=_key(prompt))).device_prefix_len == 0
