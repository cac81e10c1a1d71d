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


ENGINES: dict[str, Callable[[Instance], CheckResult]] = {"explore": _explore}
CASES = sorted(SPECS.glob("*.py")) + sorted(CORPUS.glob("*.py"))


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_engine_matches_expected_verdict(engine: str, path: Path) -> None:
    spec = load_spec(path)
    assert spec.expect is not None, f"{path.name} must declare expect="
    result = ENGINES[engine](Instance(spec))
    if spec.expect.safe:
        assert result.verdict >= Verdict.BOUNDED_OK, result.coverage()
    else:
        assert result.verdict is Verdict.VIOLATED
        assert result.violated == spec.expect.violates
        assert result.trace is not None and result.trace.violation == spec.expect.violates
