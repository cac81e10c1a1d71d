"""finish frees `pages + pages`: the page table concatenated with itself, every page listed twice.

The explorer finds the double free (no_double_ownership, 3 steps); bmc and
prove refused the spec ("unsupported operand type(s) for +: 'SymPages'"):
the page set pages_of returns under the Z3 engines did not concatenate as
the concrete list does.
"""

from ownership import Enum, Ownership, Spec, require, violates

spec = Spec("enc_page_table_added_twice", expect=violates("no_double_ownership"))
spec.param("requests", 2, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Page = pool.Page
Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)

@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.alloc(s, r, 1)
    s.phase[r] = Phase.RUNNING

@spec.action
def finish(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pages = pool.pages_of(s, r)
    pool.free_pages(s, r, pages + pages)
    s.phase[r] = Phase.DONE

own.invariants("no_double_ownership")
