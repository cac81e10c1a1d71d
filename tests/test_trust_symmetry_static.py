"""No int, position, name, string or salted hash of a symmetric element reaches spec code.

Each adversarial spec in ``tests/trust/sym_static_*.py`` gets an order out of
interchangeable elements through one channel; each is refused with OWN060
(OWN063 for iterating a table over two domains) at the line that did it,
with symmetry reduction on or off.  Before, they were answered PROVED, or
refused only by the sampled permutation check at the action's declaration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from ownership import Optional, SetOf, Spec, require
from ownership.core.result import Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.errors import Code, OwnershipError
from ownership.lang.elements import Element
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

TRUST = Path(__file__).parent / "trust"
ROOT = Path(__file__).parent.parent

# spec -> (code, the start of the line that must be named)
REFUSED = {
    "sym_static_int_leader": (Code.SYMMETRY_BROKEN, "s.leader = 0"),
    "sym_static_int_index": (Code.SYMMETRY_BROKEN, "require(r == r and s.started[0]"),
    "sym_static_position": (Code.SYMMETRY_BROKEN, "first = s.all(Req)[0]"),
    "sym_static_index_of": (Code.SYMMETRY_BROKEN, "k = s.all(Req).index(r)"),
    "sym_static_enumerate_table": (Code.SYMMETRY_BROKEN, "for k, w in enumerate(s.waiting)"),
    "sym_static_mask": (Code.SYMMETRY_BROKEN, "require(s.holders[p] & 1 == 0)"),
    "sym_static_mask_write": (Code.SYMMETRY_BROKEN, "s.holders[p] = 1"),
    "sym_static_private": (Code.SYMMETRY_BROKEN, "require(r._i == 0"),
    "sym_static_name": (Code.SYMMETRY_BROKEN, 'require(s.name_of(Req, r) == "A")'),
    "sym_static_min_str": (Code.SYMMETRY_BROKEN, "s.resident[min(victims, key=str)]"),
    "sym_static_name_dict": (Code.SYMMETRY_BROKEN, 'require(f"{r}" in PRIORITY)'),
    "sym_static_two_domain_sum": (Code.WRONG_DOMAIN, "return sum(s.mapped) <= 1"),
}


def line_of(path: Path, text: str) -> int:
    for k, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip().startswith(text):
            return k
    raise AssertionError(f"{text!r} not in {path}")


@pytest.mark.parametrize("name", sorted(REFUSED))
@pytest.mark.parametrize("symmetry", [True, False])
def test_every_channel_is_refused_at_its_line(name: str, symmetry: bool) -> None:
    path = TRUST / f"{name}.py"
    code, text = REFUSED[name]
    with pytest.raises(OwnershipError) as exc:
        explore(Instance(load_spec(path)), ExploreOptions(symmetry=symmetry))
    assert exc.value.code is code, exc.value.one_line()
    assert exc.value.file is not None and Path(exc.value.file).resolve() == path.resolve()
    assert exc.value.line == line_of(path, text), exc.value.one_line()


def test_a_table_over_two_domains_summed_by_values_finds_the_violation() -> None:
    result = explore(Instance(load_spec(TRUST / "sym_static_two_domain_sum_fixed.py")))
    assert result.verdict is Verdict.VIOLATED and result.violated == "one_mapping"
    assert result.trace is not None and len(result.trace) == 2


def test_sets_items_and_emitted_elements_are_what_a_symmetric_spec_uses() -> None:
    inst = Instance(load_spec(TRUST / "sym_static_sets_ok.py"))
    reduced = explore(inst)
    full = explore(Instance(load_spec(TRUST / "sym_static_sets_ok.py")), ExploreOptions(symmetry=False))
    assert reduced.verdict is Verdict.PROVED and full.verdict is Verdict.PROVED
    assert reduced.stats.states < full.stats.states
    # The view names an emitted element for the trace (spec code never sees the name).
    ai = inst.find_instance("share", (1, 0))
    with inst.mode(recording=True):
        (succ,) = inst.successors_of(inst.init_state, ai)
    assert [dict(e.payload()) for e in succ.events if e.kind == "share"] == [{"req": "B", "page": "P"}]


def test_element_hash_is_the_same_in_every_run() -> None:
    code = ("from ownership.lang.elements import Element; "
            "print(hash(Element('Req', 0, 'A')), hash(Element('Req', 1, 'B')))")
    seen = set()
    for seed in ("1", "2", "random"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        seen.add(out.stdout.strip())
    assert seen == {f"{zlib.crc32(b'Req')} {zlib.crc32(b'Req')}"}


def _spec(symmetric: bool) -> Spec:
    spec = Spec("ints", summary="ints name elements of ordered domains")
    Req = spec.domain("Req", 2, symmetric=symmetric, ordered=not symmetric)
    spec.var("lead", Optional(Req), init=None)
    spec.var("set", SetOf(Req), init=0)
    spec.var("run", bool, per=Req, init=False)

    @spec.action
    def go(s):  # type: ignore[no-untyped-def]
        require(s.lead is None)
        s.lead = 0
        s.set = 1
        s.run[0] = True
        assert list(s.all(Req))[0] is not None and sum(s.run) <= 1

    spec.invariant(lambda s: True, name="ok")
    return spec


def test_ints_stay_fine_for_ordered_domains() -> None:
    inst = Instance(_spec(symmetric=False))
    (succ,) = inst.successors_of(inst.init_state, inst.find_instance("go", ()))
    assert succ.state == (0, 1, True, False)
    inst = Instance(_spec(symmetric=True))
    with pytest.raises(OwnershipError) as exc:
        inst.successors_of(inst.init_state, inst.find_instance("go", ()))
    assert exc.value.code is Code.SYMMETRY_BROKEN and "writes the int 0 into lead" in exc.value.message


def test_spec_code_sees_sets_of_elements_and_no_positions() -> None:
    spec = Spec("views")
    Req = spec.domain("Req", 3, symmetric=True, names="ABC")
    Page = spec.domain("Page", 2, names="PQ")
    spec.var("holders", SetOf(Req), per=Page, init=0)
    spec.var("n", int, per=(Req, Page), init=0)
    spec.var("batch", SetOf(Req), init=0)
    spec.invariant(lambda s: True, name="ok")
    seen: dict[str, object] = {}

    @spec.action
    def look(s, r: Req):  # type: ignore[no-untyped-def]
        s.holders[0] = s.holders[0] | {r}
        s.batch = s.batch | {r}  # a scalar set reads as a set of elements too
        reqs = s.all(Req)
        seen.update(held=s.holders[0], len=len(reqs), has=r in reqs, listed=list(reqs),
                    items=s.n.items(), empty=s.holders[1] == 0, nonempty=s.holders[0] != 0)
        for bad in (lambda: reqs[0], lambda: reqs.index(r), lambda: s.holders[0] & 1, lambda: s.holders[0] > 0,
                    lambda: s.holders[0] == 1, lambda: list(s.n), lambda: s.name_of(Req, r), lambda: repr(r),
                    lambda: r._name, lambda: r._domain, lambda: str(s.holders[0]), lambda: s.batch & 2):
            with pytest.raises(OwnershipError) as exc:
                bad()
            assert exc.value.code in (Code.SYMMETRY_BROKEN, Code.WRONG_DOMAIN)
            assert exc.value.file == __file__
        seen["page_name"] = s.name_of(Page, 1)  # an ordered domain's names stay readable

    inst = Instance(spec)
    a, b, _ = inst.elements["Req"]
    (succ,) = inst.successors_of(inst.init_state, inst.find_instance("look", (1,)))
    assert seen["held"] == frozenset({b}) and all(e.__class__ is Element for e in seen["held"])  # type: ignore[attr-defined]
    assert seen["len"] == 3 and seen["has"] is True and seen["listed"] == list(inst.elements["Req"])
    assert seen["items"] == [((e, p), 0) for e in inst.elements["Req"] for p in range(2)]
    assert seen["empty"] is True and seen["nonempty"] is True and seen["page_name"] == "Q"
    assert succ.state[0] == 2 and succ.state[-1] == 2  # the cells stay bitmasks: bit 1 is B
