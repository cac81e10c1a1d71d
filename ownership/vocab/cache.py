"""Hand-off to a cache: pages a request's page table lets go of and a cache (a radix tree) keeps.

When a request finishes (SGLang ``cache_finished_req``) or after its prefill
(``cache_unfinished_req``), its KV pages are not freed: they are *handed off*
to the prefix cache, whose tree nodes now hold them until eviction.  A pool
alone cannot say that (a page is free or in a request's table), so specs used
to fake it with a free and a re-insert, and pictures drew cache-held pages as
lost.  :class:`Cache` declares the third place a page can be:

* ``<name>_held[p]``: the set of tree nodes whose value holds page ``p``
  (marked ``"keeper"`` on the pool, so renderers never draw it as lost);
  ``<name>_pos[p]`` is the page's offset inside its node's value;
* ``<name>_lock[n]``: lock references on node ``n`` (``full_lock_ref``);
  ``<name>_tomb[n]``: the node is a tombstone (it keeps its place in the
  tree but holds no pages of this pool and cannot be matched);
* ``<name>_mapped[r, p]``: request ``r``'s page table maps cached page ``p``
  (a prefix hit; ``r`` reads it but does not own it);
* ghost ``<name>_freed_in_use[r]``: the cache returned a page ``r`` still
  mapped to the free list.

Operations: :meth:`Cache.hand_off` (the request lets go, the node holds),
:meth:`Cache.match` / :meth:`Cache.unmatch` (map and lock, unmap and unlock),
:meth:`Cache.release` (the node's pages go back to the free list),
:meth:`Cache.evict` (release an unlocked node), :meth:`Cache.tombstone`
(release and mark) and :meth:`Cache.split` (part of a node's pages move to
another node, each still held exactly once).

A second pool managed alongside the first (SGLang's SWA hybrid allocator
``SWATokenToKVPoolAllocator``: every token has a full-attention page and a
sliding-window page) is a second :class:`Cache` over the same node domain;
:class:`PairedCaches` declares the pair, allocates and frees both halves
together, releases a request's SWA pages outside the window on their own
and registers ``pairs_held_together`` and ``window_held_unless_tombstone``.

The built-in invariants (``pages_partitioned``, ``cache_accounting``,
``cache_pages_single_node``, ``tombstones_hold_nothing``,
``no_release_in_use``, ``cache_offsets_unique``, ``cache_locks_nonnegative``,
``pages_cached_or_free_when_idle``) are registered by
:meth:`Cache.invariants` or :meth:`PairedCaches.invariants`.  The partition
counts every ``"keeper"`` mark of a pool, so a
:class:`~ownership.vocab.prefix.PrefixIndex`'s pages count as cache-held too.

Everything is written with the primitives a spec uses (state variables,
comparisons, ``require``, loops over domains) and conditional writes that
are one ``If`` term under the Z3 engines, so every engine runs it unchanged.

Two caches driven together (a sliding-window pool next to a full-attention
pool) are :class:`ownership.vocab.paired.PairedCaches`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ownership.core.events import CacheHit, CacheRelease, HandOff, NodeSplit, Tombstone
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.declarations import Domain
from ownership.lang.elements import Member, ix
from ownership.lang.guard import require
from ownership.lang.model import Spec
from ownership.lang.types import BoolType, Int, Ref, SetOf
from ownership.vocab.pool import Ownership, PagePool, check_count
from ownership.vocab.prefix import _not, _set_if


def _req_holds(s: Any, pool: PagePool, r: Member, p: Any) -> Any:
    """Whether ``r``'s page table holds page ``p`` of ``pool`` (a term under Z3; compared, never combined)."""
    return (getattr(s, pool.holders_var)[p] >> ix(r) & 1) != 0


