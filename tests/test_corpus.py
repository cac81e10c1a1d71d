"""The shared corpus: every (spec, expected verdict) against every engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pins import LIVENESS_LASSOS, LIVENESS_PINNED, explored

from conftest import CORPUS, SPECS
from ownership.core.replay import replay
from ownership.core.result import CheckResult, Verdict
from ownership.core.trace import TraceKind
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.registry import ENGINES as REGISTRY
from ownership.errors import OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec


def _explore(inst: Instance) -> CheckResult:
    return explore(inst, ExploreOptions())


def _hypothesis(inst: Instance) -> CheckResult:
    from ownership.engines.hypothesis_engine.engine import check_stateful
    from ownership.engines.hypothesis_engine.options import HypothesisOptions

    # On a library spec, which explore and prove decide, this run only shows that random walks
    # raise no false alarm: 40 examples do that (150 on the toys, whose bugs it must find).
    library = inst.spec.file is not None and Path(inst.spec.file).parent == SPECS
    return check_stateful(inst, HypothesisOptions(max_examples=40 if library else 150, steps=30, derandomize=True))


# Bounded model checking to depth 16 covers every library counterexample (the longest
# has 15 steps) and exhausts the terminating safe specs; vllm_block_pool never
# terminates and each depth costs seconds there, so it is checked to depth 8.
BMC_DEPTH = {"vllm_block_pool": 8}


def _bmc(inst: Instance) -> CheckResult:
    from ownership.engines.bmc import bmc
    from ownership.engines.z3run import BmcOptions

    return bmc(inst, BmcOptions(max_depth=BMC_DEPTH.get(inst.spec.name, 16)))


def _prove(inst: Instance) -> CheckResult:
    from ownership.engines.prove import prove
    from ownership.engines.z3run import BmcOptions

    return prove(inst, BmcOptions(spacer=False))


ENGINES: dict[str, Callable[[Instance], CheckResult]] = {
    "explore": _explore, "hypothesis": _hypothesis, "bmc": _bmc, "prove": _prove,
}
SYMBOLIC = {"bmc", "prove"}
CASES = sorted(SPECS.glob("*.py")) + sorted(CORPUS.glob("*.py"))
# Random testing needs minutes (not CI seconds) to hit the long interleavings
# of the library's buggy specs; bench/hypothesis_bench.py measures those.  On
# safe specs it must still pass, and on the corpus toys it must find the bug.
SLOW_FOR_RANDOM = {p.stem for p in SPECS.glob("*.py")}
# Specs the Z3 engines refuse, with the reason they must give (see spec-guide.md section 11).
NOT_SYMBOLIC = {"sglang_paged_allocator": "cannot run symbolically"}
# Library specs with temporal properties (pages_return, requests_finish: docs/liveness.md), and the
# property each one's declared verdict names (None: expected safe).  Temporal properties were
# decided by explore only at first (docs/liveness.md, "Other engines"); an engine whose registry
# entry does not declare the liveness capability checks these specs' invariants alone (from the
# command line it warns OWN115; called directly, as here, it does not).  On a buggy spec such an
# engine cannot find the declared violation: a strict xfail, which fails as soon as the engine
# decides properties without saying so.  An engine that declares the capability must get the
# declared verdict like on any other spec, and on a fixed spec every engine must find it safe.
LIVENESS_SPECS: dict[str, str | None] = {
    "radix_lock_skips_leaf_fixed": None,
    "sglang_disagg_v0_5_20": None,
    "sglang_disagg_v0_5_21": None,
    "sglang_epd_send_deregister_fixed": None,
    "sglang_pd_abort_inflight_fixed": None,
    "sglang_single_node": None,
    "sglang_swa_insert_evicted_window_fixed": None,
    "sglang_swa_recover_locked_full_fixed": None,
    "tgi_prefix_published_before_write_fixed": None,
    "vllm_async_sched_inflight_step_fixed": None,
    "vllm_mooncake_failed_load_stranded_buggy": "requests_finish",
    "vllm_mooncake_failed_load_stranded_fixed": None,
    "vllm_mooncake_transfer_id_reuse_buggy": "pages_return",
    "vllm_mooncake_transfer_id_reuse_fixed": None,
    "vllm_nixl_abort_timeout_fixed": None,
    "vllm_nixl_multi_handle_failure_fixed": None,
    "vllm_prefix_hash_collision_fixed": None,
    "vllm_prefix_lora_scope_fixed": None,
    "vllm_push_abort_recv_leak_buggy": "pages_return",
    "vllm_push_abort_recv_leak_fixed": None,
}
LIVENESS_XFAIL = pytest.mark.xfail(strict=True, reason="this engine does not decide temporal properties (its registry "
                                   "entry declares no liveness; docs/liveness.md): it cannot find the declared lasso")


def liveness_marks(engine: str, stem: str) -> list[pytest.MarkDecorator]:
    """A strict xfail where ``engine`` does not decide temporal properties and ``stem``'s bug is one."""
    decides = REGISTRY[engine].capabilities.liveness
    return [] if decides or not LIVENESS_SPECS.get(stem) else [LIVENESS_XFAIL]


