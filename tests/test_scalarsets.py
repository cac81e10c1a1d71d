"""Scalarset-style symmetric domains, the ordered form, the permutation check and typed writes.

Every adversarial spec here got a clean PROVED from explore before symmetric
values became opaque (and the ill-typed writes were accepted or crashed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ownership import Ownership, Spec
from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.prove import prove
from ownership.engines.symcheck import check_symmetry, permuter
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.elements import Element, ix
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.lang.types import SetOf

TRUST = Path(__file__).parent / "trust"
SPECS = Path(__file__).parent.parent / "specs"

# spec file -> the text of the line that must be named by OWN060
BROKEN = {
    "scalar_next_slot": "q = p - 1",
    "scalar_sorted_first": "first = sorted(s.all(Page))[0]",
    "scalar_names_one": "require(p == 1)",
    "scalar_int_of": "require(int(p) > 0)",
    "scalar_less_than": "require(q < p)",
    "scalar_pool_next_slot": "nxt = pages[0] + 1",
}


def line_of(path: Path, text: str) -> int:
    for k, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip().startswith(text):
            return k
    raise AssertionError(f"{text!r} not in {path}")


def inst_of(path: Path, **params: int) -> Instance:
    return Instance(load_spec(path), params)


# Lines also refused in these specs: whichever the search reaches first is reported.
ALSO = {"nxt = pages[0] + 1": "return not s.claimed[s.params.pages - 1]"}


def assert_refused(exc: pytest.ExceptionInfo[OwnershipError], code: Code, path: Path, text: str) -> None:
    assert exc.value.code is code, exc.value.one_line()
    assert exc.value.file is not None and Path(exc.value.file).resolve() == path.resolve()
    lines = {line_of(path, text)} | ({line_of(path, ALSO[text])} if text in ALSO else set())
    assert exc.value.line in lines, exc.value.one_line()


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_symmetry_is_refused_by_explore(name: str) -> None:
    path = TRUST / f"{name}.py"
    with pytest.raises(OwnershipError) as exc:
        explore(inst_of(path))
    assert_refused(exc, Code.SYMMETRY_BROKEN, path, BROKEN[name])
    assert "declare the domain ordered" in exc.value.message
    # Without symmetry reduction the same spec is refused too: the values stay opaque.
    with pytest.raises(OwnershipError) as exc:
        explore(inst_of(path), ExploreOptions(symmetry=False))
    assert_refused(exc, Code.SYMMETRY_BROKEN, path, BROKEN[name])


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_symmetry_is_refused_by_bmc_and_prove(name: str) -> None:
    path = TRUST / f"{name}.py"
    with pytest.raises(OwnershipError) as exc:
        bmc(inst_of(path), BmcOptions(max_depth=4))
    assert_refused(exc, Code.SYMMETRY_BROKEN, path, BROKEN[name])
    with pytest.raises(OwnershipError) as exc:
        prove(inst_of(path), BmcOptions(max_depth=4))
    assert_refused(exc, Code.SYMMETRY_BROKEN, path, BROKEN[name])


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_symmetry_is_refused_by_hypothesis(name: str) -> None:
    path = TRUST / f"{name}.py"
    with pytest.raises(OwnershipError) as exc:
        check_stateful(inst_of(path), HypothesisOptions(max_examples=30, steps=5, seed=1))
    assert_refused(exc, Code.SYMMETRY_BROKEN, path, BROKEN[name])


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_ordered_version_finds_the_two_step_violation(name: str, tmp_path: Path) -> None:
    text = (TRUST / f"{name}.py").read_text().replace("symmetric=True", "ordered=True")
    text = text.replace('own.pool("kv", "pages")', 'own.pool("kv", "pages", ordered=True)')
    path = tmp_path / f"{name}_ordered.py"
    path.write_text(text)
    for symmetry in (True, False):
        result = explore(inst_of(path), ExploreOptions(symmetry=symmetry))
        assert result.verdict is Verdict.VIOLATED
        assert result.violated == "one_page"
        assert result.trace is not None and len(result.trace) == 2
    if name == "scalar_pool_next_slot":
        return  # `len()` of a symbolic page list does not run under Z3 (a limit of the symbolic vocabulary)
    result = bmc(inst_of(path), BmcOptions(max_depth=4))
    assert result.verdict is Verdict.VIOLATED and result.trace is not None and len(result.trace) == 2


def test_order_dependency_through_iteration_is_caught_by_the_permutation_check() -> None:
    path = TRUST / "scalar_first_free.py"
    # bmc and prove run the spec on a sample of reachable states first and refuse it; explore checks
    # every state it expands up to symmetry, and taking the first of interchangeable free pages
    # reaches the same orbits as taking any of them (it is what the search's choice reduction does).
    for run in (lambda i: bmc(i, BmcOptions(max_depth=3)), lambda i: prove(i, BmcOptions())):
        with pytest.raises(OwnershipError) as exc:
            run(inst_of(path))
        assert exc.value.code is Code.SYMMETRY_MISMATCH, exc.value.one_line()
        assert "action take" in exc.value.message
        assert "kv_free[" in exc.value.message  # the cell that differs
        assert "ordered=True" in exc.value.message
        assert exc.value.line == line_of(path, "@spec.action")  # where the action is declared
    # Without symmetry reduction nothing is merged, so nothing needs checking; with it, the same verdict.
    assert explore(inst_of(path), ExploreOptions(symmetry=False)).verdict is Verdict.PROVED
    assert explore(inst_of(path)).verdict is Verdict.PROVED


def test_invariant_naming_an_element_is_caught_by_the_permutation_check() -> None:
    spec = Spec("names_first_page")
    Page = spec.domain("Page", 2, symmetric=True)
    spec.var("used", bool, per=Page, init=False)

    @spec.action
    def take(s, p: Page):  # type: ignore[no-untyped-def]
        s.used[p] = True

    @spec.invariant
    def first_page_unused(s):  # type: ignore[no-untyped-def]
        return not s.used[0]  # an int index names page 0

    # An int index into a table of a symmetric domain is refused where it is written.
    with pytest.raises(OwnershipError) as exc:
        check_symmetry(Instance(spec))
    assert exc.value.code is Code.SYMMETRY_BROKEN
    assert "with the int 0" in exc.value.message


def test_library_specs_pass_the_permutation_check_and_report_it() -> None:
    result = explore(inst_of(SPECS / "sglang_single_node.py"), ExploreOptions(max_depth=4))
    assert any("checked on" in n and "KvPage" in n for n in result.notes), result.notes
    result = bmc(inst_of(SPECS / "sglang_single_node.py"), BmcOptions(max_depth=2))
    assert any("checked on" in n or "proved by Z3 for every state" in n for n in result.notes), result.notes


def test_permuter_moves_cells_and_maps_references() -> None:
    inst = inst_of(SPECS / "sglang_single_node.py")
    pi = permuter(inst, "Req", [1, 0])
    st = inst.init_state
    assert pi(pi(st)) == st
    state = list(st)
    lay = inst.layouts["read_foreign"]
    state[lay.offset] = 1  # read_foreign[A] = B
    image = pi(tuple(state))
    assert image[lay.offset + 1] == 0 and image[lay.offset] is None  # read_foreign[B] = A


BAD_WRITES = {
    1: (Code.BAD_VALUE, "s.phase[r] = 7", "writes 7 into state variable phase, declared Enum Phase"),
    2: (Code.BAD_VALUE, "s.done[r] = 5", "writes 5 into state variable done, declared bool"),
    3: (Code.BAD_VALUE, 's.phase[r] = "RUNNING"', "writes 'RUNNING' into state variable phase"),
    4: (Code.BAD_VALUE, "s.owner[p] = p", "declared Optional(Req): p0 is an element of Page"),
    5: (Code.BAD_VALUE, "s.readers[p] = -1", "writes -1 into state variable readers, declared SetOf(Req)"),
    6: (Code.WRONG_DOMAIN, "require(s.done[p])", "indexes done (declared per Req) with p0, an element of Page"),
}


@pytest.mark.parametrize("case", sorted(BAD_WRITES))
def test_ill_typed_writes_and_indexing_are_refused(case: int) -> None:
    code, text, message = BAD_WRITES[case]
    path = TRUST / "scalar_bad_writes.py"
    with pytest.raises(OwnershipError) as exc:
        explore(inst_of(path, case=case))
    assert_refused(exc, code, path, text)
    assert message in exc.value.message


def test_too_large_mask_and_element_into_int_are_refused() -> None:
    spec = Spec("masks")
    Req = spec.domain("Req", 2, symmetric=True)
    spec.var("set", SetOf(Req), init=0)
    spec.var("count", int, init=0)

    @spec.action
    def big(s):  # type: ignore[no-untyped-def]
        s.set = 4

    @spec.action
    def elem(s, r: Req):  # type: ignore[no-untyped-def]
        s.count = r

    spec.invariant(lambda s: True, name="ok")
    inst = Instance(spec)
    with pytest.raises(OwnershipError) as exc:
        inst.successors_of(inst.init_state, inst.find_instance("big", ()))
    assert exc.value.code is Code.BAD_VALUE and "0..3" in exc.value.message
    with pytest.raises(OwnershipError) as exc:
        inst.successors_of(inst.init_state, inst.find_instance("elem", (0,)))
    assert exc.value.code is Code.BAD_VALUE and "Optional(Req)" in exc.value.message


def test_elements_support_only_what_permutations_preserve() -> None:
    spec = Spec("elems")
    Req = spec.domain("Req", 3, symmetric=True, names="ABC")
    spec.domain("Page", 2, symmetric=True)
    spec.var("x", bool, per=Req, init=False)
    spec.invariant(lambda s: True, name="ok")

    @spec.action
    def noop(s, r: Req):  # type: ignore[no-untyped-def]
        pass

    inst = Instance(spec)
    a, b, c = inst.elements["Req"]
    p0 = inst.elements["Page"][0]
    assert a == a and a != b and a != None  # noqa: E711
    assert hash(a) == hash(b) == hash(c)  # no index order leaks through set/dict iteration
    assert len({a, b, a}) == 2 and b in {a, b}
    assert ix(c) == 2 and inst.names["Req"][2] == "C"
    assert tuple(inst.view.all(Req)) == (a, b, c)
    assert isinstance(inst.action_instances[1].call[0], Element)
    for bad in (lambda: a + 1, lambda: 1 + a, lambda: a < b, lambda: sorted([b, a]), lambda: int(a),
                lambda: bool(a), lambda: 1 << a, lambda: a & 1, lambda: "%d" % a,  # noqa: UP031 lambda: f"{a:03}",
                lambda: a == 1, lambda: min(a, b), lambda: [0, 1, 2][a], lambda: range(a),
                lambda: str(a), lambda: f"{b}", lambda: repr(c), lambda: a._i):
        with pytest.raises(OwnershipError) as exc:
            bad()
        assert exc.value.code is Code.SYMMETRY_BROKEN
        assert exc.value.file == __file__  # located at the line that did it
    with pytest.raises(OwnershipError) as exc:
        _ = a == p0
    assert exc.value.code is Code.WRONG_DOMAIN


def test_ordered_and_symmetric_exclude_each_other_and_ordered_pools_give_ints() -> None:
    spec = Spec("both")
    with pytest.raises(OwnershipError) as exc:
        spec.domain("D", 2, symmetric=True, ordered=True)
    assert exc.value.code is Code.SPEC_INVALID
    spec = Spec("pools")
    Req = spec.domain("Req", 2, symmetric=True)
    own = Ownership(spec, requests=Req)
    sym = own.pool("kv", 3)
    ordered = own.pool("slab", 3, ordered=True)
    assert sym.Page.symmetric and not sym.Page.ordered
    assert ordered.Page.ordered and not ordered.Page.symmetric
    seen: dict[str, list[object]] = {}

    @spec.action
    def grab(s, r: Req):  # type: ignore[no-untyped-def]
        seen["kv"] = sym.alloc(s, r, 2) + sym.pages_of(s, r)
        seen["slab"] = ordered.alloc(s, r, 2) + ordered.pages_of(s, r)

    own.invariants("no_double_ownership")
    inst = Instance(spec)
    assert inst.successors_of(inst.init_state, inst.find_instance("grab", (0,)))
    assert all(isinstance(p, Element) for p in seen["kv"])
    assert all(type(p) is int for p in seen["slab"])


def test_plain_turns_elements_into_indices_at_every_depth() -> None:
    # Model-based tests compare the spec's expectation (elements) with an implementation's numbers.
    from ownership.lang.elements import plain

    inst = Instance(load_spec(TRUST / "scalar_next_slot.py"))
    dom = next(iter(inst.elements))
    a, b = inst.elements[dom][0], inst.elements[dom][1]
    assert plain({"x": [a, (b, None)], "y": {a}}) == {"x": [0, (1, None)], "y": {0}}
    assert plain([3, "s"]) == [3, "s"]


def _orbit(inst: Instance, state: tuple[object, ...], domains: list[str]) -> set[tuple[object, ...]]:
    """Every renaming of ``state`` under the product of the domains' permutations."""
    import itertools

    out = {state}
    for d in domains:
        maps = [permuter(inst, d, perm) for perm in itertools.permutations(range(inst.sizes[d]))]
        out = {f(x) for x in out for f in maps}
    return out


