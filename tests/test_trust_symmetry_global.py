"""The symmetry promise is established for every reachable state, not a sample.

Each spec under ``tests/trust/sym_global_*.py`` depends on the order of
``s.all(Req)`` only 42 steps deep, past any small sample of reachable states:
a reduced search that keeps the first of two mirror states never sees the
violation.  Explore checks every state it expands and refuses the spec
(OWN061 at the action); bmc and prove break symmetry only where Z3 proved it
for every state, so they search without it here and find the violation at
depth 42; ``ownership test`` fails the spec.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.prove import prove
from ownership.engines.symcheck import generators, precheck, prove_symmetry
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

TRUST = Path(__file__).parent / "trust"
SPECS = Path(__file__).parent.parent / "specs"
ROOT = Path(__file__).parent.parent
DEEP = sorted(TRUST.glob("sym_global_*.py"))


def inst_of(path: Path) -> Instance:
    return Instance(load_spec(path), {})


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_there_are_three_deep_specs() -> None:
    assert [p.stem for p in DEEP] == ["sym_global_deep_first", "sym_global_enumerate_first", "sym_global_reduce_first"]


@pytest.mark.parametrize("path", DEEP, ids=lambda p: p.stem)
def test_explore_refuses_an_order_dependence_42_steps_deep(path: Path) -> None:
    with pytest.raises(OwnershipError) as exc:
        explore(inst_of(path))
    assert exc.value.code is Code.SYMMETRY_MISMATCH, exc.value.one_line()
    assert "action first" in exc.value.message
    assert exc.value.line == line_of(path, "def first(") - 1  # the @spec.action line
    # Without the reduction the violation is found, 42 steps in.
    plain = explore(inst_of(path), ExploreOptions(symmetry=False))
    assert plain.verdict is Verdict.VIOLATED and plain.stats.depth == 42


@pytest.mark.parametrize("path", DEEP, ids=lambda p: p.stem)
def test_bmc_and_prove_refuse_an_unproved_symmetry_broken_in_a_reachable_state(path: Path) -> None:
    # Z3 cannot prove the symmetry, so every reachable state of the (small) instance is checked
    # before any reduction: the order dependence 42 steps deep is found there.
    for run in (lambda i: bmc(i, BmcOptions(max_depth=44)), lambda i: prove(i, BmcOptions())):
        with pytest.raises(OwnershipError) as err:
            run(inst_of(path))
        assert err.value.code is Code.SYMMETRY_MISMATCH


def test_bmc_and_prove_search_unreduced_when_the_symmetry_is_neither_proved_nor_checked() -> None:
    from ownership.engines import symevery

    inst = inst_of(DEEP[0])
    assert symevery.check_reachable(inst, ["Req"], cap=10) is None  # too many states for this cap
    found = bmc(inst, BmcOptions(max_depth=44, symmetry=False))
    assert found.verdict is Verdict.VIOLATED and found.stats.depth == 42


def test_an_unproved_symmetry_checked_on_every_reachable_state_reduces() -> None:
    inst = inst_of(SPECS / "sglang_disagg_v0_5_19.py")
    note, reduce = precheck(inst, True)
    assert reduce and note is not None, note
    assert "which were all the reachable states" in note, note
    assert not prove_symmetry(inst, ["Req", "PrefillPage", "DecodePage"]).proved  # the check stands in for it


def test_the_proof_names_the_action_and_the_renaming() -> None:
    inst = inst_of(TRUST / "sym_global_deep_first.py")
    proof = prove_symmetry(inst, ["Req"])
    assert not proof.proved
    assert "action first()" in proof.reason and "(A->B B->A) of Req" in proof.reason
    assert "perhaps unreachable" in proof.reason


def test_ownership_test_fails_the_deep_specs(tmp_path: Path) -> None:
    for path in DEEP:
        shutil.copy(path, tmp_path / path.name)
    run = subprocess.run([sys.executable, "-m", "ownership", "test", str(tmp_path)], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert "3 passed" not in out and out.count("OWN061") == 3, out


def test_a_symmetric_spec_is_proved_once_and_reduced() -> None:
    inst = inst_of(SPECS / "mooncake_get_outlives_lease_fixed.py")
    proof = prove_symmetry(inst, ["Key"] if "Key" in inst.sizes else list(inst.sizes)[:1])
    assert proof.proved and "proved by Z3 for every state" in proof.describe(), proof
    note, reduce = precheck(inst, True)  # a small instance: every reachable state checked, no proof needed
    assert reduce and note is not None and "which were all the reachable states" in note, note
    assert precheck(inst, False) == (None, False)


def test_explore_says_it_checked_every_expanded_state() -> None:
    result = explore(inst_of(SPECS / "sglang_disagg_v0_5_21.py"), ExploreOptions(max_states=200))
    note = next(n for n in result.notes if "checked on every one of" in n)
    assert "expanded states" in note and "every renaming of Req, PrefillPage on its own" in note, note
    assert "renamings of all the domains together are too many to apply" in note


def test_a_small_group_is_applied_whole_to_every_expanded_state() -> None:
    from ownership.engines.symevery import checked_renamings

    inst = inst_of(SPECS / "sglang_single_node.py")
    parts, words = checked_renamings(inst, ["Req"])
    assert len(parts) == 5 if inst.sizes["Req"] == 3 else len(parts) == 1
    assert "every reachable state is one of those renamed" in words


def test_generators_are_a_transposition_and_a_cycle() -> None:
    inst = inst_of(SPECS / "sglang_disagg_v0_5_21.py")
    gens = dict.fromkeys(d for d, _ in generators(inst, ["Req", "PrefillPage"]))
    assert list(gens) == ["Req", "PrefillPage"]
    pages = [p for d, p in generators(inst, ["PrefillPage"])]
    n = inst.sizes["PrefillPage"]
    assert pages[0] == [1, 0, *range(2, n)]
    if n > 2:
        assert pages[1] == [*range(1, n), 0]


def test_a_large_reduced_search_asks_z3_once_and_stops_checking() -> None:
    from ownership.engines.explore import _Checker, invariant_checker
    from ownership.engines.search import BreadthFirst
    from ownership.engines.symevery import EveryState
    from ownership.engines.symmetry import make_canonicalizer

    inst = inst_of(SPECS / "mooncake_get_outlives_lease_fixed.py")
    names = tuple(inst.spec.invariants)
    search = BreadthFirst(inst)
    assert search.reduced
    every = EveryState(inst, make_canonicalizer(inst, search.plan, exact=True), (*search.plan.permuted, *search.plan.sorted), names,
                       invariant_checker(inst, names), search.expand, proof_after=3)
    search.expand = every
    outcome = search.run(_Checker(inst, search, names, False))
    assert every.proof is not None and every.proof.proved and every.states == 3
    assert outcome.expanded > 3
    assert "proved by Z3 for every state" in every.describe() and "first 3 expanded states" in every.describe()


def test_an_unproved_search_keeps_checking_and_says_why() -> None:
    from ownership.engines.explore import _Checker, invariant_checker
    from ownership.engines.search import BreadthFirst
    from ownership.engines.symevery import EveryState
    from ownership.engines.symmetry import make_canonicalizer

    path = TRUST / "sym_global_deep_first.py"
    inst = inst_of(path)
    names = tuple(inst.spec.invariants)
    search = BreadthFirst(inst)
    every = EveryState(inst, make_canonicalizer(inst, search.plan, exact=True), ("Req",), names, invariant_checker(inst, names), search.expand,
                       proof_after=2)
    search.expand = every
    with pytest.raises(OwnershipError) as exc:
        search.run(_Checker(inst, search, names, False))
    assert exc.value.code is Code.SYMMETRY_MISMATCH
    assert every.proof is not None and not every.proof.proved and every.states > 40


@pytest.mark.parametrize("name", ["vllm_fork_double_free_fixed", "vllm_prefix_lora_scope_buggy"])
def test_the_exact_key_is_the_same_on_every_renaming(name: str) -> None:
    # Two permuted domains: the search's key may differ between renamings (it only wastes work),
    # the key the symmetry check compares successors by may not.
    from ownership.engines.diagram import reachable_states
    from ownership.engines.symmetry import make_canonicalizer, plan_symmetry
    from ownership.lang.permutation import Permutation

    inst = inst_of(SPECS / f"{name}.py")
    plan = plan_symmetry(inst)
    key = make_canonicalizer(inst, plan, exact=True)
    perms = [Permutation.of(inst, {d: p}) for d, p in generators(inst, (*plan.permuted, *plan.sorted))]
    states = reachable_states(inst, 2_000).states
    assert len(states) > 100
    for st in states:
        assert all(key(pi.apply(st)) == key(st) for pi in perms)
