"""text-generation-inference v3 router before PR #2489: prefix blocks published without prefill.

Models prefix caching in the v3 backend's router (backends/v3/src/) as of
commit b70ae096 ("Prefix caching", PR #2402), the parent of the hotfix:

* ``queue.rs State::next_batch`` takes entries off the queue and allocates
  their blocks (``block_allocator.rs BlockAllocator::allocate`` ->
  ``radix.rs RadixAllocator::allocate``: ``RadixTrie::find`` of the
  prompt, ``incref`` of the prefix node, ``alloc_or_reclaim`` of the
  suffix blocks, evicting unreferenced leaves when the free list is short);
  if the finished batch is smaller than ``min_size`` the entries are pushed
  back onto the queue and nothing is sent to the shards;
* ``backend.rs batching_task`` passes ``min_size =
  Some(floor(batch_size * waiting_served_ratio))`` while a batch is running;
* the shard's prefill computes the KV of the blocks past ``prefix_len`` and
  attends over all of them;
* ``RadixAllocator::free`` (run by ``BlockAllocation::drop``) decrefs the
  prefix node and **inserts the allocation's prompt blocks into the trie**,
  assuming the prefill wrote them; blocks the trie already had and the
  non-prompt blocks go back to the free list.

Known bug (PR #2489: "The minimum batch size logic could cause prefix blocks
to be deallocated without prefill. The next allocation of the same prefix
would then use garbage blocks."): a batch below ``min_size`` is pushed back
after its allocations were made; dropping such an allocation runs ``free``,
which publishes blocks nobody wrote; the next allocation of that prefix gets
them as cached KV and the shard skips their prefill.

Simplified: every prompt is one shared full block ``x`` and a partial last
block; its allocation is one page for ``x`` unless the trie has it, plus one
page for the partial block and the generated tokens (``extra=1``), which is
never inserted.  (A second key, ``{"x": None, "xy": "x"}``, explores in well
under a second but makes the Z3 engine minutes slower; see the tests for
larger instances.)  A batch is
one entry, and whether it is below ``min_size`` is left open whenever a
batch is running (the real threshold depends on ``waiting_served_ratio``).
The pushed-back entry's allocation is dropped when it is pushed back;
upstream drops it when the next ``next_batch`` overwrites
``entry.block_allocation`` after allocating again, so there the garbage
blocks are hit by the next allocation of the prefix after that (the next
entry of the same batch, or the entry's own next attempt): the same blocks
are published, one allocation later.  A failed allocation leaves the trie as
it was (upstream, ``alloc_or_reclaim`` may already have evicted some leaves).
Eviction picks any unreferenced leaf (the LRU order is not modelled).
"""

from typing import Annotated

from ownership import Element, Enum, Optional, Ownership, Source, Spec, require, violates
from ownership.vocab.prefix import PrefixIndex

spec = Spec(
    "tgi_prefix_published_before_write_buggy",
    summary="TGI v3 prefix caching: a batch below min_size frees its allocation, publishing unwritten blocks",
    models=Source(
        "text-generation-inference",
        "b70ae096 (before PR #2489)",
        where=(
            "backends/v3/src/queue.rs State::next_batch",
            "backends/v3/src/backend.rs batching_task (min_size)",
            "backends/v3/src/radix.rs RadixAllocator::allocate, RadixAllocator::free, RadixTrie::find/insert/evict",
            "backends/v3/src/block_allocator.rs BlockAllocation::drop",
        ),
        links=("text-generation-inference PR #2489", "text-generation-inference PR #2498"),
    ),
    expect=violates("prefix_hit_written"),
)
spec.param("requests", 2, "concurrent requests modelled", min=1, max=3)
spec.param("blocks", 4, "KV blocks (max_batch_total_tokens / block_size)", min=1, max=6)

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "blocks", prefix="K")
# Every prompt is the same full block x (plus its partial last block): the prefix all requests share.
trie = PrefixIndex(pool, "trie", {"x": None})
TrieNodeId = Annotated[int, trie.Node]  # the type of an action argument drawn from trie.Node