def kept(s: Any, pool: PagePool, p: Any) -> Any:
    """How many ``"keeper"`` marks of ``pool`` hold page ``p`` (caches, prefix indexes, any spec mark)."""
    total: Any = 0
    for mark in pool.marks:
        if mark.role != "keeper":
            continue
        vtype = pool.own.spec.vars[mark.var].type
        value = getattr(s, mark.var)[p]
        if isinstance(vtype, Ref):
            held = value != None  # noqa: E711 - also runs on solver terms
        elif isinstance(vtype, BoolType):
            held = value == True  # noqa: E712
        else:
            held = value != 0
        total = total + held
    return total


def partitioned(s: Any, pools: Sequence[PagePool]) -> bool:
    """Every page of ``pools`` is in exactly one place: free once, in request page tables, or kept."""
    for pool in pools:
        free = getattr(s, pool.free_var)
        holders = getattr(s, pool.holders_var)
        for p in s.all(pool.Page):
            places = free[p] + (holders[p] != 0) + kept(s, pool, p)
            if not ((free[p] >= 0) & (places == 1)):
                return False
    return True


class Cache:
    """A cache (radix tree) whose nodes hold pages of ``pool``; see the module docstring.

    ``nodes`` is the node domain: a list of node names (declares the domain
    ``<Name>Node``) or an existing :class:`Domain` (a second pool's
    component of the same tree, as in :class:`PairedCaches`).
    """

    def __init__(
        self, pool: PagePool, name: str, nodes: Sequence[str] | Domain, *, spec: Spec | None = None, doc: str = ""
    ) -> None:
        self.pool = pool
        self.name = name
        self.spec = spec or pool.own.spec
        if isinstance(nodes, Domain):
            self.Node = nodes
        elif isinstance(nodes, (list, tuple)) and nodes and all(isinstance(n, str) for n in nodes):
            title = name[:1].upper() + name[1:]
            self.Node = self.spec.domain(f"{title}Node", len(nodes), names=list(nodes),
                                         doc=doc or f"nodes of the {name} tree")
        else:
            file, line = caller_location(2)
            raise OwnershipError(Code.CACHE_INVALID,
                                 f"cache {name}: nodes must be a non-empty list of names or a domain, got {nodes!r}",
                                 file, line)
        Req, Page = pool.own.requests, pool.Page
        self.held_var = f"{name}_held"
        self.pos_var = f"{name}_pos"
        self.lock_var = f"{name}_lock"
        self.tomb_var = f"{name}_tomb"
        self.mapped_var = f"{name}_mapped"
        self.lost_var = f"{name}_freed_in_use"
        sv = self.spec.var
        sv(self.held_var, SetOf(self.Node), per=Page, init=0, doc=f"{name} nodes whose value holds the page")
        sv(self.pos_var, Int, per=Page, init=-1, doc="offset of the page in its node's value (-1: not cached)")
        sv(self.lock_var, Int, per=self.Node, init=0, doc=f"lock references on the {name} node (lock_ref)")
        sv(self.tomb_var, bool, per=self.Node, init=False,
           doc=f"the {name} node is a tombstone: kept in the tree, holding no pages, never matched")
        sv(self.mapped_var, bool, per=(Req, Page), init=False,
           doc=f"the request's page table maps the page, held by the {name} cache (a prefix hit)")
        sv(self.lost_var, bool, per=Req, init=False, ghost=True,
           doc=f"history: the {name} cache freed a page this request's page table still mapped")
        pool.mark(self.held_var, "keeper", f"held by {name}")
        pool.mark(self.mapped_var, "pending", f"mapped from {name}")

    # -- queries -----------------------------------------------------------------------------
    def node_of(self, s: Any, node: Any) -> int:
        """``node`` as a concrete element (a symbolic engine forks once per possible value)."""
        for m in s.all(self.Node):
            if node == m:
                return m  # type: ignore[no-any-return]
        raise AssertionError("a node outside its domain")  # pragma: no cover - the domain is exhaustive

    def holds(self, s: Any, node: Any, p: Any) -> Any:
        """Whether node ``node``'s value holds page ``p`` (a term under Z3)."""
        return (getattr(s, self.held_var)[p] >> ix(node) & 1) != 0

    def held(self, s: Any, p: Any) -> Any:
        """Whether some node of the cache holds page ``p``."""
        return getattr(s, self.held_var)[p] != 0

    def count(self, s: Any, node: Any) -> Any:
        """How many pages node ``node`` holds."""
        n = self.node_of(s, node)
        return sum(self.holds(s, n, p) for p in s.all(self.pool.Page))

    def cached(self, s: Any, node: Any) -> Any:
        """Whether node ``node`` holds any page."""
        return self.count(s, node) > 0

    def tombstoned(self, s: Any, node: Any) -> Any:
        """Whether node ``node`` is a tombstone."""
        return getattr(s, self.tomb_var)[self.node_of(s, node)]

    def locked(self, s: Any, node: Any) -> Any:
        """Whether node ``node`` has a lock reference."""
        return getattr(s, self.lock_var)[self.node_of(s, node)] > 0

    def evictable(self, s: Any) -> Any:
        """Pages held by unlocked nodes (``evictable_size``); locked nodes' pages are protected."""
        lock = getattr(s, self.lock_var)
        total: Any = 0
        for m in s.all(self.Node):
            unlocked = lock[m] == 0
            for p in s.all(self.pool.Page):
                total = total + (self.holds(s, m, p) & unlocked)
        return total

    def in_use(self, s: Any, p: Any) -> Any:
        """How many requests' page tables map cached page ``p``."""
        mapped = getattr(s, self.mapped_var)
        return sum(mapped[u, p] for u in s.all(self.pool.own.requests))

    # -- operations ----------------------------------------------------------------------------
    def hand_off(self, s: Any, r: Member, node: Any, first_slot: int = 0, count: int | None = None) -> None:
        """``r``'s pages at slots ``first_slot ..`` (``count`` of them, or all) leave its table; ``node`` holds them.

        No free happens: the page goes from the request's page table straight
        into the node's value (``insert(key, value)`` with the request's
        ``req_to_token`` row), at offset ``slot - first_slot``.  A tombstoned
        node that takes pages is one no longer.
        """
        if count is not None:
            check_count(count, f"{self.name}.hand_off: the number of pages", s)
        n = self.node_of(s, node)
        holders = getattr(s, self.pool.holders_var)
        slot = getattr(s, self.pool.slot_var)
        held = getattr(s, self.held_var)
        pos = getattr(s, self.pos_var)
        keep = ~(1 << ix(r))
        bit = 1 << ix(n)
        moved = []
        for p in s.all(self.pool.Page):
            mine = _req_holds(s, self.pool, r, p) & (slot[p] >= first_slot)
            if count is not None:
                mine = mine & (slot[p] < first_slot + count)
            _set_if(s, pos, p, mine, slot[p] - first_slot)
            _set_if(s, held, p, mine, held[p] | bit)
            _set_if(s, holders, p, mine, holders[p] & keep)
            _set_if(s, slot, p, mine, -1)
            if s.recording and mine:
                moved.append(p)
        # A tombstone holds nothing, so it holds pages now exactly when this hand-off gave it some.
        _set_if(s, getattr(s, self.tomb_var), n, self.cached(s, n), False)
        if s.recording and moved:
            s.emit(HandOff(pool=self.pool.name, req=self._req(s, r), node=self._node(s, n),
                           pages=tuple(self._page(s, p) for p in moved)))

    def match(self, s: Any, r: Member, node: Any) -> None:
        """``r`` reuses node ``node``'s pages (``match_prefix`` + ``inc_lock_ref``): mapped, the node locked.

        Not enabled for a tombstone or a node holding nothing: a tombstoned
        node cannot be matched.
        """
        n = self.node_of(s, node)
        require(self.cached(s, n))
        require(_not(self.tombstoned(s, n)))
        mapped = getattr(s, self.mapped_var)
        lock = getattr(s, self.lock_var)
        lock[n] = lock[n] + 1
        for p in s.all(self.pool.Page):
            _set_if(s, mapped, (r, p), self.holds(s, n, p), True)
        if s.recording:
            s.emit(CacheHit(pool=self.pool.name, req=self._req(s, r), node=self._node(s, n),
                            pages=tuple(self._page(s, p) for p in s.all(self.pool.Page) if self.holds(s, n, p))))

    def unmatch(self, s: Any, r: Member, node: Any) -> None:
        """``r`` stops reading ``node``'s pages (``dec_lock_ref``): unmapped, one lock reference less.

        Only the pages ``node`` holds now are unmapped: a page the node no
        longer holds stays mapped until :meth:`drop` releases ``r``'s table.
        """
        n = self.node_of(s, node)
        mapped = getattr(s, self.mapped_var)
        lock = getattr(s, self.lock_var)
        lock[n] = lock[n] - 1
        for p in s.all(self.pool.Page):
            _set_if(s, mapped, (r, p), self.holds(s, n, p), False)

    def drop(self, s: Any, r: Member) -> None:
        """``r``'s page table is released (``req_to_token_pool.free``): it maps no cached page any more."""
        mapped = getattr(s, self.mapped_var)
        for p in s.all(self.pool.Page):
            mapped[r, p] = False

    def release(self, s: Any, node: Any) -> None:
        """Every page of node ``node`` goes back to the free list (``allocator.free(node.value)``).

        Locks are not consulted (callers that must honour them check
        :meth:`locked`, as :meth:`evict` does): a page some request's table
        still maps is released all the same, sets the ghost behind
        ``no_release_in_use`` and makes the step that violation.
        """
        n = self.node_of(s, node)
        free = getattr(s, self.pool.free_var)
        held = getattr(s, self.held_var)
        pos = getattr(s, self.pos_var)
        mapped = getattr(s, self.mapped_var)
        lost = getattr(s, self.lost_var)
        drop = ~(1 << ix(n))
        check = s.checks("no_release_in_use")
        pages, users = [], []
        for p in s.all(self.pool.Page):
            here = self.holds(s, n, p)
            for u in s.all(self.pool.own.requests):
                in_use = here & mapped[u, p]
                lost[u] = lost[u] | in_use
                if check:
                    s.flag("no_release_in_use", in_use)
                if s.recording and in_use:
                    users.append(self._req(s, u))
            _set_if(s, free, p, here, free[p] + 1)
            _set_if(s, held, p, here, held[p] & drop)
            _set_if(s, pos, p, here, -1)
            if s.recording and here:
                pages.append(self._page(s, p))
        if s.recording and pages:
            s.emit(CacheRelease(pool=self.pool.name, node=self._node(s, n), pages=tuple(pages),
                                in_use_by=tuple(users), violates="no_release_in_use" if users and check else None))

    def evict(self, s: Any, node: Any) -> None:
        """Evict node ``node`` (any unlocked node holding pages: LRU order is not modelled); see :meth:`release`."""
        n = self.node_of(s, node)
        require(self.cached(s, n))
        require(_not(self.locked(s, n)))
        self.release(s, n)

    def tombstone(self, s: Any, node: Any) -> None:
        """Release node ``node``'s pages and keep the node as a tombstone (``swa_tombstone = True``)."""
        n = self.node_of(s, node)
        self.release(s, n)
        getattr(s, self.tomb_var)[n] = True
        if s.recording:
            s.emit(Tombstone(pool=self.pool.name, node=self._node(s, n)))

    def split(self, s: Any, node: Any, into: Any, at: int) -> None:
        """``_split_node``: the pages of ``node`` from offset ``at`` on move to the empty node ``into``.

        Each page stays held exactly once (by ``node`` below ``at``, by
        ``into`` from it, at offset ``pos - at``); ``into`` takes ``node``'s
        lock count and tombstone flag, as the split halves share them.
        """
        n, m = self.node_of(s, node), self.node_of(s, into)
        require(n != m)
        require(_not(self.cached(s, m)))
        held = getattr(s, self.held_var)
        pos = getattr(s, self.pos_var)
        lock = getattr(s, self.lock_var)
        tomb = getattr(s, self.tomb_var)
        moved = []
        keep, bit = ~(1 << ix(n)), 1 << ix(m)
        for p in s.all(self.pool.Page):
            lower = self.holds(s, n, p) & (pos[p] >= at)
            _set_if(s, held, p, lower, (held[p] & keep) | bit)
            _set_if(s, pos, p, lower, pos[p] - at)
            if s.recording and lower:
                moved.append(self._page(s, p))
        lock[m] = lock[n]
        tomb[m] = tomb[n]
        if s.recording:
            s.emit(NodeSplit(pool=self.pool.name, node=self._node(s, n), into=self._node(s, m), pages=tuple(moved)))

    # -- built-in invariants ---------------------------------------------------------------------
    def invariants(self, *names: str, idle: Callable[[Any], bool] | None = None, spec: Spec | None = None) -> None:
        """Register this cache's invariants by name (all of them when none are named).

        ``idle`` is as for :func:`cache_builtins`; ``spec`` registers them on a
        spec derived from the cache's.
        """
        _register(self.spec, spec, cache_builtins([self], idle), names, "cache")

    # -- display ----------------------------------------------------------------------------------
    def _req(self, s: Any, r: Any) -> str:
        return s.name_of(self.pool.own.requests, r)

    def _page(self, s: Any, p: Any) -> str:
        return s.name_of(self.pool.Page, p)

    def _node(self, s: Any, n: Any) -> str:
        return s.name_of(self.Node, n)


