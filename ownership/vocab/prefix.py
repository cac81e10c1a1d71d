"""Prefix caching: a radix tree of prompt blocks over a page pool, with lock refs and eviction.

Engines that cache prompt prefixes (SGLang's ``RadixCache``, mini-sglang's
``RadixCacheManager``, text-generation-inference's ``RadixAllocator``) keep
a tree keyed by token blocks whose values are KV pages.  A request *matches*
its prompt against the tree and reuses the pages of the longest cached
prefix instead of recomputing them; it *locks* the matched entries so that
eviction leaves them alone; when it finishes, its own pages are *inserted*
(published) so the next request with the same prefix can reuse them; under
memory pressure unlocked leaves are *evicted* and their pages go back to the
free list.  :class:`PrefixIndex` is that bookkeeping, built on a
:class:`~ownership.vocab.pool.PagePool`.

The model:

* the **key tree** is static: the spec names every prompt block that can
  occur (``{"x": None, "xy": "x"}``: block ``x`` under the root, block
  ``xy`` after it).  An element of the node domain stands for a whole
  prefix (root to that block), so a prompt is the node of its last full
  block.  Each node is one page (page size = block size); path compression
  and node splits are left out: every block is its own radix node;
* per page, ``node`` is the entry whose value the page is (``None``: not in
  the index) and ``kv`` is the prefix whose KV the page holds (set by
  :meth:`PrefixIndex.write`, not cleared when the page is evicted or freed:
  pages are not zeroed).  A page in the index is neither on the free list
  nor held by a request (the pool's ``holders``): the index owns it;
* per node, ``lock`` counts the lock references (``ref_count``);
* per request and page, ``table`` is the prompt block that the request's
  page table maps to that page: set for matched pages by
  :meth:`PrefixIndex.match` and for the request's own pages by
  :meth:`PrefixIndex.alloc`, cleared by :meth:`PrefixIndex.release`.  A
  matched page is *in use* while any request's table maps it;
* per request, ghost history: a prefix hit returned a page not holding that
  prefix's KV; a page the request was using was evicted; it read a matched
  page holding other KV.

Every operation is written with the same primitives a spec uses (state
variables, comparisons, ``s.choose``), so it runs unchanged under every
engine.  Updates whose target depends on state are conditional writes: a
plain ``if`` concretely and one ``If`` term under the Z3 engines, so that
symbolic runs do not fork once per page.

The module runs a little over 400 lines because :class:`PrefixIndex` is
one concept (match, lock, alloc, write, read, insert, release, evict and the
invariants over them) whose operations share its state variables; splitting
it would scatter one data structure's bookkeeping over several files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ownership.core.events import Evict, Free, PrefixHit, PrefixRead, Publish
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.declarations import Domain
from ownership.lang.elements import Member, ix
from ownership.lang.guard import require
from ownership.lang.types import Int, Optional
from ownership.vocab.operation import operation
from ownership.vocab.pool import PagePool


@operation
def _set_if(s: Any, field: Any, key: Any, cond: Any, value: Any) -> None:
    """``field[key] = value`` when ``cond``: an ``if`` concretely, an ``If`` term symbolically (no fork)."""
    if cond:
        field[key] = value


def _not(x: Any) -> Any:
    """Negation that builds a term for a symbolic value instead of forking (``not`` would fork)."""
    return x == False  # noqa: E712 - also runs on solver terms


class PrefixIndex:
    """A prefix index (radix tree) over the pages of ``pool``; see the module docstring.

    ``blocks`` maps each prompt block to its parent block (``None``: a child
    of the root), parents first.  ``root_refs`` models the root's own
    reference count (mini-sglang counts it, starting at 1; TGI ignores
    references to the root).
    """

    def __init__(
        self,
        pool: PagePool,
        name: str,
        blocks: Mapping[str, str | None],
        *,
        root_refs: bool = False,
        doc: str = "",
    ) -> None:
        self.pool = pool
        self.name = name
        own = pool.own
        spec = own.spec
        Req = own.requests
        keys = list(blocks)
        parents: list[int | None] = []
        for k in keys:
            parent = blocks[k]
            if parent is not None and parent not in keys[: len(parents)]:
                file, line = caller_location(2)
                raise OwnershipError(
                    Code.SPEC_INVALID, f"prefix index {name}: block {k!r} names parent {parent!r}, which is not declared before it",
                    file, line,
                )
            parents.append(None if parent is None else keys.index(parent))
        self.parent_of: tuple[int | None, ...] = tuple(parents)
        self.children_of: tuple[tuple[int, ...], ...] = tuple(
            tuple(c for c, p in enumerate(parents) if p == n) for n in range(len(keys))
        )
        paths: list[tuple[int, ...]] = []
        for n, p in enumerate(parents):
            paths.append((*(paths[p] if p is not None else ()), n))
        self._paths = tuple(paths)
        title = name[:1].upper() + name[1:]
        self.Node: Domain = spec.domain(
            f"{title}Node", len(keys), names=keys, doc=doc or f"prompt blocks the {name} prefix index can cache"
        )
        self.root_refs = root_refs
        self.node_var = f"{name}_node"
        self.kv_var = f"{name}_kv"
        self.lock_var = f"{name}_lock"
        self.root_lock_var = f"{name}_root_lock"
        self.table_var = f"{name}_table"
        self.hit_var = f"{name}_hit_unwritten"
        self.evicted_var = f"{name}_evicted_in_use"
        self.stale_var = f"{name}_read_stale"
        Page = pool.Page
        spec.var(self.node_var, Optional(self.Node), per=Page, init=None,
                 doc=f"the {name} entry whose value this page is (none: not in the index)")
        spec.var(self.kv_var, Optional(self.Node), per=Page, init=None,
                 doc="the prefix whose KV the page holds (not cleared on eviction: pages are not zeroed)")
        pool.mark(self.node_var, "keeper", "cached")  # a page in the index is neither free nor lost
        spec.var(self.lock_var, Int, per=self.Node, init=0, doc=f"lock references on the {name} entry (ref_count)")
        if root_refs:
            spec.var(self.root_lock_var, Int, init=1, doc="lock references on the root (starts at 1: never evicted)")
        spec.var(self.table_var, Optional(self.Node), per=(Req, Page), init=None,
                 doc="the prompt block the request's page table maps to this page")
        spec.var(self.hit_var, bool, per=Req, init=False, ghost=True,
                 doc="history: a prefix hit gave this request a page not holding that prefix's KV")
        spec.var(self.evicted_var, bool, per=Req, init=False, ghost=True,
                 doc="history: a page this request's page table maps was evicted from the index")
        spec.var(self.stale_var, bool, per=Req, init=False, ghost=True,
                 doc="history: this request read a matched page holding other KV")

    # -- the static key tree ---------------------------------------------------------------
    def path(self, node: int | None) -> tuple[int, ...]:
        """The blocks from the root to ``node`` (a concrete node; ``None`` is the root: empty)."""
        return () if node is None else self._paths[node]

    def node_of(self, s: Any, node: Any) -> int | None:
        """``node`` as a concrete element, or ``None`` for the root.

        A symbolic engine forks here once per possible value; every static
        question about the node (its parent, its path) is then plain Python.
        """
        for m in s.all(self.Node):
            if node == m:
                return m
        return None

    def parent(self, s: Any, node: Any) -> int | None:
        """The parent of ``node``: ``None`` (the root) for a child of the root, and for the root itself."""
        n = self.node_of(s, node)
        return None if n is None else self.parent_of[n]

    def depth(self, s: Any, node: Any) -> int:
        """Number of blocks from the root to ``node`` (0 for the root)."""
        return len(self.path(self.node_of(s, node)))

    # -- queries ----------------------------------------------------------------------------
    def count(self, s: Any, n: int) -> Any:
        """How many pages hold the entry of block ``n`` (0 or 1 unless the index is broken)."""
        nodes = getattr(s, self.node_var)
        return sum(nodes[p] == n for p in s.all(self.pool.Page))

    def cached(self, s: Any, n: int) -> Any:
        """Whether block ``n`` is in the index."""
        return self.count(s, n) > 0

    def published(self, s: Any, p: Any) -> Any:
        """Whether page ``p`` is the value of an entry of the index (for ``no_write_to_shared_page``)."""
        return getattr(s, self.node_var)[p] != None  # noqa: E711 - also runs on solver terms

    def evictable(self, s: Any) -> Any:
        """Pages in the index whose entry has no lock reference (mini-sglang's ``evictable_size``)."""
        nodes = getattr(s, self.node_var)
        lock = getattr(s, self.lock_var)
        total: Any = 0
        for m in s.all(self.Node):
            unlocked = lock[m] == 0
            for p in s.all(self.pool.Page):
                total = total + ((nodes[p] == m) & unlocked)
        return total

    def written(self, s: Any, r: Member) -> Any:
        """Whether each of ``r``'s own pages that its table labels with a block holds that block's KV.

        True once ``r``'s forward has run (:meth:`write`); a query for helper
        invariants that let ``ownership prove`` skip unreachable states.
        """
        kv = getattr(s, self.kv_var)
        table = getattr(s, self.table_var)
        bad = sum(self._holds(s, r, p) & (table[r, p] != None) & (kv[p] != table[r, p])  # noqa: E711
                  for p in s.all(self.pool.Page))
        return bad == 0

    def _holds(self, s: Any, r: Member, p: int) -> Any:
        return (getattr(s, self.pool.holders_var)[p] >> ix(r)) & 1 == 1

    @operation
    def _choose_node(self, s: Any, label: str) -> Any:
        """Any node (``s.choose``); under the Z3 engines one fresh term instead of a path per node."""
        # The domain names the chosen node in traces (its prefix, not an index); the index's nodes are
        # named and never symmetric, so no search reduces this choice by it.
        return s.choose(list(s.all(self.Node)), label=label, domain=self.Node)

    # -- lock references -----------------------------------------------------------------------
    def add_ref(self, s: Any, node: Any, delta: int) -> None:
        """Add ``delta`` lock references to the entry of ``node`` (one entry, not its ancestors).

        The root's references are counted only with ``root_refs``.
        """
        n = self.node_of(s, node)
        if n is None:
            if self.root_refs:
                setattr(s, self.root_lock_var, getattr(s, self.root_lock_var) + delta)
            return
        lock = getattr(s, self.lock_var)
        lock[n] = lock[n] + delta

    def lock_path(self, s: Any, node: Any, delta: int) -> None:
        """Add ``delta`` lock references to ``node`` and to every ancestor up to the root."""
        n = self.node_of(s, node)
        for m in reversed(self.path(n)):
            self.add_ref(s, m, delta)
        self.add_ref(s, None, delta)

    # -- operations -------------------------------------------------------------------------------
    def match(self, s: Any, r: Member, key: Any) -> int | None:
        """Longest cached prefix of ``key`` (``find`` / ``match_prefix``); its pages go into ``r``'s table.

        Returns the deepest matched node (``None``: nothing matched, the
        root).  Locks nothing: the caller locks what the engine locks.  A
        matched page whose KV is not that prefix's sets the ghost behind
        ``prefix_hit_written``.
        """
        nodes = getattr(s, self.node_var)
        kv = getattr(s, self.kv_var)
        table = getattr(s, self.table_var)
        hit = getattr(s, self.hit_var)
        handle: int | None = None
        check_hit = s.checks("prefix_hit_written")
        for m in self.path(self.node_of(s, key)):
            if not self.cached(s, m):
                break
            for p in s.all(self.pool.Page):
                here = nodes[p] == m
                _set_if(s, table, (r, p), here, m)
                stale = here & (kv[p] != m)
                hit[r] = hit[r] | stale
                if check_hit:
                    s.flag("prefix_hit_written", stale)
                if s.recording and here:
                    s.emit(PrefixHit(pool=self.pool.name, req=self._req(s, r), page=self._page(s, p),
                                     node=self._node(s, m), kv=self._node(s, kv[p]),
                                     violates="prefix_hit_written" if stale and s.checks("prefix_hit_written") else None))
            handle = m
        return handle

    def alloc(self, s: Any, r: Member, key: Any, cached: Any, extra: int = 0) -> None:
        """Pages for the blocks of ``key`` below ``cached``, plus ``extra`` private pages, into ``r``'s table.

        The engine's allocator with reclaim (TGI ``alloc_or_reclaim``,
        mini-sglang ``CacheManager.allocate``): when the free list is short,
        unlocked leaves are evicted first (:meth:`evict_one`).  Not enabled
        when that still leaves too few pages.  Slot ``i`` of ``r``'s page
        table holds block ``i`` of the prompt; the extra pages follow.
        """
        blocks = self.path(self.node_of(s, key))
        first = self.depth(s, cached)
        todo = blocks[first:]
        need = len(todo) + extra
        for _ in range(need):
            if self.pool.available(s) < need:
                self.evict_one(s, r)
        self.pool.alloc(s, r, need, first_slot=first)
        table = getattr(s, self.table_var)
        slot = getattr(s, self.pool.slot_var)
        for p in s.all(self.pool.Page):
            mine = self._holds(s, r, p)
            for i, m in enumerate(todo):
                _set_if(s, table, (r, p), mine & (slot[p] == first + i), m)

    def evict_one(self, s: Any, r: Member | None = None) -> None:
        """Evict one unlocked leaf entry (any one: LRU order is not modelled); its page is freed.

        ``r`` is the request whose allocation needs the page (for the trace).
        Evicting a page some request's table still maps sets the ghost
        behind ``no_evict_in_use``.  Not enabled when no leaf is unlocked.
        """
        lock = getattr(s, self.lock_var)
        m = self._choose_node(s, f"{self.name} entry to evict")
        leaf = [self.cached(s, n) & (lock[n] == 0) & (sum(self.count(s, c) for c in self.children_of[n]) == 0)
                for n in s.all(self.Node)]
        require(sum((m == n) & leaf[n] for n in s.all(self.Node)) > 0)
        nodes = getattr(s, self.node_var)
        free = getattr(s, self.pool.free_var)
        table = getattr(s, self.table_var)
        lost = getattr(s, self.evicted_var)
        check_evict = s.checks("no_evict_in_use")
        for p in s.all(self.pool.Page):
            here = nodes[p] == m
            _set_if(s, nodes, p, here, None)
            free[p] = free[p] + here
            users = []
            for u in s.all(self.pool.own.requests):
                in_use = here & (table[u, p] != None)  # noqa: E711 - also runs on solver terms
                lost[u] = lost[u] | in_use
                if check_evict:
                    s.flag("no_evict_in_use", in_use)
                if s.recording and in_use:
                    users.append(self._req(s, u))
            if s.recording and here:
                s.emit(Evict(pool=self.pool.name, req=self._req(s, r) if r is not None else self.name,
                             page=self._page(s, p), node=self._node(s, m), in_use_by=tuple(users),
                             violates="no_evict_in_use" if users and s.checks("no_evict_in_use") else None))

    def write(self, s: Any, r: Member) -> None:
        """``r``'s forward writes its KV into its own pages; prompt-block pages get their prefix label."""
        self.pool.write(s, r, self.pool.pages_of(s, r))
        kv = getattr(s, self.kv_var)
        table = getattr(s, self.table_var)
        for p in s.all(self.pool.Page):
            _set_if(s, kv, p, self._holds(s, r, p), table[r, p])

    def read(self, s: Any, r: Member) -> None:
        """``r``'s attention over its page table: matched pages, then its own pages (pool ``read``).

        A matched page whose KV is not the prefix it was matched for sets
        the ghost behind ``prefix_read_matches``.
        """
        kv = getattr(s, self.kv_var)
        table = getattr(s, self.table_var)
        stale_of = getattr(s, self.stale_var)
        check_read = s.checks("prefix_read_matches")
        for p in s.all(self.pool.Page):
            m = table[r, p]
            stale = (m != None) & _not(self._holds(s, r, p)) & (kv[p] != m)  # noqa: E711
            stale_of[r] = stale_of[r] | stale
            if check_read:
                s.flag("prefix_read_matches", stale)
            if s.recording and m is not None and not self._holds(s, r, p):
                s.emit(PrefixRead(pool=self.pool.name, req=self._req(s, r), page=self._page(s, p),
                                  node=self._node(s, m), kv=self._node(s, kv[p]),
                                  violates="prefix_read_matches" if stale and s.checks("prefix_read_matches") else None))
        self.pool.read(s, r, self.pool.pages_of(s, r))

    def insert(self, s: Any, r: Member, key: Any) -> None:
        """Publish ``r``'s pages for the blocks of ``key`` (``RadixTrie::insert`` / ``insert_prefix``).

        Block by block from the root: a block not in the index gets the page
        ``r``'s table maps to it, written or not (the index trusts the
        caller); a block already there keeps its page, and ``r``'s own page
        for it goes back to the free list.
        """
        table = getattr(s, self.table_var)
        nodes = getattr(s, self.node_var)
        free = getattr(s, self.pool.free_var)
        holders = getattr(s, self.pool.holders_var)
        slot = getattr(s, self.pool.slot_var)
        drop = ~(1 << ix(r))
        for m in self.path(self.node_of(s, key)):
            already = self.cached(s, m)
            for p in s.all(self.pool.Page):
                mine = table[r, p] == m
                own = self._holds(s, r, p)
                publish = mine & _not(already)
                duplicate = mine & own & already
                _set_if(s, nodes, p, publish, m)
                _set_if(s, free, p, duplicate, free[p] + 1)
                _set_if(s, holders, p, mine & own, holders[p] & drop)
                _set_if(s, slot, p, mine & own, -1)
                if s.recording and publish:
                    s.emit(Publish(pool=self.pool.name, req=self._req(s, r), page=self._page(s, p),
                                   node=self._node(s, m)))
                if s.recording and duplicate:
                    s.emit(Free(pool=self.pool.name, req=self._req(s, r), pages=(self._page(s, p),)))

    def release(self, s: Any, r: Member) -> None:
        """``r``'s page table is dropped: its own pages go back to the free list, matched pages are unmapped."""
        self.pool.free(s, r)
        table = getattr(s, self.table_var)
        for p in s.all(self.pool.Page):
            table[r, p] = None

    # -- built-in invariants ---------------------------------------------------------------------
    def invariants(self, *names: str, idle: Callable[[Any], bool] | None = None) -> None:
        """Register the index's invariants by name (all of them when none are named).

        ``pages_accounted_when_idle`` needs ``idle(s)`` (defaults to the
        spec's ``@spec.terminal`` predicate); register it instead of the
        pool's ``pages_returned_when_idle``, which counts cached pages as lost.
        """
        builtins = self._builtins(idle)
        if idle is None:
            builtins["pages_accounted_when_idle"].needs_terminal = True  # type: ignore[attr-defined]
        for n in names or tuple(builtins):
            if n not in builtins:
                file, line = caller_location(2)
                raise OwnershipError(Code.UNKNOWN_INVARIANT, f"no prefix-index invariant {n!r} (known: {', '.join(builtins)})", file, line)
            self.pool.own.spec.invariant(builtins[n], name=n)

    def _builtins(self, idle: Callable[[Any], bool] | None) -> dict[str, Callable[[Any], bool]]:
        index = self
        Req = self.pool.own.requests
        Page = self.pool.Page

        def prefix_hit_written(s: Any) -> bool:
            """A prefix hit returns only pages that hold the KV written for that prefix."""
            return not any(getattr(s, index.hit_var)[r] for r in s.all(Req))

        def no_evict_in_use(s: Any) -> bool:
            """No page is evicted from the prefix index while a request's page table still maps it."""
            return not any(getattr(s, index.evicted_var)[r] for r in s.all(Req))

        def lock_refs_nonnegative(s: Any) -> bool:
            """No lock count of the prefix index drops below zero."""
            lock = getattr(s, index.lock_var)
            ok = all(lock[m] >= 0 for m in s.all(index.Node))
            return ok and (not index.root_refs or getattr(s, index.root_lock_var) >= 0)

        def prefix_read_matches(s: Any) -> bool:
            """Every matched page a request reads holds the KV of the prefix block it was matched for."""
            return not any(getattr(s, index.stale_var)[r] for r in s.all(Req))

        def index_pages_exclusive(s: Any) -> bool:
            """A page in the prefix index is not on the free list or held by a request, and no block has two pages."""
            nodes = getattr(s, index.node_var)
            free = getattr(s, index.pool.free_var)
            holders = getattr(s, index.pool.holders_var)
            for p in s.all(Page):
                if (nodes[p] != None) & ((free[p] != 0) | (holders[p] != 0)):  # noqa: E711
                    return False
            return all(index.count(s, m) <= 1 for m in s.all(index.Node))

        def free_count_at_most_one(s: Any) -> bool:
            """No page sits on the free list twice (or a negative number of times)."""
            free = getattr(s, index.pool.free_var)
            return all((free[p] >= 0) & (free[p] <= 1) for p in s.all(Page))

        def pages_accounted_when_idle(s: Any) -> bool:
            """When no request is in flight, every page is on the free list exactly once or cached in the index."""
            if not (idle(s) if idle is not None else s.terminal()):
                return True
            nodes = getattr(s, index.node_var)
            free = getattr(s, index.pool.free_var)
            holders = getattr(s, index.pool.holders_var)
            for p in s.all(Page):
                if holders[p] != 0:
                    return False
                if (nodes[p] == None) & (free[p] != 1):  # noqa: E711
                    return False
            return True

        return {
            "prefix_hit_written": prefix_hit_written,
            "no_evict_in_use": no_evict_in_use,
            "lock_refs_nonnegative": lock_refs_nonnegative,
            "prefix_read_matches": prefix_read_matches,
            "index_pages_exclusive": index_pages_exclusive,
            "free_count_at_most_one": free_count_at_most_one,
            "pages_accounted_when_idle": pages_accounted_when_idle,
        }

    # -- display ----------------------------------------------------------------------------------
    def _req(self, s: Any, r: Any) -> str:
        return s.name_of(self.pool.own.requests, r)

    def _page(self, s: Any, p: Any) -> str:
        return s.name_of(self.pool.Page, p)

    def _node(self, s: Any, n: Any) -> str:
        return s.name_of(self.Node, n)
