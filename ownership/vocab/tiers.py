"""Storage tiers with an index: copy, commit, demote, read.

Hierarchical KV caches (SGLang HiCache: GPU "device" pages, CPU "host"
pages, a storage backend below) keep one **index** (the radix tree) that
says, for each item (a tree node's KV), on which tier it can be found and in
which pages.  Each tier is an ordinary :class:`~ownership.vocab.pool.PagePool`
of the same :class:`~ownership.vocab.pool.Ownership`, whose "requests" are the
items:

* ``tier.pages_of(s, n)`` (the pool's holders and slots) is the index entry:
  the pages the index says hold ``n`` on that tier (``node.value`` for the
  device, ``node.host_value`` for the host);
* ``tier_content[p]`` is what page ``p`` really holds (not cleared on free).

Operations:

* :meth:`Tiers.copy` moves a copy down or up (``write_backup``,
  ``load_back``): it reads the source copy the index names, allocates pages on
  the destination and, once the data is there, **commits** them to the index.
  When the destination has too few free pages it changes nothing and returns
  false: the copy failed and the index must not claim it.
* :meth:`Tiers.drop` removes an item's copy from a tier (frees its pages);
  :meth:`Tiers.demote` is a drop whose caller relies on a lower tier's copy
  (``_evict_to_host``), and records when no committed copy exists there.
* :meth:`Tiers.read` is a request attending over the copy the index names.

Ghost history per item, for the built-in invariants:

* ``tier_misread[n]``: a read (or the source side of a copy) found a page
  the index names holding something other than ``n``'s KV, or found no copy
  at all where the caller trusted the index to have one;
* ``tier_lost[n]``: ``n`` was demoted while the lower tier held no committed
  copy (its data is gone).

Everything is written with spec primitives and pool operations, so it runs
unchanged under the Z3 engines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ownership.core.events import CopyFailed, Demote, Read
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.elements import Member, ix
from ownership.lang.model import Spec
from ownership.vocab.pool import Ownership, PagePool, transfer
from ownership.vocab.refcount import all_of, any_of

BUILTINS = ("tier_read_matches_index", "demote_only_after_copy")
HELPERS = ("index_matches_content", "pages_accounted")
"""Structural facts every tier spec keeps; register them with ``helper=True`` to help ``prove``."""


def _named(s: Any, tier: PagePool, n: Any) -> list[Any]:
    """Per page of ``tier``: whether ``n``'s index entry names it (a bool, or a term)."""
    holders = getattr(s, tier.holders_var)
    # (bit == 1) is a bool: sums of these are ordinary ints, not set-sized bit-vectors.
    return [(holders[p] >> ix(n) & 1) == 1 for p in s.all(tier.Page)]


