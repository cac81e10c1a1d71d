"""Permutation: renaming elements of symmetric domains in states, checked against renaming by name."""

from __future__ import annotations

import itertools
import pickle
import random
from pathlib import Path
from typing import Any

import pytest

from ownership import Enum, Spec
from ownership.engines.symmetry import (
    SymmetryPlan,
    make_canonical_permuter,
    make_canonicalizer,
    make_plain_key,
    plan_symmetry,
)
from ownership.lang.instance import Instance, State
from ownership.lang.loader import load_spec
from ownership.lang.permutation import MASK_TABLE_BITS, Permutation, StateShape
from ownership.lang.types import Optional, Ref, RefSet, SetOf

Phase = Enum("Phase", "IDLE RUN DONE")


def _spec(reqs: int = 3, pages: int = 2) -> Instance:
    """Every kind of cell a renaming touches: rows, two-domain tables, a table indexed twice, refs, sets."""
    spec = Spec("renamings")
    req = spec.domain("Req", reqs, symmetric=True, names=lambda i: "ABCDEFGHIJKLMNOP"[i])
    page = spec.domain("Page", pages, symmetric=True)
    spec.var("phase", Phase, per=req, init=Phase.IDLE)
    spec.var("owner", Optional(req), per=page, init=None)
    spec.var("first", req, init=0)
    spec.var("holders", SetOf(req), per=page, init=0)
    spec.var("table", bool, per=(req, page), init=False)
    spec.var("waits", int, per=(req, req), init=0)
    spec.var("used", SetOf(page), init=0)
    spec.var("steps", int, init=0)

    @spec.action
    def tick(s: Any) -> None:
        s.steps = 1

    @spec.invariant
    def fine(s: Any) -> bool:
        return True

    return Instance(spec)


def _random_state(inst: Instance, rng: random.Random) -> State:
    cells: list[Any] = []
    for var in inst.spec.vars.values():
        vtype = var.type
        for _ in range(inst.layouts[var.name].length):
            if isinstance(vtype, Ref):
                n = inst.sizes[vtype.domain]
                cells.append(rng.choice([*range(n), *([None] if vtype.optional else [])]))
            elif isinstance(vtype, RefSet):
                cells.append(rng.randrange(1 << inst.sizes[vtype.domain]))
            elif var.name == "table":
                cells.append(rng.random() < 0.5)
            else:
                cells.append(rng.randrange(3))
    return tuple(cells)


def _by_name(inst: Instance, state: State, maps: dict[str, list[int]]) -> State:
    """The renaming done on the readable form of the state: element names swapped wherever they appear."""
    rename = {d: {inst.names[d][i]: inst.names[d][j] for i, j in enumerate(p)} for d, p in maps.items()}

    def walk(value: Any, axes: list[str], vtype: Any) -> Any:
        if axes:
            table = rename.get(axes[0], {})
            return {table.get(k, k): walk(v, axes[1:], vtype) for k, v in value.items()}
        dom = vtype.refers_to()
        if dom in rename and value is not None:
            return [rename[dom][x] for x in value] if isinstance(vtype, RefSet) else rename[dom][value]
        return value

    data = inst.to_json(state)
    out = {v.name: walk(data[v.name], [d.name for d in v.index], v.type) for v in inst.spec.vars.values()}
    return inst.from_json(out)


def _all_perms(inst: Instance, dom: str) -> list[list[int]]:
    return [list(p) for p in itertools.permutations(range(inst.sizes[dom]))]


def test_apply_renames_like_renaming_the_readable_state() -> None:
    inst = _spec()
    rng = random.Random(7)
    states = [_random_state(inst, rng) for _ in range(30)]
    for rp in _all_perms(inst, "Req"):
        for pp in _all_perms(inst, "Page"):
            pi = Permutation.of(inst, {"Req": rp, "Page": pp})
            for st in states:
                assert pi.apply(st) == _by_name(inst, st, {"Req": rp, "Page": pp})


