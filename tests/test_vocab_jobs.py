"""ownership.vocab.jobs: jobs with their own page references, reused request ids, non-negative counters.

Unit tests of each operation and invariant on the concrete view, and every
operation under bmc and prove on tiny specs.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import run_once as run
from ownership import Enum, Ownership, PagePool, Spec, require
from ownership.core.result import Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.vocab.jobs import Jobs, counters_nonnegative


def tiny(pages: int = 2, generations: int = 2) -> tuple[Spec, PagePool, Jobs]:
    spec = Spec("tiny_jobs")
    spec.param("requests", 2)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", pages, prefix="K")
    jobs = Jobs(pool, "save", generations=generations)
    jobs.no_stale_completion()
    jobs.invariant()
    jobs.consistency()
    own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership")
    return spec, pool, jobs




def test_a_job_keeps_released_pages_off_the_free_list_until_it_completes() -> None:
    spec, pool, jobs = tiny(pages=1)
    seen: list[Any] = []

    def body(s):  # noqa: ANN001, ANN202
        (p,) = pool.alloc(s, 0, 1)
        jobs.start(s, 0)
        jobs.release(s, 0)
        seen.append((pool.available(s), jobs.keeps(s, p), jobs.running(s, 0), jobs.idle(s)))
        jobs.complete(s, 0)
        seen.append((pool.available(s), jobs.keeps(s, p), jobs.running(s, 0), jobs.idle(s)))

    inst, (out,) = run(spec, body)
    assert seen == [(0, True, True, False), (1, False, False, True)]
    assert [e.kind for e in out.events] == ["alloc", "job started", "job keeps", "job done"]
    assert inst.violated(out.state) is None


def test_release_without_a_job_frees_at_once_and_a_held_page_is_not_freed_by_completion() -> None:
    spec, pool, jobs = tiny(pages=2)

    def body(s):  # noqa: ANN001, ANN202
        a, b = pool.alloc(s, 0, 2)
        jobs.start(s, 0, [a])  # only page a is the job's
        jobs.complete(s, 0)  # r still holds a: it stays allocated
        assert pool.available(s) == 0
        jobs.release(s, 0)  # no job now: both pages go back
        assert pool.available(s) == 2

    inst, outs = run(spec, body)
    assert outs and all(inst.violated(o.state) is None for o in outs)


def test_freeing_a_page_a_job_references_is_flagged() -> None:
    spec, pool, jobs = tiny(pages=1)

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        jobs.start(s, 0)
        jobs.free(s, 0)  # ignores the job's reference

    inst, (out,) = run(spec, body)
    assert inst.violated(out.state) == "no_free_while_job_holds"
    assert [(e.kind, e.violates) for e in out.events if e.kind == "job still holds"] == [
        ("job still holds", "no_free_while_job_holds")]

    def completes_after(s):  # noqa: ANN001, ANN202
        body(s)
        jobs.complete(s, 0)  # the page is already free: not freed a second time
        assert pool.available(s) == 1

    assert run(spec, completes_after)[1]


def test_a_new_lifecycle_ages_the_running_job_and_its_completion_is_stale() -> None:
    spec, pool, jobs = tiny(pages=2)
    seen: list[Any] = []

    def body(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        jobs.start(s, 0)
        jobs.release(s, 0)
        jobs.new_lifecycle(s, 0)  # the id is reused
        seen.append((jobs.running(s, 0, 0), jobs.running(s, 0, 1), jobs.any_running(s, 0)))
        pool.alloc(s, 0, 1)
        jobs.start(s, 0)  # the new lifecycle's own job (age 0)
        jobs.complete(s, 0, 1, touches_current=True)  # the old one's completion applied to the new one

    inst, outs = run(spec, body)
    assert seen[0] == (False, True, True)
    for out in outs:
        assert inst.violated(out.state) == "no_stale_completion"
        assert ("stale completion", "no_stale_completion") in [(e.kind, e.violates) for e in out.events]
        assert inst.to_json(out.state)["save_stale"]["A"] is True

    def routed(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        jobs.start(s, 0)
        jobs.new_lifecycle(s, 0)
        jobs.complete(s, 0, 1)  # addressed to its own lifecycle: fine

    inst, outs = run(spec, routed)
    assert outs and all(inst.violated(o.state) is None for o in outs)


def test_generations_bound_the_reuses_a_running_job_sees() -> None:
    spec, pool, jobs = tiny(pages=1, generations=2)

    def twice(s):  # noqa: ANN001, ANN202
        pool.alloc(s, 0, 1)
        jobs.start(s, 0)
        jobs.new_lifecycle(s, 0)
        jobs.new_lifecycle(s, 0)  # the job would be two lifecycles old

    assert run(spec, twice)[1] == []

    def without_job(s):  # noqa: ANN001, ANN202
        for _ in range(3):
            jobs.new_lifecycle(s, 0)  # nothing to age: always enabled

    assert len(run(spec, without_job)[1]) == 1

    for body in (lambda s: jobs.complete(s, 0), lambda s: (jobs.start(s, 0), jobs.start(s, 0))):
        assert run(spec, body)[1] == []


def test_consistency_rejects_a_reference_without_a_running_job() -> None:
    spec, pool, jobs = tiny(pages=1)

    def stray(s):  # noqa: ANN001, ANN202
        (p,) = pool.alloc(s, 0, 1)
        s.save_refs[next(iter(s.all(spec.domains["Req"]))), p] = 1  # request 0: an element, never an int

    inst, (out,) = run(spec, stray)
    assert inst.violated(out.state) == "jobs_consistent"


def test_counters_nonnegative_over_scalars_and_tables() -> None:
    spec, pool, jobs = tiny(pages=1)
    Req = spec.domains["Req"]
    spec.var("locks", int, per=Req, init=0)
    spec.var("total", int, init=0)
    counters_nonnegative(spec, "locks", "total")
    assert "counters_nonnegative" in spec.invariants
    assert "locks" in (spec.invariants["counters_nonnegative"].doc or "")

    def negative_table(s):  # noqa: ANN001, ANN202
        second = list(s.all(Req))[1]  # spec code holds elements, never ints
        s.locks[second] = s.locks[second] - 1

    inst, (out,) = run(spec, negative_table)
    assert inst.violated(out.state) == "counters_nonnegative"

    def negative_scalar(s):  # noqa: ANN001, ANN202
        s.total = -1

    inst, (out,) = run(spec, negative_scalar)
    assert inst.violated(out.state) == "counters_nonnegative"

    def fine(s):  # noqa: ANN001, ANN202
        s.locks[next(iter(s.all(Req)))] = 2

    inst, (out,) = run(spec, fine)
    assert inst.violated(out.state) is None


def test_bad_declarations_are_refused_at_the_calling_line() -> None:
    spec, pool, jobs = tiny()
    spec.var("ready", bool, init=False)
    with pytest.raises(OwnershipError) as unknown:
        counters_nonnegative(spec, "nope")
    assert unknown.value.code is Code.COUNTER_NOT_INT and unknown.value.file == __file__
    with pytest.raises(OwnershipError) as not_int:
        counters_nonnegative(spec, "ready")
    assert "not an integer" in not_int.value.message
    with pytest.raises(OwnershipError) as none:
        counters_nonnegative(spec)
    assert none.value.code is Code.COUNTER_NOT_INT
    with pytest.raises(OwnershipError) as gens:
        Jobs(pool, "other", generations=0)
    assert gens.value.code is Code.OPERATIONS_INVALID and gens.value.file == __file__


def test_the_keeper_variable_is_marked_for_the_pictures() -> None:
    _, pool, jobs = tiny()
    assert [(m.var, m.role) for m in pool.marks] == [(jobs.holders_var, "keeper")]


# -- under the solver ------------------------------------------------------------------------
def solver_spec(*, fixed: bool) -> Spec:
    """Every operation in one small spec: start, release, new_lifecycle, complete, free; a counter checked.

    ``fixed=False`` applies a completion to whatever lifecycle holds the id
    (stale completions); ``fixed=True`` addresses it to its own lifecycle.
    """
    spec, pool, jobs = tiny(pages=2)
    Req = spec.domains["Req"]
    Phase = Enum("Phase", "IDLE RUNNING FINISHED")
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)
    spec.var("finished", int, per=Req, init=0)
    counters_nonnegative(spec, "finished", helper=True)
    spec.actions.clear()

    @spec.action
    def arrive(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] != Phase.RUNNING)
        jobs.new_lifecycle(s, r)
        pool.alloc(s, r, 1)
        s.phase[r] = Phase.RUNNING

    @spec.action
    def finish(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.RUNNING)
        jobs.start(s, r)
        jobs.release(s, r)
        s.phase[r] = Phase.FINISHED
        s.finished[r] = 1

    @spec.action
    def saved(s, r: Req, age: SaveAge):  # noqa: ANN001, ANN202, F821
        jobs.complete(s, r, age, touches_current=not fixed)
        s.finished[r] = 0

    @spec.action
    def evict(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.RUNNING)
        jobs.free(s, r)
        s.phase[r] = Phase.IDLE

    spec.terminal(lambda s: jobs.idle(s) and all(s.phase[r] != Phase.RUNNING for r in s.all(Req)))
    return spec


@pytest.mark.slow
def test_every_operation_runs_under_bmc_and_finds_the_stale_completion() -> None:
    e = explore(Instance(solver_spec(fixed=False)))
    b = bmc(Instance(solver_spec(fixed=False)), BmcOptions(max_depth=5))
    assert e.violated == b.violated == "no_stale_completion"
    # arrive, finish (the job starts), arrive again (it is now a lifecycle old), its completion
    assert e.trace is not None and b.trace is not None and len(e.trace) == len(b.trace) == 4


@pytest.mark.slow
def test_every_operation_runs_under_prove() -> None:
    assert explore(Instance(solver_spec(fixed=True))).verdict is Verdict.PROVED
    assert prove(Instance(solver_spec(fixed=True)), BmcOptions()).verdict is Verdict.PROVED
