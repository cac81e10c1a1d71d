"""A symmetric SetOf is written with sets of elements in spec code; bmc and prove run such code as explore does."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

SPEC = Path(__file__).resolve().parent / "trust" / "sym_static_sets_engines.py"


@pytest.mark.parametrize("engine", ["explore", "bmc", "prove"])
def test_set_writes_membership_and_difference_run_in_every_engine(engine: str) -> None:
    inst = Instance(load_spec(SPEC), {})
    run = {"explore": lambda: explore(inst), "bmc": lambda: bmc(inst, BmcOptions(max_depth=4)),
           "prove": lambda: prove(inst, BmcOptions())}[engine]
    result = run()
    assert result.verdict is Verdict.VIOLATED and result.violated == "one_holder"
    assert result.stats.depth == 2
