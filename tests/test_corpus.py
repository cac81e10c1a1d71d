"""The shared corpus: every (spec, expected verdict) against every engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import CORPUS, SPECS
from ownership.core.result import CheckResult, Verdict
from ownership.engines.explore import ExploreOptions, explore
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


def _cases() -> list[object]:
    """(engine, spec) pairs; the solver and random engines on the library specs take seconds each: slow."""
    return [
        pytest.param(engine, path, id=f"{path.stem}-{engine}",
                     marks=[pytest.mark.slow] if engine != "explore" and path.parent == SPECS else [])
        for engine in sorted(ENGINES) for path in CASES
    ]


@pytest.mark.parametrize(("engine", "path"), _cases())
def test_engine_matches_expected_verdict(engine: str, path: Path) -> None:
    spec = load_spec(path)
    assert spec.expect is not None, f"{path.name} must declare expect="
    if engine == "hypothesis" and not spec.expect.safe and path.stem in SLOW_FOR_RANDOM:
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
