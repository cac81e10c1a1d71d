"""ownership.vocab.handles: several operations per request, each posted, then done, failed or cancelled.

Unit tests of each operation and invariant on the concrete view, and every
operation under bmc and prove on tiny specs (the Z3 engines run the same
code over terms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from conftest import run_once as run
from ownership import Enum, Ownership, PagePool, Spec, require
from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.vocab.handles import Handles, HandleState
from ownership.vocab.inflight import holds


def tiny(pages: int = 2, count: int = 2) -> tuple[Spec, PagePool, Handles]:
    spec = Spec("tiny_handles")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    ops = Handles(pool, "xfer", count)
    ops.invariant()
    ops.consistency()
    own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership")
    return spec, pool, ops




def test_a_posted_handle_covers_the_table_at_post_time_and_completion_lands_it() -> None:
    spec, pool, ops = tiny(pages=1)
    seen: list[Any] = []

    def body(s):  # noqa: ANN001, ANN202
        (p,) = pool.alloc(s, 0, 1)
        ops.start(s, 0, 0)
        ops.start(s, 0, 1)
        seen.append((ops.outstanding(s, 0), ops.pending_on(s, p), ops.settled(s, 0), ops.all_done(s, 0)))
        ops.complete(s, 0, 0)
        seen.append((ops.outstanding(s, 0), ops.pending_on(s, p), ops.state(s, 0, 0)))
        ops.complete(s, 0, 1)
        seen.append((ops.settled(s, 0), ops.all_done(s, 0), ops.failed(s, 0)))

    inst, (out,) = run(spec, body)
    assert seen == [(2, 2, False, False), (1, 1, HandleState.DONE), (True, True, False)]
    st = inst.to_json(out.state)
    assert st["kv_content"] == {"K0": "A"} and st["xfer_pending"]["A"] == {"K0": []}
    assert [e.kind for e in out.events] == [
        "alloc", "handle posted", "handle posted", "write", "handle settled", "write", "handle settled"]
    assert inst.violated(out.state) is None


def test_prepare_and_cancel_before_post_is_always_honoured() -> None:
    spec, pool, ops = tiny(pages=1)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        ops.prepare(s, 0, 0)
        assert ops.outstanding(s, 0) == 1  # a prepared operation may still be posted: not terminal
        ops.cancel(s, 0, 0)
        assert ops.settled(s, 0) and ops.state(s, 0, 0) == HandleState.CANCELLED
        ops.reset(s, 0)
        assert ops.state(s, 0, 0) == HandleState.IDLE

    inst, (out,) = run(spec, body)
    assert inst.to_json(out.state)["xfer_pending"]["A"] == {"K0": []}

    def cancel_posted(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        ops.start(s, 0, 0)
        ops.cancel(s, 0, 0)

    assert run(spec, cancel_posted)[1] == []  # cancel() is for prepared operations only


def test_a_cancel_request_to_a_posted_handle_may_be_ignored() -> None:
    spec, pool, ops = tiny(pages=1)
    answers: list[bool] = []

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        ops.start(s, 0, 0)
        answers.append(ops.request_cancel(s, 0, 0))
        ops.free(s, 0)  # the caller frees right after asking

    inst, outs = run(spec, body)
    assert sorted(answers) == [False, True] and len(outs) == 2
    verdicts = sorted(str(inst.violated(o.state)) for o in outs)
    assert verdicts == ["None", "no_release_with_operation_pending"]


def test_failure_and_the_flagged_free_of_a_page_a_sibling_still_covers() -> None:
    spec, pool, ops = tiny(pages=1)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        ops.start(s, 0, 0)
        ops.start(s, 0, 1)
        ops.fail(s, 0, 0)
        assert ops.failed(s, 0) and not ops.settled(s, 0)
        ops.free(s, 0)  # handle 1 is still posted
        b = pool.alloc(s, 1, 1)
        pool.write(s, 1, b)
        ops.complete(s, 0, 1)  # the straggler lands in B's page
        pool.read(s, 1, b)

    inst, (out,) = run(spec, body)
    st = inst.to_json(out.state)
    assert st["kv_content"] == {"K0": "A"} and st["wrote_unowned"]["A"] and st["read_foreign"]["B"] == "A"
    kinds = [(e.kind, e.violates) for e in out.events]
    assert ("operation still pending", "no_release_with_operation_pending") in kinds
    assert ("write", "no_unowned_write") in kinds and ("read", "no_foreign_read") in kinds


def test_the_invariant_holds_exactly_when_no_free_page_is_pending() -> None:
    spec, pool, ops = tiny(pages=1)

    def pending_free(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        ops.start(s, 0, 0)
        pool.free(s, 0)

    inst, (out,) = run(spec, pending_free)
    assert inst.violated(out.state) == "no_release_with_operation_pending"

    def settled_free(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        ops.start(s, 0, 0)
        ops.fail(s, 0, 0)
        ops.start(s, 0, 1)
        ops.complete(s, 0, 1)
        ops.free(s, 0)

    inst, (out,) = run(spec, settled_free)
    assert inst.violated(out.state) is None
    assert not [e for e in out.events if e.kind == "operation still pending"]


def test_coverage_of_part_of_the_table() -> None:
    spec, pool, ops = tiny(pages=2)

    def body(s):  # noqa: ANN001, ANN202
        first, second = pool.alloc(s, 0, 2)
        ops.start(s, 0, 0, pages=[second])
        assert ops.pending_on(s, first) == 0 and ops.pending_on(s, second) == 1

    inst, outs = run(spec, body)
    assert outs and all(inst.violated(o.state) is None for o in outs)


def test_operations_are_not_enabled_out_of_order() -> None:
    spec, pool, ops = tiny(pages=1)
    for body in (
        lambda s: ops.post(s, 0, 0),  # nothing prepared
        lambda s: ops.complete(s, 0, 0),  # nothing posted
        lambda s: ops.fail(s, 0, 0),
        lambda s: (ops.start(s, 0, 0), ops.start(s, 0, 0)),  # the slot is taken
        lambda s: (ops.start(s, 0, 0), ops.reset(s, 0)),  # still outstanding
    ):
        assert run(spec, body)[1] == []


def test_terminal_when_idle_and_consistency() -> None:
    spec, pool, ops = tiny(pages=1)
    Req = spec.domains["Req"]
    spec.var("busy", bool, per=Req, init=False)
    spec.terminal(lambda s: not any(s.busy[r] for r in s.all(Req)))
    ops.terminal_when_idle()

    def left_posted(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        ops.start(s, 0, 0)

    inst, (out,) = run(spec, left_posted)
    assert inst.violated(out.state) == "handles_terminal_when_idle"

    def stray_bit(s):  # noqa: ANN001, ANN202
        (p,) = pool.alloc(s, 0, 1)
        first = next(iter(s.all(spec.domains["Req"])))  # request 0 (spec code holds elements, never ints)
        handle = next(iter(s.all(ops.Handle)))
        s.xfer_pending[first, p] = frozenset({handle})  # a pending bit of a handle that was never prepared

    inst, (out,) = run(spec, stray_bit)
    assert inst.violated(out.state) == "handles_consistent"


def test_bad_declarations_are_refused_at_the_calling_line() -> None:
    spec = Spec("bad_handles")
    Req = spec.domain("Req", 1, names="A")
    pool = Ownership(spec, requests=Req).pool("kv", 1)
    with pytest.raises(OwnershipError) as zero:
        Handles(pool, "xfer", 0)
    assert zero.value.code is Code.OPERATIONS_INVALID and zero.value.file == __file__
    with pytest.raises(OwnershipError) as bad:
        Handles(pool, "not a name", 1)
    assert bad.value.code is Code.OPERATIONS_INVALID


def test_the_pending_variable_is_marked_for_the_pictures() -> None:
    _, pool, ops = tiny()
    assert [(m.var, m.role) for m in pool.marks] == [(ops.pending_var, "pending")]


# -- under the solver ------------------------------------------------------------------------
def solver_spec(*, fixed: bool) -> Spec:
    """Every operation in one small spec: prepare, post, complete, fail, cancel, request_cancel, reset, free.

    (``start`` is ``prepare`` then ``post``, and ``prepare`` without
    ``pages`` covers the whole table; the library spec
    ``vllm_nixl_multi_handle_failure`` runs both under bmc and prove.)

    ``fixed=False`` releases at the first failure (the race); ``fixed=True``
    waits until every operation of the request is terminal.
    """
    spec, pool, ops = tiny(pages=1, count=2)
    Req = spec.domains["Req"]
    Phase = Enum("Phase", "IDLE WAITING DONE")
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)
    spec.actions.clear()
    ops.terminal_when_idle()

    @spec.action
    def begin(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.IDLE)
        pool.alloc(s, r, 1)
        mine = [p for p in s.all(pool.Page) if holds(s, pool, r, p)]  # a concrete list, also under Z3
        for h in s.all(ops.Handle):
            ops.prepare(s, r, h, pages=mine)  # each waits to be posted, or withdrawn
        s.phase[r] = Phase.WAITING

    @spec.action
    def post(s, r: Req, h: XferHandle):  # noqa: ANN001, ANN202, F821
        ops.post(s, r, h)

    @spec.action
    def withdraw(s, r: Req, h: XferHandle):  # noqa: ANN001, ANN202, F821
        ops.cancel(s, r, h)

    @spec.action
    def done(s, r: Req, h: XferHandle):  # noqa: ANN001, ANN202, F821
        ops.complete(s, r, h)

    @spec.action
    def failed(s, r: Req, h: XferHandle):  # noqa: ANN001, ANN202, F821
        ops.fail(s, r, h)

    @spec.action
    def ask_cancel(s, r: Req, h: XferHandle):  # noqa: ANN001, ANN202, F821
        ops.request_cancel(s, r, h)

    @spec.action
    def finish(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.WAITING)
        if fixed:
            require(ops.settled(s, r))
        else:
            require(ops.failed(s, r) or ops.all_done(s, r))
        ops.free(s, r)
        if fixed:
            ops.reset(s, r)
        s.phase[r] = Phase.DONE

    spec.terminal(lambda s: all(s.phase[r] != Phase.WAITING for r in s.all(Req)))
    return spec


@pytest.mark.slow
def test_every_operation_runs_under_bmc_and_finds_the_race() -> None:
    e = explore(Instance(solver_spec(fixed=False)))
    b = bmc(Instance(solver_spec(fixed=False)), BmcOptions(max_depth=4))
    assert e.violated == b.violated == "no_release_with_operation_pending"
    # begin (both prepared), post one, it fails, the release: the other is still prepared
    assert e.trace is not None and b.trace is not None and len(e.trace) == len(b.trace) == 4


@pytest.mark.slow
def test_every_operation_runs_under_prove() -> None:
    assert explore(Instance(solver_spec(fixed=True))).verdict is Verdict.PROVED
    assert prove(Instance(solver_spec(fixed=True)), BmcOptions()).verdict is Verdict.PROVED


def test_the_documented_example_runs_and_finds_the_race(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "vocabulary.md").read_text()
    block = text.split("<!-- example: handles -->", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "two_handles.py"
    path.write_text(block)
    result = explore(Instance(load_spec(path)))
    assert result.violated == "no_release_with_operation_pending"
    assert result.trace is not None and [s.action for s in result.trace.steps] == ["load", "failed", "give_up"]
    fixed = tmp_path / "two_handles_fixed.py"
    fixed.write_text(block.replace("xfer.failed(s, r))", "xfer.settled(s, r) and xfer.failed(s, r))"))
    assert explore(Instance(load_spec(fixed))).verdict is Verdict.PROVED


def test_the_handle_domain_is_reduced_by_permutation_not_row_sorting() -> None:
    """Handles is a value domain (the pending sets name handles), so symmetry permutes it exactly.

    Row sorting it as well as the pages would sort two index domains of one
    variable independently, which is not an exact canonical form.
    """
    from ownership.engines.symmetry import plan_symmetry

    spec, _, ops = tiny()
    inst, _ = run(spec, lambda s: ops.start(s, 0, 0))
    plan = plan_symmetry(inst)
    assert ops.Handle.name in plan.permuted and ops.Handle.name not in plan.sorted
