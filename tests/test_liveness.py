"""Temporal properties and fairness: declarations, the fair-component search, lassos, replay, other engines."""

from __future__ import annotations

import json
from array import array
from dataclasses import replace
from pathlib import Path

import pytest

from ownership.core.replay import replay
from ownership.core.result import StopReason, Verdict
from ownership.core.trace import Trace, TraceKind
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.liveness.fair import FairActions, components, cycle_through, fair_components
from ownership.engines.liveness.graph import StateGraph
from ownership.engines.storage import Tree
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.render.itf import trace_to_itf

HERE = Path(__file__).resolve().parent / "liveness"


def spec_of(name: str):  # type: ignore[no-untyped-def]
    return load_spec(HERE / f"{name}.py")


def graph(edges: dict[int, list[tuple[int, int]]], n: int) -> StateGraph:
    """A hand-made graph: ``edges[src] = [(dst, action), ...]``."""
    heads, targets, actions = array("q", [0]), array("q"), array("i")
    for node in range(n):
        for dst, act in edges.get(node, []):
            targets.append(dst)
            actions.append(act)
        heads.append(len(targets))
    return StateGraph(list(range(n)), heads, targets, actions, {}, Tree(), array("i", [0] * n))


# -- the fair-component search on hand-made graphs ----------------------------------------------------------------
def test_components_split_a_graph_into_its_strongly_connected_parts() -> None:
    g = graph({0: [(1, 0)], 1: [(2, 0)], 2: [(1, 0), (3, 0)], 3: []}, 4)
    assert sorted(sorted(c) for c in components(g, range(4))) == [[0], [1, 2], [3]]


def test_weak_fairness_discards_a_cycle_that_never_takes_an_always_enabled_step() -> None:
    # 0 <-> 1 by action 0; action 1 (0 -> 2) is enabled in 0 only; action 2 is enabled in both and never taken inside.
    g = graph({0: [(1, 0), (2, 1), (2, 2)], 1: [(0, 0), (2, 2)], 2: [(2, 3)]}, 3)
    assert sorted(map(sorted, fair_components(g, {0, 1}, FairActions()))) == [[0, 1]]
    assert fair_components(g, {0, 1}, FairActions(weak=frozenset({2}))) == []
    # Action 1 is disabled in state 1: weakly fair or not, the cycle stays fair.
    assert sorted(map(sorted, fair_components(g, {0, 1}, FairActions(weak=frozenset({1}))))) == [[0, 1]]


def test_strong_fairness_refines_a_component_to_the_states_where_the_starved_step_is_disabled() -> None:
    # 0 -> 1 -> 2 -> 0, and 1 <-> 3 (a self-contained loop); action 9 leaves from state 0 only (to 4).
    g = graph({0: [(1, 0), (4, 9)], 1: [(2, 0), (3, 1)], 2: [(0, 0)], 3: [(1, 1)], 4: [(4, 5)]}, 5)
    assert fair_components(g, {0, 1, 2, 3}, FairActions(weak=frozenset({9}))) != []  # 9 disabled in 1, 2, 3
    found = fair_components(g, {0, 1, 2, 3}, FairActions(strong=frozenset({9})))
    assert sorted(map(sorted, found)) == [[1, 3]]  # the loop 1 <-> 3 never enables 9


def test_a_dead_end_is_a_fair_component_and_a_transient_state_is_none() -> None:
    g = graph({0: [(1, 0)], 1: []}, 2)
    assert fair_components(g, {0, 1}, FairActions(weak=frozenset({0}))) == [frozenset({1})]
    assert cycle_through(g, frozenset({1}), 1, FairActions()) == []


def test_the_cycle_takes_every_fair_step_of_its_component() -> None:
    g = graph({0: [(1, 0)], 1: [(0, 1), (2, 2)], 2: [(0, 3)]}, 3)
    fair = FairActions(weak=frozenset({3}))
    cycle = cycle_through(g, frozenset({0, 1, 2}), 0, fair)
    assert 3 in [g.actions[e] for e in cycle]
    assert g.targets[cycle[-1]] == 0


