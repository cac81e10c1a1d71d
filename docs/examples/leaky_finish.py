import paged_alloc_fixed as base
from paged_alloc import Phase, Req, pool

from ownership import require, violates

spec = base.spec.derive(
    "leaky_finish", summary="finish forgets to free the pages", expect=violates("pages_returned_when_idle")
)


@spec.replace
def finish(s, r: Req):
    """Leave the batch but forget to free the pages."""
    require(s.phase[r] == Phase.RUNNING)
    for p in s.all(pool.Page):
        s.batch_table[r, p] = False
    s.phase[r] = Phase.DONE
