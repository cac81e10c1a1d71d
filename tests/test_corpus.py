"""The shared corpus: every (spec, expected verdict) against every engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import CORPUS, SPECS
from ownership.core.result import CheckResult, Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.spec.instance import Instance
from ownership.spec.loader import load_spec


def _explore(inst: Instance) -> CheckResult:
    return explore(inst, ExploreOptions())


def _hypothesis(inst: Instance) -> CheckResult:
    from ownership.engines.stateful import HypothesisOptions, check_stateful

    return check_stateful(inst, HypothesisOptions(max_examples=150, steps=30, derandomize=True))


ENGINES: dict[str, Callable[[Instance], CheckResult]] = {"explore": _explore, "hypothesis": _hypothesis}
CASES = sorted(SPECS.glob("*.py")) + sorted(CORPUS.glob("*.py"))
# Random testing needs minutes (not CI seconds) to hit the long interleavings
# of the library's buggy specs; bench/hypothesis_bench.py measures those.  On
# safe specs it must still pass, and on the corpus toys it must find the bug.
SLOW_FOR_RANDOM = {p.stem for p in SPECS.glob("*.py")}


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_engine_matches_expected_verdict(engine: str, path: Path) -> None:
    spec = load_spec(path)
    assert spec.expect is not None, f"{path.name} must declare expect="
    if engine == "hypothesis" and not spec.expect.safe and path.stem in SLOW_FOR_RANDOM:
        pytest.skip("random search for this library bug takes minutes: see bench/hypothesis_bench.py")
    result = ENGINES[engine](Instance(spec))
    if spec.expect.safe:
        assert result.verdict >= Verdict.BOUNDED_OK, result.coverage()
    else:
        assert result.verdict is Verdict.VIOLATED
        assert result.violated == spec.expect.violates
        assert result.trace is not None and result.trace.violation == spec.expect.violates