def test_apply_by_hand() -> None:
    inst = _spec(reqs=2, pages=2)
    st = list(inst.init_state)
    lay = inst.layouts
    st[lay["phase"].offset] = Phase.RUN          # phase[R0] = RUN
    st[lay["owner"].offset + 1] = 0              # owner[P1] = R0
    st[lay["holders"].offset] = 0b01             # holders[P0] = {R0}
    st[lay["table"].offset + 1] = True           # table[R0, P1]
    st[lay["waits"].offset + 1] = 2              # waits[R0, R1] = 2
    image = Permutation.of(inst, {"Req": [1, 0]}).apply(tuple(st))
    assert image[lay["phase"].offset: lay["phase"].offset + 2] == (Phase.IDLE, Phase.RUN)
    assert image[lay["owner"].offset + 1] == 1 and image[lay["owner"].offset] is None
    assert image[lay["holders"].offset] == 0b10
    assert image[lay["table"].offset + 2 + 1] is True and image[lay["table"].offset + 1] is False
    assert image[lay["waits"].offset + 2] == 2 and image[lay["waits"].offset + 1] == 0  # waits[R1, R0]
    assert image[lay["first"].offset] == 1  # first = R0 -> R1


def test_inverse_undoes_and_compose_applies_the_right_one_first() -> None:
    inst = _spec()
    rng = random.Random(3)
    states = [_random_state(inst, rng) for _ in range(20)]
    p = Permutation.of(inst, {"Req": [1, 2, 0]})
    q = Permutation.of(inst, {"Req": [1, 0, 2], "Page": [1, 0]})
    assert p.compose(q) != q.compose(p)  # the order is observable, so the test below can fail
    for st in states:
        assert p.inverse().apply(p.apply(st)) == st
        assert p.compose(q).apply(st) == p.apply(q.apply(st))
        assert q.compose(p).apply(st) == q.apply(p.apply(st))
    assert p.compose(p.inverse()).is_identity and p.inverse().inverse() == p
    assert p.compose(q)["Req"] == (2, 1, 0) and p.compose(q)["Page"] == (1, 0)


def test_identity_equality_hash_and_repr() -> None:
    inst = _spec()
    shape = StateShape.of(inst)
    ident = Permutation.identity(shape)
    assert ident == Permutation.identity(inst) == Permutation(shape, {"Req": [0, 1, 2]})
    assert ident.apply(inst.init_state) is inst.init_state and ident["Req"] == (0, 1, 2)
    assert repr(ident) == "Permutation(identity)"
    swap = Permutation(shape, {"Req": [1, 0, 2], "Page": (0, 1)})
    assert swap == Permutation(shape, {"Req": (1, 0, 2)}) and hash(swap) == hash(Permutation(shape, {"Req": (1, 0, 2)}))
    assert len({swap, Permutation(shape, {"Req": [1, 0, 2]}), ident}) == 2
    assert repr(swap) == "Permutation(Req: A->B, B->A)"
    both = Permutation(shape, {"Page": [1, 0], "Req": [2, 0, 1]})
    assert repr(both).startswith("Permutation(Req: A->C, B->A, C->B; Page: ")


def test_bad_permutations_are_refused() -> None:
    inst = _spec()
    with pytest.raises(ValueError, match="not a permutation"):
        Permutation.of(inst, {"Req": [0, 0, 1]})
    with pytest.raises(ValueError, match="not a permutation"):
        Permutation.of(inst, {"Req": [1, 0]})
    with pytest.raises(KeyError, match="Nope"):
        Permutation.of(inst, {"Nope": [0]})
    other = Permutation.of(_spec(reqs=2), {"Req": [1, 0]})
    with pytest.raises(ValueError, match="different instances"):
        Permutation.of(inst, {"Req": [1, 0, 2]}).compose(other)


def test_pickles_and_applies_the_same_after() -> None:
    inst = _spec()
    pi = Permutation.of(inst, {"Req": [2, 0, 1], "Page": [1, 0]})
    st = _random_state(inst, random.Random(1))
    before = pi.apply(st)  # builds the index maps, which must not travel
    back = pickle.loads(pickle.dumps(pi))
    assert back == pi and hash(back) == hash(pi)
    assert back.apply(st) == before
    assert len(pickle.dumps(pi)) < 4 * len(pickle.dumps(pi.shape))


def test_masks_of_large_domains_are_renamed_bit_by_bit() -> None:
    inst = _spec(reqs=MASK_TABLE_BITS + 2, pages=1)
    n = inst.sizes["Req"]
    rng = random.Random(5)
    perm = list(range(n))
    rng.shuffle(perm)
    pi = Permutation.of(inst, {"Req": perm})
    holders = inst.layouts["holders"].offset
    for _ in range(20):
        st = list(inst.init_state)
        mask = rng.randrange(1 << n)
        st[holders] = mask
        want = sum(1 << perm[i] for i in range(n) if mask >> i & 1)
        assert pi.apply(tuple(st))[holders] == want


