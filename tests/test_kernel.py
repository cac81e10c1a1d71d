"""The compiled kernel: packed states, the memo, and identical results to the Python search.

The promise the kernel makes is that it is the Python search, faster: the
same states in the same order, so the same counts, verdicts, first
violations, paths and per-action coverage.  The library-wide test holds it
to that on every spec, with deadlock checking on (the fast run caps each
search; the slow run goes to the end).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from conftest import SPECS, instance
from ownership.core.result import CheckResult, StopReason, Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.errors import Code, OwnershipError
from ownership.kernel.codec import Codec, TooWide, Unrepresentable, unzigzag, zigzag
from ownership.kernel.memo import Memo
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

LIBRARY = sorted(p.stem for p in SPECS.glob("*.py"))


def _summary(r: CheckResult) -> tuple[Any, ...]:
    trace = None if r.trace is None else [(s.action, s.state, s.picks) for s in r.trace.steps]
    actions = [(a.name, a.enabled_states, a.transitions, a.states, a.depth, a.complete) for a in r.actions]
    return (r.verdict, r.stop_reason, r.stats.states, r.stats.transitions, r.stats.depth, r.violated, trace, actions)


def _both(inst_of: Any, **options: Any) -> tuple[CheckResult, CheckResult]:
    python = explore(inst_of(), ExploreOptions(kernel="python", **options))
    compiled = explore(inst_of(), ExploreOptions(kernel="compiled", **options))
    return python, compiled


@pytest.mark.parametrize("name", LIBRARY)
def test_the_kernel_is_the_python_search_on_every_library_spec(name: str) -> None:
    python, compiled = _both(lambda: instance(name), symmetry=False, deadlock=True, max_states=3000)
    assert _summary(compiled) == _summary(python)
    assert any("compiled kernel" in n for n in compiled.notes)


@pytest.mark.slow
@pytest.mark.parametrize("name", LIBRARY)
def test_the_kernel_is_the_python_search_to_the_end(name: str) -> None:
    python, compiled = _both(lambda: instance(name), symmetry=False)
    assert _summary(compiled) == _summary(python)


@pytest.mark.parametrize("name", ["sglang_disagg_v0_5_19", "sglang_disagg_v0_5_21", "toy_deadlock", "vllm_block_pool"])
def test_fingerprint_storage_finds_the_same_states(name: str) -> None:
    python = explore(instance(name), ExploreOptions(kernel="python", symmetry=False, deadlock=True))
    fingerprints = explore(instance(name), ExploreOptions(symmetry=False, deadlock=True, storage="fingerprint"))
    assert _summary(fingerprints) == _summary(python)
    assert fingerprints.stats.storage is not None and "probability of a collision" in fingerprints.stats.storage


def test_a_frontier_past_its_share_of_memory_goes_to_disk() -> None:
    from ownership.kernel.driver import KernelLimits, search

    inst = instance("sglang_disagg_v0_5_21")
    names = [i.name for i in inst.invariants]
    spilled = search(inst, names, False, KernelLimits(fingerprints=True, spill_bytes=40_000))
    exact = search(instance("sglang_disagg_v0_5_21"), names, False, KernelLimits())
    assert "spilled to disk" in spilled.storage and "spilled" not in exact.storage
    assert (spilled.states, spilled.transitions, spilled.reason) == (exact.states, exact.transitions, exact.reason)


def test_a_memory_budget_ends_the_compiled_search_with_its_coverage() -> None:
    result = explore(instance("sglang_disagg_v0_5_20"), ExploreOptions(symmetry=False, kernel="compiled", max_memory=1))
    assert result.verdict is Verdict.UNKNOWN and result.stop_reason is StopReason.MEMORY_LIMIT
    assert any("every interleaving of up to" in n for n in result.notes)
    assert result.stats.storage is not None and "exact" in result.stats.storage
    assert result.stats.peak_memory is not None and result.stats.peak_memory > 0


def test_fingerprints_need_the_compiled_kernel() -> None:
    with pytest.raises(OwnershipError) as err:
        explore(instance("toy_deadlock"), ExploreOptions(kernel="python", storage="fingerprint"))
    assert err.value.code is Code.BAD_OPTION


@pytest.mark.parametrize("limit", [{"max_depth": 4}, {"max_states": 500}, {"max_depth": 9, "max_states": 4000}])
def test_limits_stop_both_searches_at_the_same_place(limit: dict[str, int]) -> None:
    python, compiled = _both(lambda: instance("sglang_disagg_v0_5_21"), symmetry=False, **limit)
    assert _summary(compiled) == _summary(python)
    assert compiled.verdict in (Verdict.BOUNDED_OK, Verdict.UNKNOWN)


def test_a_deadlock_is_found_by_both() -> None:
    python, compiled = _both(lambda: instance("toy_deadlock"), symmetry=False, deadlock=True)
    assert compiled.stop_reason is StopReason.DEADLOCK
    assert _summary(compiled) == _summary(python)


def test_auto_switches_to_the_kernel_past_the_switch_point() -> None:
    result = explore(instance("sglang_disagg_v0_5_20"), ExploreOptions(symmetry=False))
    assert result.stats.states == 56_709
    notes = " ".join(result.notes)
    assert "compiled kernel" in notes and "searched again from the start" in notes


def test_auto_stays_on_python_with_symmetry_and_says_why() -> None:
    result = explore(instance("sglang_disagg_v0_5_21"), ExploreOptions())
    assert "compiled kernel does not reduce by symmetry" in " ".join(result.notes)


def test_compiled_with_symmetry_is_refused() -> None:
    with pytest.raises(OwnershipError) as err:
        explore(instance("sglang_disagg_v0_5_21"), ExploreOptions(kernel="compiled"))
    assert err.value.code is Code.BAD_OPTION and "--no-symmetry" in str(err.value)


# -- packing ---------------------------------------------------------------------------

def test_zigzag_round_trips() -> None:
    for v in [0, 1, -1, 2, -2, 127, -128, 2**40, -(2**40)]:
        assert unzigzag(zigzag(v)) == v
    assert [zigzag(v) for v in (0, -1, 1, -2)] == [0, 1, 2, 3]


@pytest.mark.parametrize("name", ["sglang_disagg_v0_5_19", "vllm_block_pool", "sglang_paged_allocator"])
def test_packing_round_trips_every_reached_state(name: str) -> None:
    inst = instance(name)
    codec = Codec(inst)
    state, rng = inst.init_state, random.Random(7)
    for _ in range(200):
        assert codec.unpack(codec.pack(state)) == state
        succs = [sc for ai in inst.action_instances for sc in inst.successors_of(state, ai)]
        if not succs:
            break
        state = rng.choice(succs).state


def _spec(tmp_path: Path, body: str) -> Instance:
    path = tmp_path / "counter_spec.py"
    path.write_text(
        "from ownership import Spec, require, safe\n"
        "spec = Spec('counter_spec', summary='a counter', expect=safe())\n"
        "spec.var('n', int, init=0)\n" + body
    )
    return Instance(load_spec(path))


def test_an_int_that_outgrows_its_cell_restarts_wider(tmp_path: Path) -> None:
    inst_of = lambda: _spec(tmp_path, (  # noqa: E731
        "@spec.action\n"
        "def step(s):\n"
        "    require(s.n < 3000)\n"
        "    s.n = s.n + 7\n"
        "@spec.invariant\n"
        "def bounded(s):\n"
        "    return s.n < 5000\n"))
    python, compiled = _both(inst_of, symmetry=False)
    assert compiled.stats.states == 430
    assert _summary(compiled) == _summary(python)
    assert any("wider int cells" in n for n in compiled.notes)
    codec = Codec(inst_of())
    with pytest.raises(TooWide):
        codec.code(0, 10_000)


def test_a_value_that_does_not_pack_takes_the_python_path(tmp_path: Path) -> None:
    body = ("@spec.action\n"
            "def flip(s):\n"
            "    require(s.n == 0)\n"
            "    s.n = True\n"
            "@spec.invariant\n"
            "def small(s):\n"
            "    return s.n < 2\n")
    inst = _spec(tmp_path, body)
    with pytest.raises(Unrepresentable):
        Codec(inst).code(0, True)
    assert explore(_spec(tmp_path, body), ExploreOptions(symmetry=False, kernel="python")).stats.states == 2
    with pytest.raises(OwnershipError) as err:
        explore(_spec(tmp_path, body), ExploreOptions(symmetry=False, kernel="compiled"))
    assert "does not pack" in str(err.value)


def test_the_memo_refuses_a_run_that_reads_differently_on_the_same_values() -> None:
    inst = instance("sglang_single_node")
    memo = Memo(1, Codec(inst))
    state = inst.init_state
    memo.add_action(0, 0, state, [0, 1], [], "action a")
    with pytest.raises(OwnershipError) as err:
        memo.add_action(0, 0, state, [0, 2], [], "action a")
    assert err.value.code is Code.SPEC_NONDETERMINISTIC
    assert "not a function of the state" in str(err.value)


# -- the command line ------------------------------------------------------------------

def _cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from ownership.cli import app

    return CliRunner().invoke(app, list(args))


def test_cli_kernel_compiled_finds_the_leak_and_says_how_it_searched(tmp_path: Path) -> None:
    res = _cli("check", str(SPECS / "sglang_disagg_v0_5_19.py"), "--no-symmetry", "--kernel", "compiled",
               "--no-render", "--no-progress", "--out", str(tmp_path / "cx"))
    assert res.exit_code == 1, res.output
    assert "no_foreign_read" in res.output and "compiled kernel: states packed in" in res.output
    assert "85,945 distinct states" in res.output or "85,945" in res.output
    assert "--kernel compiled" in res.output  # the reproduce line repeats the choice


def test_cli_fingerprints_state_the_collision_probability() -> None:
    res = _cli("check", str(SPECS / "sglang_disagg_v0_5_21.py"), "--no-symmetry", "--storage", "fingerprint",
               "--no-progress")
    assert res.exit_code == 0, res.output
    assert "probability of a collision" in res.output and "16,313 distinct states" in res.output


@pytest.mark.parametrize("args", [["--kernel", "compiled"], ["--kernel", "fast"], ["--storage", "fingerprint",
                                                                                  "--kernel", "python"]])
def test_cli_kernel_misuse_is_one_error_line(args: list[str]) -> None:
    res = _cli("check", str(SPECS / "sglang_disagg_v0_5_21.py"), *args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output


def test_a_time_limit_ends_the_compiled_search_with_its_coverage() -> None:
    result = explore(instance("sglang_disagg_v0_5_20"), ExploreOptions(symmetry=False, kernel="compiled",
                                                                       max_seconds=0.05))
    assert result.verdict is Verdict.UNKNOWN and result.stop_reason is StopReason.TIME_LIMIT
    assert any("every interleaving of up to" in n for n in result.notes)
    assert 0 < result.stats.states < 56_709
