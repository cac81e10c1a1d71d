"""The tiny allocator with give_back replaced: it reads before freeing, then also checks the count."""

import tiny as base
from tiny import Phase, Req, pool

from ownership import require, safe

spec = base.spec.derive("tiny_derived", expect=safe())


@spec.replace
def give_back(s, r: Req):
    """Free the page (no read)."""
    require(s.phase[r] == Phase.HELD)
    pool.free(s, r)
    s.phase[r] = Phase.DONE


@spec.invariant
def held_means_one_page(s) -> bool:
    """A request holds its one page exactly while HELD."""
    return all((s.phase[r] == Phase.HELD) == (pool.held(s, r) == 1) for r in s.all(Req))


spec.accept_mutant("give_back delete-require: require(s.phase[r] == Phase.HELD) => pass",
                   reason="freeing a request that holds nothing is a no-op")
