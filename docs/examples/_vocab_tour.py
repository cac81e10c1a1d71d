"""Run each page-pool operation in isolation and print what it does.

    python docs/examples/_vocab_tour.py

The output is quoted in docs/vocabulary.md.  Each section builds a one-action
spec, runs the action on the initial state through the concrete semantics
(every outcome of its ``s.choose`` calls) and prints the resulting pool
cells, the invariant the state violates (if any) and the events.  The file
name starts with ``_`` so ``ownership list``/``test`` skip it.
"""

from ownership import Ownership, Spec, transfer
from ownership.lang.instance import Instance


def one_pool(pages: int, invariants: tuple[str, ...] = ("no_double_ownership",)) -> tuple[Spec, object]:
    spec = Spec("tour")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    own.invariants(*invariants)
    return spec, pool


def run(spec: Spec, body, fields: tuple[str, ...], events: bool = True) -> None:
    spec.action(body)
    inst = Instance(spec)
    outs = inst.successors_of(inst.init_state, inst.action_instances[0])
    print(f"{len(outs)} outcome(s)")
    for o in outs:
        st = inst.to_json(o.state)
        print(" ", {k: st[k] for k in fields}, "violates:", inst.violated(o.state))
        if events:
            for e in o.events:
                print("    event", e.to_json())


print("== alloc: 2 pages out of 3 free")
spec, pool = one_pool(3)


def take_two(s):
    pool.alloc(s, 0, 2)


run(spec, take_two, ("kv_free", "kv_slot"))

print("== alloc: not enough free pages")
spec, pool = one_pool(1)


def take_two_of_one(s):
    pool.alloc(s, 0, 2)


run(spec, take_two_of_one, ())

print("== write, free, reuse, read")
spec, pool = one_pool(1, ("no_foreign_read",))


def reuse(s):
    a = pool.alloc(s, 0, 1)
    pool.write(s, 0, a)
    pool.free(s, 0)
    b = pool.alloc(s, 1, 1)
    pool.read(s, 1, b)


run(spec, reuse, ("kv_holders", "kv_content", "read_foreign"))

print("== read of a page nobody wrote")
spec, pool = one_pool(1, ("no_read_of_unwritten",))


def read_fresh(s):
    pool.read(s, 0, pool.alloc(s, 0, 1))


run(spec, read_fresh, ("kv_content", "read_unwritten"))

print("== write without holding the page")
spec, pool = one_pool(2, ("no_unowned_write",))


def stray(s):
    pool.write(s, 1, [0])


run(spec, stray, ("kv_holders", "kv_content", "wrote_unowned"))

print("== double free, then the page is allocated again")
spec, pool = one_pool(1, ("no_double_ownership",))


def double_free(s):
    pages = pool.alloc(s, 0, 1)
    pool.free_pages(s, 0, pages)
    pool.free_pages(s, 0, pages)  # a stale copy of the page list is freed again
    print("  available after the double free:", pool.available(s))
    pool.alloc(s, 1, 1)


run(spec, double_free, ("kv_free", "kv_holders"), events=False)

print("== transfer: 1 prefill page into a 3-page decode table")
spec = Spec("tour_transfer")
Req = spec.domain("Req", 1, names="A")
own = Ownership(spec, requests=Req)
prefill = own.pool("prefill", 1, prefix="P")
decode = own.pool("decode", 3, prefix="D")
own.invariants("no_read_of_unwritten")


def send_one_page(s):
    prefill.write(s, 0, prefill.alloc(s, 0, 1))
    decode.alloc(s, 0, 3)
    transfer(s, 0, prefill, decode, 1)
    decode.read(s, 0, decode.pages_of(s, 0))


spec.action(send_one_page)
inst = Instance(spec)
outs = inst.successors_of(inst.init_state, inst.action_instances[0])
first = outs[0]
st = inst.to_json(first.state)
print(f"{len(outs)} outcome(s); the first:")
print(" ", {k: st[k] for k in ("decode_slot", "decode_content", "read_unwritten")}, "violates:", inst.violated(first.state))
for e in first.events:
    print("    event", e.to_json())

print("== transfer: 2 prefill pages into a 1-page decode table")
spec = Spec("tour_overflow")
Req = spec.domain("Req", 1, names="A")
own = Ownership(spec, requests=Req)
prefill = own.pool("prefill", 2, prefix="P")
decode = own.pool("decode", 2, prefix="D")
own.invariants("no_unowned_write")


def overflow(s):
    prefill.write(s, 0, prefill.alloc(s, 0, 2))
    decode.alloc(s, 0, 1)
    transfer(s, 0, prefill, decode, 2)


spec.action(overflow)
inst = Instance(spec)
first = inst.successors_of(inst.init_state, inst.action_instances[0])[0]
st = inst.to_json(first.state)
print(" ", {k: st[k] for k in ("decode_content", "wrote_unowned")}, "violates:", inst.violated(first.state))
for e in first.events:
    if e.kind in ("write", "transfer") and e.get("pool") != "prefill":
        print("    event", e.to_json())