def _marks(engine: str, path: Path) -> list[pytest.MarkDecorator]:
    if engine == "explore" or path.parent != SPECS:
        return []
    return [pytest.mark.slow, *liveness_marks(engine, path.stem)]


def _cases() -> list[object]:
    """(engine, spec) pairs; the solver and random engines on the library specs take seconds each: slow."""
    return [pytest.param(engine, path, id=f"{path.stem}-{engine}", marks=_marks(engine, path))
            for engine in sorted(ENGINES) for path in CASES]


@pytest.mark.parametrize(("engine", "path"), _cases())
def test_engine_matches_expected_verdict(engine: str, path: Path) -> None:
    spec = load_spec(path)
    assert spec.expect is not None, f"{path.name} must declare expect="
    if (engine == "hypothesis" and not spec.expect.safe and path.stem in SLOW_FOR_RANDOM
            and not (REGISTRY[engine].capabilities.liveness and path.stem in LIVENESS_SPECS)):
        pytest.skip("random search for this library bug takes minutes: see bench/hypothesis_bench.py")
    if engine in SYMBOLIC and path.stem in NOT_SYMBOLIC:
        with pytest.raises(OwnershipError, match=NOT_SYMBOLIC[path.stem]):
            ENGINES[engine](Instance(spec))
        return
    result = ENGINES[engine](Instance(spec))
    if spec.expect.safe:
        assert result.verdict >= Verdict.BOUNDED_OK, result.coverage()
        if engine == "prove":  # k-induction or the reachable set must close at these sizes
            assert result.verdict is Verdict.PROVED, result.notes
    else:
        assert result.verdict is Verdict.VIOLATED
        assert result.violated == spec.expect.violates
        assert result.trace is not None and result.trace.violation == spec.expect.violates
        if engine in SYMBOLIC:  # the same shortest length as breadth-first search
            shortest = explore(Instance(spec), ExploreOptions()).trace
            assert shortest is not None and len(result.trace) == len(shortest)


# -- the library's temporal properties ------------------------------------------------------------
def test_liveness_specs_names_every_spec_with_temporal_properties() -> None:
    found = {}
    for path in sorted(SPECS.glob("*.py")):
        spec = load_spec(path)
        if spec.properties:
            assert spec.expect is not None
            found[path.stem] = None if spec.expect.safe else spec.expect.violates
            assert spec.expect.safe or spec.expect.violates in spec.properties, path.stem
    assert found == LIVENESS_SPECS
    assert {name for name, _ in LIVENESS_PINNED} == set(LIVENESS_SPECS)
    assert set(LIVENESS_LASSOS) == {name for name, prop in LIVENESS_SPECS.items() if prop}


# Without symmetry the properties are decided on the full graph (56,709 states for sglang_disagg_v0_5_20): slow.
@pytest.mark.parametrize(("name", "symmetry"), [
    pytest.param(name, symmetry, id=f"{name}-{symmetry}", marks=[] if symmetry else [pytest.mark.slow])
    for name, symmetry in sorted(LIVENESS_PINNED)])
def test_liveness_library_specs_keep_their_pinned_figures(name: str, symmetry: bool) -> None:
    assert explored(name, symmetry) == LIVENESS_PINNED[(name, symmetry)]


@pytest.mark.parametrize("symmetry", [True, False])
@pytest.mark.parametrize("name", sorted(LIVENESS_LASSOS))
def test_liveness_library_bugs_are_fair_lassos_that_replay(name: str, symmetry: bool) -> None:
    inst = Instance(load_spec(SPECS / f"{name}.py"))
    result = explore(inst, ExploreOptions(symmetry=symmetry))
    trace = result.trace
    assert trace is not None and trace.kind is TraceKind.LASSO
    actions, loop = LIVENESS_LASSOS[name]
    assert ([s.action for s in trace.steps], trace.loop) == (actions, loop)
    assert trace.since is not None and trace.since <= loop and trace.subject in ("A", "B")
    assert replay(inst, trace).ok
