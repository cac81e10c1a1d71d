"""The Z3 engines: agreement with explore, replay checks, induction, parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, instance
from ownership.cli import app
from ownership.core.result import StopReason, Verdict
from ownership.core.trace import TraceKind
from ownership.engines.bmc import bmc
from ownership.engines.explore import explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

SOLVER = Path(__file__).resolve().parent / "solver"

# Specs small enough for the solver in a unit test, with parameters.
SMALL = [
    ("toy_double_free", {}),
    ("toy_safe_counter", {}),
    ("toy_deadlock", {}),
    # Library specs at one request (tests/test_corpus.py runs every library spec
    # at its default size through bmc and prove as well).
    ("sglang_single_node", {"requests": 1}),
    ("sglang_disagg_v0_5_19", {"requests": 1}),
    ("sglang_disagg_v0_5_21", {"requests": 1}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "params"), SMALL, ids=[f"{n}{'-' if p else ''}{'-'.join(f'{k}={v}' for k, v in p.items())}" for n, p in SMALL])
def test_bmc_agrees_with_explore(name: str, params: dict[str, int]) -> None:
    e = explore(instance(name, **params))
    b = bmc(instance(name, **params), BmcOptions(max_depth=20))
    assert (e.verdict is Verdict.VIOLATED) == (b.verdict is Verdict.VIOLATED)
    assert e.violated == b.violated
    if e.trace is not None:
        assert b.trace is not None and len(b.trace) == len(e.trace)
    else:
        # Terminating protocols: the solver shows no execution is longer than the explorer's depth.
        assert b.verdict is Verdict.PROVED and b.stop_reason is StopReason.EXHAUSTED
        assert b.stats.depth == e.stats.depth


def test_bmc_trace_replays_from_the_command_line(tmp_path: Path) -> None:
    spec = str(CORPUS / "toy_double_free.py")
    res = CliRunner().invoke(app, ["check", spec, "--engine", "bmc", "--out", str(tmp_path), "--no-render"])
    assert res.exit_code == 1, res.output
    assert "(bmc)" in res.stdout.splitlines()[0]
    res = CliRunner().invoke(app, ["replay", str(tmp_path / "trace.json")])
    assert res.exit_code == 0 and res.stdout.startswith("REPLAYED")


def test_a_wrong_encoding_is_caught_by_the_replay_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import ownership.vocab.encodings as sym
    from ownership.vocab.operation import encoding_of
    from ownership.vocab.pool import PagePool

    real_write = sym.write

    def mislabelling_write(s, pool, r, pages):  # type: ignore[no-untyped-def]
        return real_write(s, pool, 1 - r, pages)  # labels the KV with the other request

    monkeypatch.setattr(encoding_of(PagePool.write), "fn", mislabelling_write)
    # The solver now "finds" a foreign read that the concrete semantics does not have (asked at every
    # depth: a concrete search of the first depths would find the spec safe and leave the solver nothing to ask).
    with pytest.raises(OwnershipError) as info:
        bmc(instance("toy_safe_counter"), BmcOptions(max_depth=10, prefix_states=0))
    assert info.value.code is Code.INTERNAL_REPLAY
    assert "after step 1, field " in info.value.message and "concrete semantics" in info.value.message


def test_engine_all_compares_and_reports_agreement() -> None:
    res = CliRunner().invoke(app, ["check", str(CORPUS / "toy_double_free.py"), "--engine", "all", "--no-render",
                                   "--out", "/tmp/ownership-test-all"])
    assert res.exit_code == 1, res.output
    assert "agrees: bmc says VIOLATED" in res.output


def test_engine_disagreement_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import ownership.engines.registry as engines
    from ownership.core.result import CheckResult, Stats

    real = engines.run_engine

    def lying(name, inst, options, progress=None):  # type: ignore[no-untyped-def]
        if name == "bmc":
            return CheckResult(inst.spec.name, "bmc", Verdict.PROVED, StopReason.EXHAUSTED, Stats(), {}, ())
        return real(name, inst, options, progress)

    monkeypatch.setattr(engines, "run_engine", lying)
    res = CliRunner().invoke(app, ["check", str(CORPUS / "toy_double_free.py"), "--engine", "all", "--no-render",
                                   "--out", "/tmp/ownership-test-all"])
    assert res.exit_code == 4
    assert "OWN040" in res.output and "engines disagree" in res.output


def test_k_induction_proves_a_spec_that_is_not_one_inductive() -> None:
    r = prove(Instance(load_spec(SOLVER / "shift_two_inductive.py")), BmcOptions(max_k=5))
    assert r.verdict is Verdict.PROVED and r.stop_reason is StopReason.INDUCTION
    assert r.stats.depth == 2  # 1-induction fails (y := x from x != 0), 2-induction closes


def test_induction_failure_shows_a_counterexample_to_induction_then_a_helper_fixes_it(tmp_path: Path) -> None:
    path = SOLVER / "runaway_needs_helper.py"
    r = prove(Instance(load_spec(path)), BmcOptions(max_k=4, spacer=False, reach_states=0))
    assert r.verdict is Verdict.UNKNOWN and r.stop_reason is StopReason.INDUCTION_FAILED
    assert r.trace is not None and r.trace.kind is TraceKind.CTI
    assert r.trace.initial["x"] > 0  # starts outside the reachable states
    assert r.trace.states[-1]["x"] >= 1000
    helped = tmp_path / "helped.py"
    helped.write_text(path.read_text() + "\n\n@spec.invariant(helper=True)\ndef stays_zero(s):\n    return s.x == 0\n")
    r = prove(Instance(load_spec(helped)), BmcOptions(max_k=4, spacer=False, reach_states=0))
    assert r.verdict is Verdict.PROVED and r.stats.depth == 1


def test_spacer_proves_what_k_induction_cannot() -> None:
    # The single-node spec is not 1-inductive (an unreachable state can read a foreign page);
    # Spacer finds a strengthening invariant by itself.
    inst = instance("sglang_single_node", requests=1)
    r = prove(inst, BmcOptions(max_k=0, spacer_timeout=60, reach_states=0))
    assert r.verdict is Verdict.PROVED and r.stop_reason is StopReason.INVARIANT_FOUND, r.notes
    assert any("Spacer" in n for n in r.notes)


def test_minimize_finds_the_exact_boundary() -> None:
    inst = Instance(load_spec(SOLVER / "reserve_overflow.py"))
    r = bmc(inst, BmcOptions(max_depth=2, free=("prompt_tokens",), minimize="prompt_tokens"))
    assert r.verdict is Verdict.VIOLATED and r.extremum == ("prompt_tokens", 3 * 4 + 1)
    assert r.trace is not None and r.trace.params["prompt_tokens"] == 13
    # With a --where bound below the boundary there is no violation.
    r = bmc(inst, BmcOptions(max_depth=2, free=("prompt_tokens",), where=("prompt_tokens <= 12",)))
    assert r.verdict is Verdict.PROVED


def test_prove_for_every_value_of_a_free_parameter() -> None:
    inst = Instance(load_spec(SOLVER / "reserve_overflow.py"))
    r = prove(inst, BmcOptions(free=("prompt_tokens",), where=("prompt_tokens <= 12",)))
    assert r.verdict is Verdict.PROVED
    assert r.params["prompt_tokens"] == "free"


def test_solver_unknown_exits_3() -> None:
    res = CliRunner().invoke(app, ["check", str(CORPUS / "toy_safe_counter.py"), "--engine", "bmc",
                                   "--solver-timeout", "0.000001", "--no-render"])
    assert res.exit_code == 3, res.output
    assert res.stdout.startswith("UNKNOWN") and "unknown" in res.output


def test_free_parameter_that_sizes_a_domain_is_refused() -> None:
    with pytest.raises(OwnershipError, match="sets the size of domain"):
        bmc(instance("toy_safe_counter"), BmcOptions(free=("pages",)))


def test_symmetry_is_not_broken_twice_for_page_domains() -> None:
    inst = Instance(load_spec(SOLVER / "page_argument_and_alloc.py"))
    e = explore(inst)
    b = bmc(Instance(load_spec(SOLVER / "page_argument_and_alloc.py")), BmcOptions(max_depth=5))
    assert e.verdict is Verdict.VIOLATED and b.verdict is Verdict.VIOLATED
    assert e.trace is not None and b.trace is not None and len(b.trace) == len(e.trace)


def test_large_products_do_not_wrap() -> None:
    from ownership.engines.paramexplore import ParamOptions, explore_params

    path = SOLVER / "overflow_product.py"
    assert bmc(Instance(load_spec(path)), BmcOptions(max_depth=3, free=("P",))).verdict is Verdict.VIOLATED
    r = explore_params(Instance(load_spec(path)), ParamOptions(free=("P",), minimize="P"))
    assert r.extremum == ("P", 2**31 // 4)
    assert any("64-bit" in n for n in r.notes)


def test_prove_only_the_chosen_invariant() -> None:
    path = SOLVER / "two_invariants.py"
    r = prove(Instance(load_spec(path)), BmcOptions(invariants=("nonneg",)))
    assert r.verdict is Verdict.PROVED and r.invariants == ("nonneg",)
    r = prove(Instance(load_spec(path)), BmcOptions())
    assert r.verdict is Verdict.VIOLATED and r.violated == "below_two"


def test_bookkeeping_lemmas_are_kept_only_when_proved() -> None:
    from ownership.engines.z3run import encode
    from ownership.symbolic.lemmas import proven_lemmas
    from ownership.vocab.encodings import pool_lemmas

    def kept(inst: Instance) -> tuple[int, int]:
        sym = encode(inst, BmcOptions())
        own = inst.spec.extensions["ownership"]
        proposed = [c for pool in own.pools for _n, c in pool_lemmas(pool, inst, sym.cells)]
        proven = {c.get_id() for c in proven_lemmas(sym, BmcOptions())}
        return sum(c.get_id() in proven for c in proposed), len(proposed)

    # A correct allocator: every bookkeeping fact is inductive.
    n, total = kept(instance("sglang_disagg_v0_5_19", requests=1))
    assert n == total > 0
    # A double free puts a page on the free list twice: "free is 1 when unheld" is false there.
    n, total = kept(instance("toy_double_free"))
    assert 0 < n < total


def test_partial_order_reduction_keeps_the_shortest_violation_with_two_requests() -> None:
    # Two requests that share a pool: steps of different requests commute except on the pool.
    e = explore(instance("toy_double_free", requests=2))
    b = bmc(instance("toy_double_free", requests=2), BmcOptions(max_depth=10))
    assert e.trace is not None and b.trace is not None
    assert b.violated == e.violated and len(b.trace) == len(e.trace)


# -- integer width: narrow encodings are widened when an execution outgrows them ----


def test_narrow_encoding_is_widened_before_it_can_hide_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    # At 4 bits (-8..7) the counter overflows at 8: had the overflowing step simply been
    # left out, bmc would report no violation, and prove would prove below_ten.
    import ownership.engines.z3run as engine

    monkeypatch.setattr(engine, "initial_width", lambda inst, free=(): 4)
    inst = Instance(load_spec(SOLVER / "count_to_ten.py"))
    b = bmc(inst, BmcOptions(max_depth=12))
    assert b.verdict is Verdict.VIOLATED and b.trace is not None and len(b.trace) == 10
    assert any("4-bit integers were too narrow" in n for n in b.notes)
    assert any("integers are 8-bit" in n for n in b.notes)
    p = prove(Instance(load_spec(SOLVER / "count_to_ten.py")), BmcOptions())
    assert p.verdict is Verdict.VIOLATED


def test_a_constant_too_wide_for_the_encoding_widens_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import ownership.engines.z3run as engine

    monkeypatch.setattr(engine, "initial_width", lambda inst, free=(): 4)
    r = bmc(Instance(load_spec(SOLVER / "two_invariants.py")), BmcOptions(max_depth=5))
    assert r.verdict is Verdict.VIOLATED and r.violated == "below_two"
    assert any("integers are 4-bit" in n for n in r.notes)
    # 1000 needs 11 bits: the 4-bit and 8-bit encodings are given up on.
    r = prove(Instance(load_spec(SOLVER / "runaway_needs_helper.py")), BmcOptions(spacer=False))
    assert any("8-bit integers were too narrow" in n for n in r.notes)
    assert any("integers are 16-bit" in n for n in r.notes)


def test_values_that_outgrow_every_width_give_unknown_not_a_proof() -> None:
    inst = Instance(load_spec(SOLVER / "tripling.py"))
    b = bmc(inst, BmcOptions(max_depth=5))
    # 3**5 = 243 does not fit 8 bits: checked at 16 bits, and so said.
    assert b.verdict is Verdict.BOUNDED_OK
    assert any("8-bit integers were too narrow" in n for n in b.notes)
    assert any("integers are 16-bit" in n for n in b.notes)
    p = prove(Instance(load_spec(SOLVER / "tripling.py")), BmcOptions(spacer=False, reach_states=0))
    assert p.verdict is Verdict.UNKNOWN
    assert any("overflows 8-bit integers" in n for n in p.notes)


# -- Spacer's answers are checked, never taken on trust -----------------------------------


def test_a_spacer_invariant_that_does_not_hold_up_is_rejected() -> None:
    import z3

    from ownership.engines.prove.spacer import certificate_fails
    from ownership.engines.z3run import encode
    from ownership.symbolic.unroll import Unroller

    inst = instance("toy_double_free")
    sym = encode(inst, BmcOptions(), 8)
    un = Unroller(sym, prefix="h")
    x, y = un.state(0), un.state(1)
    reach = z3.Function("Reach", *[c.sort() for c in x], z3.BoolSort())
    bad = z3.Or(*[z3.Not(un.invariant(n, 0)) for n in inst.spec.invariants])
    trans = un.transition(0)

    def model_where_reach_is(body: z3.BoolRef) -> z3.ModelRef:
        s = z3.Solver()
        s.add(z3.ForAll(x, reach(*x) == body))
        assert s.check() == z3.sat
        return s.model()

    def verdict(body: z3.BoolRef) -> str:
        return certificate_fails(model_where_reach_is(body), reach, un.init(inst), x, y, [], [], trans, bad, BmcOptions())

    # "Every state" contains the double free; "no state" misses the initial one.
    assert verdict(z3.BoolVal(True)) == "it contains an error state"
    assert verdict(z3.BoolVal(False)) == "an initial state is outside it"
    # "Exactly the initial state" is not closed under steps.
    assert verdict(z3.And(*un.init(inst))) == "a step leaves it"


@pytest.mark.slow
def test_prove_on_a_buggy_spec_never_says_proved_even_if_spacer_answers_wrongly(monkeypatch: pytest.MonkeyPatch) -> None:
    # With xform.bit_blast, this Z3 answers "safe" for this buggy spec, with an invariant that
    # does not contain the initial state: the independent check must refuse the proof.
    import z3

    real = z3.SolverFor

    def bit_blasting(logic: str, *args: object, **kwargs: object) -> z3.Solver:
        s = real(logic, *args, **kwargs)  # type: ignore[arg-type]
        if logic == "HORN":
            s.set("xform.bit_blast", True)
        return s

    monkeypatch.setattr(z3, "SolverFor", bit_blasting)
    r = prove(instance("sglang_pd_abort_inflight_buggy"), BmcOptions(max_k=0, reach_states=0))
    assert r.verdict is not Verdict.PROVED
    # Whether Spacer answers wrongly (rejected, then bmc runs) or rightly, the trace is shown.
    assert r.verdict is Verdict.VIOLATED and r.trace is not None, r.notes


# -- the explicit reachable set as the inductive invariant -------------------------------------


@pytest.mark.slow
def test_prove_checks_the_reachable_set_as_the_inductive_invariant() -> None:
    r = prove(instance("sglang_disagg_v0_5_21"), BmcOptions(spacer=False))
    assert r.verdict is Verdict.PROVED and r.stop_reason is StopReason.INVARIANT_FOUND, r.notes
    assert r.stats.states == 16_313 and r.stats.depth == 16
    assert any("explicit reachable set as the inductive invariant" in n for n in r.notes)
    assert "the 16,313 reachable states, all within 16 steps" in r.coverage()


def test_a_reachable_set_missing_states_is_not_taken_as_a_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    # Claim completeness for a set with its last states cut off: the closure check must fail.
    import dataclasses

    import ownership.engines.diagram as diagram

    real = diagram.reachable_states

    def truncated(inst: Instance, max_states: int, fits: object = None, report: object = None) -> diagram.ReachableStates:
        reach = real(inst, max_states, fits, report)  # type: ignore[arg-type]
        return dataclasses.replace(reach, states=reach.states[:-3])

    monkeypatch.setattr(diagram, "reachable_states", truncated)
    r = prove(instance("sglang_single_node", requests=1), BmcOptions(max_k=0, spacer=False))
    assert r.verdict is Verdict.UNKNOWN
    assert any("is not a proof: a step of the symbolic transition relation leaves it" in n for n in r.notes), r.notes


@pytest.mark.slow
def test_a_reachable_violation_gives_the_shortest_trace() -> None:
    e = explore(instance("sglang_disagg_v0_5_19"))
    r = prove(instance("sglang_disagg_v0_5_19"), BmcOptions(spacer=False))
    assert r.verdict is Verdict.VIOLATED and r.violated == e.violated
    assert r.trace is not None and e.trace is not None and len(r.trace) == len(e.trace) == 15
    assert any("violates no_foreign_read" in n for n in r.notes), r.notes


@pytest.mark.slow
def test_the_reachable_set_is_skipped_above_its_limit() -> None:
    r = prove(instance("sglang_disagg_v0_5_21"), BmcOptions(spacer=False, reach_states=1_000))
    assert r.verdict is Verdict.UNKNOWN
    assert any("more than 1,000 states" in n for n in r.notes), r.notes


def _two_ways(first: str) -> Instance:
    """One step can break ``wide`` (eight ways) or ``narrow`` (one way); ``first`` is declared first."""
    from ownership import Spec

    spec = Spec(f"two_ways_{first}")
    Idx = spec.domain("Idx", 8, names=lambda i: f"i{i}")
    spec.var("hit", int, per=Idx, init=0)

    @spec.action
    def poke(s, i: Idx) -> None:  # type: ignore[no-untyped-def]
        s.hit[i] = 1

    def wide(s) -> bool:  # type: ignore[no-untyped-def]
        return all(s.hit[i] == 0 for i in s.all(Idx))

    def narrow(s) -> bool:  # type: ignore[no-untyped-def]
        return s.hit[0] == 0

    for name in (first, "narrow" if first == "wide" else "wide"):
        spec.invariant({"wide": wide, "narrow": narrow}[name], name=name)
    return Instance(spec)


@pytest.mark.parametrize("first", ["wide", "narrow"])
def test_of_two_invariants_broken_at_one_depth_the_declared_first_is_reported(first: str) -> None:
    """The solver's model may break either; the report follows the declaration, as explore's does."""
    for engine in (bmc, prove):
        result = engine(_two_ways(first), BmcOptions(max_depth=3, spacer=False))
        assert result.verdict is Verdict.VIOLATED and result.violated == first, (engine, result.violated)
    assert explore(_two_ways(first)).violated == first
