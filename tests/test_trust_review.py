"""Wrong verdicts found by review after the round's classes were closed: the terminal predicate, the checker's ix, history kept where the audit does not look."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownership.engines.explore import ExploreOptions, explore
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

TRUST = Path(__file__).resolve().parent / "trust"


def test_a_terminal_predicate_that_flags_is_refused_at_its_line() -> None:
    inst = Instance(load_spec(TRUST / "events_flag_in_terminal.py"), {})
    with pytest.raises(OwnershipError) as err:
        explore(inst, ExploreOptions(deadlock=True, kernel="python"))
    assert err.value.code is Code.SPEC_INVARIANT_STEP
    assert "the terminal predicate calls s.flag" in err.value.message
    lines = (TRUST / "events_flag_in_terminal.py").read_text().splitlines()
    assert err.value.line == next(i for i, ln in enumerate(lines, start=1) if 's.flag("replies"' in ln)


def test_flag_is_not_a_state_variable_name(tmp_path: Path) -> None:
    spec = tmp_path / "flag_var.py"
    spec.write_text("from ownership import Spec\nspec = Spec('flag_var')\nspec.var('flag', bool, init=False)\n")
    with pytest.raises(OwnershipError) as err:
        load_spec(spec)
    assert err.value.code is Code.SPEC_INVALID and "shadows a view method" in err.value.message


def test_spec_code_cannot_unwrap_an_element_with_the_checkers_ix() -> None:
    with pytest.raises(OwnershipError) as err:
        explore(Instance(load_spec(TRUST / "sym_static_unwraps_ix.py"), {}))
    assert err.value.code is Code.SYMMETRY_BROKEN and "uses ix" in err.value.message
    lines = (TRUST / "sym_static_unwraps_ix.py").read_text().splitlines()
    assert err.value.line == next(i for i, ln in enumerate(lines, start=1) if "s.fast[r] = ix(r)" in ln)


@pytest.mark.parametrize("name", ["impure_project_escape_funcattr", "impure_project_escape_globals",
                                  "impure_project_escape_sysmod", "impure_project_escape_gen",
                                  "impure_project_escape_arr", "impure_spec_attribute"])
def test_history_kept_where_the_audit_does_not_look_is_refused_statically(name: str) -> None:
    import sys

    sys.path.insert(0, str(TRUST))  # the spec imports its project's helper module
    try:
        with pytest.raises(OwnershipError) as err:
            explore(Instance(load_spec(TRUST / f"{name}.py"), {}))
    finally:
        sys.path.remove(str(TRUST))
    assert err.value.code is Code.SPEC_IMPURE


@pytest.mark.parametrize("name", ["sym_review_three_arrangement", "sym_review_pool_stamp_order"])
def test_an_order_dependence_only_a_third_renaming_shows_is_refused(name: str) -> None:
    # Every renaming of a 3-element domain is applied to each expanded state, not only the generators.
    inst = Instance(load_spec(TRUST / f"{name}.py"), {})
    assert explore(inst, ExploreOptions(symmetry=False)).verdict.name == "VIOLATED"
    with pytest.raises(OwnershipError) as err:
        explore(Instance(load_spec(TRUST / f"{name}.py"), {}))
    assert err.value.code is Code.SYMMETRY_MISMATCH


def test_the_graph_export_checks_the_symmetry_it_reduces_by() -> None:
    from ownership.engines.graph import state_graph

    with pytest.raises(OwnershipError) as err:
        state_graph(Instance(load_spec(TRUST / "sym_global_deep_first.py"), {}))
    assert err.value.code is Code.SYMMETRY_MISMATCH


def test_an_elements_state_is_not_handed_to_spec_code() -> None:
    with pytest.raises(OwnershipError) as err:
        explore(Instance(load_spec(TRUST / "sym_static_getstate.py"), {}))
    assert err.value.code is Code.SYMMETRY_BROKEN and "takes the state of" in err.value.message
