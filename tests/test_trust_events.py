"""Violations carried by steps: refused in invariants (OWN064), found by every engine whatever state the step reaches.

Each spec in tests/trust/events_*.py was PROVED (or broke an engine) before
the check it exercises.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def hypothesis_run(inst: Instance) -> Any:
    from ownership.engines.hypothesis_engine.engine import check_stateful
    from ownership.engines.hypothesis_engine.options import HypothesisOptions

    return check_stateful(inst, HypothesisOptions(seed=1))


def no_overflow() -> Any:  # a z3 term; z3 is imported only here
    import z3

    return z3.BoolVal(False)


# -- invariants are functions of the state: no flags, emits or event reads ----------------

ENGINES: dict[str, Callable[[Instance], Any]] = {
    "explore (python)": lambda i: explore(i, ExploreOptions(kernel="python", symmetry=False)),
    "explore (compiled)": lambda i: explore(i, ExploreOptions(kernel="compiled", symmetry=False)),
    "violated": lambda i: i.violated(i.init_state),
    "bmc": lambda i: bmc(i, BmcOptions(max_depth=4)),
    "bmc (no prefix)": lambda i: bmc(i, BmcOptions(max_depth=4, prefix_states=0)),
    "prove": lambda i: prove(i, BmcOptions()),
    "encoding": lambda i: encode(i, BmcOptions()),
    "hypothesis": hypothesis_run,
}

IN_INVARIANT = [
    ("events_flag_in_invariant", "calls s.flag(...)", 's.flag("two_done"'),
    ("events_emit_in_invariant", "calls s.emit(...)", 's.emit("both done"'),
    ("events_read_in_invariant", "reads s.events", "in s.events if"),
]


@pytest.mark.parametrize(("name", "what", "text"), IN_INVARIANT)
def test_an_invariant_that_flags_emits_or_reads_events_is_refused_at_its_line_in_every_engine(
        name: str, what: str, text: str) -> None:
    for engine, run in ENGINES.items():
        if engine == "violated":
            continue  # evaluating in one state runs only the code that state reaches (the helper test below)
        inst = trust(name)
        with pytest.raises(OwnershipError) as err:
            run(inst)
        assert err.value.code is Code.SPEC_INVARIANT_STEP, engine
        assert err.value.line == line_of(name, text), engine
        assert str(err.value.file).endswith(f"{name}.py"), engine
        assert what in err.value.message, engine
        # The message says where the check belongs.
        assert "in the action" in err.value.message and "state variable" in err.value.message, engine
    # Actions still emit and record events (only invariants may not).
    inst = trust(name)
    with inst.mode(recording=True):
        succ = inst.run_with_picks(inst.init_state, inst.action_instances[0], ())
    assert succ is not None and succ.state != inst.init_state


@pytest.mark.parametrize(("name", "what", "text"), [
    ("events_flag_in_helper", "calls s.flag(...)", 'view.flag("two_done"'),
    ("events_read_in_helper", "reads s.events", "in view.events if"),
])
def test_a_helper_an_invariant_calls_is_refused_when_it_runs(name: str, what: str, text: str) -> None:
    # The invariant's own code is clean: only running it shows the flag or the read.
    for engine in ("explore (python)", "explore (compiled)", "violated", "bmc", "prove", "hypothesis"):
        inst = trust(name)
        with pytest.raises(OwnershipError) as err:
            ENGINES[engine](inst)
        assert err.value.code is Code.SPEC_INVARIANT_STEP, engine
        assert err.value.line == line_of(name, text), engine
        assert what in err.value.message and "invariant" in err.value.message, engine


def test_the_symbolic_encoding_refuses_a_flag_raised_by_an_invariants_helper() -> None:
    inst = trust("events_flag_in_helper")
    with pytest.raises(OwnershipError) as err:
        encode(inst, BmcOptions())
    assert err.value.code is Code.SPEC_INVARIANT_STEP
    assert "invariant two_done" in err.value.message


# -- a flagged step is a violation whatever state it reaches -------------------------------

def verdicts(inst_of: Callable[[], Instance]) -> dict[str, tuple[Any, Any, int | None]]:
    """Each engine's answer on a fresh instance: (verdict or kind, violated, trace length)."""
    runs: dict[str, Callable[[Instance], Any]] = {
        "explore (python)": ENGINES["explore (python)"],
        "explore (compiled)": ENGINES["explore (compiled)"],
        "bmc": lambda i: bmc(i, BmcOptions(max_depth=8)),
        "bmc (no prefix)": lambda i: bmc(i, BmcOptions(max_depth=8, prefix_states=0)),
        "prove": lambda i: prove(i, BmcOptions()),
        "prove --max-k 0": lambda i: prove(i, BmcOptions(max_k=0)),
        "hypothesis": hypothesis_run,
    }
    out: dict[str, tuple[Any, Any, int | None]] = {}
    for engine, run in runs.items():
        inst = inst_of()
        result = run(inst)
        steps = len(result.trace.steps) if result.trace is not None else None
        if result.trace is not None:
            assert replay(inst, result.trace).ok, engine
        out[engine] = (result.verdict, result.violated, steps)
    inst = inst_of()
    names = list(inst.spec.invariants)
    sym = encode(inst, BmcOptions())
    cert = reachable_certificate(sym, inst, BmcOptions(), names, no_overflow())
    out["reach"] = (cert.kind, cert.violated, None)
    out["spacer"] = (spacer(sym, inst, BmcOptions(), names).kind, None, None)
    return out


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.parametrize(("name", "invariant"), [("events_flag_self_loop", "no_poke"),
                                                 ("events_flag_back_edge", "no_rewind")])
