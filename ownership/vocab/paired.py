"""Two page caches driven together: full-attention pages next to sliding-window pages.

SGLang's hybrid allocator (``SWATokenToKVPoolAllocator``) gives every token a
full-attention page and a sliding-window (SWA) page.  Both are allocated and
freed together, except that SWA pages outside the attention window are freed
on their own (``free_swa``), and a radix node whose SWA pages are gone is a
*tombstone*: its full pages stay cached, it cannot be matched.
:class:`PairedCaches` is two :class:`~ownership.vocab.cache.Cache` objects
over one node domain, driven together, with the invariants that tie them:
``pairs_held_together`` and ``window_held_unless_tombstone``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ownership.core.events import Free
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.elements import Member, ix
from ownership.lang.guard import require
from ownership.lang.model import Spec
from ownership.vocab.cache import Cache, _register, _req_holds, cache_builtins
from ownership.vocab.prefix import _not, _set_if


class PairedCaches:
    """Two pools managed as one allocator: every token has a page in each (SGLang ``SWATokenToKVPoolAllocator``).

    ``full`` and ``window`` are caches over the same node domain, on two
    pools of one ``Ownership``.  A token's pages sit at the same slot of the
    request's two page tables (``full_to_swa_index_mapping``) and in the same
    node of the tree.  The window pool's pages may be released early (outside
    the sliding window, or a tombstoned node), the full pages never before
    them: ``pairs_held_together``; a node that is no tombstone of the window
    pool holds both halves: ``window_held_unless_tombstone``.
    """

    def __init__(self, full: Cache, window: Cache) -> None:
        if full.Node is not window.Node or full.pool is window.pool or full.pool.own is not window.pool.own:
            file, line = caller_location(2)
            raise OwnershipError(Code.CACHE_INVALID,
                                 f"paired caches {full.name} and {window.name} must share one node domain and "
                                 "sit on two pools of one Ownership", file, line)
        self.full = full
        self.window = window

    def alloc(self, s: Any, r: Member, n: int, first_slot: int = 0) -> None:
        """``alloc``: ``n`` pages of each pool at the same slots (the full-to-SWA mapping)."""
        self.full.pool.alloc(s, r, n, first_slot)
        self.window.pool.alloc(s, r, n, first_slot)

    def free(self, s: Any, r: Member) -> None:
        """``free``: both halves of every token ``r``'s tables hold go back to their free lists."""
        self.full.pool.free(s, r)
        self.window.pool.free(s, r)

    def free_window(self, s: Any, r: Member, below: int) -> None:
        """``free_swa``: ``r``'s window pages at slots below ``below`` go back; its full pages stay."""
        pool = self.window.pool
        free = getattr(s, pool.free_var)
        holders = getattr(s, pool.holders_var)
        slot = getattr(s, pool.slot_var)
        keep = ~(1 << ix(r))
        freed = []
        for p in s.all(pool.Page):
            out = _req_holds(s, pool, r, p) & (slot[p] < below)
            _set_if(s, free, p, out, free[p] + 1)
            _set_if(s, holders, p, out, holders[p] & keep)
            _set_if(s, slot, p, out, -1)
            if s.recording and out:
                freed.append(s.name_of(pool.Page, p))
        if s.recording and freed:
            s.emit(Free(pool=pool.name, req=s.name_of(pool.own.requests, r), pages=tuple(freed)))

    def hand_off(self, s: Any, r: Member, node: Any, first_slot: int = 0, count: int | None = None) -> None:
        """Both halves of ``r``'s tokens at those slots go to ``node`` (see :meth:`Cache.hand_off`)."""
        self.full.hand_off(s, r, node, first_slot, count)
        self.window.hand_off(s, r, node, first_slot, count)

    def matchable(self, s: Any, node: Any) -> Any:
        """Node ``node`` holds full pages and is no tombstone of the window pool."""
        # (a & b) == 1: under Z3, & of two truth values is a one-bit number; the comparison keeps a truth value.
        return (self.full.cached(s, node) & _not(self.window.tombstoned(s, node))) == 1

    def match(self, s: Any, r: Member, node: Any) -> None:
        """Map and lock both halves of ``node`` (not enabled for a window tombstone)."""
        self.full.match(s, r, node)
        self.window.match(s, r, node)

    def evict(self, s: Any, node: Any) -> None:
        """Evict a node no request locks in either pool: both halves are freed (a tombstone's full half only)."""
        n = self.full.node_of(s, node)
        require(self.full.cached(s, n))
        require(_not(self.full.locked(s, n)))
        require(_not(self.window.locked(s, n)))
        self.full.release(s, n)
        self.window.release(s, n)

    def invariants(self, *names: str, idle: Callable[[Any], bool] | None = None, spec: Spec | None = None) -> None:
        """Register the invariants over both caches and pools (all when none are named), and the two of the pair.

        ``pairs_held_together`` and ``window_held_unless_tombstone`` come on
        top of :func:`cache_builtins` over both caches.
        """
        builtins = cache_builtins([self.full, self.window], idle)
        builtins["pairs_held_together"] = self._pairs_held_together()
        builtins["window_held_unless_tombstone"] = self._window_held_unless_tombstone()
        _register(self.full.spec, spec, builtins, names, "paired-cache")

    def _pairs_held_together(self) -> Callable[[Any], bool]:
        full, window = self.full, self.window
        Req = full.pool.own.requests

        def pairs_held_together(s: Any) -> bool:
            """A token's window page is held only while its full page is, by the same holder.

            A request's window page at slot ``i`` needs its full page at slot
            ``i``; a node holding window pages holds full pages.  Releasing the
            window half first (outside the window) is allowed; releasing the full
            half first (or handing only it to the cache) is not.
            """
            fslot = getattr(s, full.pool.slot_var)
            wslot = getattr(s, window.pool.slot_var)
            for r in s.all(Req):
                for q in s.all(window.pool.Page):
                    partner = sum(_req_holds(s, full.pool, r, p) & (fslot[p] == wslot[q]) for p in s.all(full.pool.Page))
                    if _req_holds(s, window.pool, r, q) & (partner == 0):
                        return False
            for m in s.all(full.Node):
                if window.cached(s, m) & _not(full.cached(s, m)):
                    return False
            return True

        return pairs_held_together

    def _window_held_unless_tombstone(self) -> Callable[[Any], bool]:
        full, window = self.full, self.window

        def window_held_unless_tombstone(s: Any) -> bool:
            """A node that is no window tombstone holds a window page for each of its full pages.

            SWARadixCache's own bookkeeping: ``swa_evictable_size_`` counts the
            tokens of every non-tombstone node, so a node inserted as live whose
            window pages were already released inflates it (and its eviction
            frees what the window pool no longer has).
            """
            tomb = getattr(s, window.tomb_var)
            for m in s.all(full.Node):
                if _not(tomb[m]) & (window.count(s, m) != full.count(s, m)):
                    return False
            return True

        return window_held_unless_tombstone


__all__ = ["PairedCaches"]