class Tiers:
    """Tiers of one item set, fastest first; see the module docstring.

    ``tiers = Tiers(own, device, host)`` declares the ghost variables;
    ``tiers.invariants()`` registers the built-in invariants.
    """

    def __init__(self, own: Ownership, *pools: PagePool) -> None:
        self.own = own
        self.pools = pools
        spec = own.spec
        items = own.requests
        spec.var("tier_misread", bool, per=items, init=False, ghost=True,
                 doc="history: a tier read found a page not holding this item, or no copy at all")
        # Not a ghost: a trace should show the step that lost the data, not only the later misread.
        spec.var("tier_lost", bool, per=items, init=False,
                 doc="history: demoted while no lower tier held a committed copy (its data is gone)")

    # -- queries -----------------------------------------------------------------
    def count(self, s: Any, n: Any, tier: PagePool) -> Any:
        """How many pages ``n``'s index entry names on ``tier`` (0: not resident there)."""
        return sum(_named(s, tier, n))

    def holds(self, s: Any, n: Any, tier: PagePool) -> Any:
        """Whether the index names a copy of ``n`` on ``tier`` (``node.backuped`` for the host)."""
        return self.count(s, n, tier) > 0

    # -- operations ------------------------------------------------------------------
    def read(self, s: Any, n: Member, tier: PagePool) -> None:
        """A request reads ``n``'s KV from ``tier``, through the index."""
        self._check(s, n, tier)

    def copy(self, s: Any, n: Member, src: PagePool, dst: PagePool) -> bool:
        """Copy ``n`` from ``src`` to ``dst`` and commit the new pages to the index.

        Reads the source copy the index names (a missing or wrong one is a
        misread).  Returns false, changing nothing on ``dst``, when the source
        has no copy or ``dst`` has too few free pages: the copy failed.
        """
        need = self._check(s, n, src)
        if need == 0:
            return False
        if dst.available(s) < need:
            if s.recording:
                s.emit(CopyFailed(req=s.name_of(self.own.requests, n), src=src.name, dst=dst.name,
                                  reason=f"no free {dst.name} page"))
            return False
        dst.alloc(s, n, need)
        transfer(s, n, src, dst, need)
        return True

    def drop(self, s: Any, n: Member, tier: PagePool) -> None:
        """Remove ``n``'s copy from ``tier``: free its pages; the index no longer names them."""
        tier.free(s, n)

    def demote(self, s: Any, n: Member, src: PagePool, dst: PagePool) -> None:
        """Drop ``n`` from ``src``, relying on the committed copy on ``dst``.

        Without one, ``n``'s data is lost (``tier_lost``), and the index's
        claim that ``dst`` holds it is false.
        """
        kept = self.holds(s, n, dst)
        self.drop(s, n, src)
        s.tier_lost[n] = any_of(s.tier_lost[n], kept == 0)
        if s.checks("demote_only_after_copy"):
            s.flag("demote_only_after_copy", kept == 0)
        if s.recording:
            lost = not kept
            s.emit(Demote(req=s.name_of(self.own.requests, n), src=src.name, dst=dst.name,
                          note=f"no committed {dst.name} copy: data lost" if lost else f"{dst.name} copy committed",
                          violates="demote_only_after_copy" if lost and s.checks("demote_only_after_copy") else None))

    def _check(self, s: Any, n: Member, tier: PagePool) -> Any:
        """Read ``n``'s copy on ``tier`` through the index; record a misread. Returns the page count."""
        content = getattr(s, tier.content_var)
        named = _named(s, tier, n)
        count = sum(named)
        wrong = sum(all_of(named[ix(p)], content[p] != n) for p in s.all(tier.Page))
        s.tier_misread[n] = any_of(s.tier_misread[n], count == 0, wrong > 0)
        if s.checks("tier_read_matches_index"):
            s.flag("tier_read_matches_index", any_of(count == 0, wrong > 0))
        if s.recording:
            self._emit_read(s, n, tier)
        return count

    def _emit_read(self, s: Any, n: Member, tier: PagePool) -> None:
        Items = self.own.requests
        content = getattr(s, tier.content_var)
        flag = "tier_read_matches_index" if s.checks("tier_read_matches_index") else None
        pages = tier.pages_of(s, n)
        who = s.name_of(Items, n)
        if not pages:
            s.emit(Read(pool=tier.name, req=who, page=f"(no {tier.name} copy)", content=None, violates=flag))
        for p in pages:
            c = content[p]
            s.emit(Read(pool=tier.name, req=who, page=s.name_of(tier.Page, p),
                        content=s.name_of(Items, c) if c is not None else None, violates=flag if c != n else None))

    # -- built-in invariants -----------------------------------------------------------
    def invariants(self, *names: str, spec: Spec | None = None, helper: bool = False) -> None:
        """Register built-in invariants by name (the two of ``BUILTINS`` when none are named).

        ``HELPERS`` are facts about the bookkeeping itself; a fixed spec
        registers them with ``helper=True`` so that ``ownership prove`` has
        an inductive invariant to start from.  ``spec`` registers on a
        derived spec.
        """
        builtins = self._builtins()
        for name in names or BUILTINS:
            if name not in builtins:
                file, line = caller_location(2)
                known = ", ".join(BUILTINS + HELPERS)
                raise OwnershipError(Code.UNKNOWN_INVARIANT, f"no built-in invariant {name!r} (known: {known})", file, line)
            (spec or self.own.spec).invariant(builtins[name], name=name, helper=helper)

    def _builtins(self) -> dict[str, Callable[[Any], bool]]:
        Items = self.own.requests

        def tier_read_matches_index(s: Any) -> bool:
            """A tier's page is read only if it holds the content the index claims."""
            return not any(s.tier_misread[n] for n in s.all(Items))

        def demote_only_after_copy(s: Any) -> bool:
            """An item leaves a tier only once a lower tier holds a committed copy."""
            return not any(s.tier_lost[n] for n in s.all(Items))

        pools = self.pools

        def index_matches_content(s: Any) -> bool:
            """Every page an item's index entry names holds that item's KV."""
            for tier in pools:
                holders, content = getattr(s, tier.holders_var), getattr(s, tier.content_var)
                for p in s.all(tier.Page):
                    for n in s.all(Items):
                        if all_of((holders[p] >> ix(n) & 1) == 1, content[p] != n):
                            return False
            return True

        def pages_accounted(s: Any) -> bool:
            """Each page is either on the free list once, or named by exactly one index entry at slot 0."""
            for tier in pools:
                free, holders, slot = getattr(s, tier.free_var), getattr(s, tier.holders_var), getattr(s, tier.slot_var)
                for p in s.all(tier.Page):
                    named = sum((holders[p] >> ix(n) & 1) == 1 for n in s.all(Items))
                    if not any_of(all_of(free[p] == 1, named == 0, slot[p] == -1),
                                  all_of(free[p] == 0, named == 1, slot[p] == 0)):
                        return False
            return True

        return {
            "tier_read_matches_index": tier_read_matches_index,
            "demote_only_after_copy": demote_only_after_copy,
            "index_matches_content": index_matches_content,
            "pages_accounted": pages_accounted,
        }


__all__ = ["BUILTINS", "HELPERS", "Tiers"]
