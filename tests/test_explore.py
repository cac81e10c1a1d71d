"""The explicit-state engine: pinned state counts, shortest traces, limits, symmetry."""

from __future__ import annotations

import pytest

from conftest import instance
from ownership.core.result import StopReason, Verdict
from ownership.core.trace import TraceKind
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.symmetry import make_canonicalizer, plan_symmetry

# (spec, symmetry) -> (verdict, distinct states, transitions, depth).  For the
# buggy spec the counts are those explored until the violation; breadth-first
# order is deterministic, so they are stable.
PINNED = {
    ("sglang_disagg_v0_5_19", True): (Verdict.VIOLATED, 874, 2044, 15),
    ("sglang_disagg_v0_5_19", False): (Verdict.VIOLATED, 85945, 208519, 15),
    ("sglang_disagg_v0_5_21", True): (Verdict.PROVED, 334, 783, 16),
    ("sglang_disagg_v0_5_21", False): (Verdict.PROVED, 16313, 42354, 16),
    ("sglang_single_node", True): (Verdict.PROVED, 57, 92, 10),
    ("sglang_single_node", False): (Verdict.PROVED, 405, 696, 10),
}


@pytest.mark.parametrize(("name", "symmetry"), sorted(PINNED))
def test_pinned_state_counts(name: str, symmetry: bool) -> None:
    result = explore(instance(name), ExploreOptions(symmetry=symmetry))
    s = result.stats
    assert (result.verdict, s.states, s.transitions, s.depth) == PINNED[(name, symmetry)]


def test_v0_5_19_counterexample_is_shortest_and_shows_the_leak() -> None:
    result = explore(instance("sglang_disagg_v0_5_19"))
    assert result.violated == "no_foreign_read"
    trace = result.trace
    assert trace is not None and len(trace) == 15
    # No violation exists in fewer steps: the same search bounded to 14 steps is clean.
    bounded = explore(instance("sglang_disagg_v0_5_19"), ExploreOptions(max_depth=14))
    assert bounded.verdict is Verdict.BOUNDED_OK and bounded.stop_reason is StopReason.DEPTH_LIMIT
    assert bounded.stats.depth == 14
    # The last step is B's decode reading a page that holds A's KV, and B's client gets 200.
    last = trace.steps[-1]
    assert last.action == "decode_forward"
    foreign = [e for e in last.events if e.kind == "read" and e.violates == "no_foreign_read"]
    assert foreign and foreign[0].get("req") != foreign[0].get("content")
    assert trace.states[-1]["http"][last.args[0]] == "OK_200"
    # B was rejected on prefill (placeholder of one token) yet admitted on decode.
    assert trace.states[-1]["p_to_finish"][last.args[0]] is True
    assert trace.states[-1]["p_input_len"][last.args[0]] == 1


@pytest.mark.slow
def test_symmetry_never_changes_verdicts_or_shortest_length() -> None:
    for name in ("sglang_disagg_v0_5_19", "sglang_disagg_v0_5_21", "sglang_single_node"):
        on = explore(instance(name), ExploreOptions(symmetry=True))
        off = explore(instance(name), ExploreOptions(symmetry=False))
        assert on.verdict == off.verdict and on.violated == off.violated
        assert (len(on.trace) if on.trace else None) == (len(off.trace) if off.trace else None)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sglang_single_node", "sglang_disagg_v0_5_21"])
def test_symmetry_keys_are_exact_orbits(name: str) -> None:
    """Reduced count == number of orbits among all states of the unreduced search."""
    inst = instance(name)
    canon = make_canonicalizer(inst, plan_symmetry(inst))
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
    reduced = explore(instance(name), ExploreOptions(symmetry=True))
    assert len({canon(s) for s in seen}) == reduced.stats.states
    assert len(seen) == explore(instance(name), ExploreOptions(symmetry=False)).stats.states


def test_state_and_time_limits_are_inconclusive_and_say_so() -> None:
    r = explore(instance("sglang_disagg_v0_5_21"), ExploreOptions(max_states=50))
    assert r.verdict is Verdict.UNKNOWN and r.stop_reason is StopReason.STATE_LIMIT
    assert any("inconclusive" in n for n in r.notes)
    r = explore(instance("sglang_disagg_v0_5_21"), ExploreOptions(max_seconds=0.0))
    assert r.verdict is Verdict.UNKNOWN and r.stop_reason is StopReason.TIME_LIMIT


def test_depth_limit_is_bounded_ok_and_states_the_bound() -> None:
    r = explore(instance("sglang_disagg_v0_5_21"), ExploreOptions(max_depth=5))
    assert r.verdict is Verdict.BOUNDED_OK
    assert "up to 5 steps" in r.coverage()


def test_exhaustive_verdict_states_what_was_covered() -> None:
    r = explore(instance("sglang_disagg_v0_5_21"))
    text = r.coverage()
    assert "all reachable states" in text and "334" in text and "requests=2" in text


def test_deadlock_check_is_opt_in() -> None:
    plain = explore(instance("toy_deadlock"))
    assert plain.verdict is Verdict.PROVED
    found = explore(instance("toy_deadlock"), ExploreOptions(deadlock=True))
    assert found.verdict is Verdict.VIOLATED and found.stop_reason is StopReason.DEADLOCK
    assert found.trace is not None and found.trace.kind is TraceKind.DEADLOCK
    # One request holds both pages; the other waits forever.
    assert len(found.trace) == 1


def test_invariant_selection() -> None:
    r = explore(instance("sglang_disagg_v0_5_19"), ExploreOptions(invariants=("no_double_ownership",)))
    assert r.verdict is Verdict.PROVED and r.invariants == ("no_double_ownership",)


def test_states_differing_only_by_minus_one_and_minus_two_are_distinct() -> None:
    """CPython's hash(-1) == hash(-2): deduplicating by hash would lose the -2 state."""
    from ownership import Spec, require
    from ownership.lang.instance import Instance

    spec = Spec("countdown")
    spec.var("x", int, init=0)

    @spec.action
    def dec(s):
        require(s.x > -3)
        s.x -= 1

    @spec.invariant
    def never_minus_two(s):
        return s.x != -2

    r = explore(Instance(spec))
    assert r.verdict is Verdict.VIOLATED and r.trace is not None and len(r.trace) == 2


def test_state_limit_equal_to_the_state_count_is_exhaustive() -> None:
    r = explore(instance("sglang_single_node"), ExploreOptions(max_states=57))
    assert r.verdict is Verdict.PROVED and r.stats.states == 57
