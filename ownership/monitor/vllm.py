"""The runtime ownership monitor on vLLM's real v1 scheduling stack.

``instrument(scheduler, monitor)`` wraps, for the time of a ``with`` block, the
methods of one vLLM ``Scheduler`` (its ``KVCacheManager`` and ``BlockPool``)
through which KV blocks change hands, and reports each change to the monitor
as an event of the event-log contract (docs/monitor.md):

  alloc   ``BlockPool.get_new_blocks`` (inside ``allocate_slots``)
  share   ``BlockPool.touch`` of the prefix-cache hits that ``allocate_slots``
          adopts (``get_computed_blocks`` found them)
  write   the scheduled tokens land in the request's blocks that cover them:
          noted at a successful ``allocate_slots``, reported when the step's
          schedule is final (a request preempted later in the same ``schedule``
          call writes nothing), or earlier, just before another request's
          prefix hit adopts one of those blocks (vLLM computes a block and lets
          a request of the same batch read it in one forward pass)
  cache   ``BlockPool.cache_full_blocks``
  free    ``BlockPool.free_blocks`` (inside ``KVCacheManager.free``)
  finish  ``KVCacheManager.free`` of a finished request
  read    after ``Scheduler.schedule``: every scheduled request's attention reads
          the blocks covering its computed tokens

Content keys are computed here from token ids, never taken from vLLM: the key of
a block is a hash chained over the request's tokens up to the last one the block
holds, so a legitimate prefix hit has the publisher's key and stale or foreign
content does not.  Only the full-attention, single-group layout (``Unitary``
coordinator, no KV connector, no speculative decoding) is instrumented; a
block change outside ``allocate_slots``/``free`` raises ``UninstrumentedPathError``.

vLLM is imported by the caller; this module only touches the objects it is
given (``ownership --help`` never pays for vLLM).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

NODE = "gpu"


class EventSink(Protocol):
    """What the instrumentation reports to: ``ownership.monitor.Monitor`` (or anything with its methods)."""

    def alloc(self, req: str, pages: Sequence[int], node: str = ..., at: str | None = ...) -> None: ...
    def share(self, req: str, pages: Sequence[int], content: Sequence[str], node: str = ..., at: str | None = ...) -> None: ...
    def write(self, req: str, pages: Sequence[int], content: Sequence[str], node: str = ..., at: str | None = ...) -> None: ...
    def cache(self, req: str, pages: Sequence[int], content: Sequence[str], node: str = ..., at: str | None = ...) -> None: ...
    def read(self, req: str, pages: Sequence[int], content: Sequence[str], node: str = ..., at: str | None = ...) -> None: ...
    def free(self, req: str, pages: Sequence[int], node: str = ..., at: str | None = ...) -> None: ...
    def finish(self, req: str, at: str | None = ...) -> None: ...


class UninstrumentedPathError(RuntimeError):
    """vLLM moved blocks on a path the instrumentation does not attribute to a request."""


def nodes_of(scheduler: Any) -> dict[str, dict[str, Any]]:
    """The event-log header's ``nodes`` for this scheduler's block pool (block 0 is vLLM's null block)."""
    pool = scheduler.kv_cache_manager.block_pool
    return {NODE: {"pages": pool.num_gpu_blocks, "page_size": _block_size(scheduler), "reserved": [pool.null_block.block_id]}}


def _block_size(scheduler: Any) -> int:
    managers = scheduler.kv_cache_manager.coordinator.single_type_managers
    if len(managers) != 1:
        raise UninstrumentedPathError(f"{len(managers)} KV cache groups: only a single full-attention group is instrumented")
    return int(managers[0].block_size)


def _where(function: Callable[..., Any]) -> str:
    """``vllm/v1/core/block_pool.py:706``: where the wrapped engine method starts."""
    code = getattr(function, "__code__", None)
    if code is None:
        return "?"
    parts = Path(code.co_filename).parts
    # From the last "vllm" in the path: the package, not a virtual environment named after it.
    tail = parts[len(parts) - 1 - parts[::-1].index("vllm"):] if "vllm" in parts else parts[-1:]
    return f"{'/'.join(tail)}:{code.co_firstlineno}"


@dataclass
class _ContentKeys:
    """Prefix-chain hashes of one request's token ids, extended as the request grows."""

    block_size: int
    chain: list[bytes] = field(default_factory=list)  # chain[i]: hash of tokens[: (i + 1) * block_size]
    hexes: list[str] = field(default_factory=list)  # chain[i].hex(), kept because reads ask for them each step

    def keys(self, tokens: Sequence[int], first: int, end: int) -> list[str]:
        """The keys of blocks ``first..`` holding the tokens before ``end``: full blocks carry their
        chain hash; a last, partly filled block the hash of its tokens so far."""
        bs, chain = self.block_size, self.chain
        while len(chain) * bs + bs <= len(tokens):  # every full block whose tokens exist
            i = len(chain)
            chain.append(self._digest(chain[i - 1] if i else b"", tokens[i * bs : i * bs + bs]))
            self.hexes.append(chain[-1].hex())
        full = end // bs
        out = self.hexes[first:full]
        if end % bs and full >= first:
            out.append(self._digest(chain[full - 1] if full else b"", tokens[full * bs : end]).hex())
        return out

    @staticmethod
    def _digest(parent: bytes, tokens: Sequence[int]) -> bytes:
        return hashlib.blake2b(parent + array("q", tokens).tobytes(), digest_size=8).digest()


@dataclass
class _Context:
    """The request on whose behalf vLLM is currently moving blocks."""

    request: Any
    hits: list[int] = field(default_factory=list)  # block ids of the prefix hits being adopted
    first_hit_index: int = 0  # block-table index of hits[0]


class _Tap:
    """The wrappers' shared state: the sink, the current request, content keys per request."""

    def __init__(self, scheduler: Any, sink: EventSink) -> None:
        self.scheduler = scheduler
        self.manager = scheduler.kv_cache_manager
        self.pool = self.manager.block_pool
        self.sink = sink
        self.block_size = _block_size(scheduler)
        self.stack: list[_Context] = []
        self.keys: dict[str, _ContentKeys] = {}
        # Writes of the step being scheduled, not yet reported: request id -> (pages, content, at).
        self.pending: dict[str, tuple[list[int], list[str], str]] = {}

    def flush(self, req_id: str) -> None:
        """Report the pending write of ``req_id`` (if any)."""
        pending = self.pending.pop(req_id, None)
        if pending is not None:
            self.sink.write(req_id, pending[0], pending[1], node=NODE, at=pending[2])

    # -- helpers ------------------------------------------------------------------------------
    def current(self, what: str) -> _Context:
        if not self.stack:
            raise UninstrumentedPathError(f"{what} outside allocate_slots/free: no request to attribute it to")
        return self.stack[-1]

    def key_list(self, request: Any, first: int, end: int) -> list[str]:
        """Content keys of the request's blocks ``first..`` holding its tokens before ``end``."""
        keys = self.keys.get(request.request_id)
        if keys is None:
            keys = self.keys[request.request_id] = _ContentKeys(self.block_size)
        return keys.keys(request.all_token_ids, first, end)

    def key(self, request: Any, index: int) -> str:
        """The content key of the request's full block ``index``."""
        return self.key_list(request, index, (index + 1) * self.block_size)[0]

    def table(self, request: Any) -> list[int]:
        return list(self.manager.get_block_ids(request.request_id)[0])

    def covering(self, request: Any, start: int, end: int) -> tuple[list[int], list[str]]:
        """The block ids and content keys of the blocks holding tokens ``start..end-1``."""
        if end <= start:
            return [], []
        bs = self.block_size
        table = self.table(request)
        indices = range(start // bs, (end - 1) // bs + 1)
        if indices.stop > len(table):
            raise UninstrumentedPathError(f"request {request.request_id}: tokens up to {end} but {len(table)} blocks")
        return table[indices.start : indices.stop], self.key_list(request, indices.start, end)


@contextmanager
def instrument(scheduler: Any, sink: EventSink) -> Iterator[None]:
    """Report every block change of ``scheduler`` to ``sink`` while the block runs.

    The methods are replaced on the instances (``scheduler``, its
    ``KVCacheManager`` and ``BlockPool``), so other schedulers in the process are
    untouched; a seeded bug patched onto the class still runs underneath.
    """
    tap = _Tap(scheduler, sink)
    manager, pool = tap.manager, tap.pool
    originals: list[tuple[Any, str]] = []

    def wrap(target: Any, name: str, make: Callable[[Callable[..., Any], str], Callable[..., Any]]) -> None:
        original = getattr(target, name)
        originals.append((target, name))
        setattr(target, name, make(original, _where(original)))

    def allocate_slots(original: Callable[..., Any], at: str) -> Callable[..., Any]:
        def wrapper(request: Any, num_new_tokens: int, num_new_computed_tokens: int = 0,
                    new_computed_blocks: Any = None, *args: Any, **kwargs: Any) -> Any:
            hits = [b.block_id for b in new_computed_blocks.blocks[0] if not b.is_null] if new_computed_blocks is not None else []
            context = _Context(request, hits, request.num_computed_tokens // tap.block_size)
            tap.stack.append(context)
            try:
                result = original(request, num_new_tokens, num_new_computed_tokens, new_computed_blocks, *args, **kwargs)
            finally:
                tap.stack.pop()
            if result is not None:
                start = request.num_computed_tokens + num_new_computed_tokens + kwargs.get("num_external_computed_tokens", 0)
                end = min(start + num_new_tokens, len(request.all_token_ids))
                pages, content = tap.covering(request, start, end)
                if pages:
                    tap.pending[request.request_id] = (pages, content, at)
            return result
        return wrapper

    def free(original: Callable[..., Any], at: str) -> Callable[..., Any]:
        def wrapper(request: Any) -> None:
            tap.stack.append(_Context(request))
            try:
                original(request)
            finally:
                tap.stack.pop()
            if request.is_finished():
                sink.finish(request.request_id, at=at)
                tap.keys.pop(request.request_id, None)
        return wrapper

    def get_new_blocks(original: Callable[..., Any], at: str) -> Callable[..., Any]:
        def wrapper(num_blocks: int) -> Any:
            context = tap.current("get_new_blocks")
            blocks = original(num_blocks)
            sink.alloc(context.request.request_id, [b.block_id for b in blocks], node=NODE, at=at)
            return blocks
        return wrapper

    def touch(original: Callable[..., Any], at: str) -> Callable[..., Any]:
        def wrapper(blocks: Sequence[Any]) -> None:
            context = tap.current("touch")
            pages = [b.block_id for b in blocks if not b.is_null]
            for writer, (written, _, _) in list(tap.pending.items()):
                if writer != context.request.request_id and not set(written).isdisjoint(pages):
                    tap.flush(writer)
            original(blocks)
            request = context.request
            content = []
            for page in pages:
                if page not in context.hits:
                    raise UninstrumentedPathError(f"touch of block {page}, not one of the prefix hits being adopted")
                index = context.first_hit_index + context.hits.index(page)
                content.append(tap.key(request, index))
            if pages:
                sink.share(request.request_id, pages, content, node=NODE, at=at)
        return wrapper

    def cache_full_blocks(original: Callable[..., Any], at: str) -> Callable[..., Any]:
        def wrapper(request: Any, blocks: list[Any], num_cached_blocks: int, num_full_blocks: int,
                    *args: Any, **kwargs: Any) -> None:
            original(request, blocks, num_cached_blocks, num_full_blocks, *args, **kwargs)
            indices = [i for i in range(num_cached_blocks, num_full_blocks) if not blocks[i].is_null]
            if indices:
                content = [tap.key(request, i) for i in indices]
                sink.cache(request.request_id, [blocks[i].block_id for i in indices], content, node=NODE, at=at)
        return wrapper

    def free_blocks(original: Callable[..., Any], at: str) -> Callable[..., Any]:
        def wrapper(ordered_blocks: Any) -> None:
            context = tap.current("free_blocks")
            blocks = list(ordered_blocks)
            original(blocks)
            pages = [b.block_id for b in blocks if not b.is_null]
            if pages:
                sink.free(context.request.request_id, pages, node=NODE, at=at)
        return wrapper

    def schedule(original: Callable[..., Any], at: str) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            tap.pending.clear()
            output = original(*args, **kwargs)
            for req_id in output.num_scheduled_tokens:
                tap.flush(req_id)
            tap.pending.clear()  # requests preempted after their allocation: never computed
            for req_id in output.num_scheduled_tokens:
                request = scheduler.requests[req_id]
                pages, content = tap.covering(request, 0, request.num_computed_tokens)
                if pages:
                    sink.read(req_id, pages, content, node=NODE, at=at)
            return output
        return wrapper

    wrap(manager, "allocate_slots", allocate_slots)
    wrap(manager, "free", free)
    wrap(pool, "get_new_blocks", get_new_blocks)
    wrap(pool, "touch", touch)
    wrap(pool, "cache_full_blocks", cache_full_blocks)
    wrap(pool, "free_blocks", free_blocks)
    wrap(scheduler, "schedule", schedule)
    try:
        yield
    finally:
        for target, name in reversed(originals):
            delattr(target, name)  # the instance attribute goes; the class method shows through again


def monitor_for(scheduler: Any, *, log: Any = None, source: str = "", raise_on_violation: bool = True) -> Any:
    """A ``Monitor`` for this scheduler's block pool, its log header naming vLLM and its version."""
    import vllm

    from ownership.monitor import Monitor

    return Monitor(nodes_of(scheduler), log=log, engine="vllm", engine_version=str(vllm.__version__),
                   source=source, raise_on_violation=raise_on_violation)
