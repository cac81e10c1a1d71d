"""Drive SGLang's real paged allocator and radix cache with ``specs/sglang_paged_allocator.py``.

Needs SGLang 0.5.23 and a CPU torch (``scripts/real-engines.sh`` builds such
an environment); SGLang is imported only in :meth:`SglangAllocatorAdapter.setup`,
so this module imports without it.

The adapter plays the scheduler: per request it keeps what ``Req.kv`` keeps
(the row of KV indices, ``cache_protected_len``, the tree lock) and calls the
engine's primitives the way ``PrefillAdder``/``alloc_for_extend`` and
``mem_cache/common.py release_kv_cache`` call them:
``RadixCache.match_prefix`` / ``path_device_indices`` / ``lock`` /
``insert`` / ``unlock`` / ``evict`` and
``PagedTokenToKVPoolAllocator.alloc`` / ``free_segment``.  The tree is
``RadixCache.create_simulated`` over the real allocator (no GPU KV buffers:
bookkeeping only).  On a CPU the allocator takes its naive (non-Triton) paths.

Spec page ``i`` is page id ``i + 1`` (page 0 is the padding page); a page
holds ``PAGE_SIZE`` tokens.  Prompt ``XY`` is the tokens of pages X and Y.

Run it:  ``ownership mbt specs/sglang_paged_allocator.py --adapter
examples.real_engines.sglang_allocator_adapter:SglangAllocatorAdapter``
(from the repository root, inside the SGLang environment).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from examples.real_engines.sglang_import import prepare_sglang_import
from ownership.testing import Adapter, Rejected

PAGE_SIZE = 2
#: Token ids of the page contents X, Y, Z.
X, Y, Z = (11, 12), (21, 22), (31, 32)
#: Prompt (spec element: XY = 0, XZ = 1) -> token ids: XY and XZ share their first page.
PROMPTS = (X + Y, X + Z)
#: Page-prefix of a prompt -> spec radix node (N_X, N_XY, N_XZ).
NODE_OF_PREFIX: dict[tuple[tuple[int, ...], ...], int] = {(X,): 0, (X, Y): 1, (X, Z): 2}
DEBUG_VAR = "SGLANG_DEBUG_MEMORY_POOL"


@dataclass
class _ReqKv:
    """What ``Req.kv`` and ``Req.lock`` hold for one request (kept after release, for probes)."""

    tokens: tuple[int, ...]
    kv: Any  # torch.Tensor of token indices: req_to_token row
    protected: int  # cache_protected_len, tokens
    lock: Any  # TreeLock from RadixCache.lock


class SglangAllocatorAdapter(Adapter):
    """``PagedTokenToKVPoolAllocator`` + ``RadixCache`` against ``specs/sglang_paged_allocator.py``."""

    spec = "../../specs/sglang_paged_allocator.py"
    params = {"requests": 2, "pages": 3}
    # alloc returning None is turned into Rejected below; asserts are the
    # engine's only other checks (SGLANG_DEBUG_MEMORY_POOL=1 adds some).
    rejected = (AssertionError,)
    #: ``PagedTokenToKVPoolAllocator(need_sort=...)``: False on a single node, True under PD disaggregation.
    need_sort = False
    #: Value of ``SGLANG_DEBUG_MEMORY_POOL`` while the allocator is built (None: leave the environment alone).
    debug_memory_pool: bool | None = False

    allocator: Any
    tree: Any
    reqs: dict[int, _ReqKv]

    def setup(self) -> None:
        """A fresh allocator of ``pages`` pages and an empty radix tree over it."""
        prepare_sglang_import()
        import torch
        from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator
        from sglang.srt.mem_cache.radix_cache import RadixCache

        saved = os.environ.get(DEBUG_VAR)
        if self.debug_memory_pool is not None:
            os.environ[DEBUG_VAR] = "1" if self.debug_memory_pool else "0"
        try:
            # The allocator reads SGLANG_DEBUG_MEMORY_POOL here, once.
            self.allocator = PagedTokenToKVPoolAllocator(
                size=self.params["pages"] * PAGE_SIZE,
                page_size=PAGE_SIZE,
                dtype=torch.int64,
                device="cpu",
                kvcache=None,
                need_sort=self.need_sort,
            )
        finally:
            if saved is None:
                os.environ.pop(DEBUG_VAR, None)
            else:
                os.environ[DEBUG_VAR] = saved
        self.tree = RadixCache.create_simulated(mock_allocator=self.allocator, page_size=PAGE_SIZE)
        self.reqs = {}

    def _key(self, tokens: tuple[int, ...]) -> Any:
        from array import array

        from sglang.srt.mem_cache.radix_cache import RadixKey

        return RadixKey(array("q", tokens))

    # -- one method per spec action ----------------------------------------------
    def admit(self, r: int, prompt: int) -> list[int]:
        """match_prefix, lock the matched node, alloc the rest; returns the new pages (spec indices)."""
        import torch
        from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams

        tokens = PROMPTS[prompt]
        match = self.tree.match_prefix(MatchPrefixParams(key=self._key(tokens)))
        prefix = self.tree.path_device_indices(match.last_device_node)
        lock = self.tree.lock(match.last_device_node)
        need = len(tokens) - len(prefix)
        new = self.allocator.alloc(need) if need else prefix[:0]
        if new is None:
            raise Rejected(f"alloc({need}) returned None with {self.allocator.available_size()} tokens free")
        self.reqs[r] = _ReqKv(tokens, torch.cat((prefix, new)), len(prefix), lock)
        return [int(i) // PAGE_SIZE - 1 for i in new[::PAGE_SIZE]]

    def _held(self, r: int) -> _ReqKv:
        held = self.reqs.get(r)
        if held is None:
            # release_kv_cache asserts req.kv.holds_kv before touching anything.
            raise Rejected(f"request {r} never held KV: nothing reaches the allocator")
        return held

    def release_with_checkpoint(self, r: int) -> None:
        """release_kv_cache(checkpoint=True): insert the prompt, free the duplicates, unlock."""
        from sglang.srt.mem_cache.base_prefix_cache import InsertParams

        held = self._held(r)
        result = self.tree.insert(InsertParams(key=self._key(held.tokens), value=held.kv.clone()))
        # RadixCache._insert_cache: the pages the tree already had are this request's duplicates.
        self.allocator.free_segment(held.kv[held.protected : result.prefix_len], start_pos=held.protected)
        self.tree.unlock(held.lock)

    def release_without_checkpoint(self, r: int) -> None:
        """release_kv_cache(checkpoint=False): free the row past the protected prefix, unlock."""
        held = self._held(r)
        self.allocator.free_segment(held.kv[held.protected :], start_pos=held.protected)
        self.tree.unlock(held.lock)

    def evict(self) -> list[int]:
        """RadixCache.evict(page_size tokens); returns the evicted leaf (spec node)."""
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams

        before = self._nodes()
        self.tree.evict(EvictParams(num_tokens=PAGE_SIZE))
        gone = [n for n in before if n not in self._nodes()]
        if not gone:
            raise Rejected("evict freed nothing")
        return [max(gone)]  # the deepest node: N_XY/N_XZ before N_X

    # -- observation -----------------------------------------------------------------
    def _nodes(self) -> dict[int, tuple[int, int, int]]:
        """Spec node -> (page index, lock_ref, id of the engine TreeNode holding it), for cached pages."""
        out: dict[int, tuple[int, int, int]] = {}
        stack: list[tuple[Any, tuple[tuple[int, ...], ...]]] = [(self.tree.root_node, ())]
        while stack:
            node, prefix = stack.pop()
            for child in node.children.values():
                tokens, values = list(child.key), child.value.tolist()
                path = prefix
                for i in range(0, len(tokens), PAGE_SIZE):
                    path = (*path, tuple(tokens[i : i + PAGE_SIZE]))
                    out[NODE_OF_PREFIX[path]] = (values[i] // PAGE_SIZE - 1, child.lock_ref, id(child))
                stack.append((child, path))
        return out

    def observe(self) -> dict[str, object]:
        """Free-list multiplicities, tree pages, lock refs, node sharing, the tree's size counters."""
        free_ids = self.allocator.get_all_free_pages().tolist()
        nodes = self._nodes()
        pages = self.params["pages"]
        return {
            "free_pages": [free_ids.count(p + 1) for p in range(pages)],
            "padding_page_free": free_ids.count(0),
            "available_pages": self.allocator.available_size() // PAGE_SIZE,
            "tree_pages": [nodes[n][0] if n in nodes else None for n in range(3)],
            "lock_ref": [nodes[n][1] if n in nodes else 0 for n in range(3)],
            "joined": [n in nodes and 0 in nodes and nodes[n][2] == nodes[0][2] for n in (1, 2)],
            "evictable_pages": self.tree.evictable_size() // PAGE_SIZE,
            "protected_pages": self.tree.protected_size() // PAGE_SIZE,
        }

    def expected(self, s: Any) -> dict[str, object]:
        """The same, from the spec state."""
        pages = self.params["pages"]
        cached = [n for n in range(3) if s.value[n] is not None]
        return {
            "free_pages": [s.free[p] for p in range(pages)],
            "padding_page_free": 0,
            "available_pages": sum(s.free[p] for p in range(pages)),
            "tree_pages": [s.value[n] for n in range(3)],
            "lock_ref": [s.lock_ref[n] for n in range(3)],
            "joined": [bool(s.joined[1]), bool(s.joined[2])],
            "evictable_pages": sum(1 for n in cached if s.lock_ref[n] == 0),
            "protected_pages": sum(1 for n in cached if s.lock_ref[n] > 0),
        }


class SglangAllocatorSortedAdapter(SglangAllocatorAdapter):
    """The same with ``need_sort=True`` (PD disaggregation): frees are staged and merged sorted."""

    need_sort = True


class SglangAllocatorDebugAdapter(SglangAllocatorAdapter):
    """The same with ``SGLANG_DEBUG_MEMORY_POOL=1`` (the allocator's duplicate and alignment checks on)."""

    debug_memory_pool = True


class SglangDoubleReleaseProbe(SglangAllocatorAdapter):
    """Also re-sends a request's release after it was released (a double free), debug checks off.

    The spec forbids it.  The adapter sends the stale row and lock, as a
    second release path holding the same ``Req.kv`` would.
    """

    probe_disabled = frozenset({"release_with_checkpoint", "release_without_checkpoint"})
    debug_memory_pool = False


class SglangDoubleReleaseProbeDebug(SglangDoubleReleaseProbe):
    """The double-release probe with ``SGLANG_DEBUG_MEMORY_POOL=1``."""

    debug_memory_pool = True
