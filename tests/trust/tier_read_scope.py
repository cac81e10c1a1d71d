"""A read through the storage tiers that finds no copy: judged by tier_read_matches_index only.

``read_host`` reads item A's host copy through the index while none was ever
made.  The tier read does not touch the pool's read history, so
``no_foreign_read``/``no_read_of_unwritten`` hold; ``tier_read_matches_index``
is the invariant that covers it (docs/vocabulary.md, "Which invariant covers a
tier read").  Expected: violates tier_read_matches_index.
"""

from ownership import Ownership, Spec, require, violates
from ownership.vocab.tiers import Tiers

spec = Spec("tier_read_scope", summary="a tier read with no copy", expect=violates("tier_read_matches_index"))
spec.param("items", 1, min=1, max=1)
Node = spec.domain("Node", "items", names="A")
own = Ownership(spec, requests=Node)
device = own.pool("device", 1, prefix="D")
host = own.pool("host", 1, prefix="H")
tiers = Tiers(own, device, host)
spec.var("done", bool, init=False)


@spec.action
def read_host(s):
    require(not s.done)
    tiers.read(s, 0, host)
    s.done = True


own.invariants("no_foreign_read", "no_read_of_unwritten")
tiers.invariants()
