"""Specs that used to be PROVED without being checked: non-bool invariants and guards,
violations carried only on events, impure actions (issue #12, items 2, 4 and 5).

Each spec in tests/trust/ was PROVED (or not refused) before the check it exercises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ownership.core.replay import replay
from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.prove import prove
from ownership.engines.prove.outcome import Kind
from ownership.engines.prove.reach import reachable_certificate
from ownership.engines.prove.spacer import spacer
from ownership.engines.z3run import BmcOptions, encode
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

TRUST = Path(__file__).resolve().parent / "trust"


def trust(name: str, **params: int) -> Instance:
    return Instance(load_spec(TRUST / f"{name}.py"), params)


def line_of(name: str, text: str) -> int:
    lines = (TRUST / f"{name}.py").read_text().splitlines()
    return next(i for i, ln in enumerate(lines, start=1) if text in ln)


# -- item 2: invariants and guards must be bools ------------------------------------------


@pytest.mark.parametrize(("name", "what"), [("invariant_returns_list", "a list"),
                                            ("invariant_returns_generator", "a generator")])
def test_an_invariant_that_is_not_a_bool_is_refused_in_every_engine(name: str, what: str) -> None:
    for run in (lambda i: explore(i), lambda i: i.violated(i.init_state), lambda i: bmc(i, BmcOptions(max_depth=2))):
        inst = trust(name)
        with pytest.raises(OwnershipError) as err:
            run(inst)
        assert err.value.code is Code.SPEC_NOT_BOOL
        assert f"returned {what}, not a bool" in err.value.message
        assert err.value.line == inst.invariants[0].line


def test_a_guard_that_is_a_number_is_refused_at_its_line() -> None:
    with pytest.raises(OwnershipError) as err:
        explore(trust("require_len"))
    assert err.value.code is Code.SPEC_NOT_BOOL
    assert err.value.line == line_of("require_len", "require(s.queued - 1)")
    assert "require(len(x) > 0)" in err.value.message


def test_a_guard_that_is_a_symbolic_integer_is_refused() -> None:
    with pytest.raises(OwnershipError) as err:
        bmc(trust("require_len"), BmcOptions(max_depth=2))
    assert err.value.code is Code.SPEC_NOT_BOOL


# -- item 4: events marked violates= are violations --------------------------------------

INFLIGHT = "no_free_with_write_in_flight"


def test_free_and_realloc_inside_one_action_is_a_violation_in_explore() -> None:
    inst = trust("free_realloc_inflight")
    result = explore(inst, ExploreOptions(invariants=(INFLIGHT,)))
    assert result.verdict is Verdict.VIOLATED and result.violated == INFLIGHT
    assert result.trace is not None and len(result.trace.steps) == 2
    # The final state satisfies the invariant: only the event of the last step shows the violation.
    assert inst.holds(inst.from_json(result.trace.steps[-1].state), INFLIGHT)
    assert any(e.kind == "write still in flight" and e.violates == INFLIGHT for e in result.trace.steps[-1].events)
    outcome = replay(inst, result.trace)
    assert outcome.ok and outcome.final_violation == INFLIGHT


@pytest.mark.parametrize("engine", ["bmc", "prove"])
def test_free_and_realloc_inside_one_action_is_a_violation_in_the_solver_engines(engine: str) -> None:
    run = bmc if engine == "bmc" else prove
    result = run(trust("free_realloc_inflight"), BmcOptions(max_depth=4, invariants=(INFLIGHT,)))
    assert result.verdict is Verdict.VIOLATED and result.violated == INFLIGHT
    assert result.trace is not None and len(result.trace.steps) == 2


def test_the_reachable_set_certificate_and_spacer_see_event_violations() -> None:
    inst = trust("free_realloc_inflight")
    sym = encode(inst, BmcOptions())
    cert = reachable_certificate(sym, inst, BmcOptions(), [INFLIGHT], sym_false())
    assert cert.kind is Kind.REFUTED and cert.violated == INFLIGHT
    found = spacer(sym, inst, BmcOptions(), [INFLIGHT])
    assert found.kind is Kind.REFUTED  # an error state is reachable


def sym_false():  # noqa: ANN201 - a z3 term; z3 is imported only here
    import z3

    return z3.BoolVal(False)


def test_free_and_realloc_inside_one_action_is_a_violation_for_hypothesis() -> None:
    from ownership.engines.hypothesis_engine.engine import check_stateful
    from ownership.engines.hypothesis_engine.options import HypothesisOptions

    result = check_stateful(trust("free_realloc_inflight"), HypothesisOptions(invariants=(INFLIGHT,), seed=1))
    assert result.verdict is Verdict.VIOLATED and result.violated == INFLIGHT


# -- item 5: impure specs are refused -----------------------------------------------------


@pytest.mark.parametrize(("name", "words", "line_text"), [
    ("impure_random", "uses the module random", "random.random()"),
    ("impure_global_guard", "assigns the module global GATE", "GATE = 1"),
    ("impure_lru_cache", "lru_cache", "gate_open(s))"),
])
def test_impure_code_is_refused_when_the_spec_is_bound(name: str, words: str, line_text: str) -> None:
    with pytest.raises(OwnershipError) as err:
        trust(name)
    assert err.value.code is Code.SPEC_IMPURE
    assert words in err.value.message
    assert err.value.line == line_of(name, line_text)


def test_reading_s_cur_is_refused_at_its_line() -> None:
    with pytest.raises(OwnershipError) as err:
        explore(trust("impure_raw_cells"))
    assert err.value.code is Code.SPEC_IMPURE
    assert err.value.line == line_of("impure_raw_cells", "s.cur[1]")


def test_an_action_that_answers_differently_each_run_is_refused_by_the_audit() -> None:
    with pytest.raises(OwnershipError) as err:
        explore(trust("impure_counter"))
    # A module-level iterator is now refused before the search, at the line that reads it.
    assert err.value.code is Code.SPEC_IMPURE
    assert "action step" in err.value.message and "module-level count" in err.value.message
    assert err.value.line is not None


def test_a_guard_reading_a_shared_object_is_refused_by_the_audit() -> None:
    with pytest.raises(OwnershipError) as err:
        explore(trust("impure_shared_object"))
    assert err.value.code in (Code.SPEC_NONDETERMINISTIC, Code.SPEC_IMPURE)
    # Refused before the search now: the action that changes the shared object, at its line.
    assert "action open_gate" in err.value.message and err.value.line is not None


def test_the_audit_keeps_the_explorers_counts() -> None:
    # The audit re-runs actions on the side: the search itself is unchanged.
    result = explore(trust("free_realloc_inflight"), ExploreOptions(invariants=("no_double_ownership",)))
    assert (result.verdict, result.stats.states, result.stats.transitions) == (Verdict.PROVED, 5, 4)


def test_a_tier_read_is_judged_by_tier_read_matches_index_not_by_the_pool_read_invariants() -> None:
    inst = trust("tier_read_scope")
    for result in (explore(inst), bmc(inst, BmcOptions(max_depth=2))):
        assert result.verdict is Verdict.VIOLATED and result.violated == "tier_read_matches_index"
    only_pool = explore(inst, ExploreOptions(invariants=("no_foreign_read", "no_read_of_unwritten")))
    assert only_pool.verdict is Verdict.PROVED  # the documented boundary: tier reads are not pool reads


def test_diagnose_finds_the_step_whose_event_is_the_violation() -> None:
    from ownership.analysis.explain.necessary import diagnose

    d = diagnose(trust("free_realloc_inflight"), INFLIGHT)
    assert d.violating_states > 0
    assert [n.action for n in d.necessary] == ["admit_and_post", "abort_and_admit"]
