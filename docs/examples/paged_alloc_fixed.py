"""The fix for ``paged_alloc``, written as a patch: only client_abort changes."""

import paged_alloc as base
from paged_alloc import Phase, Req, pool

from ownership import require, safe

spec = base.spec.derive(
    "paged_alloc_fixed",
    summary="client abort takes the request out of the batch before freeing its pages",
    expect=safe(),
)


@spec.replace
def client_abort(s, r: Req):
    """FIX: retire r from the running batch, then free its pages."""
    require(s.phase[r] == Phase.RUNNING)
    for p in s.all(pool.Page):
        s.batch_table[r, p] = False
    pool.free(s, r)
    s.phase[r] = Phase.DONE


# What `ownership mutate` finds (docs/spec-guide.md, section 9): the fix's guard can be dropped or
# flipped without breaking an invariant.  Both are accepted, with why, where a reviewer reads them.
spec.accept_mutant(
    "client_abort delete-require: require(s.phase[r] == Phase.RUNNING) => pass",
    reason="aborting a request that is not running is harmless here: it holds no pages and has no batch "
    "entry, so no page changes owner or content",
)
spec.accept_mutant(
    "client_abort flip-compare: require(s.phase[r] == Phase.RUNNING) => require(s.phase[r] != Phase.RUNNING)",
    reason="it only removes behaviour: a fix that never aborts a running request is safe too, and invariants "
    "say what must never happen, not what must be possible; the base spec's counterexample is the abort of "
    "a running request",
)
