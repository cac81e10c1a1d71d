"""SGLang instrumentation: the page events of a real ``PagedTokenToKVPoolAllocator`` and ``RadixCache``.

:class:`SglangMonitor` wraps the methods of one allocator and one radix tree
(instance attributes, so nothing global changes and ``uninstall`` restores
them) and turns what they do into monitor events:

* ``alloc`` / ``alloc_extend`` / ``alloc_decode`` -> ``alloc`` of the new pages, per request of the batch;
* ``free`` / ``free_segment`` / ``free_page_ids`` -> ``free`` by whoever is acting (a request, or the tree
  inside ``evict``);
* ``insert`` -> ``cache`` of the pages the tree did not have, under prefix-chain content keys, a ``share`` by
  the tree (it keeps a reference) and a ``free`` by the request (its reference goes to the tree);
* ``inc_lock_ref`` -> ``share`` of the locked path's pages by the acting request (a lock is what keeps a matched
  prefix for a request; ``match_prefix`` alone takes nothing, SGLang calls it for requests it does not admit);
* ``dec_lock_ref`` -> ``free`` of the path's pages by the acting request;
* ``evict`` -> the tree is the actor of the frees it makes.

The engine has no notion of which request calls the allocator, so the driver
(the scheduler loop of a test) says it with ``with sm.acting(rid)`` (or a batch
``sm.acting(r1, r2)``, in the batch's order).  The attention kernel does not
run on a CPU; :meth:`SglangMonitor.forward` reports what it would write and
read, reading the request's real ``req_to_token`` row.  Nothing here imports
SGLang (or torch): the objects come from the caller.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from ownership.monitor.core import Monitor, Node

#: The holder name of the radix tree's own references.
TREE = "radix-tree"
NODE = "gpu"


def content_keys(tokens: Sequence[int], page_size: int, *, extra_key: object = None) -> list[str]:
    """Prefix-chain content keys, one per page of ``tokens`` (the last page may be partial).

    Page ``i``'s key hashes the hash before it and its own token ids (as
    64-bit integers), so two pages have equal keys iff the token ids up to
    their ends (and the ``extra_key`` namespace, SGLang's LoRA/cache-salt tag)
    are equal.
    """
    return _chain(array("q", tokens).tobytes(), page_size, _seed(extra_key), 0)[0]


def _seed(extra_key: object) -> bytes:
    return hashlib.sha256(repr(extra_key).encode()).digest() if extra_key is not None else b""


def _chain(data: bytes, page_size: int, h: bytes, first: int) -> tuple[list[str], bytes]:
    """Keys of the pages from ``first`` on of token bytes ``data``, chained from hash ``h``; and the last full page's hash."""
    step = 8 * page_size
    keys: list[str] = []
    last_full = h
    for off in range(first * step, len(data), step):
        h = hashlib.sha256(h + data[off:off + step]).digest()
        keys.append("p:" + h.hex()[:16])
        if off + step <= len(data):
            last_full = h
    return keys, last_full


def _at(fn: Callable[..., Any]) -> str:
    """``sglang/srt/...py:LINE`` of a function's definition (no absolute path: logs must be reproducible)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", "?")
    path = code.co_filename.replace(os.sep, "/")
    cut = path.rfind("/sglang/")
    return f"{path[cut + 1:] if cut >= 0 else Path(path).name}:{code.co_firstlineno}"


def _namespace(key: Any) -> object:
    """What keeps equal token ids apart in the tree: ``RadixKey.extra_key`` and ``cache_salt`` (None: neither)."""
    extra, salt = key.extra_key, getattr(key, "cache_salt", None)
    return None if extra is None and salt is None else (extra, salt)


class SglangMonitor:
    """A :class:`Monitor` fed by one SGLang paged allocator and radix tree (see the module docstring)."""

    def __init__(self, monitor: Monitor, allocator: Any, tree: Any, *, node: str = NODE) -> None:
        self.monitor = monitor
        self.allocator = allocator
        self.tree = tree
        self.node = node
        self.page_size = int(allocator.page_size)
        self._actors: list[tuple[str, ...]] = []
        self._depth = 0  # nesting of wrapped frees: only the outermost reports
        self._saved: list[tuple[Any, str]] = []
        # rid -> (token bytes of its full pages, their keys, the last full page's hash, namespace)
        self._chains: dict[str, tuple[bytes, list[str], bytes, object]] = {}

    @classmethod
    def create(cls, allocator: Any, tree: Any, *, log: str | Path | IO[str] | None = None, source: str = "",
               raise_on_violation: bool = True) -> SglangMonitor:
        """A monitor sized for ``allocator`` (page 0 reserved: SGLang's padding page), installed."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            engine_version = version("sglang")
        except PackageNotFoundError:
            engine_version = ""
        pages = int(allocator.num_pages) + 1
        m = Monitor({NODE: Node(pages, int(allocator.page_size), (0,))}, log=log, engine="sglang",
                    engine_version=engine_version, source=source,
                    raise_on_violation=raise_on_violation)
        sm = cls(m, allocator, tree)
        sm.install()
        return sm

    # -- who is acting -----------------------------------------------------------------------
    @contextmanager
    def acting(self, *rids: str) -> Iterator[None]:
        """Attributes the allocator and lock calls inside to these requests (a batch, in order)."""
        self._actors.append(tuple(rids))
        try:
            yield
        finally:
            self._actors.pop()

    def around(self, fn: Callable[..., Any], rids: Callable[..., Sequence[str]]) -> Callable[..., Any]:
        """``fn`` run under ``acting(*rids(args))``: for patching an engine entry point in a test suite.

        For example ``around(common.release_kv_cache, lambda req, *a, **k: [req.rid])``.
        """
        def acting_fn(*args: Any, **kwargs: Any) -> Any:
            with self.acting(*rids(*args, **kwargs)):
                return fn(*args, **kwargs)
        acting_fn.__wrapped__ = fn  # type: ignore[attr-defined]
        return acting_fn

    def _actor(self, what: str) -> str:
        if not self._actors or len(self._actors[-1]) != 1:
            raise RuntimeError(f"{what} ran with no single request acting: wrap the call in SglangMonitor.acting(rid)")
        return self._actors[-1][0]

    def _batch(self, n: int, what: str) -> tuple[str, ...]:
        if not self._actors or len(self._actors[-1]) != n:
            raise RuntimeError(f"{what} for a batch of {n} ran without SglangMonitor.acting(...) naming {n} requests")
        return self._actors[-1]

    # -- installing the wrappers --------------------------------------------------------------
    def install(self) -> None:
        """Wraps the allocator's and the tree's methods on these two instances."""
        a, t = self.allocator, self.tree
        for obj, name, make in (
            (a, "alloc", self._wrap_alloc), (a, "alloc_extend", self._wrap_alloc_extend),
            (a, "alloc_decode", self._wrap_alloc_decode), (a, "free", self._wrap_free_tokens),
            (a, "free_segment", self._wrap_free_segment), (a, "free_page_ids", self._wrap_free_page_ids),
            (t, "insert", self._wrap_insert), (t, "inc_lock_ref", self._wrap_lock),
            (t, "dec_lock_ref", self._wrap_unlock), (t, "evict", self._wrap_evict),
        ):
            setattr(obj, name, make(getattr(obj, name)))
            self._saved.append((obj, name))

    def uninstall(self) -> None:
        """Restores the engine's own methods."""
        for obj, name in reversed(self._saved):
            delattr(obj, name)
        self._saved.clear()

    # -- allocator ------------------------------------------------------------------------------
    def _pages_of(self, token_indices: Any) -> list[int]:
        """Page ids of a token-index tensor, each once, in order."""
        ps = self.page_size
        seen: set[int] = set()
        out: list[int] = []
        for i in token_indices.tolist():
            p = i // ps
            if p not in seen:
                seen.add(p)
                out.append(p)
        return out

    def _wrap_alloc(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        at = _at(orig)

        def alloc(need_size: int) -> Any:
            rid = self._actor("alloc")
            out = orig(need_size)
            if out is not None and len(out):
                self.monitor.alloc(rid, self._pages_of(out), self.node, at)
            return out
        return alloc

    def _wrap_alloc_extend(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        at = _at(orig)

        def alloc_extend(prefix_lens: Any, prefix_lens_cpu: Any, seq_lens: Any, seq_lens_cpu: Any, last_loc: Any,
                         extend_num_tokens: int, *args: Any, **kwargs: Any) -> Any:
            rids = self._batch(len(seq_lens_cpu), "alloc_extend")
            out = orig(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens,
                       *args, **kwargs)
            if out is None:
                return out
            prefix, seq = prefix_lens_cpu.tolist(), seq_lens_cpu.tolist()
            ps, start = self.page_size, 0
            for rid, p, s in zip(rids, prefix, seq, strict=True):
                # tokens before the prefix's page end go into the request's last (partial) page
                in_old = min(s, -(-p // ps) * ps) - p
                new = self._pages_of(out[start + in_old:start + s - p])
                if new:
                    self.monitor.alloc(rid, new, self.node, at)
                start += s - p
            return out
        return alloc_extend

    def _wrap_alloc_decode(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        at = _at(orig)

        def alloc_decode(seq_lens: Any, seq_lens_cpu: Any, last_loc: Any, *args: Any, **kwargs: Any) -> Any:
            rids = self._batch(len(seq_lens_cpu), "alloc_decode")
            out = orig(seq_lens, seq_lens_cpu, last_loc, *args, **kwargs)
            if out is None:
                return out
            ps = self.page_size
            for rid, s, loc in zip(rids, seq_lens_cpu.tolist(), out.tolist(), strict=True):
                if (s - 1) % ps == 0:  # the token starts a new page
                    self.monitor.alloc(rid, [loc // ps], self.node, at)
            return out
        return alloc_decode

    def _freeing(self, orig: Callable[..., Any], at: str, pages_of: Callable[..., list[int]]) -> Callable[..., Any]:
        def free(index: Any, *args: Any, **kwargs: Any) -> Any:
            if self._depth == 0 and index.numel():
                self.monitor.free(self._actor("free"), pages_of(index), self.node, at)
            self._depth += 1
            try:
                return orig(index, *args, **kwargs)
            finally:
                self._depth -= 1
        return free

    def _wrap_free_tokens(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        ps = self.page_size
        return self._freeing(orig, _at(orig), lambda index: sorted({i // ps for i in index.tolist()}))

    def _wrap_free_segment(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        ps = self.page_size
        return self._freeing(orig, _at(orig), lambda index: [i // ps for i in index[::ps].tolist()])

    def _wrap_free_page_ids(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        return self._freeing(orig, _at(orig), lambda ids: [int(p) for p in ids.tolist()])

    # -- radix tree ---------------------------------------------------------------------------------
    def _path(self, node: Any) -> tuple[list[int], list[str]]:
        """Pages on the path from the root to ``node`` and their content keys."""
        tokens: list[int] = []
        values: list[int] = []
        extra = None
        chain = []
        root = self.tree.root_node
        while node is not root and node is not None:
            chain.append(node)
            node = node.parent
        for n in reversed(chain):
            tokens.extend(n.key.token_ids[:len(n.key)])
            values.extend(n.value.tolist())
            extra = _namespace(n.key)
        ps = self.page_size
        return [v // ps for v in values[::ps]], content_keys(tokens, ps, extra_key=extra)

    def _wrap_insert(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        at = _at(orig)

        def insert(params: Any) -> Any:
            result = orig(params)
            key, value = params.key, params.value
            ps = self.page_size
            aligned = len(key) // ps * ps
            if value is None or result.prefix_len >= aligned:
                return result
            rid = self._actor("insert")
            tokens = list(key.token_ids[:aligned])
            keys = content_keys(tokens, ps, extra_key=_namespace(key))[result.prefix_len // ps:]
            pages = [int(v) // ps for v in value[result.prefix_len:aligned:ps].tolist()]
            self.monitor.cache(rid, pages, keys, self.node, at)
            self.monitor.share(TREE, pages, keys, self.node, at, note="the tree keeps the inserted pages")
            self.monitor.free(rid, pages, self.node, at, note="the request's reference goes to the tree")
            return result
        return insert

    def _wrap_lock(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        at = _at(orig)

        def inc_lock_ref(node: Any) -> Any:
            pages, keys = self._path(node)
            if pages:
                self.monitor.share(self._actor("inc_lock_ref"), pages, keys, self.node, at)
            return orig(node)
        return inc_lock_ref

    def _wrap_unlock(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        at = _at(orig)

        def dec_lock_ref(node: Any, *args: Any, **kwargs: Any) -> Any:
            pages, _ = self._path(node)
            if pages:
                self.monitor.free(self._actor("dec_lock_ref"), pages, self.node, at)
            return orig(node, *args, **kwargs)
        return dec_lock_ref

    def _wrap_evict(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def evict(params: Any) -> Any:
            with self.acting(TREE):
                return orig(params)
        return evict

    # -- what the model would do ----------------------------------------------------------------------
    def forward(self, rid: str, row: Any, tokens: Sequence[int], start: int, *, extra_key: object = None,
                at: str | None = None) -> None:
        """The attention of one forward step: writes KV for ``tokens[start:]``, reads all of ``tokens``.

        ``row`` is the request's ``req_to_token`` row (token -> KV index), as
        the engine holds it: the pages read are the ones the engine would read.
        ``extra_key`` is the request's namespace as the tree sees it
        (``(extra_key, cache_salt)``, or None when both are None).
        """
        ps = self.page_size
        n = len(tokens)
        if n == 0:
            return
        pages = [int(i) // ps for i in row[:n:ps].tolist()]
        keys = self._keys_of(rid, array("q", tokens).tobytes(), extra_key)
        first = start // ps
        if first < len(pages):
            self.monitor.write(rid, pages[first:], keys[first:], self.node, at)
        self.monitor.read(rid, pages, keys, self.node, at)

    def _keys_of(self, rid: str, data: bytes, extra_key: object) -> list[str]:
        """content_keys of a request's tokens, reusing the full pages' keys of its last forward (tokens only grow)."""
        ps = self.page_size
        full = len(data) // (8 * ps) * 8 * ps
        cached = self._chains.get(rid)
        if cached is not None and cached[3] == extra_key and data.startswith(cached[0]):
            done, keys_done, h = cached[0], cached[1], cached[2]
            more, h_full = _chain(data, ps, h, len(done) // (8 * ps))
            keys = keys_done + more
        else:
            keys, h_full = _chain(data, ps, _seed(extra_key), 0)
        n_full = full // (8 * ps)
        self._chains[rid] = (data[:full], keys[:n_full], h_full, extra_key)
        return keys
    def finish(self, rid: str) -> None:
        """The request is done (after ``release_kv_cache``)."""
        self._chains.pop(rid, None)
        self.monitor.finish(rid)