# -- explore on specs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("symmetry", [True, False])
def test_a_page_leak_is_a_fair_lasso_and_its_fix_holds(symmetry: bool) -> None:
    buggy = explore(Instance(spec_of("page_leak_buggy")), ExploreOptions(symmetry=symmetry))
    assert buggy.verdict is Verdict.VIOLATED and buggy.violated == "finished_pages_return"
    trace = buggy.trace
    assert trace is not None and trace.kind is TraceKind.LASSO
    assert [s.action for s in trace.steps[:2]] == ["admit", "abort"] and trace.since == 2 and trace.loop == 2
    assert trace.subject == "A"
    fixed = explore(Instance(spec_of("page_leak_fixed")), ExploreOptions(symmetry=symmetry))
    assert fixed.verdict is Verdict.PROVED and fixed.properties == ("finished_pages_return",)
    assert "hold on every fair path" in fixed.coverage()


def test_a_fix_that_frees_later_holds_only_if_the_sweep_is_fair() -> None:
    spec = spec_of("page_leak_fixed")
    spec.fairness.pop("sweep")
    result = explore(Instance(spec))
    assert result.verdict is Verdict.VIOLATED and result.trace is not None
    assert [s.action for s in result.trace.steps[:2]] == ["admit", "abort"]
    assert "fairness weak: finish, recycle; strong: none" in result.notes[-1]


def test_without_fairness_a_path_only_has_to_keep_moving() -> None:
    spec = spec_of("starved_admit")
    spec.fairness.clear()
    # One request: whatever is enabled is its own next step, and a path may not stop while one is.
    assert explore(Instance(spec, {"requests": 1})).verdict is Verdict.PROVED
    two = explore(Instance(spec))
    assert two.verdict is Verdict.VIOLATED and two.trace is not None
    assert "fairness weak: none; strong: none" in two.notes[-1]


def test_a_state_where_nothing_runs_is_a_lasso_that_stays() -> None:
    result = explore(Instance(spec_of("page_leak_buggy"), {"requests": 1}))
    trace = result.trace
    assert trace is not None and trace.loop == len(trace.steps) == 2
    assert replay(Instance(spec_of("page_leak_buggy"), {"requests": 1}), trace).ok


def test_weak_admission_starves_a_waiting_request_and_strong_does_not() -> None:
    spec = spec_of("starved_admit")
    spec.fair("admit", "weak")
    weak = explore(Instance(spec))
    assert weak.verdict is Verdict.VIOLATED and weak.violated == "waiting_gets_admitted"
    spec.fair("admit", "strong")
    assert explore(Instance(spec)).verdict is Verdict.PROVED


def test_always_eventually_and_eventually_always() -> None:
    spec = spec_of("page_leak_fixed")
    kv = spec.extensions["ownership"].pools[0]

    def nothing_held(s):  # type: ignore[no-untyped-def]
        return all(len(kv.pages_of(s, r)) == 0 for r in s.all(spec.domains["Req"]))

    spec.always_eventually(nothing_held)
    spec.eventually_always(nothing_held)
    inst = Instance(spec)
    first = explore(inst, ExploreOptions(invariants=("always_eventually_nothing_held",)))
    # Two requests can take turns holding the page for ever (finish and recycle taken, admit unfair).
    assert first.verdict is Verdict.VIOLATED and first.trace is not None and first.trace.loop is not None
    assert replay(inst, first.trace).ok
    second = explore(inst, ExploreOptions(invariants=("eventually_always_nothing_held",)))
    assert second.verdict is Verdict.VIOLATED and replay(inst, second.trace).ok  # type: ignore[arg-type]
    # Fair admission of nobody, one request: it may stay idle for ever, so []<> holds; <>[] fails (admit, finish...).
    single = explore(Instance(spec, {"requests": 1}), ExploreOptions(invariants=("always_eventually_nothing_held",)))
    assert single.verdict is Verdict.PROVED


def test_properties_wait_for_the_invariants_and_for_a_finished_search() -> None:
    bounded = explore(Instance(spec_of("page_leak_buggy")), ExploreOptions(max_depth=2))
    assert bounded.verdict is Verdict.BOUNDED_OK
    assert any("temporal properties not decided" in n for n in bounded.notes)


