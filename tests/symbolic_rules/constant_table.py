"""A constant table indexed by a value read from the state: explore runs it, the Z3 engines cannot."""

from ownership import Enum, Spec, require, safe

spec = Spec("constant_table", expect=safe())
Req = spec.domain("Req", 2, symmetric=True, names="AB")
Kind = Enum("Kind", "SHORT LONG")
PAGES_FOR = (1, 3)  # pages a request of each kind needs
spec.var("kind", Kind, per=Req, init=Kind.SHORT)
spec.var("need", int, per=Req, init=0)


@spec.action
def grow(s, r: Req):
    """A request becomes long."""
    require(s.kind[r] == Kind.SHORT)
    s.kind[r] = Kind.LONG


@spec.action
def plan(s, r: Req):
    """Look up how many pages the request's kind needs."""
    k = s.kind[r]
    s.need[r] = PAGES_FOR[k]


@spec.invariant
def need_fits(s):
    """No request needs more than three pages."""
    return all(s.need[r] <= 3 for r in s.all(Req))