@pytest.mark.parametrize(("path", "params"), [
    (TRUST / "scalar_two_index_domains.py", {}),
    (SPECS / "vllm_nixl_multi_handle_failure_fixed.py", {}),
    (SPECS / "sglang_pd_abort_inflight_fixed.py", {}),
])
def test_states_share_a_symmetry_key_only_when_one_renames_the_other(path: Path, params: dict[str, int]) -> None:
    """The reduction's key is a function of the orbit alone: equal keys mean a renaming, never two behaviours.

    Two domains sorted in one table (``cover[H, P]``) gave "p free, g covers p"
    and "q free, g covers p" one key, so the explorer kept one of two states
    that are no renaming of each other.
    """
    from ownership.engines.symcheck import _sample, symmetric_domains
    from ownership.engines.symmetry import make_canonicalizer, plan_symmetry

    inst = inst_of(path, **params)
    plan = plan_symmetry(inst)
    key = make_canonicalizer(inst, plan)
    reduced = [d for d in symmetric_domains(inst) if d in (*plan.permuted, *plan.sorted)]
    groups: dict[object, list[tuple[object, ...]]] = {}
    for st in _sample(inst, 3000):
        groups.setdefault(key(st), []).append(st)
    for members in groups.values():
        orbit = _orbit(inst, members[0], reduced)
        assert all(m in orbit for m in members), (plan.describe(), members[:2])


def test_a_table_of_two_symmetric_domains_sorts_one_and_permutes_the_other() -> None:
    from ownership.engines.symmetry import plan_symmetry

    plan = plan_symmetry(inst_of(TRUST / "scalar_two_index_domains.py"))
    assert len(plan.sorted) == 1 and len(plan.permuted) == 1 and set(plan.sorted + plan.permuted) == {"P", "H"}