# -- the lasso on replay, in files --------------------------------------------------------------------------------
def test_a_lasso_round_trips_through_json_and_replays() -> None:
    inst = Instance(spec_of("page_leak_buggy"))
    trace = explore(inst).trace
    assert trace is not None
    back = Trace.from_json(json.loads(trace.dumps()))
    assert (back.kind, back.loop, back.since, back.subject) == (TraceKind.LASSO, trace.loop, trace.since, "A")
    assert replay(inst, back).ok
    # Moved loop: the path does not return there; another element: the property holds for it.
    assert not replay(inst, replace(back, loop=1)).ok
    assert not replay(inst, replace(back, subject="B")).ok


def test_a_lasso_that_is_not_fair_does_not_replay() -> None:
    spec = spec_of("page_leak_buggy")
    inst = Instance(spec)
    trace = explore(inst).trace
    assert trace is not None
    spec.fair("admit", "weak")  # now the loop starves admit(A)? no: A is aborted; B's admit is taken in the loop
    assert replay(Instance(spec), trace).ok
    spec.fair("abort", "strong")  # abort(B) is enabled in the loop (B runs) and never taken
    outcome = replay(Instance(spec), trace)
    assert not outcome.ok and "not fair to abort(B)" in outcome.message


def test_itf_marks_the_loop() -> None:
    trace = explore(Instance(spec_of("page_leak_buggy"))).trace
    assert trace is not None and trace.loop is not None
    itf = trace_to_itf(trace)
    assert itf["loop"] == trace.loop
    assert len(itf["states"]) == len(trace.steps)  # the last state is the loop's first again: left out
    assert itf["#meta"]["property"] == "finished_pages_return"


def test_a_corrupt_loop_position_is_refused() -> None:
    trace = explore(Instance(spec_of("page_leak_buggy"))).trace
    assert trace is not None
    data = json.loads(trace.dumps())
    data["extra"]["loop"] = 99
    with pytest.raises(OwnershipError) as err:
        Trace.from_json(data)
    assert err.value.code is Code.TRACE_CORRUPT and "past the trace's last state" in err.value.message


# -- declarations -------------------------------------------------------------------------------------------------
def test_malformed_declarations_are_refused_at_their_line() -> None:
    spec = spec_of("page_leak_fixed")
    Req = spec.domains["Req"]
    with pytest.raises(OwnershipError) as err:
        spec.leads_to(lambda s: True, lambda s: True, each=Req, name="x")
    assert err.value.code is Code.PROPERTY_INVALID and "expected (s, r)" in err.value.message
    assert err.value.line is not None
    with pytest.raises(OwnershipError) as err:
        spec.leads_to(lambda s, r: True, lambda s, r: True, each=Req)
    assert "needs name=" in err.value.message
    with pytest.raises(OwnershipError) as err:
        spec.always_eventually(lambda s: True, each="Req", name="y")  # type: ignore[arg-type]
    assert "each= takes a domain" in err.value.message
    with pytest.raises(OwnershipError) as err:
        spec.fair("admit", "sometimes")
    assert err.value.code is Code.PROPERTY_INVALID and "weak" in err.value.message
    with pytest.raises(OwnershipError) as err:
        spec.fair("nope")
    assert "fair names no action 'nope'" in err.value.message
    with pytest.raises(OwnershipError) as err:
        spec.always_eventually(lambda s: True, name="finished_pages_return")
    assert "declared twice" in err.value.message


def test_a_property_that_returns_no_bool_is_refused() -> None:
    spec = spec_of("page_leak_fixed")
    spec.always_eventually(lambda s: [], name="listy")
    with pytest.raises(OwnershipError) as err:
        explore(Instance(spec), ExploreOptions(invariants=("listy",)))
    assert err.value.code is Code.SPEC_NOT_BOOL


