"""Deadlocks in every engine, each reported with what is stuck: the request, its actions, the guard blocking each."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import CORPUS
from ownership.core.replay import replay
from ownership.core.result import StopReason, Verdict
from ownership.core.trace import TraceKind
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.z3run import BmcOptions
from ownership.errors import OwnershipError
from ownership.lang.deadlock import stuck
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec


def _deadlocked() -> Instance:
    return Instance(load_spec(CORPUS / "toy_deadlock.py"))


def _run(engine: str, inst: Instance, **extra: object):  # type: ignore[no-untyped-def]
    if engine == "explore":
        return explore(inst, ExploreOptions(deadlock=True))
    if engine == "bmc":
        from ownership.engines.bmc import bmc

        return bmc(inst, dataclasses.replace(BmcOptions(max_depth=6, deadlock=True), **extra))
    if engine == "prove":
        from ownership.engines.prove import prove

        return prove(inst, dataclasses.replace(BmcOptions(spacer=False, deadlock=True), **extra))
    from ownership.engines.hypothesis_engine.engine import check_stateful
    from ownership.engines.hypothesis_engine.options import HypothesisOptions

    return check_stateful(inst, dataclasses.replace(HypothesisOptions(derandomize=True, deadlock=True), **extra))


CASES = [("explore", {}), ("bmc", {}), ("bmc", {"prefix_states": 0}), ("prove", {}), ("hypothesis", {}),
         ("hypothesis", {"exhaustive_states": 0, "max_examples": 2, "walks": 10, "steps": 5})]


@pytest.mark.parametrize(("engine", "extra"), CASES, ids=[f"{e}-{'-'.join(x) or 'default'}" for e, x in CASES])
def test_every_engine_finds_the_deadlock_and_says_what_is_stuck(engine: str, extra: dict[str, object]) -> None:
    inst = _deadlocked()
    result = _run(engine, inst, **extra)
    assert result.verdict is Verdict.VIOLATED and result.stop_reason is StopReason.DEADLOCK
    assert result.trace is not None and result.trace.kind is TraceKind.DEADLOCK and replay(inst, result.trace).ok
    stuck_lines = [n for n in result.notes if " is stuck: " in n]
    assert len(stuck_lines) == 2 and any("admit(A): toy_deadlock.py:" in n for n in stuck_lines)
    assert any("require(s.phase[r] == Phase.WAITING)" in n for n in stuck_lines)


def test_the_stuck_report_names_each_request_and_the_guard_line() -> None:
    inst = _deadlocked()
    trace = explore(inst, ExploreOptions(deadlock=True)).trace
    assert trace is not None
    report = stuck(inst, inst.from_json(trace.states[-1]))
    assert [s.request for s in report] == ["A", "B"]
    waiting = next(s for s in report if any(b.call == "admit(B)" for b in s.blocked))
    (blocked,) = waiting.blocked
    assert blocked.line > 0 and blocked.text.startswith("pool.alloc")  # B waits for pages A holds


@pytest.mark.parametrize("engine", ["bmc", "prove", "hypothesis"])
def test_a_deadlock_free_spec_says_so(engine: str) -> None:
    inst = Instance(load_spec(CORPUS / "toy_safe_counter.py"))
    result = _run(engine, inst)
    assert result.verdict is not Verdict.VIOLATED
    assert any("no deadlock" in n for n in result.notes), result.notes


def test_prove_does_not_claim_deadlock_freedom_past_the_states_it_enumerated() -> None:
    from pathlib import Path

    leak_fixed = Path(__file__).resolve().parent / "liveness" / "page_leak_fixed.py"
    # Induction proves the invariant; the reachable states are not enumerated (--reach-states 1).
    result = _run("prove", Instance(load_spec(leak_fixed)), reach_states=1, invariants=("no_double_ownership",))
    assert result.verdict is Verdict.UNKNOWN
    assert any("deadlocks not decided" in n for n in result.notes)


def test_deadlock_is_an_option_of_every_engine_but_not_with_free() -> None:
    from ownership.engines.registry import resolve
    from ownership.session.settings import Settings

    for engine in ("explore", "bmc", "hypothesis", "prove", "all"):
        resolve(Settings(engine=engine, options={"deadlock": True}))
    with pytest.raises(OwnershipError, match="without --free only"):
        resolve(Settings(engine="bmc", options={"deadlock": True, "free": ("pages",)}))
