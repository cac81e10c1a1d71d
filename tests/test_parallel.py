"""The sharded search (`--workers N`) gives the one-process search's answer: states, counts, trace, coverage.

Every library spec at its defaults, searched by one process on the Python
path and by two and three worker processes; corpus specs for the stops that
end a level early (a flagged step, a deadlock, the state and depth limits)
and a spec error raised inside a worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import SPECS, instance
from ownership.cli import app
from ownership.core.progress import Progress, WorkerProgress
from ownership.core.result import CheckResult
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.parallel.shard import shard_of
from ownership.errors import OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

TRUST = Path(__file__).resolve().parent / "trust"
LIBRARY = sorted(p.stem for p in SPECS.glob("*.py"))


def _answer(r: CheckResult) -> tuple[object, ...]:
    steps = tuple((s.call, s.picks, tuple(s.state.items())) for s in r.trace.steps) if r.trace is not None else None
    return (r.verdict, r.stop_reason, r.stats.states, r.stats.transitions, r.stats.depth, r.violated, steps,
            r.actions, r.warnings)


def _inst(name: str) -> Instance:
    path = TRUST / f"{name}.py"
    return Instance(load_spec(path), None) if path.exists() else instance(name)


def _both(name: str, workers: int = 2, **options: object) -> tuple[CheckResult, CheckResult]:
    one = explore(_inst(name), ExploreOptions(kernel="python", **options))  # type: ignore[arg-type]
    many = explore(_inst(name), ExploreOptions(workers=workers, **options))  # type: ignore[arg-type]
    return one, many


@pytest.mark.parametrize("name", LIBRARY)
def test_every_library_spec_gets_the_same_answer_from_two_workers(name: str) -> None:
    one, two = _both(name)
    assert _answer(two) == _answer(one)
    assert any("searched by 2 worker processes" in n for n in two.notes)


@pytest.mark.parametrize("name", ["sglang_disagg_v0_5_19", "sglang_disagg_v0_5_21", "vllm_block_pool"])
def test_three_workers_and_no_symmetry_too(name: str) -> None:
    one, three = _both(name, workers=3, symmetry=False)
    assert _answer(three) == _answer(one)


def test_a_stop_inside_a_level_counts_what_one_process_counted() -> None:
    # Each limit ends the search inside a level: the counts are the one-process search's at that point.
    for opts in ({"max_states": 100}, {"max_states": 333}, {"max_depth": 7}, {"deadlock": True}):
        one, two = _both("sglang_disagg_v0_5_21", **opts)
        assert _answer(two) == _answer(one), opts
    one, two = _both("toy_double_free", deadlock=True)
    assert _answer(two) == _answer(one)


@pytest.mark.parametrize("name", ["events_flag_back_edge", "events_flag_self_loop"])
def test_a_flagged_step_is_the_same_counterexample(name: str) -> None:
    # The flagged step returns to a state already seen: still the violation, at the same depth.
    one, two = _both(name)
    assert one.verdict.name == "VIOLATED"
    assert _answer(two) == _answer(one)


def test_shards_are_the_same_in_every_process() -> None:
    # None hashes by address and strings by a per-process seed: the shard must not depend on either.
    key = (None, (1, None, False), "a")
    code = f"from ownership.engines.parallel.shard import shard_of; print(shard_of({key!r}, 7))"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2)}
    assert outs == {f"{shard_of(key, 7)}\n"}


def test_a_spec_error_in_a_worker_is_the_located_error(tmp_path: Path) -> None:
    spec = tmp_path / "boom.py"
    spec.write_text(
        "from ownership import Spec\n"
        "spec = Spec('boom')\n"
        "spec.var('n', int, init=0)\n"
        "@spec.action\n"
        "def step(s):\n"
        "    s.n = s.n + 1\n"
        "    if s.n == 3:\n"
        "        raise ValueError('three')\n"
        "@spec.invariant\n"
        "def fine(s) -> bool:\n"
        "    return True\n"
    )
    with pytest.raises(OwnershipError) as one:
        explore(Instance(load_spec(spec), None), ExploreOptions(kernel="python"))
    with pytest.raises(OwnershipError) as two:
        explore(Instance(load_spec(spec), None), ExploreOptions(workers=2))
    assert two.value.one_line() == one.value.one_line()


def test_compiled_kernel_and_workers_are_refused() -> None:
    with pytest.raises(OwnershipError, match="--workers 2"):
        ExploreOptions(workers=2, kernel="compiled").validate()


def test_workers_on_the_command_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["check", str(SPECS / "sglang_disagg_v0_5_19.py"), "--workers", "2",
                                   "--no-render", "--no-progress", "--out", str(tmp_path)])
    assert res.exit_code == 1, res.output
    assert "Counterexample: 15 steps" in res.output
    assert "--workers 2" in res.output  # the reproduce line
    bad = CliRunner().invoke(app, ["check", str(SPECS / "toy_safe_counter.py"), "--workers", "zero"])
    assert bad.exit_code == 2 and "--workers must be auto or a number" in bad.output


def test_progress_line_of_a_parallel_run() -> None:
    p = Progress(10.0, 1000, 5000, 4, 200, workers=(WorkerProgress(True, 1500.0, 120), WorkerProgress(False, 0.0, 80)))
    assert "1 of 2 workers busy (1,500 + 0 states/s; level per shard 120/80)" in p.line()


@pytest.mark.slow
def test_sigterm_stops_the_workers_too(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ownership", "check", str(SPECS / "sglang_disagg_v0_5_21.py"), "-p", "requests=3",
         "--no-symmetry", "--workers", "2", "--out", str(tmp_path / "o")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    time.sleep(8)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, (out, err)
    assert "Traceback" not in err
    assert out.startswith("UNKNOWN") and "interrupted" in out
    # Forked workers carry the coordinator's command line, so its unique --out names them.
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "o")], capture_output=True, text=True).stdout
    assert not left.strip()


@pytest.fixture(scope="module")
def local_ray():  # type: ignore[no-untyped-def]
    """A local Ray cluster with this machine's CPUs, joined by every --ray auto run of the module."""
    ray = pytest.importorskip("ray")
    from ownership.engines.parallel import machine_workers

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=machine_workers(), include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sglang_disagg_v0_5_19", "sglang_disagg_v0_5_21", "vllm_block_pool",
                                  "events_flag_back_edge"])
