"""The random engine as a swarm (`--engine hypothesis --workers N`): seeds of their own, the union of coverage.

Each worker runs its share of the walks and examples on a seed drawn from
the run's seed and its number; the answer is deterministic for a seed and a
number of workers, the coverage is the union of the workers', and a failure
found by a worker is shrunk and replayed by the coordinator.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import SPECS, instance
from ownership.cli import app
from ownership.core.progress import Progress, WorkerProgress
from ownership.core.replay import replay
from ownership.core.result import CheckResult, Verdict
from ownership.engines import registry
from ownership.engines.hypothesis_engine.engine import check_stateful
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.hypothesis_engine.sample import Found, Sample, merge
from ownership.engines.hypothesis_engine.swarm import share, worker_seed

BUGGY = "sglang_disagg_v0_5_19"
FIXED = "sglang_pd_abort_inflight_fixed"


def _run(name: str, **options: object) -> CheckResult:
    defaults: dict[str, object] = {"seed": 5, "max_examples": 20, "walks": 400, "exhaustive_states": 0}
    return check_stateful(instance(name), HypothesisOptions(**{**defaults, **options}))  # type: ignore[arg-type]


def _answer(r: CheckResult) -> tuple[object, ...]:
    steps = tuple((s.call, s.picks) for s in r.trace.steps) if r.trace is not None else None
    return (r.verdict, r.violated, r.stats.states, r.stats.transitions, r.stats.depth, steps, r.actions)


def test_shares_add_up_to_the_whole() -> None:
    for total in (0, 1, 7, 200, 1001):
        for workers in (1, 2, 3, 8):
            parts = [share(total, workers, i) for i in range(workers)]
            assert sum(parts) == total and max(parts) - min(parts) <= 1


def test_worker_seeds_differ_and_depend_on_the_run_seed_only() -> None:
    seeds = [worker_seed(5, i) for i in range(4)]
    assert len(set(seeds)) == 4
    assert worker_seed(5, 1) == seeds[1] and worker_seed(6, 1) != seeds[1]


def test_merge_unites_coverage_and_keeps_the_lowest_workers_failure() -> None:
    a = Sample(walks=3, examples=1, steps=10, max_depth=4, states={(1,), (2,)}, action_counts=Counter(x=2),
               enabled_in={"x": {(1,)}})
    b = Sample(walks=2, examples=2, steps=5, max_depth=6, states={(2,), (3,)}, action_counts=Counter(x=1, y=4),
               enabled_in={"x": {(3,)}, "y": {(2,)}}, found=Found("walk", [(0, ())], "inv", walk=2))
    c = Sample(found=Found("hypothesis", [(1, ())], "other"))
    m = merge([a, b, c])
    assert (m.walks, m.examples, m.steps, m.max_depth) == (5, 3, 15, 6)
    assert m.states == {(1,), (2,), (3,)}
    assert m.action_counts == Counter(x=3, y=4)
    assert m.enabled_in == {"x": {(1,), (3,)}, "y": {(2,)}}
    assert m.found is not None and m.found.invariant == "inv" and m.found.worker == 1


def test_the_same_seed_and_workers_give_the_same_answer() -> None:
    first, again = _run(BUGGY, workers=2), _run(BUGGY, workers=2)
    assert first.verdict is Verdict.VIOLATED
    assert _answer(first) == _answer(again)
    assert any("sampled by 2 worker processes" in n for n in first.notes), first.notes


def test_a_swarm_counterexample_is_replayed_through_the_spec() -> None:
    r = _run(BUGGY, workers=3)
    assert r.violated == "no_foreign_read" and r.trace is not None
    replayed = replay(instance(BUGGY), r.trace)
    assert replayed.ok and replayed.final_violation == "no_foreign_read", replayed.message
    assert any(n.startswith("found by worker ") for n in r.notes), r.notes


def test_a_swarm_pass_covers_the_union_and_counts_every_walk() -> None:
    one, two = _run(FIXED, walks=40), _run(FIXED, walks=40, workers=2)
    assert one.verdict is two.verdict is Verdict.BOUNDED_OK
    assert "40 swarm random walks and 20 random examples" in two.coverage()
    assert two.options["workers"] == 2
    assert "ran 40 swarm random walks" in two.notes[0]


def test_the_reproduce_line_names_the_workers(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["check", str(SPECS / f"{BUGGY}.py"), "--engine", "hypothesis", "--workers", "2",
                                   "--max-states", "1", "--no-render", "--out", str(tmp_path / "o")])
    assert res.exit_code == 1, res.output
    line = next(ln for ln in res.output.splitlines() if "reproduce:" in ln)
    assert "--workers 2" in line and "--seed " in line


def test_engines_that_take_workers_are_those_that_run_in_parallel() -> None:
    for name, engine in registry.ENGINES.items():
        takes = {row.field for row in engine.options_schema}
        assert ("workers" in takes) == ("ray" in takes) == engine.capabilities.parallel, name


def test_the_progress_line_of_a_swarm_says_its_states_are_summed() -> None:
    p = Progress(3.0, 900, examples=40, steps=4000, workers=(WorkerProgress(True, 700.0, 0),
                                                            WorkerProgress(True, 650.0, 0)))
    assert "900 distinct states (summed over workers), 2 workers (700 + 650 steps/s)" in p.line()


@pytest.mark.slow
def test_a_swarm_on_ray_actors_gives_the_local_swarms_answer() -> None:
    ray = pytest.importorskip("ray")
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        local, on_ray = _run(BUGGY, workers=2), _run(BUGGY, workers=2, ray="auto")
    finally:
        ray.shutdown()
    assert _answer(local) == _answer(on_ray)
    assert any("2 Ray actors" in n for n in on_ray.notes), on_ray.notes
