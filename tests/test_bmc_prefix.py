"""bmc's concrete search of the first depths: a measured lower bound, the same answers as the solver alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import instance
from ownership.core.result import Verdict
from ownership.engines import bmc as bmc_module
from ownership.engines.bmc import bmc
from ownership.engines.bmcprefix import Prefix, search_prefix
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

SOLVER = Path(__file__).resolve().parent / "solver"

INCIDENT = "sglang_disagg_v0_5_19"
INVARIANTS = ["no_foreign_read", "no_unowned_write", "no_double_ownership", "pages_returned_when_idle"]


def _prefix_note(notes: tuple[str, ...]) -> bool:
    return any("breadth-first search of" in n for n in notes)


def test_the_search_measures_the_depth_of_the_incident_and_keeps_a_witness() -> None:
    inst = instance(INCIDENT)
    p = search_prefix(inst, list(inst.spec.invariants), max_states=50_000, max_depth=30, symmetry=True)
    # Breadth-first: no violation in 14 steps, and level 15 finished, so its invariants are all known.
    assert (p.clean, p.reached, p.complete) == (14, 15, True)
    assert [name for name, _ in p.witnesses] == ["no_foreign_read"]
    states = p.witnesses[0][1]
    assert len(states) == 16 and states[0] == inst.init_state
    assert not inst.holds(states[-1], "no_foreign_read")


def test_a_budget_cut_short_still_gives_a_lower_bound() -> None:
    inst = instance(INCIDENT)
    p = search_prefix(inst, list(inst.spec.invariants), max_states=100, max_depth=30, symmetry=True)
    assert 0 < p.clean < 14 and not p.witnesses and p.states <= 100


def test_no_budget_no_search() -> None:
    inst = instance(INCIDENT)
    assert search_prefix(inst, INVARIANTS, max_states=0, max_depth=30, symmetry=True) == Prefix(clean=-1, reached=0)


@pytest.mark.parametrize(("name", "params", "depth"), [
    ("toy_double_free", {}, 10),
    ("toy_safe_counter", {}, 10),
    ("toy_deadlock", {}, 10),
    (INCIDENT, {"requests": 1}, 12),
    ("sglang_disagg_v0_5_21", {"requests": 1}, 12),
])
@pytest.mark.parametrize("budget", [50_000, 20])
def test_same_verdict_and_length_as_the_solver_alone(name: str, params: dict[str, int], depth: int,
                                                     budget: int) -> None:
    alone = bmc(instance(name, **params), BmcOptions(max_depth=depth, prefix_states=0))
    with_prefix = bmc(instance(name, **params), BmcOptions(max_depth=depth, prefix_states=budget))
    assert with_prefix.verdict is alone.verdict
    assert with_prefix.violated == alone.violated
    assert with_prefix.stats.depth == alone.stats.depth
    assert (len(with_prefix.trace) if with_prefix.trace else None) == (len(alone.trace) if alone.trace else None)
    assert _prefix_note(with_prefix.notes) and not _prefix_note(alone.notes)


@pytest.mark.slow
def test_the_incident_gives_the_same_answer_with_any_budget() -> None:
    # The solver alone (tens of seconds) and the default budget (the search reaches the violation; the
    # solver is guided).  A budget cut short is the fast test's (20 states, the solver unguided after it).
    answers = set()
    for budget in (0, 50_000):
        r = bmc(instance(INCIDENT), BmcOptions(max_depth=16, prefix_states=budget))
        assert r.trace is not None
        answers.add((r.verdict, r.violated, r.stats.depth, len(r.trace)))
    assert answers == {(Verdict.VIOLATED, "no_foreign_read", 15, 15)}


def test_free_parameters_are_not_searched_concretely() -> None:
    # The concrete search would run the default value only; the solver ranges over every value.
    inst = Instance(load_spec(SOLVER / "reserve_overflow.py"))
    free = bmc(inst, BmcOptions(max_depth=2, free=("prompt_tokens",), where=("prompt_tokens <= 12",)))
    fixed = bmc(inst, BmcOptions(max_depth=2))
    assert not _prefix_note(free.notes) and _prefix_note(fixed.notes)


def test_a_witness_the_solver_rules_out_falls_back_to_the_plain_query(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = instance("toy_double_free")
    names = list(inst.spec.invariants)
    honest = search_prefix(inst, names, max_states=50_000, max_depth=12, symmetry=True)
    assert honest.witnesses and honest.complete
    # The same depth, but the "witness" stays in the initial state: no model follows it.
    bogus = Prefix(clean=honest.clean, reached=honest.reached, complete=True, states=honest.states,
                   witnesses=((honest.witnesses[0][0], (inst.init_state,) * (honest.clean + 2)),))

    def fake(*args: Any, **kwargs: Any) -> Prefix:
        return bogus

    monkeypatch.setattr(bmc_module, "search_prefix", fake)
    r = bmc(inst, BmcOptions(max_depth=12))
    assert r.verdict is Verdict.VIOLATED and r.trace is not None
    assert len(r.trace) == honest.clean + 1 and r.violated == honest.witnesses[0][0]


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(OwnershipError) as info:
        BmcOptions(prefix_states=-1).validate()
    assert info.value.code is Code.BAD_NUMBER


def test_the_c_api_walks_agree_with_z3s_own() -> None:
    import z3

    from ownership.engines.z3run import encode
    from ownership.symbolic.terms import to_z3
    from ownership.symbolic.unroll import Unroller, _cells_read, free_constants, substitute

    inst = instance(INCIDENT)
    sym = encode(inst, BmcOptions(), 8)
    un = Unroller(sym)
    cell_of = {c.get_id(): i for i, c in enumerate(sym.cells)}
    for pr in un.paths:
        p = pr.path
        terms = [*p.pc, *p.constraints, *(to_z3(v, sym.sorts[c]) for c, v in p.writes.items())]
        assert _cells_read(terms, cell_of) == {cell_of[c.get_id()] for c in free_constants(terms) if c.get_id() in cell_of}
    inv = sym.invariant_formula("no_foreign_read")
    pairs = list(zip(sym.cells, un.state(3), strict=True))
    assert substitute(inv, pairs).eq(z3.substitute(inv, *pairs))
    assert substitute(inv, []).eq(inv)
