"""Every vocabulary operation's Z3 encoding means what its concrete body means, on generated states.

bmc and prove run each ``@operation``'s registered encoding; the explorer,
the replay and every trace run its Python body.  Here Hypothesis generates
states of two specs that call every encoded operation directly (pages on
the free list 0 to 3 times, shared and unheld pages, slots that tie, counts
held in the state from -2 up past the pool's size, absent owners) and
:func:`check_conformance` compares, on each, whether every action instance
is enabled, every cell it writes (returned values are stored in cells), the
invariants it flags, and every invariant's value.  Where the Python refuses
an input (a negative count, OWN113), the encoding must refuse it too.

The registry is enumerated: an operation with an encoding and no entry in
:data:`GENERATORS` fails the test, so a new one cannot be forgotten.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ownership.lang.instance import Instance, State
from ownership.lang.loader import load_spec
from ownership.lang.types import BoolType, Enum, Ref, RefSet
from ownership.symbolic.conformance import Conformance, check_conformance, symbolic_spec
from ownership.symbolic.encoding import SymbolicSpec
from ownership.vocab.operation import ENCODINGS, encoding_of, registered_operations

TRUST = Path(__file__).resolve().parent / "trust"

GENERATORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "PagePool.alloc": ("enc_inputs_pool", ("alloc", "alloc_after", "alloc_held_count", "take_exactly_free",
                                         "alloc_then_free", "alloc_then_read")),
    "PagePool.available": ("enc_inputs_pool", ("available", "take_exactly_free")),
    "PagePool.pages_of": ("enc_inputs_pool", ("count_held", "first_held", "holds", "free_held", "write_held")),
    "PagePool.write": ("enc_inputs_pool", ("write_listed", "write_held", "write_mixed")),
    "PagePool.read": ("enc_inputs_pool", ("read_listed", "read_held", "alloc_then_read")),
    "PagePool.free_pages": ("enc_inputs_pool", ("free_listed", "free_nothing", "free_held", "free_held_twice",
                                                "free_held_and_listed", "free_held_added", "alloc_then_free")),
    "transfer": ("enc_inputs_pool", ("send", "send_back", "send_held_count")),
    "pages_exclusive": ("enc_inputs_pool", ("exclusive",)),
    "pages_all_returned": ("enc_inputs_pool", ("all_returned",)),
    "InflightWrites.free": ("enc_inputs_more", ("free_with_writes",)),
    "PrefixIndex._choose_node": ("enc_inputs_more", ("evict", "choose_node")),
    "_set_if": ("enc_inputs_more", ("set_if_cell", "set_if_reference", "evict")),
    "BlockTables._take_free": ("enc_inputs_more", ("allocate", "take_free")),
}
"""Each operation with an encoding: the input spec (in tests/trust/) and the actions of it that call the operation."""

FAST_EXAMPLES = {"enc_inputs_pool": 5, "enc_inputs_more": 25}
"""Hypothesis examples per input spec in the fast test (each a few states, every action instance on each)."""
SLOW_EXAMPLES = {"enc_inputs_pool": 30, "enc_inputs_more": 200}
"""Examples per input spec in the slow test (enc_inputs_pool's states cost about 1 s each at 3 requests)."""
STATES_PER_EXAMPLE = 3


def encoded_operations() -> dict[str, Callable[..., Any]]:
    """Every vocabulary operation that has a registered encoding."""
    importlib.import_module(ENCODINGS)
    return {name: op for name, op in registered_operations().items() if encoding_of(op).fn is not None}


@functools.cache
def encoded(name: str, requests: int = 2) -> tuple[Instance, SymbolicSpec]:
    inst = Instance(load_spec(TRUST / f"{name}.py"), {"requests": requests})
    return inst, symbolic_spec(inst)


# -- the registry ---------------------------------------------------------------------------------


def test_every_operation_has_an_encoding_and_a_generator() -> None:
    ops = encoded_operations()
    unencoded = sorted(set(registered_operations()) - set(ops))
    assert not unencoded, f"operations bmc and prove cannot run (no encoding registered): {unencoded}"
    assert len(ops) >= 13
    missing = sorted(set(ops) - set(GENERATORS))
    assert not missing, f"operations with an encoding but no generator here: {missing}"
    assert not sorted(set(GENERATORS) - set(ops)), "a generator names an operation that has no encoding"


def calling_action(spec_file: str) -> str | None:
    """The innermost function of ``spec_file`` on the stack: the action being encoded."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == spec_file:
            return frame.f_code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    return None


def test_the_generators_call_their_operations(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each named action of each input spec reaches the operation's encoding while the spec is encoded.
    ops = encoded_operations()
    calls: dict[str, set[str | None]] = {name: set() for name in ops}
    for name, op in ops.items():
        slot = encoding_of(op)

        def counted(*args: Any, _fn: Any = slot.fn, _name: str = name, **kwargs: Any) -> Any:
            calls[_name].add(calling_action(spec_file[0]))
            return _fn(*args, **kwargs)

        monkeypatch.setattr(slot, "fn", counted)
    spec_file = [""]
    for spec_name in sorted({spec for spec, _ in GENERATORS.values()}):
        spec_file[0] = str(TRUST / f"{spec_name}.py")
        symbolic_spec(Instance(load_spec(TRUST / f"{spec_name}.py")))
    for op_name, (_spec, actions) in GENERATORS.items():
        missing = set(actions) - calls[op_name]
        assert not missing, f"{op_name}: {sorted(missing)} never call its encoding"


# -- generated states -----------------------------------------------------------------------------


def cell_strategy(inst: Instance, name: str, vtype: object) -> st.SearchStrategy[Any]:
    """Values of one cell: every value of its type, free lists -1 to 3 deep, integers from -2 past the pool's size."""
    if isinstance(vtype, BoolType):
        return st.booleans()
    if isinstance(vtype, RefSet):
        return st.integers(0, (1 << inst.sizes[vtype.domain]) - 1)
    if isinstance(vtype, Ref):
        members = st.integers(0, inst.sizes[vtype.domain] - 1)
        return st.one_of(st.none(), members) if vtype.optional else members
    if isinstance(vtype, Enum):
        return st.integers(0, len(vtype.members) - 1)
    if name.endswith("_free"):
        return st.integers(-1, 3)  # a spec's raw write may take a page off twice
    pages = inst.param_values.get("pages", 3)
    # -1 is an unheld page's slot; pages and pages + 1 are the counts just past what the pool holds.
    return st.one_of(st.sampled_from([-1, 0, 1, pages, pages + 1]), st.integers(-2, pages + 2))


def states(inst: Instance) -> st.SearchStrategy[State]:
    """Whole states, every cell drawn within its type: reachable or not (a bug reaches odd states)."""
    cells = [cell_strategy(inst, v.name, v.type) for v in inst.spec.vars.values()
             for _k in range(inst.layouts[v.name].length)]
    return st.tuples(*cells)


def assert_agrees(inst: Instance, report: Conformance, count: int) -> None:
    """No discrepancy; where the Python refuses an input, a negative count refused by the encoding too."""
    assert report.states == count
    assert not report.discrepancies, report.describe(inst)
    refused = set(report.refused)
    for state, what, message in report.raised:
        assert "cannot be negative" in message, (what, message)
        assert (state, what) in refused, f"{what}: the Python refuses ({message}), the encoding does not"
    assert not report.overflows, f"the encoding refuses where the Python runs: {report.overflows[:3]}"


def check_generated(name: str, requests: int, examples: int) -> None:
    inst, sym = encoded(name, requests)

    # No shrinking: a state costs a solver call per action instance, and the report already names
    # each disagreeing state and both sides' successors readably.
    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(states(inst), min_size=1, max_size=STATES_PER_EXAMPLE))
    def agree(batch: list[State]) -> None:
        with_init = [inst.init_state, *batch]
        assert_agrees(inst, check_conformance(inst, with_init, sym), len(with_init))

    agree()


@pytest.mark.parametrize("name", sorted(FAST_EXAMPLES))
def test_the_encodings_agree_with_the_python_on_generated_states(name: str) -> None:
    check_generated(name, 2, FAST_EXAMPLES[name])


@pytest.mark.slow
@pytest.mark.parametrize("requests", [2, 3])
@pytest.mark.parametrize("name", sorted(FAST_EXAMPLES))
def test_the_encodings_agree_on_many_generated_states(name: str, requests: int) -> None:
    check_generated(name, requests, SLOW_EXAMPLES[name])