def test_an_unknown_name_is_refused_and_a_property_name_selects_it() -> None:
    inst = Instance(spec_of("page_leak_buggy"))
    with pytest.raises(OwnershipError) as err:
        explore(inst, ExploreOptions(invariants=("nope",)))
    assert err.value.code is Code.UNKNOWN_INVARIANT and "finished_pages_return" in err.value.message
    only_safety = explore(inst, ExploreOptions(invariants=("no_double_ownership",)))
    assert only_safety.verdict is Verdict.PROVED and only_safety.properties == ()
    only_liveness = explore(inst, ExploreOptions(invariants=("finished_pages_return",)))
    assert only_liveness.verdict is Verdict.VIOLATED and only_liveness.stop_reason is StopReason.VIOLATION


def test_an_engine_that_cannot_decide_properties_warns_instead_of_passing() -> None:
    from ownership.engines.registry import ENGINES

    inst = Instance(spec_of("page_leak_buggy"))
    bmc = ENGINES["bmc"]
    blind = replace(bmc, capabilities=replace(bmc.capabilities, liveness=False))  # as an engine without liveness
    safe = explore(inst, ExploreOptions(invariants=("no_double_ownership",)))
    result = blind.undecided(inst, ExploreOptions(), safe)
    (warning,) = [w for w in result.warnings if w.code is Code.PROPERTY_UNDECIDED]
    assert "bmc does not decide temporal properties: finished_pages_return was not checked (run --engine explore" \
        in warning.message
    assert result.vacuity()
    # Every engine decides them now: none of them warns.
    assert all(e.capabilities.liveness for e in ENGINES.values())


# -- bmc: the concrete search's graph when it exhausts the states, else a bounded lasso search ---------------------
def test_bmc_decides_properties_exactly_when_its_concrete_search_exhausts_the_states() -> None:
    from ownership.engines.bmc import bmc
    from ownership.engines.z3run import BmcOptions

    buggy = Instance(spec_of("page_leak_buggy"))
    found = bmc(buggy, BmcOptions(max_depth=10))
    assert found.verdict is Verdict.VIOLATED and found.violated == "finished_pages_return"
    assert found.trace is not None and found.trace.kind is TraceKind.LASSO and replay(buggy, found.trace).ok
    fixed = bmc(Instance(spec_of("page_leak_fixed")), BmcOptions(max_depth=10))
    assert fixed.verdict is Verdict.BOUNDED_OK and fixed.properties == ("finished_pages_return",)
    assert any("decided exactly, by a concrete search of every reachable state" in n for n in fixed.notes)


@pytest.mark.parametrize("name", ["page_leak_buggy", "starved_admit"])
def test_bmc_finds_the_lassos_symbolically(name: str) -> None:
    from ownership.engines.bmc import bmc
    from ownership.engines.z3run import BmcOptions

    spec = spec_of(name)
    if name == "starved_admit":
        spec.fair("admit", "weak")
    inst = Instance(spec)
    found = bmc(inst, BmcOptions(max_depth=8, prefix_states=0))
    assert found.verdict is Verdict.VIOLATED and found.trace is not None and found.trace.loop is not None
    assert replay(inst, found.trace).ok
    assert any("fair lasso of" in n for n in found.notes)
    # The same length as the shortest lasso the explicit search can find here (depth by depth).
    assert len(found.trace) <= len(explore(inst).trace or ())  # type: ignore[arg-type]


def test_bmc_bounds_what_it_cannot_find_and_says_so() -> None:
    from ownership.engines.bmc import bmc
    from ownership.engines.z3run import BmcOptions

    spec = spec_of("starved_admit")
    spec.fair("admit", "strong")
    result = bmc(Instance(spec), BmcOptions(max_depth=6, prefix_states=0))
    assert result.verdict is Verdict.BOUNDED_OK
    assert any("no fair lasso of up to 6 steps breaks waiting_gets_admitted" in n for n in result.notes)


