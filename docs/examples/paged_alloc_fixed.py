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
