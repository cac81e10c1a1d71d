"""vLLM block manager with a sliding window, after PR #3347: references counted per distinct block.

Written as the patch on ``vllm_fork_double_free_buggy`` (compare with the
upstream diff of vLLM PR #3347, "Fixes #1556 double free"):

* ``BlockSpaceManager.fork``: ``for block in set(src_block_table):
  block.ref_count += 1``: a table that names a block twice holds one
  reference to it;
* ``BlockSpaceManager._free_block_table``: ``blocks_to_free =
  block_table[-self.block_sliding_window:]``, then ``for block in
  set(blocks_to_free)``: only the live window is freed, so a block whose
  reference copy-on-write already dropped (an older entry outside the
  window) is not freed again.

Expected: safe at the default size (the configuration of the PR's
regression test: window 2, a prompt of 3 blocks, one decode step each).
"""


import vllm_fork_double_free_buggy as base
from vllm_fork_double_free_buggy import Phase, Seq, SeqId, blocks

from ownership import Source, require, safe

spec = base.spec.derive(
    "vllm_fork_double_free_fixed",
    summary="vLLM after PR #3347: fork counts each block once, free releases only the live window",
    models=Source(
        "vLLM",
        "0.4.0",
        where=("vllm/core/block_manager.py BlockSpaceManager.fork, _free_block_table",),
        links=("vllm issue #1556", "vllm PR #3347"),
    ),
    expect=safe(),
)


@spec.replace
def fork(s, parent: SeqId, child: SeqId):
    """BlockSpaceManager.fork: copy the table; ref_count += 1 once per distinct block (FIX: set())."""
    require(parent != child and s.status[parent] == Phase.RUNNING and s.status[child] == Phase.IDLE)
    n = blocks.copy_table(s, parent, child)
    blocks.incref(s, parent, range(n), per_block=True)  # FIX: for block in set(src_block_table)
    s.status[child] = Phase.RUNNING


@spec.replace
def free(s, r: SeqId):
    """BlockSpaceManager.free: _free_block_table over set(block_table[-W:]) (FIX: the live window)."""
    require(s.status[r] == Phase.RUNNING)
    n = blocks.length(s, r)
    blocks.free(s, r, blocks.live(s, n))  # FIX: set(block_table[-self.block_sliding_window:])
    blocks.truncate(s, r)
    s.status[r] = Phase.FINISHED


# What the fix must keep, beyond the invariant the buggy version breaks: every block's
# count is the number of live windows naming it (so no block is freed early or kept forever).
blocks.invariants("refcount_matches_tables", spec=spec)


@spec.invariant
def tables_match_status(s) -> bool:
    """A running sequence's table holds at least its prompt; an idle or finished one's is empty."""
    for r in s.all(Seq):
        n = blocks.length(s, r)
        if s.status[r] == Phase.RUNNING:
            if n < s.params.prompt_blocks:
                return False
        elif n != 0:
            return False
    return True


spec.accept_mutant(
    "free delete-require: require(s.status[r] == Phase.RUNNING) => pass",
    reason="freeing a sequence that is not running frees an empty table: a no-op, as in vLLM's "
    "BlockSpaceManager.free (a sequence without a block table returns early)",
)