# -- the vocabulary's built-in properties -------------------------------------------------------------------------
def test_built_in_properties_follow_a_derived_spec_and_find_the_leak() -> None:
    base = spec_of("page_leak_buggy")
    own = base.extensions["ownership"]
    St = base.vars["st"].type
    fixed = base.derive("page_leak_with_builtins")

    def ended(s, r):  # type: ignore[no-untyped-def]
        return s.st[r] in (St.DONE, St.ABORTED)

    def started(s, r):  # type: ignore[no-untyped-def]
        return s.st[r] != St.IDLE

    own.properties(ended=ended, started=started, spec=fixed)
    assert "pages_return" not in base.properties and {"pages_return", "requests_finish"} <= set(fixed.properties)
    prop = fixed.properties["pages_return"]
    assert prop.file == __file__ and prop.formula() == "\\A r \\in Req: ended(r) ~> holds_no_page(r)"
    result = explore(Instance(fixed), ExploreOptions(invariants=("pages_return",)))
    assert result.verdict is Verdict.VIOLATED and result.trace is not None and replay(Instance(fixed), result.trace).ok
    # A running request ends: finish is weakly fair, so it cannot be put off for ever.
    assert explore(Instance(fixed), ExploreOptions(invariants=("requests_finish",))).verdict is Verdict.PROVED


def test_built_in_properties_say_what_they_need() -> None:
    own = spec_of("page_leak_fixed").extensions["ownership"]
    with pytest.raises(OwnershipError) as err:
        own.properties()
    assert err.value.code is Code.PROPERTY_INVALID and "needs ended=" in err.value.message
    with pytest.raises(OwnershipError) as err:
        own.properties("requests_finish", ended=lambda s, r: True)
    assert "requests_finish needs started=" in err.value.message
    with pytest.raises(OwnershipError) as err:
        own.properties("pages_came_back", ended=lambda s, r: True)
    assert err.value.code is Code.UNKNOWN_INVARIANT and "pages_return" in err.value.message


# -- symmetry: the annotated quotient against the full graph ------------------------------------------------------
def _with_global_properties(name: str):  # type: ignore[no-untyped-def]
    spec = spec_of(name)
    kv = spec.extensions["ownership"].pools[0]
    Req = spec.domains["Req"]

    def none_held(s):  # type: ignore[no-untyped-def]
        return all(len(kv.pages_of(s, r)) == 0 for r in s.all(Req))

    spec.always_eventually(none_held)
    spec.eventually_always(none_held)
    return spec


def _agree(spec, combos, sizes) -> int:  # type: ignore[no-untyped-def]
    from ownership.lang.temporal import Fairness

    compared = 0
    actions = list(spec.actions)
    for combo in combos:
        spec.fairness.clear()
        spec.fairness.update({a: Fairness(f) for a, f in zip(actions, combo, strict=True) if f})
        for n in sizes:
            for prop in spec.properties:
                reduced = explore(Instance(spec, {"requests": n}), ExploreOptions(invariants=(prop,)))
                full = explore(Instance(spec, {"requests": n}), ExploreOptions(invariants=(prop,), symmetry=False))
                assert reduced.verdict is full.verdict, (spec.name, combo, n, prop, reduced.notes[-1])
                compared += 1
    return compared


@pytest.mark.parametrize("name", ["page_leak_buggy", "page_leak_fixed", "starved_admit"])
def test_the_quotient_decides_as_the_full_graph_does_under_each_fairness(name: str) -> None:
    spec = _with_global_properties(name)
    n = len(spec.actions)
    combos = [(None,) * n, ("weak",) * n, ("strong",) * n] + [
        tuple("strong" if i == j else "weak" for i in range(n)) for j in range(n)]
    assert _agree(spec, combos, [2, 3]) == len(combos) * 2 * len(spec.properties)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["page_leak_buggy", "page_leak_fixed", "starved_admit"])
def test_the_quotient_decides_as_the_full_graph_does_under_every_fairness(name: str) -> None:
    import itertools

    spec = _with_global_properties(name)
    combos = list(itertools.product([None, "weak", "strong"], repeat=len(spec.actions)))
    # Three requests: renamings of three elements are where a quotient could go wrong (two is the fast test's).
    assert _agree(spec, combos, [3]) == len(combos) * len(spec.properties)