def test_a_flagged_step_to_the_same_or_an_earlier_state_is_a_violation_in_every_engine(
        name: str, invariant: str, depth: int) -> None:
    found = verdicts(lambda: trust(name, depth=depth))
    for engine, (verdict, violated, steps) in found.items():
        if engine in ("reach", "spacer"):
            assert verdict is Kind.REFUTED, engine
            continue
        assert (verdict, violated) == (Verdict.VIOLATED, invariant), engine
        if engine != "prove --max-k 0" or steps is not None:
            assert steps == depth, engine  # every engine's trace is a shortest one


def test_bmc_does_not_reorder_a_step_whose_flag_reads_another_steps_write() -> None:
    # Without its concrete prefix (as in --engine all), bmc's partial-order reduction decides alone.
    result = bmc(trust("events_flag_reordered"), BmcOptions(max_depth=4, prefix_states=0))
    assert result.verdict is Verdict.VIOLATED and result.violated == "no_late_check"
    assert result.trace is not None and [s.action for s in result.trace.steps] == ["set_x", "check"]


@pytest.mark.parametrize(("goal", "value"), [("minimize", 1), ("maximize", 4)])
def test_bmc_minimize_and_maximize_count_a_flagged_step_back_to_an_earlier_state(goal: str, value: int) -> None:
    options = BmcOptions(max_depth=6, free=("depth",), minimize="depth" if goal == "minimize" else None,
                         maximize="depth" if goal == "maximize" else None)
    result = bmc(trust("events_flag_back_edge"), options)
    assert result.verdict is Verdict.VIOLATED and result.violated == "no_rewind"
    assert result.extremum == ("depth", value)
    assert result.trace is not None and len(result.trace.steps) == value


def test_the_parametric_explorer_refuses_a_flag_raised_by_an_invariants_helper() -> None:
    from ownership.engines.paramexplore.engine import ParamOptions, explore_params

    name = "events_flag_in_helper_free"
    with pytest.raises(OwnershipError) as err:
        explore_params(trust(name), ParamOptions(free=("limit",)))
    assert err.value.code is Code.SPEC_INVARIANT_STEP
    assert "invariant small" in err.value.message
    assert err.value.line == line_of(name, "@spec.invariant")

