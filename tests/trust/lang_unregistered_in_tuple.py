"""Adversarial: ``finish`` lost its ``@spec.action`` but is named in a module-level tuple and ``__all__``.

Those names made the loader think something used it, so it gave no warning and
the checker said PROVED for a protocol in which nobody ever frees a page.
Nothing the spec runs calls ``finish``: the loader reports it (OWN071), and the
verdict is not a pass.
"""

from ownership import Enum, Ownership, Spec, require, safe

spec = Spec("lang_unregistered_in_tuple", summary="an action missing its decorator, named in a tuple", expect=safe())
Req = spec.domain("Req", 2, symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", 2)
Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.write(s, r, pool.alloc(s, r, 1))
    s.phase[r] = Phase.RUNNING


def finish(s, r: Req):  # BUG: no @spec.action
    require(s.phase[r] == Phase.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    pool.free(s, r)
    s.phase[r] = Phase.DONE


STEPS = (start, finish)
HANDLERS = {"finish": finish}
__all__ = ["spec", "start", "finish"]

own.invariants("no_foreign_read", "no_double_ownership")