def test_the_quotient_is_smaller_and_says_how_it_was_decided() -> None:
    reduced = explore(Instance(spec_of("page_leak_fixed"), {"requests": 3}))
    full = explore(Instance(spec_of("page_leak_fixed"), {"requests": 3}), ExploreOptions(symmetry=False))
    assert reduced.verdict is full.verdict is Verdict.PROVED
    assert "symmetry-reduced graph" in reduced.notes[-1] and "concrete preimage" in reduced.notes[-1]
    assert "full state graph" in full.notes[-1]
    states = [int(note.split("(")[1].split(" states")[0].replace(",", "")) for note in (reduced.notes[-1],
                                                                                      full.notes[-1])]
    assert states[0] < states[1]


def test_a_quotient_lasso_is_concrete_and_replays() -> None:
    spec = spec_of("starved_admit")
    spec.fair("admit", "weak")
    inst = Instance(spec, {"requests": 3})
    result = explore(inst)
    assert result.verdict is Verdict.VIOLATED and result.trace is not None
    assert replay(inst, result.trace).ok


def test_a_property_that_names_an_element_is_refused_under_symmetry() -> None:
    from ownership.lang.elements import ix  # the checker's own index of an element: spec code never sees one

    spec = spec_of("page_leak_fixed")
    St = spec.vars["st"].type

    def first_idle(s, r):  # type: ignore[no-untyped-def]
        return ix(r) != 0 or s.st[r] == St.IDLE

    spec.always_eventually(first_idle, each=spec.domains["Req"])
    with pytest.raises(OwnershipError) as err:
        explore(Instance(spec), ExploreOptions(invariants=("always_eventually_first_idle",)))
    assert err.value.code is Code.SYMMETRY_MISMATCH and "--no-symmetry" in err.value.message
    assert err.value.line is not None
    unreduced = explore(Instance(spec), ExploreOptions(invariants=("always_eventually_first_idle",), symmetry=False))
    assert unreduced.verdict in (Verdict.PROVED, Verdict.VIOLATED)


# -- prove and hypothesis -----------------------------------------------------------------------------------------
def test_prove_decides_properties_on_the_enumerated_reachable_states() -> None:
    from ownership.engines.prove import prove
    from ownership.engines.z3run import BmcOptions

    buggy = Instance(spec_of("page_leak_buggy"))
    found = prove(buggy, BmcOptions(spacer=False))
    assert found.verdict is Verdict.VIOLATED and found.trace is not None and replay(buggy, found.trace).ok
    fixed = prove(Instance(spec_of("page_leak_fixed")), BmcOptions(spacer=False))
    assert fixed.verdict is Verdict.PROVED and fixed.properties == ("finished_pages_return",)



@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="order-dependent: in CI's slow stage, after other tests in the same worker, "
                   "k-induction does not close this invariant (UNKNOWN, never a false PROVED); alone it proves: "
                   "state kept between checks in one process, to be found")
def test_prove_proves_properties_by_k_liveness_past_the_enumerated_states() -> None:
    from ownership.engines.prove import prove
    from ownership.engines.z3run import BmcOptions

    # Spacer stays on: k-induction alone closes the invariant only when the symmetry proof (time-limited) lands,
    # which a loaded machine may not give it; the properties' part is what this test is about.
    fixed = prove(Instance(spec_of("page_leak_fixed")), BmcOptions(reach_states=3))
    assert fixed.verdict is Verdict.PROVED and fixed.properties == ("finished_pages_return",), fixed.notes
    assert sum("proved by k-liveness at k=" in n for n in fixed.notes) == 2  # one per request
    # A leak is never proved: k-liveness does not close, the verdict is UNKNOWN (bmc or explore show the lasso).
    buggy = prove(Instance(spec_of("page_leak_buggy")), BmcOptions(reach_states=3))
    assert buggy.verdict is Verdict.UNKNOWN
    assert any("neither the enumerated reachable states" in n for n in buggy.notes)


