"""text-generation-inference v3 router with PR #2489: no allocation is dropped before its prefill.

Written as the patch on top of ``tgi_prefix_published_before_write_buggy``.
The hotfix (commit deec30f8, ``backends/v3/src/backend.rs batching_task``)
replaces ``Some((batch_size as f32 * waiting_served_ratio).floor() as
usize)`` by ``None``: ``State::next_batch`` gets no minimum batch size, so
it never pushes back a batch whose blocks it has allocated, and
``RadixAllocator::free`` (which still publishes every allocation's prompt
blocks) only runs for allocations whose prefill wrote them.  The action for
that branch of ``next_batch`` is replaced by one that is never enabled.

PR #2498 later restored the minimum batch size with the check moved before
any allocation ("We haven't allocated yet, so we're allowed to ditch the
results"); in this model a push-back before allocating changes nothing, so
both fixes give the same reachable states.

Expected: safe; every block in the trie was written by the prefill of the
allocation that published it.
"""


import tgi_prefix_published_before_write_buggy as base
from tgi_prefix_published_before_write_buggy import Phase, ReqId, TrieNodeId

from ownership import Source, require, safe

spec = base.spec.derive(
    "tgi_prefix_published_before_write_fixed",
    summary="TGI v3 prefix caching with PR #2489: no minimum batch size, allocations are freed only after prefill",
    models=Source(
        "text-generation-inference",
        "deec30f8 (PR #2489)",
        where=("backends/v3/src/backend.rs batching_task (min_size = None)", "backends/v3/src/queue.rs State::next_batch"),
        links=("text-generation-inference PR #2489", "text-generation-inference PR #2498"),
    ),
    expect=safe(),
)


@spec.replace
def next_batch_below_min_size(s, r: ReqId, prompt: TrieNodeId):
    """FIX: batching_task passes min_size = None, so next_batch never pushes back an allocated batch."""
    require(False)


spec.may_be_dead(
    "next_batch_below_min_size",
    reason="the fix removes this branch of next_batch (min_size = None): it must never fire",
)


# What the fix is for, on every fair path: a finished request's blocks go to the trie or back to the pool
# (pages_return), and a queued request finishes (requests_finish).  The router's and shards' own steps
# are weakly fair (batching, prefill, finishing); arrive stays unfair.
for _step in ("next_batch", "prefill", "finish"):
    spec.fair(_step, "weak")
base.own.properties("pages_return", "requests_finish", spec=spec,
                    ended=lambda s, r: s.phase[r] == Phase.DONE,
                    started=lambda s, r: s.phase[r] != Phase.IDLE)
