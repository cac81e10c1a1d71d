"""vLLM <=0.3.3 block manager with a sliding window: fork and free count a shared block twice.

Models ``vllm/core/block_manager.py`` (``BlockSpaceManager``, the v1 block
manager) as shipped before vLLM PR #3347, for a model with a sliding window
(Mistral v0.1, OpenChat 3.5: ``sliding_window=4096``), block size 1 so that
every token is one logical block (the configuration of the PR's regression
test ``test_sliding_window_multi_seq``):

* ``allocate``: the prompt's blocks; logical block ``i >= W`` reuses
  ``block_table[i % W]`` (``W = block_sliding_window``), so a prompt longer
  than the window names a physical block twice; ``ref_count = num_seqs``;
* ``fork``: the child gets a copy of the parent's table, and
  ``for block in src_block_table: block.ref_count += 1``, once per *entry*;
* ``append_slot``: a new token's block (a fresh one, or beyond the window the
  reused ``block_table[len % W]``); if the last block is shared
  (``ref_count > 1``) copy-on-write: a new block replaces the entry and
  ``gpu_allocator.free(last_block)`` drops this sequence's reference;
* ``free`` / ``_free_block_table``: ``for block in set(block_table):
  gpu_allocator.free(block)``, over the *whole* table;
* ``BlockAllocator.free``: ``if block.ref_count == 0: raise
  ValueError("Double free!")``; ``ref_count -= 1``; at 0 the block returns to
  the free list.

The bug (vLLM issue #1556, "ValueError: Double free!"): once a table outgrows
the window, copy-on-write replaces only the *newest* entry for a reused
block; the older entry still names the old block, whose reference this
sequence already dropped.  ``_free_block_table`` frees that block again: it
goes back on the free list while the sibling sequence still attends over it,
and when the sibling finishes, its free raises "Double free!".  Fork adds to
the miscount: a prompt longer than the window names a block twice and fork
counts it twice.

Simplified: block size 1 (every decode step adds a logical block); each
sequence is its own group except for fork (parallel sampling: ``fork``
copies a running sequence's table into an idle one at any time, which also
covers beam search forking); the scheduler's watermark is 0; swapping and
prefix caching are left out.  The allocator's ``ValueError`` is modelled as
the count dropping to -1 (``refcount_nonnegative``); the premature return to
the free list that precedes it is ``no_free_while_referenced``.
"""

from typing import Annotated

from ownership import Element, Enum, Source, Spec, require, violates
from ownership.vocab.refcount import BlockTables

spec = Spec(
    "vllm_fork_double_free_buggy",
    summary="vLLM <=0.3.3 sliding window: copy-on-write then _free_block_table frees a shared block twice",
    models=Source(
        "vLLM",
        "0.3.3",
        where=(
            "vllm/core/block_manager.py BlockSpaceManager.allocate, append_slot, fork, _free_block_table",
            "vllm/core/block_manager.py BlockAllocator.free",
        ),
        links=("vllm issue #1556", "vllm PR #3347"),
    ),
    expect=violates("no_free_while_referenced"),
)

spec.param("seqs", 2, "sequences (a parent and its forked child)", min=1, max=3)
spec.param("num_gpu_blocks", 4, "GPU KV blocks", min=1, max=6)
spec.param("window", 2, "block_sliding_window = sliding_window // block_size", min=1)
spec.param("prompt_blocks", 3, "prompt length in blocks (block size 1: tokens)", min=1)
spec.param("max_blocks", 4, "longest sequence in blocks (prompt plus decode steps)", min=1, max=6)

Seq = spec.domain("Seq", "seqs", symmetric=True, names="ABC")
SeqId = Annotated[Element, Seq]  # the type of an action argument drawn from Seq
blocks = BlockTables(spec, Seq, "num_gpu_blocks", "max_blocks", window="window", name="gpu", prefix="B")
Phase = Enum("SeqStatus", "IDLE RUNNING FINISHED")
spec.var("status", Phase, per=Seq, init=Phase.IDLE, doc="sequence status")


@spec.action
def allocate(s, r: SeqId):
    """BlockSpaceManager.allocate: the prompt's blocks; beyond the window, block_table[i % W] again."""
    require(s.status[r] == Phase.IDLE)
    w = s.params.window
    for i in range(s.params.prompt_blocks):
        if i >= w:
            block = blocks.entry(s, r, i % w)  # reuse a block
        else:
            block = blocks.allocate(s, r)
        blocks.append(s, r, block)  # ref_count = num_seqs (1): already 1
    s.status[r] = Phase.RUNNING


@spec.action
def fork(s, parent: SeqId, child: SeqId):
    """BlockSpaceManager.fork: copy the table; ref_count += 1 for every entry (BUG: per entry)."""
    require(parent != child and s.status[parent] == Phase.RUNNING and s.status[child] == Phase.IDLE)
    n = blocks.copy_table(s, parent, child)
    blocks.incref(s, parent, range(n))  # for block in src_block_table
    s.status[child] = Phase.RUNNING


@spec.action
def append_slot(s, r: SeqId):
    """BlockSpaceManager.append_slot: a block for the new token; copy-on-write if the last one is shared."""
    require(s.status[r] == Phase.RUNNING)
    n = blocks.length(s, r)
    require(n < s.params.max_blocks)
    w = s.params.window
    if n >= w:
        blocks.append(s, r, blocks.entry(s, r, n % w))  # reuse a block
    else:
        blocks.append(s, r, blocks.allocate(s, r))
        return
    last = blocks.entry(s, r, n)
    if blocks.refcount_is(s, last, 1):  # last_block.ref_count == 1
        return  # not shared: append in place
    new_block = blocks.allocate(s, r)  # copy on write
    blocks.set_entry(s, r, n, new_block)
    blocks.decref(s, r, last)  # gpu_allocator.free(last_block)


@spec.action
def free(s, r: SeqId):
    """BlockSpaceManager.free: _free_block_table over set(block_table) (BUG: the whole table)."""
    require(s.status[r] == Phase.RUNNING)
    n = blocks.length(s, r)
    blocks.free(s, r, range(n))  # for block in set(block_table)
    blocks.truncate(s, r)
    s.status[r] = Phase.FINISHED


@spec.terminal
def all_finished(s) -> bool:
    """No sequence is running."""
    return all(s.status[r] != Phase.RUNNING for r in s.all(Seq))


blocks.invariants("refcount_nonnegative", "free_list_once", "no_free_while_referenced")