def test_hypothesis_decides_exactly_when_its_first_phase_exhausts_the_space() -> None:
    from ownership.engines.hypothesis_engine.engine import check_stateful
    from ownership.engines.hypothesis_engine.options import HypothesisOptions

    buggy = Instance(spec_of("page_leak_buggy"))
    found = check_stateful(buggy, HypothesisOptions(derandomize=True))
    assert found.verdict is Verdict.VIOLATED and found.trace is not None and found.trace.loop is not None
    fixed = check_stateful(Instance(spec_of("page_leak_fixed")), HypothesisOptions(derandomize=True))
    assert fixed.verdict is Verdict.PROVED and fixed.properties == ("finished_pages_return",)


def test_hypothesis_lasso_walks_find_a_leak_and_never_prove() -> None:
    from ownership.engines.hypothesis_engine.engine import check_stateful
    from ownership.engines.hypothesis_engine.options import HypothesisOptions

    options = HypothesisOptions(derandomize=True, exhaustive_states=0, max_examples=5, walks=40, steps=30)
    buggy = Instance(spec_of("page_leak_buggy"), {"requests": 3})
    found = check_stateful(buggy, options)
    assert found.verdict is Verdict.VIOLATED and found.trace is not None and found.trace.kind is TraceKind.LASSO
    assert replay(buggy, found.trace).ok and "a lasso is evidence, never a proof" in found.notes[0]
    fixed = check_stateful(Instance(spec_of("page_leak_fixed"), {"requests": 3}), options)
    assert fixed.verdict is Verdict.BOUNDED_OK and fixed.properties == ("finished_pages_return",)
    assert any("found no fair lasso breaking them (sampled: not a proof)" in n for n in fixed.notes)


def test_a_long_wait_without_a_lasso_is_suspected_never_a_verdict() -> None:
    import random

    from ownership.engines.hypothesis_engine.lassos import lasso_walks

    spec = spec_of("starved_admit")
    spec.fair("admit", "strong")  # holds: no fair lasso, but a waiting request can wait long in a random walk
    inst = Instance(spec, {"requests": 3})
    search = lasso_walks(inst, list(spec.properties.values()), 30, 60, random.Random(1))
    assert search.found is None and search.loops > 0
    assert all(s.startswith("suspected, not a verdict") for s in search.suspected())


def test_the_picture_marks_the_loop_and_the_pages_never_returned() -> None:
    from ownership.render.dot import trace_to_dot

    trace = explore(Instance(spec_of("page_leak_buggy"))).trace
    assert trace is not None
    dot = trace_to_dot(trace)
    assert "finished_pages_return is broken for A: steps 3-5 repeat for ever" in dot.replace("&#45;", "-")
    assert dot.count(">loop<") == 3 and dot.count("never returned") == 1
    assert "temporal property broken: " in dot


def test_the_html_report_marks_the_loop(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ownership.cli import app

    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", str(HERE / "page_leak_buggy.py"), "--out", str(out)])
    assert res.exit_code == 1, res.output
    html = out.read_text(encoding="utf-8")
    assert "back to state 2, and round again for ever" in html
    assert html.count('<span class="cause">loop</span>') == 3


def test_the_json_junit_and_sarif_reports_carry_the_property_and_the_loop(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ownership.cli import app

    args = ["check", str(HERE / "page_leak_buggy.py"), "--no-render", "--out", str(tmp_path / "out"),
            "--report", f"json={tmp_path / 'r.json'}", "--junit", str(tmp_path / "j.xml"),
            "--sarif", str(tmp_path / "s.sarif")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output
    (spec,) = json.loads((tmp_path / "r.json").read_text())["specs"]
    assert spec["properties"] == ["finished_pages_return"] and spec["violated"] == "finished_pages_return"
    assert (spec["trace"]["loop"], spec["trace"]["since"], spec["trace"]["subject"]) == (2, 2, "A")
    assert {i["name"]: i["status"] for i in spec["invariants"]}["finished_pages_return"] == "failed"
    assert 'name="finished_pages_return"' in (tmp_path / "j.xml").read_text()
    sarif = json.loads((tmp_path / "s.sarif").read_text())
    message = sarif["runs"][0]["results"][0]["message"]["text"]
    assert "breaks finished_pages_return for A on a fair path: 2 steps to state 2, then steps 3-5 repeat" in message
