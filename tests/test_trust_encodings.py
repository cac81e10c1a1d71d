"""Specs on which the concrete and the symbolic semantics of a vocabulary operation disagreed.

Each spec in tests/trust/enc_*.py got a wrong or missing answer from an
engine before its operation's Python and encoding were made to agree.  A
negative count of pages (OWN113) is refused by every engine, located at the
spec line that passed it; before, ``alloc(s, r, -1)`` took no page in the
explorer and was never enabled under bmc and prove, which answered PROVED
on a spec the explorer found violated.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import z3

from ownership.core.result import CheckResult, Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.symbolic.encoding import SymbolicSpec, initial_width
from ownership.symbolic.unroll import Unroller

TRUST = Path(__file__).resolve().parent / "trust"

ENGINES: dict[str, Callable[[Instance], CheckResult]] = {
    "explore": explore,
    "bmc": lambda inst: bmc(inst, BmcOptions(max_depth=5)),
    "prove": prove,
}


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize(("name", "call", "what"), [
    ("enc_negative_alloc", "pool.alloc(s, r, -1)", "kv.alloc: the number of pages cannot be negative, got -1"),
    ("enc_negative_alloc_computed", "pool.alloc(s, r, s.need[r])",
     "kv.alloc: the number of pages cannot be negative, got -1"),
    ("enc_negative_transfer", "transfer(s, r, pool, remote, -1)",
     "transfer from kv to remote: the number of pages cannot be negative, got -1"),
    ("enc_negative_hand_off", "tree.hand_off(s, r, 0, count=", "tree.hand_off: the number of pages cannot be negative"),
])
def test_a_negative_count_is_a_located_error_for_every_engine(engine: str, name: str, call: str, what: str) -> None:
    path = TRUST / f"{name}.py"
    with pytest.raises(OwnershipError) as info:
        ENGINES[engine](Instance(load_spec(path)))
    err = info.value
    assert err.code is Code.NEGATIVE_COUNT, err.message
    assert what in err.message and "require(n >= 0)" in err.message
    assert (Path(err.file or "").resolve(), err.line) == (path.resolve(), line_of(path, call))


def test_the_solver_finds_a_computed_negative_count_reachable() -> None:
    # bmc and prove run the spec concretely first (a symmetry sample, bmc's first levels), which
    # here meets the negative count before the solver.  The solver alone finds it too: an error
    # point, as an overflow is, reachable after shrink (step 0) in start (step 1), and only there.
    inst = Instance(load_spec(TRUST / "enc_negative_alloc_computed.py"))
    un = Unroller(SymbolicSpec(inst, (), symmetry=False, width=initial_width(inst)))
    solver = z3.Solver()
    solver.add(*un.init(inst))
    assert solver.check(un.overflow(0)) == z3.unsat  # need is 1 in the initial state
    solver.add(*un.transition(0))
    assert solver.check(un.overflow(1)) == z3.sat


def test_a_guarded_computed_count_still_proves(tmp_path: Path) -> None:
    # The error point is only reachable where the count can be negative: a guard removes it.
    src = (TRUST / "enc_negative_alloc_computed.py").read_text()
    guarded = src.replace("    pool.alloc(s, r, s.need[r])", "    require(s.need[r] >= 0)\n    pool.alloc(s, r, s.need[r])")
    path = tmp_path / "guarded.py"
    path.write_text(guarded.replace('expect=violates("no_double_ownership")', "expect=safe()")
                    .replace("import Ownership, Spec, require, violates", "import Ownership, Spec, require, safe")
                    .replace("    s.kv_holders[p] = frozenset(s.all(Req))  # every request holds it\n", "    pass\n"))
    assert explore(Instance(load_spec(path))).verdict is Verdict.PROVED
    assert prove(Instance(load_spec(path))).verdict is Verdict.PROVED


@pytest.mark.parametrize("engine", ["explore", "bmc", "prove"])
def test_a_count_negative_at_some_parameter_values_is_a_located_error(engine: str) -> None:
    # explore --free took no page at k=1 and reported the double ownership after it; bmc and
    # prove widened four times and answered UNKNOWN ("integers exceed 256 bits").
    path = TRUST / "enc_negative_alloc_parameter.py"
    done = subprocess.run([sys.executable, "-m", "ownership", "check", str(path), "--engine", engine, "--free", "k"],
                          capture_output=True, text=True, timeout=300)
    line = line_of(path, "pool.alloc(s, r, s.params.k - 2)")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"error[OWN113]: {path}:{line}: kv.alloc: the number of pages cannot be negative, got a negative value " \
           "at some values of the free parameters" in done.stdout + done.stderr


def test_a_page_table_concatenated_with_itself_is_freed_twice_by_every_engine() -> None:
    path = TRUST / "enc_page_table_added_twice.py"
    for engine, run in ENGINES.items():
        result = run(Instance(load_spec(path)))
        assert result.verdict is Verdict.VIOLATED and result.violated == "no_double_ownership", engine
        assert result.trace is not None and len(result.trace) == 3, engine


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_negative_first_slot_is_a_located_error(engine: str, tmp_path: Path) -> None:
    # Slot -1 marks a page no table holds: a held page there breaks the bookkeeping the solver relies on.
    path = tmp_path / "first_slot.py"
    path.write_text((TRUST / "enc_negative_alloc.py").read_text().replace(
        "pool.alloc(s, r, -1)", "pool.alloc(s, r, 1, first_slot=-1)"))
    with pytest.raises(OwnershipError) as info:
        ENGINES[engine](Instance(load_spec(path)))
    assert info.value.code is Code.NEGATIVE_COUNT
    assert "kv.alloc: the first slot (-1 marks a page no table holds) cannot be negative, got -1" in info.value.message
    assert info.value.line == line_of(path, "first_slot=-1")
