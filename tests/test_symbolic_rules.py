"""Explore says at load time what bmc and prove would refuse, in the same words, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownership.engines.bmc import bmc
from ownership.engines.explore import explore
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.lang.symbolic_rules import INDEX_HINT, symbolic_obstacles

HERE = Path(__file__).parent
ROOT = HERE.parent
RULES = HERE / "symbolic_rules"
DOCUMENTED = sorted([*(ROOT / "specs").glob("*.py"), *(ROOT / "docs" / "examples").glob("[!_]*.py"),
                     *(HERE / "idioms").glob("*.py"), *(HERE / "corpus").glob("*.py")])
REFUSED = {"sglang_paged_allocator"}
"""Specs the Z3 engines refuse (tests/test_corpus.py NOT_SYMBOLIC): a constant table indexed by a state value."""


def test_explore_names_the_line_bmc_refuses_with_the_same_fix() -> None:
    path = RULES / "constant_table.py"
    note = next(n for n in explore(Instance(load_spec(path))).notes if n.startswith("bmc and prove cannot run"))
    with pytest.raises(OwnershipError) as refused:
        bmc(Instance(load_spec(path)), BmcOptions(max_depth=3))
    assert refused.value.code is Code.SPEC_RUNTIME
    assert f"{refused.value.file}:{refused.value.line}: " in note
    assert INDEX_HINT in note and INDEX_HINT in refused.value.message


def test_the_library_spec_the_solver_refuses_is_named_at_the_line_bmc_stops() -> None:
    path = ROOT / "specs" / "sglang_paged_allocator.py"
    found = symbolic_obstacles(load_spec(path))
    with pytest.raises(OwnershipError) as refused:
        bmc(Instance(load_spec(path)), BmcOptions(max_depth=2))
    assert found and found[0].line == refused.value.line


def test_the_rewrite_the_hint_suggests_runs_everywhere() -> None:
    spec = load_spec(RULES / "constant_table_by_domain.py")
    assert symbolic_obstacles(spec) == []
    assert bmc(Instance(spec), BmcOptions(max_depth=3)).violated is None


@pytest.mark.parametrize("path", DOCUMENTED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_documented_spec_the_solver_runs_is_flagged(path: Path) -> None:
    found = symbolic_obstacles(load_spec(path))
    assert bool(found) == (path.stem in REFUSED), [o.message for o in found]
