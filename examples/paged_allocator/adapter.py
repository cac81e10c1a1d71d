"""Binds ``allocator_spec.py`` to ``allocator.PagedAllocator`` for model-based testing.

Each method performs the spec action of the same name on the allocator and
returns the pages it picked (spec page ``i`` is allocator page ``i``);
``observe``/``expected`` read the same facts from both sides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from allocator import OutOfPages, PagedAllocator

from ownership.testing import Adapter


class PagedAllocatorAdapter(Adapter):
    """The correct allocator against its spec; subclasses seed defects."""

    spec = "allocator_spec.py"
    params: ClassVar[Mapping[str, int]] = {"requests": 3, "pages": 4}
    rejected = (OutOfPages,)
    defects: ClassVar[tuple[str, ...]] = ()

    def setup(self) -> None:
        self.impl = PagedAllocator(self.params["pages"], defects=self.defects)

    def allocate(self, r: int, n: int) -> list[int]:
        return self.impl.allocate(r, n)

    def append_page(self, r: int) -> list[int]:
        return [self.impl.append_page(r)]

    def share_prefix(self, r: int, src: int) -> None:
        self.impl.share_prefix(r, src)

    def finish(self, r: int) -> None:
        self.impl.finish(r)

    def observe(self) -> dict[str, Any]:
        return {
            "num_free": self.impl.num_free(),
            "ref_cnt": list(self.impl.ref_cnt),
            "page_tables": {r: sorted(pages) for r, pages in self.impl.page_table.items()},
        }

    def expected(self, s: Any) -> dict[str, Any]:
        pages = range(self.params["pages"])
        return {
            "num_free": sum(s.free[p] for p in pages),
            "ref_cnt": [s.ref_cnt[p] for p in pages],
            "page_tables": {
                r: [p for p in pages if s.holds[r, p]] for r in range(self.params["requests"]) if s.running[r]
            },
        }


class FreeIgnoresRefcount(PagedAllocatorAdapter):
    defects = ("free_ignores_refcount",)


class AllocKeepsFree(PagedAllocatorAdapter):
    defects = ("alloc_keeps_free",)


class DoubleFreeOnFinish(PagedAllocatorAdapter):
    defects = ("double_free_on_finish",)