def test_a_one_cell_state_is_still_a_tuple() -> None:
    spec = Spec("one_cell")
    req = spec.domain("Req", 2, symmetric=True)
    spec.var("who", req, init=0)

    @spec.action
    def pick(s: Any) -> None:
        s.who = None

    @spec.invariant
    def fine(s: Any) -> bool:
        return True

    inst = Instance(spec)
    assert Permutation.of(inst, {"Req": [1, 0]}).apply((0,)) == (1,)


# -- the canonicaliser's permutation -------------------------------------------------------------

SPECS = Path(__file__).resolve().parent.parent / "specs"
TRUST = Path(__file__).resolve().parent / "trust"


def _reachable(inst: Instance) -> set[State]:
    """Every reachable state, without reduction."""
    seen = {inst.init_state}
    frontier = [inst.init_state]
    while frontier:
        nxt = []
        for st in frontier:
            for _, sc in inst.expand(st):
                if sc.state not in seen:
                    seen.add(sc.state)
                    nxt.append(sc.state)
        frontier = nxt
    return seen


@pytest.mark.parametrize("path", [
    SPECS / "sglang_single_node.py",                      # Req permuted, KvPage sorted
    SPECS / "vllm_nixl_multi_handle_failure_fixed.py",   # two permuted domains and a sorted one
    SPECS / "vllm_fork_double_free_fixed.py",            # two permuted domains
    SPECS / "sglang_paged_allocator.py",                 # Page permuted, Req sorted
    TRUST / "scalar_two_index_domains.py",               # one table indexed by a permuted and a sorted domain
])
def test_the_canonical_permutation_reaches_the_state_the_key_describes(path: Path) -> None:
    inst = Instance(load_spec(path))
    plan = plan_symmetry(inst)
    assert plan.permuted, plan.describe()
    key_of = make_canonicalizer(inst, plan)
    canon = make_canonical_permuter(inst, plan)
    plain = make_plain_key(inst, plan)
    states = _reachable(inst)
    representatives: dict[Any, State] = {}
    moved = 0
    for st in states:
        key, pi = canon(st)
        image = pi.apply(st)
        assert key == key_of(st)
        assert plain(image) == key, (pi, st)
        assert pi.inverse().apply(image) == st
        # The representative is a function of the key: one state per orbit.
        assert representatives.setdefault(key, image) == image
        moved += not pi.is_identity
    assert moved and len(representatives) < len(states)  # the test renamed something and merged orbits


def test_without_a_reduced_domain_the_permutation_is_the_identity() -> None:
    inst = _spec()
    canon = make_canonical_permuter(inst, SymmetryPlan((), (), ()))
    st = _random_state(inst, random.Random(2))
    key, pi = canon(st)
    assert key == st and pi.is_identity and pi == Permutation.identity(inst)


def test_the_canonical_permutation_pickles_with_its_key() -> None:
    inst = Instance(load_spec(SPECS / "sglang_single_node.py"))
    plan = plan_symmetry(inst)
    canon = make_canonical_permuter(inst, plan)
    st = next(s for s in _reachable(inst) if not canon(s)[1].is_identity)
    key, pi = canon(st)
    key2, pi2 = pickle.loads(pickle.dumps((key, pi)))
    assert key2 == key and pi2 == pi and make_plain_key(inst, plan)(pi2.apply(st)) == key


def test_the_symmetry_check_and_the_log_renamer_rename_as_permutation_does() -> None:
    from ownership.engines.symcheck import permuter
    from ownership.validate.renaming import Renamer

    inst = _spec()
    renamer = Renamer(inst, inst.spec.domains["Req"])
    rng = random.Random(11)
    states = [_random_state(inst, rng) for _ in range(10)]
    for perm in _all_perms(inst, "Req"):
        pi = permuter(inst, "Req", perm)
        for st in states:
            want = _by_name(inst, st, {"Req": perm})
            assert pi(st) == want and renamer.permute(st, perm) == want


def test_a_domain_that_nothing_mentions_renames_nothing() -> None:
    spec = Spec("unmentioned")
    spec.domain("Req", 2, symmetric=True)
    spec.var("steps", int, init=0)

    @spec.action
    def tick(s: Any) -> None:
        s.steps = 1

    @spec.invariant
    def fine(s: Any) -> bool:
        return True

    inst = Instance(spec)
    pi = Permutation.of(inst, {"Req": [1, 0]})
    assert not pi.is_identity and pi.apply((5,)) == (5,)
