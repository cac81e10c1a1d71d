"""Two calls of one action with different arguments on every path: ``add(1)`` and ``add(2)``.

Both ``n = 1`` and ``n = 2`` are necessary (every path to ``total == 3``
adds each once), and no step has both: the explanation keeps them apart.
"""

from typing import Annotated

from ownership import Spec, require

spec = Spec("two_sizes")
Sizes = spec.values("Sizes", lambda p: [1, 2], doc="how much one add adds")
SizeArg = Annotated[int, Sizes]
spec.var("total", int, init=0, doc="sum so far")
spec.var("adds", int, init=0, doc="adds so far")


@spec.action
def add(s, n: SizeArg):
    require(s.adds < 2 and s.total + n <= 3)
    if n == 1:
        s.total = s.total + 1
    else:
        s.total = s.total + 2
    s.adds = s.adds + 1


@spec.invariant
def total_below_three(s) -> bool:
    return s.total != 3
