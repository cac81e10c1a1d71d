"""Idiom: allocation (a choice) inside an if merged by the Z3 engines; its choices replay only where taken."""

from ownership import Enum, Ownership, Spec, require, violates

spec = Spec("idiom_guarded_alloc", summary="alloc and choose inside a merged if", expect=violates("no_foreign_read"))
spec.param("requests", 2)
spec.param("pages", 2)
Req = spec.domain("Req", "requests", symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Phase = Enum("Phase", "WAITING RUNNING")
spec.var("phase", Phase, per=Req, init=Phase.WAITING)
spec.var("batch_table", bool, per=(Req, pool.Page), init=False)

@spec.action
def admit_all(s):
    for r in s.all(Req):
        if s.phase[r] == Phase.WAITING and pool.available(s) >= 1:
            for p in pool.alloc(s, r, 1):
                pool.write(s, r, [p])
                s.batch_table[r, p] = True
            s.phase[r] = Phase.RUNNING

@spec.action
def client_abort(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pool.free(s, r)
    s.phase[r] = Phase.WAITING

@spec.action
def decode_step(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pool.read(s, r, [p for p in s.all(pool.Page) if s.batch_table[r, p]])

own.invariants("no_foreign_read")