Phase = Enum("Phase", "IDLE QUEUED BATCHED RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE, doc="where the entry is")
spec.var("prompt", Optional(trie.Node), per=Req, init=None, doc="the prompt's last full block")
spec.var("prefix_node", Optional(trie.Node), per=Req, init=None,
         doc="RadixAllocation.prefix_node: the trie node found for the prompt (none: root)")


def allocate(s, r: ReqId, prompt) -> None:
    """RadixAllocator::allocate: find the cached prefix, incref it, allocate the suffix blocks."""
    node = trie.match(s, r, prompt)  # RadixTrie::find(prefill_tokens)
    trie.add_ref(s, node, 1)  # incref(prefix_node): the prefix found is not evicted
    trie.alloc(s, r, prompt, node, extra=1)  # alloc_or_reclaim(suffix_blocks); None: stays queued
    s.prefix_node[r] = node


def free_allocation(s, r: ReqId, prompt) -> None:
    """RadixAllocator::free (BlockAllocation::drop): decref, insert the prompt blocks, free the rest."""
    trie.add_ref(s, s.prefix_node[r], -1)
    trie.insert(s, r, prompt)  # "add them to the cache": written or not
    trie.release(s, r)  # blocks the trie already had, and the non-prompt blocks
    s.prefix_node[r] = None


def batch_running(s) -> bool:
    """batching_task computes a min_size only while a batch is running."""
    return any(s.phase[q] == Phase.RUNNING for q in s.all(Req))


@spec.action
def arrive(s, r: ReqId, prompt: TrieNodeId):
    """Queue::append: the request joins the queue."""
    require(s.phase[r] == Phase.IDLE)
    s.prompt[r] = prompt
    s.phase[r] = Phase.QUEUED


@spec.action
def next_batch(s, r: ReqId, prompt: TrieNodeId):
    """State::next_batch: allocate the entry's blocks and send the batch to the shards."""
    require(s.phase[r] == Phase.QUEUED and s.prompt[r] == prompt)
    allocate(s, r, prompt)
    s.phase[r] = Phase.BATCHED


@spec.action
def next_batch_below_min_size(s, r: ReqId, prompt: TrieNodeId):
    """State::next_batch with min_size: allocated, batch too small, entry pushed back, allocation dropped."""
    require(s.phase[r] == Phase.QUEUED and s.prompt[r] == prompt)
    require(batch_running(s))  # min_size = Some(floor(batch_size * waiting_served_ratio))
    allocate(s, r, prompt)
    free_allocation(s, r, prompt)  # BUG: RadixAllocator::free publishes blocks no prefill wrote
    s.phase[r] = Phase.QUEUED


@spec.action
def prefill(s, r: ReqId):
    """Shard prefill: write the KV of the blocks past prefix_len, attend over all blocks."""
    require(s.phase[r] == Phase.BATCHED)
    trie.write(s, r)
    trie.read(s, r)
    s.phase[r] = Phase.RUNNING


@spec.action
def finish(s, r: ReqId, prompt: TrieNodeId):
    """The request finishes: its BlockAllocation is dropped (RadixAllocator::free)."""
    require(s.phase[r] == Phase.RUNNING and s.prompt[r] == prompt)
    free_allocation(s, r, prompt)
    s.phase[r] = Phase.DONE


@spec.terminal
def nothing_in_flight(s) -> bool:
    """No entry holds an allocation."""
    return all(s.phase[r] in (Phase.IDLE, Phase.QUEUED, Phase.DONE) for r in s.all(Req))


own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership")
trie.invariants("prefix_hit_written", "prefix_read_matches", "lock_refs_nonnegative", "no_evict_in_use",
                "index_pages_exclusive", "free_count_at_most_one", "pages_accounted_when_idle")
