"""Defects put back into SGLang 0.5.23 for the monitor to catch (``sglang_workload.run(bug=...)``).

Each function takes the SGLang modules and the scheduler of one run, changes
one thing in the engine and returns the callable that changes it back.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any


def double_free_of_the_last_decode_slot(sg: SimpleNamespace, s: Any) -> Callable[[], None]:
    """Puts back a double free: the finished request's last KV slot is freed before the release frees it again.

    The defect sgl-project/sglang-jax#982 describes (and fixes by porting
    upstream SGLang PR #12224): the output processor freed ``out_cache_loc``
    of a finished request while ``cache_finished_req`` freed the same slot
    with the rest of the row.
    """
    common = sg.common
    real = common.release_kv_cache

    def release_kv_cache(req: Any, tree_cache: Any, *, checkpoint: bool) -> None:
        n = req.kv.kv_committed_len
        if checkpoint and req.finished() and len(req.output_ids) > 1:
            row = tree_cache.req_to_token_pool.req_to_token[req.kv.req_pool_idx]
            tree_cache.token_to_kv_pool_allocator.free(row[n - 1:n].to(sg.torch.int64))
        real(req, tree_cache, checkpoint=checkpoint)

    common.release_kv_cache = release_kv_cache

    def undo() -> None:
        common.release_kv_cache = real
    return undo


def checkpoint_without_remapping_the_row(sg: SimpleNamespace, s: Any) -> Callable[[], None]:
    """Puts back a stale row: ``RadixCache.checkpoint`` frees the request's duplicate pages but leaves its row on them.

    ``checkpoint`` inserts the request's KV; where the tree already had the
    prefix (another request of the same batch finished and inserted it first)
    it frees the request's own copies and rewrites the request's
    ``req_to_token`` row to the tree's pages.  Without that rewrite the running
    request goes on reading pages it no longer holds: the defect
    sgl-project/mini-sglang#142 fixes in mini-sglang's ``cache_req``.
    """
    tree = s.tree
    real = type(tree).checkpoint

    def checkpoint(req: Any, *, up_to: int) -> None:
        pool = tree.req_to_token_pool
        pool.write = lambda indices, values: None  # the remap is checkpoint's only row write
        try:
            real(tree, req, up_to=up_to)
        finally:
            del pool.write

    tree.checkpoint = checkpoint

    def undo() -> None:
        del tree.checkpoint
    return undo


def checkpoint_that_releases_its_new_lock(sg: SimpleNamespace, s: Any) -> Callable[[], None]:
    """Puts back a lock/unlock asymmetry: after ``checkpoint`` re-locks the request's new node, the lock is dropped.

    A reintroduced defect class, not a known upstream bug: the request keeps
    running on a path whose ``lock_ref`` no longer counts it, so eviction may
    free the pages it reads and hand them to another request.  (The release
    that follows unlocks nothing: ``req.lock`` is None.)
    """
    tree = s.tree
    real = type(tree).checkpoint

    def checkpoint(req: Any, *, up_to: int) -> None:
        real(tree, req, up_to=up_to)
        tree.unlock(req.lock)
        req.lock = None

    tree.checkpoint = checkpoint

    def undo() -> None:
        del tree.checkpoint
    return undo
