"""A small paged KV-cache allocator, written the way serving engines write theirs.

* a FIFO free list of page ids;
* a page table per request (the pages holding its KV, in order);
* refcounted prefix sharing: a request can start from another request's
  cached prefix, and shared pages are freed only when the last user lets go;
* free-on-finish: finishing a request drops its references.

``PagedAllocator(num_pages, defects=...)`` can seed the three bugs the tests
show the model-based harness catching:

* ``"free_ignores_refcount"``: releasing a page puts it back on the free list
  without checking whether another request still references it;
* ``"alloc_keeps_free"``: allocation hands pages out but leaves them on the
  free list;
* ``"double_free_on_finish"``: finishing a request releases its pages twice
  (the abort path and the finish path both run).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

DEFECTS = frozenset({"free_ignores_refcount", "alloc_keeps_free", "double_free_on_finish"})


class OutOfPages(Exception):  # noqa: N818 - the engines' own naming
    """Not enough free pages: the scheduler keeps the request waiting."""


class PagedAllocator:
    """Page ids ``0 .. num_pages-1``; requests are identified by any hashable id."""

    def __init__(self, num_pages: int, defects: Iterable[str] = ()) -> None:
        self.defects = frozenset(defects)
        unknown = self.defects - DEFECTS
        if unknown:
            raise ValueError(f"unknown defects {sorted(unknown)}")
        self.free_list: deque[int] = deque(range(num_pages))
        self.ref_cnt = [0] * num_pages
        self.page_table: dict[object, list[int]] = {}

    # -- allocation -------------------------------------------------------------
    def allocate(self, rid: object, num_pages: int) -> list[int]:
        """Start request ``rid`` with ``num_pages`` fresh pages."""
        if rid in self.page_table:
            raise ValueError(f"request {rid!r} is already running")
        pages = self._take(num_pages)
        self.page_table[rid] = pages
        return pages

    def append_page(self, rid: object) -> int:
        """One more page for a running request (its sequence grew past a page boundary)."""
        table = self.page_table[rid]
        (page,) = self._take(1)
        table.append(page)
        return page

    def share_prefix(self, rid: object, src: object) -> list[int]:
        """Start request ``rid`` from ``src``'s cached prefix: both reference the same pages."""
        if rid in self.page_table:
            raise ValueError(f"request {rid!r} is already running")
        pages = list(self.page_table[src])
        for p in pages:
            self.ref_cnt[p] += 1
        self.page_table[rid] = pages
        return pages

    def _take(self, n: int) -> list[int]:
        if len(self.free_list) < n:
            raise OutOfPages(f"need {n} pages, {len(self.free_list)} free")
        if "alloc_keeps_free" in self.defects:
            pages = list(self.free_list)[:n]
        else:
            pages = [self.free_list.popleft() for _ in range(n)]
        for p in pages:
            self.ref_cnt[p] = 1
        return pages

    # -- release --------------------------------------------------------------------
    def finish(self, rid: object) -> None:
        """The request is done: drop its references; unreferenced pages go back on the free list."""
        pages = self.page_table.pop(rid)
        self._release(pages)
        if "double_free_on_finish" in self.defects:
            self._release(pages)

    def _release(self, pages: list[int]) -> None:
        for p in pages:
            self.ref_cnt[p] -= 1
            if self.ref_cnt[p] == 0 or "free_ignores_refcount" in self.defects:
                self.free_list.append(p)

    # -- observation ------------------------------------------------------------------
    def num_free(self) -> int:
        """Length of the free list (a page freed twice counts twice)."""
        return len(self.free_list)