def test_ray_actors_give_the_one_process_answer(local_ray, name: str) -> None:  # type: ignore[no-untyped-def]
    one = explore(_inst(name), ExploreOptions(kernel="python"))
    on_ray = explore(_inst(name), ExploreOptions(workers=2, ray="auto"))
    assert _answer(on_ray) == _answer(one)
    assert any("2 Ray actors on the Ray cluster at auto" in n for n in on_ray.notes), on_ray.notes
    assert local_ray.is_initialized()  # a cluster the run joined is left running


@pytest.mark.slow
def test_a_spec_error_on_a_ray_actor_is_the_located_error(local_ray, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = tmp_path / "edited.py"
    spec.write_text((SPECS / "vllm_block_pool.py").read_text())
    inst = Instance(load_spec(spec), None)
    spec.write_text(spec.read_text() + "\n# edited\n")  # the actors would load another spec: refused
    with pytest.raises(OwnershipError, match="changed since the instance"):
        explore(inst, ExploreOptions(workers=2, ray="auto"))


def test_a_spec_file_edited_since_it_was_loaded_is_refused_by_the_workers(tmp_path: Path) -> None:
    # The workers would search the edited spec while this process replays traces through the one it loaded.
    spec = tmp_path / "edited.py"
    spec.write_text((SPECS / "vllm_block_pool.py").read_text())
    inst = Instance(load_spec(spec), None)
    spec.write_text(spec.read_text() + "\n# edited\n")
    with pytest.raises(OwnershipError, match="changed since the instance"):
        explore(inst, ExploreOptions(workers=2))


def test_explain_says_its_diagnosis_ran_in_one_process(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["check", str(Path(__file__).parent / "corpus" / "toy_double_free.py"), "--workers",
                                   "2", "--explain", "--no-render", "--no-progress", "--out", str(tmp_path)])
    assert res.exit_code == 1, res.output
    assert "the diagnosis searched its bounded state graph in one process" in res.output