def cache_builtins(caches: Sequence[Cache], idle: Callable[[Any], bool] | None = None) -> dict[str, Callable[[Any], bool]]:
    """The built-in invariants over ``caches`` (and every pool of their ``Ownership``), by name.

    ``idle(s)`` is true when no request is in flight (defaults to the
    spec's ``@spec.terminal`` predicate), for ``pages_cached_or_free_when_idle``.
    """
    own: Ownership = caches[0].pool.own
    Req = own.requests

    def pages_partitioned(s: Any) -> bool:
        """Every page is in exactly one of: the free list (once), request page tables, a cache.

        A cache is anything marked ``"keeper"`` on the pool (a :class:`Cache`'s
        nodes, a prefix index's entries).  A page freed twice, freed while the
        cache still holds it, handed off and still in the request's table, or
        held by nobody (leaked) breaks it.
        """
        return partitioned(s, own.pools)

    def cache_accounting(s: Any) -> bool:
        """For each cache: free pages plus evictable cached pages never exceed the pool.

        SGLang's leak check (``available_size + evictable_size`` against
        ``size``); a page counted both free and cached makes the sum exceed it.
        """
        return all(c.pool.available(s) + c.evictable(s) <= s.size(c.pool.Page) for c in caches)

    def cache_pages_single_node(s: Any) -> bool:
        """No page is held by two nodes of a cache (a node split keeps each page held exactly once)."""
        for c in caches:
            held = getattr(s, c.held_var)
            for p in s.all(c.pool.Page):
                if sum((held[p] >> ix(m) & 1) != 0 for m in s.all(c.Node)) > 1:
                    return False
        return True

    def tombstones_hold_nothing(s: Any) -> bool:
        """A tombstoned node holds no pages of its cache's pool."""
        for c in caches:
            tomb = getattr(s, c.tomb_var)
            for m in s.all(c.Node):
                if tomb[m] & (c.count(s, m) > 0):
                    return False
        return True

    def no_release_in_use(s: Any) -> bool:
        """No cache returns a page to the free list while a request's page table still maps it."""
        return not any(getattr(s, c.lost_var)[r] for c in caches for r in s.all(Req))

    def cache_offsets_unique(s: Any) -> bool:
        """No two pages of one node sit at the same offset of its value (a re-insert replaces, never adds)."""
        for c in caches:
            pos = getattr(s, c.pos_var)
            for m in s.all(c.Node):
                for p in s.all(c.pool.Page):
                    twins = sum(c.holds(s, m, q) & (pos[q] == pos[p]) for q in s.all(c.pool.Page))
                    if c.holds(s, m, p) & (twins > 1):
                        return False
        return True

    def pages_cached_or_free_when_idle(s: Any) -> bool:
        """When no request is in flight, no page is left in a request's page table: each is free or cached.

        A request's pages either went to the cache (hand-off) or back to the
        free list; one still in a finished request's table is a leak.
        """
        if not (idle(s) if idle is not None else s.terminal()):
            return True
        return all(getattr(s, pool.holders_var)[p] == 0 for pool in own.pools for p in s.all(pool.Page))

    if idle is None:
        pages_cached_or_free_when_idle.needs_terminal = True  # type: ignore[attr-defined]

    def cache_locks_nonnegative(s: Any) -> bool:
        """No node's lock count drops below zero (an unlock without its lock)."""
        return all(getattr(s, c.lock_var)[m] >= 0 for c in caches for m in s.all(c.Node))

    return {
        "pages_partitioned": pages_partitioned,
        "cache_accounting": cache_accounting,
        "cache_pages_single_node": cache_pages_single_node,
        "tombstones_hold_nothing": tombstones_hold_nothing,
        "no_release_in_use": no_release_in_use,
        "cache_offsets_unique": cache_offsets_unique,
        "cache_locks_nonnegative": cache_locks_nonnegative,
        "pages_cached_or_free_when_idle": pages_cached_or_free_when_idle,
    }


