"""Adversarial: state writes and indexing that do not match the declared types.

Parameter ``case`` picks the one action that runs; each writes a value of the
wrong type (or indexes with an element of the wrong domain) on its own line.
"""

from ownership import Enum, Optional, SetOf, Spec, require

spec = Spec("scalar_bad_writes", summary="one ill-typed write per case")
spec.param("case", 1, "which bad write runs", min=1, max=6)
Req = spec.domain("Req", 2, symmetric=True, names="AB")
Page = spec.domain("Page", 2, symmetric=True)
Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)
spec.var("done", bool, per=Req, init=False)
spec.var("owner", Optional(Req), per=Page, init=None)
spec.var("readers", SetOf(Req), per=Page, init=0)


@spec.action
def enum_int(s, r: Req):
    require(s.params.case == 1)
    s.phase[r] = 7


@spec.action
def bool_int(s, r: Req):
    require(s.params.case == 2)
    s.done[r] = 5


@spec.action
def enum_str(s, r: Req):
    require(s.params.case == 3)
    s.phase[r] = "RUNNING"


@spec.action
def ref_other_domain(s, p: Page):
    require(s.params.case == 4)
    s.owner[p] = p


@spec.action
def set_negative(s, p: Page):
    require(s.params.case == 5)
    s.readers[p] = -1


@spec.action
def page_indexes_req(s, p: Page):
    require(s.params.case == 6)
    require(s.done[p])


@spec.invariant
def nothing_done(s):
    return not all(s.done[r] for r in s.all(Req))
