"""Content identity: which KV a page holds, as a content key, apart from which request wrote it.

A page pool labels each page with its **writer** (``{pool}_content``: the
request whose forward wrote it), and ``no_foreign_read`` judges that label:
reading a page another request wrote is a leak.  With prefix caching that
judgement is wrong in both directions.  Request B reading a page that A
wrote for the same prompt prefix is the point of the cache (a legitimate
*shared* read, not a leak), while B reading a page that B itself expected to
hold its own prefix but that holds something else is the bug, whoever wrote
it.  :class:`ContentIndex` gives every page a **content key** (what the KV is
the KV *of*: a prompt prefix, a block hash's preimage) and judges reads by it:

* ``no_wrong_content_read``: a request reads a page whose content key (or
  scope) differs from the key its page table expects there.  Use it for any
  cache whose pages are shared on purpose (prefix caches, block hashes,
  radix trees, connectors loading KV by key);
* ``no_foreign_read`` stays the property for pools whose pages are private
  (no sharing: any page written by someone else is a leak).  A spec with a
  content index should not register it for that pool, because every cache
  hit would break it; register ``no_wrong_content_read`` instead.  Reads
  through :meth:`ContentIndex.read` do not touch ``read_foreign``.

The index maps **index keys** to published pages.  An index key is the
content key itself (an exact index: SGLang's radix tree compares tokens) or
its **hash** (vLLM's block hashes): declare ``hashes=N`` and the index is
keyed by a finite, symmetric ``Hash`` domain; :meth:`ContentIndex.hash`
fixes each key's hash when it is first computed, as a nondeterministic
choice, so every hash function is explored.  With ``collide=True`` distinct
keys may share a hash (a weak or predictable hash function: every collision
an attacker could craft); with ``collide=False`` the hash is injective (a
collision-resistant hash such as SHA-256, modelled as never colliding).

A content key may be **scoped** (tenant, LoRA adapter, cache salt): declare
``scopes=Domain``; a page then holds the pair (key, scope) of the scope its
KV was computed under.  ``lookup(..., scope=x)`` matches entries of that scope
only; ``lookup(..., scope=None)`` wrongly omits the scope and matches the key
under any scope (a cache key missing the LoRA id or the salt), which
``read(..., scope=x)`` then catches as a wrong-content read.

Published and shared pages must not be written: a write into a page another
request holds, or that an index publishes, changes KV that other readers
rely on.  ``no_write_to_shared_page`` records it, for writes made by
:meth:`ContentIndex.write`, judged against this index and any other index
given with ``also=`` (a :class:`~ownership.vocab.prefix.PrefixIndex`, which
answers through its ``published`` query); :class:`SharedPageWrites` gives
the same invariant to writes through the pool or a prefix index.

The model, per page: ``{name}_key`` / ``{name}_scope`` (content, not cleared
on free: pages are not zeroed), ``{name}_entry`` / ``{name}_entry_scope`` (the
index key it is published under), ``{name}_published``; per key:
``{name}_hash`` (with ``hashes``); per request and page: ``{name}_expect``,
the content key the request's page table expects the page to hold.  A page
in the index stays in the pool's ``holders`` of every request using it (a
hit adds the request: holders are the reference count) and returns to the
free list when no request holds it and the index no longer publishes it.
Conditional updates use :func:`ownership.vocab.prefix._set_if`, so the Z3
engines build one ``If`` term instead of a path per page.

The module runs over 400 lines because :class:`ContentIndex` is one data
structure (hash, lookup, alloc, write, read, insert, release, evict and the
invariants over them) whose operations share its state variables, as
:class:`~ownership.vocab.prefix.PrefixIndex` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ownership.core.events import ContentHit, ContentRead, Evict, Free, Publish, Write
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.declarations import Domain, SizeSpec
from ownership.lang.elements import Member, ix
from ownership.lang.guard import require
from ownership.lang.types import Optional
from ownership.vocab.pool import PagePool, spec_location
from ownership.vocab.prefix import _not, _set_if

INVARIANTS = ("no_wrong_content_read", "no_write_to_shared_page", "index_entries_unique", "published_pages_not_free")
"""The built-in invariants of a content index, in registration order."""


def shared_for_write(s: Any, pool: PagePool, r: Member, p: Member, indexes: Sequence[Any]) -> Any:
    """Whether a write by ``r`` into page ``p`` changes KV others rely on: another request holds ``p``, or an index publishes it."""
    cond = (getattr(s, pool.holders_var)[p] & ~(1 << ix(r))) != 0
    for index in indexes:
        cond = cond | index.published(s, p)
    return cond


def _check_indexes(what: str, indexes: Sequence[Any]) -> tuple[Any, ...]:
    for other in indexes:
        if not callable(getattr(other, "published", None)):
            file, line = caller_location(3)
            raise OwnershipError(Code.CONTENT_ALSO_NOT_INDEX,
                                 f"{what} names {other!r}, which has no published(s, page) query", file, line)
    return tuple(indexes)


class SharedPageWrites:
    """``no_write_to_shared_page`` for writes that do not go through :meth:`ContentIndex.write`.

    ``guard = SharedPageWrites(pool, (radix,))`` declares the ghost
    ``{pool}_wrote_shared[r]``; ``guard.check(s, r)`` flags every page ``r``'s
    table holds that another request also holds or an index publishes, for a
    forward about to write all of them (call it before ``radix.write(s, r)``
    or ``pool.write(s, r, pool.pages_of(s, r))``); ``guard.write(s, r)`` is
    the check and that pool write.  Register the invariant with
    :meth:`invariant` (give another ``name`` if the spec has a content
    index registering its own).
    """

    def __init__(self, pool: PagePool, indexes: Sequence[Any] = (), *, name: str | None = None) -> None:
        self.pool = pool
        self.indexes = _check_indexes("SharedPageWrites", indexes)
        self.invariant_name = "no_write_to_shared_page"
        self.shared_var = f"{name or pool.name}_wrote_shared"
        pool.own.spec.var(self.shared_var, bool, per=pool.own.requests, init=False, ghost=True,
                          doc="history: this request wrote a page another request holds or an index publishes")

    def check(self, s: Any, r: Member) -> None:
        """``r`` is about to write every page its table holds: flag those that are shared."""
        shared_of = getattr(s, self.shared_var)
        flag = self.invariant_name if s.checks(self.invariant_name) else None
        holders = getattr(s, self.pool.holders_var)
        for p in s.all(self.pool.Page):
            bad = ((holders[p] >> ix(r) & 1) != 0) & shared_for_write(s, self.pool, r, p, self.indexes)
            shared_of[r] = shared_of[r] | bad
            if flag is not None:
                s.flag(flag, bad)

    def write(self, s: Any, r: Member) -> None:
        """:meth:`check`, then ``pool.write`` of every page ``r`` holds (a write into a shared page is flagged)."""
        self.check(s, r)
        pages = self.pool.pages_of(s, r)
        self.pool.write(s, r, pages)

    def invariant(self, name: str = "no_write_to_shared_page") -> None:
        """Register: no request writes a page that another request holds or that an index publishes."""
        self.invariant_name = name
        shared_var, Req = self.shared_var, self.pool.own.requests

        def no_write_to_shared_page(s: Any) -> bool:
            """No request writes a page that another request holds or that an index publishes."""
            return not any(getattr(s, shared_var)[r] for r in s.all(Req))

        self.pool.own.spec.invariant(no_write_to_shared_page, name=name)


class ContentIndex:
    """Content keys of ``pool``'s pages and an index from keys (or their hashes) to published pages.

    ``keys`` names the content keys (a key domain ``{Title}Key`` is declared)
    or is a declared domain.  ``hashes`` (a size or a parameter name) makes
    the index keyed by a ``{Title}Hash`` domain; ``collide`` is the default of
    :meth:`hash`.  ``scopes`` is a domain of scopes (tenants, adapters,
    salts).  ``also`` lists other indexes over the same pool whose published
    pages count as shared for ``no_write_to_shared_page``; each needs a
    ``published(s, p)`` query.
    """

    def __init__(
        self,
        pool: PagePool,
        name: str,
        keys: Sequence[str] | Domain,
        *,
        hashes: SizeSpec | None = None,
        collide: bool = False,
        scopes: Domain | None = None,
        also: Sequence[Any] = (),
        doc: str = "",
    ) -> None:
        self.pool = pool
        self.name = name
        self.collide = collide
        self.scopes = scopes
        spec = pool.own.spec
        Req, Page = pool.own.requests, pool.Page
        title = name[:1].upper() + name[1:]
        self.also = _check_indexes(f"content index {name}: also=", also)
        if isinstance(keys, Domain):
            self.Key = keys
        else:
            names = list(keys)
            if not names or len(set(names)) != len(names):
                file, line = caller_location(2)
                raise OwnershipError(Code.CONTENT_BAD_KEYS,
                                     f"content index {name}: keys must be distinct names, at least one, got {names!r}",
                                     file, line)
            self.Key = spec.domain(f"{title}Key", len(names), names=names,
                                   doc=doc or f"content keys of the {name} index (what a page's KV is the KV of)")
        self.Hash: Domain | None = None
        if hashes is not None:
            self.Hash = spec.domain(f"{title}Hash", hashes, symmetric=True, names=lambda i: f"h{i}",
                                    doc=f"hash values of the {name} index")
        index_type = self.Hash if self.Hash is not None else self.Key
        self.key_var = f"{name}_key"
        self.scope_var = f"{name}_scope"
        self.entry_var = f"{name}_entry"
        self.entry_scope_var = f"{name}_entry_scope"
        self.published_var = f"{name}_published"
        self.hash_var = f"{name}_hash"
        self.expect_var = f"{name}_expect"
        self.fresh_var = f"{name}_fresh"
        self.wrong_var = f"{name}_read_wrong"
        self.shared_var = f"{name}_wrote_shared"
        spec.var(self.key_var, Optional(self.Key), per=Page, init=None,
                 doc="the content key whose KV the page holds (not cleared on free: pages are not zeroed)")
        if scopes is not None:
            spec.var(self.scope_var, Optional(scopes), per=Page, init=None,
                     doc="the scope (tenant, adapter, salt) the page's KV was computed under")
            spec.var(self.entry_scope_var, Optional(scopes), per=Page, init=None,
                     doc=f"the scope of the {name} entry the page is published under")
        spec.var(self.entry_var, Optional(index_type), per=Page, init=None,
                 doc=f"the {name} index key the page is published under (none: not published)")
        spec.var(self.published_var, bool, per=Page, init=False, doc=f"the page is published in the {name} index")
        if self.Hash is not None:
            spec.var(self.hash_var, Optional(self.Hash), per=self.Key, init=None,
                     doc="the key's hash, fixed when first computed (none: not computed yet)")
        spec.var(self.expect_var, Optional(self.Key), per=(Req, Page), init=None,
                 doc="the content key the request's page table expects the page to hold")
        spec.var(self.fresh_var, bool, per=(Req, Page), init=False,
                 doc="the request allocated the page to compute its content and has not written it yet")
        spec.var(self.wrong_var, bool, per=Req, init=False, ghost=True,
                 doc="history: this request read a page holding other content than it expected")
        spec.var(self.shared_var, bool, per=Req, init=False, ghost=True,
                 doc="history: this request wrote a page another request holds or an index publishes")
        pool.mark(self.published_var, "keeper", "cached")
        pool.mark(self.published_var, "flag", "published")

    # -- queries ---------------------------------------------------------------------------------
    def published(self, s: Any, p: Member) -> Any:
        """Whether page ``p`` is published in this index."""
        return getattr(s, self.published_var)[p]

    def holds(self, s: Any, r: Member, p: Member) -> Any:
        """Whether ``r``'s page table holds page ``p`` (a truth value, symbolic under Z3)."""
        return (getattr(s, self.pool.holders_var)[p] >> ix(r) & 1) != 0

    def cached(self, s: Any, h: Any, scope: Any = None) -> Any:
        """Whether some page is published under index key ``h`` (and ``scope``, when given)."""
        return self._count(s, h, scope) > 0

    def _count(self, s: Any, h: Any, scope: Any) -> Any:
        return sum(self._entry_is(s, p, h, scope) for p in s.all(self.pool.Page))

    def _entry_is(self, s: Any, p: Any, h: Any, scope: Any) -> Any:
        match = getattr(s, self.published_var)[p] & (getattr(s, self.entry_var)[p] == h)
        if scope is not None:
            self._need_scopes("lookup with a scope")
            match = match & (getattr(s, self.entry_scope_var)[p] == scope)
        return match

    def shared(self, s: Any, r: Member, p: Member) -> Any:
        """Whether page ``p`` is shared for a write by ``r``: another request holds it, or an index publishes it."""
        return shared_for_write(s, self.pool, r, p, (self, *self.also))

    def _need_scopes(self, what: str) -> None:
        if self.scopes is None:
            file, line = spec_location()
            raise OwnershipError(Code.CONTENT_NO_SCOPES,
                                 f"content index {self.name}: {what}, but the index declares no scopes= domain",
                                 file, line)

    # -- the hash function ------------------------------------------------------------------------
    def hash(self, s: Any, key: Member, *, collide: bool | None = None) -> Any:
        """The index key of ``key``: its hash (fixed the first time it is computed), or ``key`` without ``hashes``.

        The first computation picks any hash value (``s.choose``): with
        ``collide`` (default: the index's ``collide``) any value at all, so
        distinct keys may share one; without it only a value no other key
        has, so the hash is injective.  ``key`` must be a concrete key (an
        action argument), not a value read from the state.
        """
        if self.Hash is None:
            return key
        collide = self.collide if collide is None else collide
        hv = getattr(s, self.hash_var)
        if hv[key] != None:  # noqa: E711 - also runs on solver terms
            return hv[key]
        if not collide and s.size(self.Hash) < s.size(self.Key):
            file, line = spec_location()
            raise OwnershipError(Code.CONTENT_HASH_TOO_SMALL,
                                 f"content index {self.name}: an injective hash of {s.size(self.Key)} keys needs at "
                                 f"least as many hash values, the {self.Hash.name} domain has {s.size(self.Hash)}",
                                 file, line)
        h = s.choose(list(s.all(self.Hash)), label=f"{self.name} hash of {s.name_of(self.Key, key)}", domain=self.Hash)
        if not collide:
            require(sum(hv[k] == h for k in s.all(self.Key)) == 0)
        hv[key] = h
        return h

    # -- operations -------------------------------------------------------------------------------
    def lookup(self, s: Any, r: Member, h: Any, key: Member, scope: Any = None) -> Any:
        """``r`` looks up index key ``h``, computed from ``key``; a hit joins ``r``'s page table expecting ``key``.

        With ``scope`` the entry's scope must match too; without it the
        lookup ignores scopes.  Returns whether it hit (a truth value,
        symbolic under Z3).  Whether the page really holds ``key`` is judged
        when ``r`` reads it (:meth:`read`); the hit event shows what it holds.
        """
        holders = getattr(s, self.pool.holders_var)
        expect = getattr(s, self.expect_var)
        content = getattr(s, self.key_var)
        bit = 1 << ix(r)
        found: Any = 0
        for p in s.all(self.pool.Page):
            hit = self._entry_is(s, p, h, scope)
            _set_if(s, holders, p, hit, holders[p] | bit)
            _set_if(s, expect, (r, p), hit, key)
            found = found + hit
            if s.recording and hit:
                s.emit(ContentHit(pool=self.pool.name, req=self._req(s, r), page=self._page(s, p),
                                  entry=self._entry_name(s, h), key=s.name_of(self.Key, key),
                                  holds=self._content_name(s, content[p], self._scope_of(s, p))))
        return found > 0

    def alloc(self, s: Any, r: Member, n: int, key: Member) -> None:
        """``n`` pages off the free list into ``r``'s table, expected to hold ``key`` (evicting unused entries first).

        When the free list is short, published pages no request holds are
        evicted one at a time (:meth:`evict_one`); not enabled when that still
        leaves too few pages.
        """
        for _ in range(n):
            if self.pool.available(s) < n:
                self.evict_one(s)
        self.pool.alloc(s, r, n)
        expect = getattr(s, self.expect_var)
        fresh = getattr(s, self.fresh_var)
        for p in s.all(self.pool.Page):
            new = self.holds(s, r, p) & (expect[r, p] == None)  # noqa: E711 - also runs on solver terms
            _set_if(s, expect, (r, p), new, key)
            _set_if(s, fresh, (r, p), new, True)

    def write(self, s: Any, r: Member, key: Member, scope: Any = None, *, recompute: bool = False) -> None:
        """``r``'s forward computes the KV of ``key`` (under ``scope``) into the pages it allocated for it.

        Those are the pages :meth:`alloc` gave ``r`` for ``key`` and not yet
        written; with ``recompute`` every page ``r``'s table expects to hold
        ``key``, pages it got from a hit included (an engine recomputing a
        cached block in place).  The pool's writer label becomes ``r`` as with
        ``pool.write``.  A page that another request holds or an index
        publishes (published before it was written, or a hit recomputed) is
        written all the same and sets the ghost behind
        ``no_write_to_shared_page``.
        """
        if scope is not None:
            self._need_scopes("write with a scope")
        expect = getattr(s, self.expect_var)
        content = getattr(s, self.key_var)
        writer = getattr(s, self.pool.content_var)
        shared_of = getattr(s, self.shared_var)
        fresh = getattr(s, self.fresh_var)
        flag = "no_write_to_shared_page" if s.checks("no_write_to_shared_page") else None
        for p in s.all(self.pool.Page):
            mine = self.holds(s, r, p) & (expect[r, p] == key)
            if not recompute:
                mine = mine & fresh[r, p]
            _set_if(s, fresh, (r, p), mine, False)
            bad = mine & self.shared(s, r, p)
            _set_if(s, content, p, mine, key)
            _set_if(s, writer, p, mine, r)
            if scope is not None:
                _set_if(s, getattr(s, self.scope_var), p, mine, scope)
            shared_of[r] = shared_of[r] | bad
            if flag is not None:
                s.flag(flag, bad)
            if s.recording and mine:
                s.emit(Write(pool=self.pool.name, req=self._req(s, r), page=self._page(s, p),
                             violates=flag if bad else None))

    def read(self, s: Any, r: Member, scope: Any = None) -> None:
        """``r`` attends over every page its table expects content in; a page holding other content is flagged.

        Other content means another key, no content at all, or (with
        ``scope``) KV computed under another scope.  Who wrote the page does
        not matter: a page another request wrote with the expected key is a
        legitimate shared read.
        """
        if scope is not None:
            self._need_scopes("read with a scope")
        expect = getattr(s, self.expect_var)
        content = getattr(s, self.key_var)
        writer = getattr(s, self.pool.content_var)
        wrong_of = getattr(s, self.wrong_var)
        flag = "no_wrong_content_read" if s.checks("no_wrong_content_read") else None
        Req = self.pool.own.requests
        for p in s.all(self.pool.Page):
            reads = self.holds(s, r, p) & (expect[r, p] != None)  # noqa: E711
            differs = content[p] != expect[r, p]
            if scope is not None:
                differs = differs | (getattr(s, self.scope_var)[p] != scope)
            wrong = reads & differs
            wrong_of[r] = wrong_of[r] | wrong
            if flag is not None:
                s.flag(flag, wrong)
            if s.recording and reads:
                held = getattr(s, self.scope_var)[p] if scope is not None else None
                s.emit(ContentRead(pool=self.pool.name, req=self._req(s, r), page=self._page(s, p),
                                   expected=self._content_name(s, expect[r, p], scope),
                                   holds=self._content_name(s, content[p], held),
                                   writer=s.name_of(Req, writer[p]), violates=flag if wrong else None))

    def insert(self, s: Any, r: Member, h: Any, key: Member, scope: Any = None) -> None:
        """Publish ``r``'s pages expected to hold ``key`` under index key ``h`` (and ``scope``).

        Written or not: the index trusts its caller.  Nothing happens when
        ``h`` already has an entry (the first page published under it stays)
        or for a page already published.  ``r`` keeps holding its pages.
        """
        if scope is not None:
            self._need_scopes("insert with a scope")
        expect = getattr(s, self.expect_var)
        entry = getattr(s, self.entry_var)
        published = getattr(s, self.published_var)
        absent = _not(self.cached(s, h, scope))
        for p in s.all(self.pool.Page):
            publish = absent & self.holds(s, r, p) & (expect[r, p] == key) & _not(published[p])
            _set_if(s, entry, p, publish, h)
            _set_if(s, published, p, publish, True)
            if scope is not None:
                _set_if(s, getattr(s, self.entry_scope_var), p, publish, scope)
            if s.recording and publish:
                s.emit(Publish(pool=self.pool.name, req=self._req(s, r), page=self._page(s, p),
                               node=self._entry_name(s, h)))

    def release(self, s: Any, r: Member) -> None:
        """``r`` drops its page table: a page nobody else holds and no index publishes returns to the free list."""
        holders = getattr(s, self.pool.holders_var)
        free = getattr(s, self.pool.free_var)
        slot = getattr(s, self.pool.slot_var)
        expect = getattr(s, self.expect_var)
        fresh = getattr(s, self.fresh_var)
        published = getattr(s, self.published_var)
        drop = ~(1 << ix(r))
        freed: list[str] = []
        for p in s.all(self.pool.Page):
            mine = self.holds(s, r, p)
            last = mine & ((holders[p] & drop) == 0)
            back = last & _not(published[p])
            _set_if(s, holders, p, mine, holders[p] & drop)
            _set_if(s, slot, p, last, -1)
            _set_if(s, free, p, back, free[p] + 1)
            expect[r, p] = None
            fresh[r, p] = False
            if s.recording and back:
                freed.append(self._page(s, p))
        if freed:
            s.emit(Free(pool=self.pool.name, req=self._req(s, r), pages=tuple(freed)))

    def evict_one(self, s: Any) -> None:
        """Evict one published page no request holds (any one: LRU order is not modelled); it returns to the free list.

        Not enabled when every published page is held.
        """
        holders = getattr(s, self.pool.holders_var)
        free = getattr(s, self.pool.free_var)
        entry = getattr(s, self.entry_var)
        published = getattr(s, self.published_var)
        p = s.choose(list(s.all(self.pool.Page)), label=f"{self.name} page to evict", domain=self.pool.Page)
        require((published[p] & (holders[p] == 0)) != 0)  # & of two conditions is 0/1 under Z3
        if s.recording:
            s.emit(Evict(pool=self.pool.name, req=self.name, page=self._page(s, p),
                         node=self._entry_name(s, entry[p]), in_use_by=()))
        published[p] = False
        entry[p] = None
        if self.scopes is not None:
            getattr(s, self.entry_scope_var)[p] = None
        free[p] = free[p] + 1

    # -- built-in invariants ----------------------------------------------------------------------
    def invariants(self, *names: str) -> None:
        """Register the index's invariants by name (all of them when none are named).

        ``no_wrong_content_read`` and ``no_write_to_shared_page`` are the
        properties; ``index_entries_unique`` and ``published_pages_not_free``
        are facts about the bookkeeping (true by construction) that give
        ``ownership prove`` a stronger starting point.
        """
        builtins = self._builtins()
        for n in names or INVARIANTS:
            if n not in builtins:
                file, line = caller_location(2)
                raise OwnershipError(Code.UNKNOWN_INVARIANT,
                                     f"no content-index invariant {n!r} (known: {', '.join(INVARIANTS)})", file, line)
            self.pool.own.spec.invariant(builtins[n], name=n, helper=n in INVARIANTS[2:])

    def _builtins(self) -> dict[str, Callable[[Any], bool]]:
        index = self
        Req, Page = self.pool.own.requests, self.pool.Page

        def no_wrong_content_read(s: Any) -> bool:
            """No request reads a page whose content key (or scope) differs from the one its page table expects.

            Judges content, not writers: reading a page another request wrote
            for the same key is legitimate sharing; a hash collision or a
            lookup without the scope that hands out other content breaks it.
            """
            return not any(getattr(s, index.wrong_var)[r] for r in s.all(Req))

        def no_write_to_shared_page(s: Any) -> bool:
            """No request writes a page that another request holds or that an index publishes."""
            return not any(getattr(s, index.shared_var)[r] for r in s.all(Req))

        def index_entries_unique(s: Any) -> bool:
            """No two published pages share an index key (and scope)."""
            entry = getattr(s, index.entry_var)
            published = getattr(s, index.published_var)
            for p in s.all(Page):
                for q in s.all(Page):
                    if ix(p) < ix(q) and published[p] & published[q] & (entry[p] == entry[q]):
                        if index.scopes is None:
                            return False
                        scope = getattr(s, index.entry_scope_var)
                        if scope[p] == scope[q]:
                            return False
            return True

        def published_pages_not_free(s: Any) -> bool:
            """A published page is not on the free list, has an index key, and no page sits on the free list twice."""
            free = getattr(s, index.pool.free_var)
            entry = getattr(s, index.entry_var)
            published = getattr(s, index.published_var)
            for p in s.all(Page):
                if published[p] & ((free[p] != 0) | (entry[p] == None)):  # noqa: E711
                    return False
                if (free[p] < 0) | (free[p] > 1):
                    return False
            return True

        return {
            "no_wrong_content_read": no_wrong_content_read,
            "no_write_to_shared_page": no_write_to_shared_page,
            "index_entries_unique": index_entries_unique,
            "published_pages_not_free": published_pages_not_free,
        }

    # -- display ----------------------------------------------------------------------------------
    def _req(self, s: Any, r: Any) -> str:
        return s.name_of(self.pool.own.requests, r)

    def _page(self, s: Any, p: Any) -> str:
        return s.name_of(self.pool.Page, p)

    def _scope_of(self, s: Any, p: Any) -> Any:
        return getattr(s, self.scope_var)[p] if self.scopes is not None else None

    def _content_name(self, s: Any, key: Any, scope: Any) -> str:
        """``key``, or ``key@scope`` when a scope is known (``p@sql``: the KV of ``p`` under adapter ``sql``)."""
        name = s.name_of(self.Key, key)
        if scope is None or self.scopes is None or key is None:
            return name
        return f"{name}@{s.name_of(self.scopes, scope)}"

    def _entry_name(self, s: Any, h: Any) -> str:
        return s.name_of(self.Hash if self.Hash is not None else self.Key, h)