def _register(home: Spec, spec: Spec | None, builtins: dict[str, Callable[[Any], bool]],
              names: Sequence[str], what: str) -> None:
    target = spec or home
    for n in names or tuple(builtins):
        if n not in builtins:
            file, line = caller_location(3)
            raise OwnershipError(Code.UNKNOWN_INVARIANT, f"no {what} invariant {n!r} (known: {', '.join(builtins)})",
                                 file, line)
        target.invariant(builtins[n], name=n)


def overwrite_row(s: Any, pool: PagePool, r: Member, first_slot: int, count: int) -> None:
    """``r``'s page-table slots ``first_slot ..`` (``count`` of them) are overwritten with cached pages.

    What ``req_to_token_pool.write`` does after a re-match: the row now names
    the cache's pages.  A page ``r``'s table still held in those slots loses
    its holder without a free (a leak ``pages_partitioned`` reports), so
    callers free or hand off a row's own pages first.
    """
    holders = getattr(s, pool.holders_var)
    slot = getattr(s, pool.slot_var)
    keep = ~(1 << ix(r))
    for p in s.all(pool.Page):
        over = _req_holds(s, pool, r, p) & (slot[p] >= first_slot) & (slot[p] < first_slot + count)
        _set_if(s, holders, p, over, holders[p] & keep)
        _set_if(s, slot, p, over, -1)


def register_partition(own: Ownership, *, spec: Spec | None = None) -> None:
    """Register ``pages_partitioned`` alone, for a spec whose caches are other keepers (a prefix index)."""
    def pages_partitioned(s: Any) -> bool:
        """Every page is in exactly one of: the free list (once), request page tables, a keeper (cache)."""
        return partitioned(s, own.pools)

    (spec or own.spec).invariant(pages_partitioned, name="pages_partitioned")


__all__ = ["Cache", "cache_builtins", "kept", "overwrite_row", "partitioned", "register_partition"]
