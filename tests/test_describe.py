"""An instance shipped to another process: InstanceDescription, describe, and the Evaluator.

The spawned worker starts in an empty folder, so a relative spec path would
not resolve there: every rebuild below goes through the description's
absolute path (or the library's copy).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import pickle
import shutil
from collections.abc import Iterator
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any

import pytest

from ownership import Spec, require
from ownership.errors import Code, OwnershipError
from ownership.lang.description import InstanceDescription, describe, description_of
from ownership.lang.evaluator import Evaluator
from ownership.lang.instance import Instance, State
from ownership.lang.loader import load_spec
from ownership.library import library_dir

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
V21 = ROOT / "specs" / "sglang_disagg_v0_5_21.py"

Outcomes = list[tuple[str, list[tuple[State, tuple[Any, ...]]]]]


def _outcomes(ev: Evaluator, states: list[State]) -> list[Outcomes]:
    """Per state, per action instance in order: its label and every (successor state, picks)."""
    inst = ev.instance
    return [[(ai.label, [(sc.state, sc.picks) for sc in ev.successors(s, ai)]) for ai in inst.action_instances]
            for s in states]


def _in_worker(description: InstanceDescription, states: list[State]) -> tuple[str, list[Outcomes]]:
    """Run in the spawned process: rebuild the instance from its description, expand the given states."""
    ev = Evaluator(description, recording=False)
    return os.getcwd(), _outcomes(ev, states)


def _evaluator_in_worker(ev: Evaluator, state: State) -> tuple[bool, list[str], list[tuple[str, State]]]:
    """Run in the spawned process: an evaluator that arrived pickled, its modes and its expansion of ``state``."""
    return ev.recording, sorted(ev.choice_reduction), [(ai.label, sc.state) for ai, sc in ev.expand(state)]


def _reachable(inst: Instance, count: int) -> list[State]:
    """The first ``count`` states breadth-first (the initial one first): some with choices behind them."""
    seen = {inst.init_state: None}
    frontier = [inst.init_state]
    while frontier and len(seen) < count:
        nxt = []
        for s in frontier:
            for ai in inst.action_instances:
                for sc in inst.successors_of(s, ai):
                    if sc.state not in seen and len(seen) < count:
                        seen[sc.state] = None
                        nxt.append(sc.state)
        frontier = nxt
    return list(seen)


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    """One spawned worker for the module, started in an empty folder (not the repository)."""
    empty = tmp_path_factory.mktemp("elsewhere")
    here = os.getcwd()
    os.chdir(empty)
    try:
        pool = multiprocessing.get_context("spawn").Pool(1)
    finally:
        os.chdir(here)
    with pool:
        yield pool


def _same_in_worker(worker: Pool, inst: Instance, count: int = 8) -> list[Outcomes]:
    states = _reachable(inst, count)
    assert len(states) > 3  # the initial state and some after it
    here = _outcomes(inst.evaluator(recording=False), states)
    description = pickle.loads(pickle.dumps(describe(inst)))
    cwd, there = worker.apply(_in_worker, (description, states))
    assert Path(cwd) != ROOT
    assert there == here
    return here


def _has_choices(outcomes: list[Outcomes]) -> bool:
    return any(picks for per_state in outcomes for _label, outs in per_state for _state, picks in outs)


# -- in another process ------------------------------------------------------------------------------


def test_a_library_spec_expands_the_same_in_a_spawned_worker(worker: Pool) -> None:
    inst = Instance(load_spec(V21), {"requests": 2})
    description = describe(inst)
    assert description.path == str(V21) and Path(description.path).is_absolute()
    assert description.spec_name == "sglang_disagg_v0_5_21"
    assert dict(description.params)["requests"] == 2
    assert description.library_name == (V21.name if library_dir().resolve() == V21.parent else None)
    _same_in_worker(worker, inst)


def test_a_derived_spec_expands_the_same_in_a_spawned_worker(worker: Pool) -> None:
    inst = Instance(load_spec(EXAMPLES / "paged_alloc_fixed.py"), {"pages": 3})
    description = describe(inst)
    assert description.spec_name == "paged_alloc_fixed"
    assert Path(description.path).name == "paged_alloc_fixed.py"
    _same_in_worker(worker, inst)
    # The base spec it patches, reached through the derived file's import, is its own file's spec.
    base = next(v for v in vars(__import__("sys").modules["paged_alloc"]).values() if isinstance(v, Spec))
    assert describe(Instance(base, {})).path == str(EXAMPLES / "paged_alloc.py")


def test_a_spec_given_by_a_relative_path_is_rebuilt_from_another_folder(worker: Pool,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT / "docs")
    spec = load_spec("examples/paged_alloc.py")
    assert spec.file == "examples/paged_alloc.py"  # what the loader keeps: the path as given
    inst = Instance(spec, {"requests": 2})
    monkeypatch.chdir(ROOT)  # the relative path means nothing here, nor in the worker's folder
    description = describe(inst)
    assert description.path == str(EXAMPLES / "paged_alloc.py")
    assert _has_choices(_same_in_worker(worker, inst, count=10))  # the pages allocated are choices


def test_an_evaluator_pickles_as_its_description_and_modes(worker: Pool) -> None:
    inst = Instance(load_spec(V21), {})
    ev = Evaluator(inst, recording=False, choice_reduction=["PrefillPage"])
    state = _reachable(inst, 4)[-1]
    recording, reduce, there = worker.apply(_evaluator_in_worker, (ev, state))
    assert (recording, reduce) == (False, ["PrefillPage"])
    assert there == [(ai.label, sc.state) for ai, sc in ev.expand(state)]


# -- the description itself ---------------------------------------------------------------------------


def test_a_description_is_plain_frozen_data() -> None:
    description = describe(Instance(load_spec(EXAMPLES / "paged_alloc.py"), {"pages": 3}))
    assert pickle.loads(pickle.dumps(description)) == description
    assert hash(description) == hash(pickle.loads(pickle.dumps(description)))
    with pytest.raises(AttributeError):
        description.spec_name = "other"  # type: ignore[misc]
    assert description.param_values == {"requests": 2, "pages": 3, "page_size": 2, "prompt_tokens": 2}


def test_rebuilding_in_the_describing_process_keeps_its_spec_and_stays_describable() -> None:
    spec = load_spec(EXAMPLES / "paged_alloc.py")
    inst = Instance(spec, {"pages": 3})
    description = describe(inst)
    again = description.instantiate()
    assert again.spec is spec  # the module already loaded is reused, not executed again
    assert again.param_values == inst.param_values and again.init_state == inst.init_state
    load_spec(EXAMPLES / "paged_alloc.py")  # loaded again: the first spec is no longer its module's
    assert describe(inst) == description


def test_a_spec_built_outside_a_spec_file_cannot_be_described() -> None:
    spec = Spec("inline")
    spec.var("x", bool, init=False)

    @spec.action
    def flip(s: Any) -> None:
        require(not s.x)
        s.x = True

    @spec.invariant
    def anything(s: Any) -> bool:
        return True

    with pytest.raises(OwnershipError) as err:
        describe(Instance(spec, {}))
    assert err.value.code is Code.INSTANCE_NOT_PORTABLE
    assert "not loaded from a spec file" in err.value.message


def test_an_edited_spec_file_is_refused_not_rebuilt(tmp_path: Path) -> None:
    file = tmp_path / "paged_alloc.py"
    shutil.copy(EXAMPLES / "paged_alloc.py", file)
    description = describe(Instance(load_spec(file), {}))
    file.write_text(file.read_text().replace('spec.param("pages", 2,', 'spec.param("pages", 3,'))
    with pytest.raises(OwnershipError) as err:
        description.instantiate()
    assert err.value.code is Code.INSTANCE_NOT_PORTABLE and "changed since" in err.value.message


def test_a_description_naming_no_spec_of_the_file_is_refused() -> None:
    description = description_of(EXAMPLES / "paged_alloc.py", "no_such_spec", {})
    with pytest.raises(OwnershipError) as err:
        description.instantiate()
    assert err.value.code is Code.INSTANCE_NOT_PORTABLE and "no spec named 'no_such_spec'" in err.value.message
    by_hand = description_of(EXAMPLES / "paged_alloc.py", "paged_alloc", {"pages": 3}).instantiate()
    assert by_hand.param_values["pages"] == 3 and by_hand.param_values["requests"] == 2


# -- the evaluator ---------------------------------------------------------------------------------


def test_an_evaluators_modes_are_its_own_whatever_the_instance_mode() -> None:
    inst = Instance(load_spec(EXAMPLES / "paged_alloc.py"), {})
    quiet, loud = inst.evaluator(recording=False), inst.evaluator(recording=True)
    assert inst.evaluator(recording=False) is quiet  # one per set of modes
    prefill = next(ai for ai in inst.action_instances if ai.action.name == "prefill")
    with inst.mode(recording=True):
        assert all(not sc.events for sc in quiet.successors(inst.init_state, prefill))
    with inst.mode(recording=False):
        assert all(sc.events for sc in loud.successors(inst.init_state, prefill))
    assert [sc.state for sc in quiet.successors(inst.init_state, prefill)] == \
        [sc.state for sc in inst.successors_of(inst.init_state, prefill)]


def test_the_view_at_a_state_and_the_cells_a_run_read() -> None:
    inst = Instance(load_spec(EXAMPLES / "paged_alloc.py"), {})
    ev = inst.evaluator(recording=False)
    phase = inst.layouts["phase"]
    view = ev.at(inst.init_state)
    assert ev.reads() == frozenset()
    assert view.phase[inst.elements["Req"][1]] == inst.init_state[phase.offset + 1]
    assert ev.reads() == {phase.offset + 1}
    prefill = next(ai for ai in inst.action_instances if ai.action.name == "prefill" and ai.args == (0,))
    first = ev.first_outcome(inst.init_state, prefill)
    assert first is not None
    succ, reads = ev.run_reading(inst.init_state, prefill, first.picks)
    assert succ is not None and succ.state == first.state
    assert phase.offset in reads  # the guard read the request's phase
    assert phase.offset + 1 not in reads  # and not the other request's
    assert ev.holds(inst.init_state, "no_foreign_read") and ev.violated(inst.init_state) is None


def test_choice_reduction_names_domains() -> None:
    inst = Instance(load_spec(EXAMPLES / "paged_alloc.py"), {})
    with pytest.raises(ValueError, match="Nope"):
        Evaluator(inst, choice_reduction=["Nope"])


@pytest.mark.parametrize("module", ["ownership/validate/search.py", "ownership/testing/conformance.py",
                                    "ownership/analysis/explain/trace.py"])
def test_callers_outside_the_language_use_no_private_cell_of_the_view(module: str) -> None:
    text = (ROOT / module).read_text()
    for private in ("view._", "._cells", "._reads", ".mode("):
        assert private not in text, f"{module} uses {private}"


def test_a_library_spec_is_rebuilt_from_the_receivers_library_whatever_the_path() -> None:
    inst = Instance(load_spec(library_dir() / V21.name), {"requests": 2})
    description = describe(inst)
    assert description.library_name == V21.name
    # Another installation puts the library elsewhere: the name, not the describing side's path, is what counts.
    moved = dataclasses.replace(description, path="/nowhere/else/" + V21.name)
    again = moved.instantiate()
    assert again.spec.name == inst.spec.name and again.param_values == inst.param_values
    assert again.init_state == inst.init_state
    assert [ai.label for ai in again.action_instances] == [ai.label for ai in inst.action_instances]
    outside = dataclasses.replace(description, path="/nowhere/else/" + V21.name, library_name=None)
    with pytest.raises(OwnershipError, match="no such spec file"):
        outside.instantiate()
