"""Benchmark of the Hypothesis engine (run by hand; figures go in docs/benchmarks.md).

    python bench/hypothesis_bench.py                         # every configuration, 20 seeds each
    python bench/hypothesis_bench.py --configs gen-default --seeds 5
    python bench/hypothesis_bench.py --summarize runs.jsonl  # the tables again, from saved runs

Time for the stateful engine to find the v0.5.19 leak (no_foreign_read in
``specs/sglang_disagg_v0_5_19.py``), one run per seed, compared with a plain
hand-written ``RuleBasedStateMachine`` of the same protocol
(``bench/handwritten_disagg.py``) under the same Hypothesis settings.

Configurations (``--configs``, comma-separated):

* ``gen-default`` / ``hand-default``: the spec's default size (2 requests x
  4 decode pages);
* ``gen-16x256`` / ``hand-16x256``: 16 requests x 256 decode pages (see
  ``BIG``);
* ``hand-pre-SIZE``: the hand-written machine in its ``precondition`` style
  (``hand`` is the plain early-return style; see ``handwritten_disagg.py``);
* ``hand-min-SIZE`` / ``hand-pre-min-SIZE``: either, with the engine's
  private ``_min_steps = steps // 2`` (a user would not set it; it separates
  the machine's cost from the length of its examples).

Per run it records the time (wall and CPU: the machine is shared) and the
examples and steps until the *first* violation is seen, then the same until
the run returns.  By default Hypothesis' shrink phase is left out (settings
otherwise the engine's own), so a run returns right after the first
violation; ``--shrink`` keeps it, to measure what shrinking costs on top.
The phase that generates examples is the same either way, so the time to the
first violation does not depend on it.  A run that reaches
``--max-examples`` without a violation is a miss.  Runs go to a JSON
lines file as they finish, so a long background run can be summarised at any
time.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from handwritten_disagg import Counters, DisaggParams, make_machine  # noqa: E402

from ownership.engines.hypothesis_engine import engine as hypothesis_engine  # noqa: E402
from ownership.engines.hypothesis_engine import machine as hypothesis_machine  # noqa: E402
from ownership.engines.hypothesis_engine.engine import check_stateful  # noqa: E402
from ownership.engines.hypothesis_engine.options import HypothesisOptions  # noqa: E402
from ownership.lang.instance import Instance  # noqa: E402
from ownership.lang.loader import load_spec  # noqa: E402

V21 = ROOT / "specs" / "sglang_disagg_v0_5_19.py"
ENGINE_SETTINGS = hypothesis_engine.hypothesis_settings  # the engine's settings, before the bench wraps them

# 16 requests x 256 decode pages.  The leak needs a prompt that prefill
# rejects (>= min(context_len - 1, prefill_pool_tokens - 1) = 63) and decode
# admits (< min(context_len - 1, decode_pool_tokens - 1) = 511): a 64-token
# prompt takes 32 decode pages but prefill writes one.  At requests=2 the
# explorer finds the violation with these values (requests=1 is safe).
BIG = {"requests": 16, "decode_pool_tokens": 512, "context_len": 1024, "prefill_pool_tokens": 64, "prompt_tokens": 64}
SIZES: dict[str, dict[str, int]] = {"default": {}, "16x256": BIG}
KINDS = ("gen", "hand", "hand-pre", "hand-min", "hand-pre-min")
CONFIGS = tuple(f"{k}-{s}" for k in KINDS for s in SIZES)
CLOCK: Callable[[], tuple[float, float]] = lambda: (time.perf_counter(), time.process_time())  # noqa: E731


@dataclass
class Run:
    """One seed of one configuration."""

    config: str
    seed: int
    found: bool
    violated: str | None
    examples_to_find: int | None
    steps_to_find: int | None
    wall_to_find: float | None
    cpu_to_find: float | None
    examples_total: int
    steps_total: int
    wall_total: float
    cpu_total: float


@dataclass
class _Probe:
    """Set by the patched engine classes: the engine's run log and the first violation."""

    log: Any = None
    first: tuple[int, int, float, float] | None = None


@contextmanager
def _probe_engine(probe: _Probe) -> Iterator[None]:
    """Watch the engine without touching its hot path.

    ``RunLog`` is replaced by a subclass that registers itself, and the
    violation exception records the counters and clocks when it is first
    built; neither runs on an ordinary step.
    """
    run_log, violation = hypothesis_engine.RunLog, hypothesis_machine.InvariantViolation

    class ProbedLog(run_log):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            probe.log = self

    class ProbedViolation(violation):  # type: ignore[misc, valid-type]
        def __init__(self, invariant: str, after: str) -> None:
            super().__init__(invariant, after)
            if probe.first is None and probe.log is not None:
                wall, cpu = CLOCK()
                probe.first = (probe.log.examples, probe.log.steps, wall, cpu)

    hypothesis_engine.RunLog, hypothesis_machine.InvariantViolation = ProbedLog, ProbedViolation  # type: ignore[misc, assignment]
    try:
        yield
    finally:
        hypothesis_engine.RunLog, hypothesis_machine.InvariantViolation = run_log, violation  # type: ignore[misc]


def _settings(options: HypothesisOptions, args: argparse.Namespace) -> Any:
    """The engine's own Hypothesis settings, less the shrink phase unless ``--shrink``, less explain if ``--no-explain``."""
    from hypothesis import Phase, settings

    base = ENGINE_SETTINGS(options)
    dropped = ({Phase.shrink} if not args.shrink else set()) | ({Phase.explain} if args.no_explain else set())
    return settings(base, phases=[p for p in base.phases if p not in dropped])


@contextmanager
def _engine_settings(args: argparse.Namespace) -> Iterator[None]:
    """Make ``check_stateful`` use :func:`_settings` (only the phases change)."""
    hypothesis_engine.hypothesis_settings = lambda options: _settings(options, args)  # type: ignore[assignment]
    try:
        yield
    finally:
        hypothesis_engine.hypothesis_settings = ENGINE_SETTINGS  # type: ignore[assignment]


def run_generated(size: str, seed: int, args: argparse.Namespace) -> Run:
    """One seed of the engine (``check_stateful``) on the v0.5.19 spec."""
    inst = Instance(load_spec(V21), SIZES[size])
    options = HypothesisOptions(max_examples=args.max_examples, steps=args.steps, seed=seed, progress_every=1e9)
    probe = _Probe()
    with _probe_engine(probe), _engine_settings(args):
        wall0, cpu0 = CLOCK()
        result = check_stateful(inst, options)
        wall1, cpu1 = CLOCK()
    log = probe.log
    first = probe.first
    return Run(
        config=f"gen-{size}",
        seed=seed,
        found=result.violated is not None,
        violated=result.violated,
        examples_to_find=first[0] if first else None,
        steps_to_find=first[1] if first else None,
        wall_to_find=first[2] - wall0 if first else None,
        cpu_to_find=first[3] - cpu0 if first else None,
        examples_total=log.examples,
        steps_total=log.steps,
        wall_total=wall1 - wall0,
        cpu_total=cpu1 - cpu0,
    )


def run_handwritten(size: str, seed: int, args: argparse.Namespace, kind: str) -> Run:
    """One seed of the hand-written machine, under the engine's own Hypothesis settings."""
    import hypothesis
    from hypothesis.reporting import with_reporter
    from hypothesis.stateful import get_state_machine_test

    counters = Counters(clock=CLOCK)
    style = "precondition" if kind.startswith("hand-pre") else "early-return"
    machine = make_machine(DisaggParams(**SIZES[size]), counters, alloc=args.alloc, style=style)
    options = HypothesisOptions(max_examples=args.max_examples, steps=args.steps, seed=seed)
    extra = {"_min_steps": args.steps // 2} if kind.endswith("-min") else {}
    test = hypothesis.seed(seed)(get_state_machine_test(machine, settings=_settings(options, args), **extra))
    violated = None
    wall0, cpu0 = CLOCK()
    try:
        with with_reporter(lambda _value: None):
            test()
    except AssertionError as exc:
        # The machine checks the same four invariants as the spec; only the leak is expected.
        violated = "no_foreign_read" if "read KV of request" in str(exc) else str(exc)
    wall1, cpu1 = CLOCK()
    first = counters.first_failure
    return Run(
        config=f"{kind}-{size}",
        seed=seed,
        found=violated is not None,
        violated=violated,
        examples_to_find=first[0] if first else None,
        steps_to_find=first[1] if first else None,
        wall_to_find=first[2] - wall0 if first else None,
        cpu_to_find=first[3] - cpu0 if first else None,
        examples_total=counters.examples,
        steps_total=counters.steps,
        wall_total=wall1 - wall0,
        cpu_total=cpu1 - cpu0,
    )


def run_one(config: str, seed: int, args: argparse.Namespace) -> Run:
    """Dispatch on the configuration name (``KIND-SIZE``)."""
    kind, size = config.rsplit("-", 1)
    if kind == "gen":
        return run_generated(size, seed, args)
    return run_handwritten(size, seed, args, kind)


def _stats(values: list[float]) -> str:
    if not values:
        return f"{'-':>8} {'-':>8} {'-':>8} {'-':>8}"
    return " ".join(
        f"{v:>8.2f}" if v < 1000 else f"{v:>8,.0f}"
        for v in (statistics.median(values), statistics.fmean(values), min(values), max(values))
    )


def summarize(runs: list[Run]) -> None:
    """Print one table per measured quantity (median, mean, min, max over the runs that found the leak)."""
    configs = [c for c in CONFIGS if any(r.config == c for r in runs)]
    head = f"{'config':<22} {'seeds':>5} {'found':>5}"
    print(f"{head} | {'median':>8} {'mean':>8} {'min':>8} {'max':>8}")
    for title, key in (
        ("CPU seconds to first violation", "cpu_to_find"),
        ("wall seconds to first violation", "wall_to_find"),
        ("examples to first violation", "examples_to_find"),
        ("steps to first violation", "steps_to_find"),
        ("CPU seconds until the run returns (shrunk only with --shrink)", "cpu_total"),
        ("wall seconds until the run returns", "wall_total"),
    ):
        print(f"-- {title}")
        for c in configs:
            mine = [r for r in runs if r.config == c]
            hits = [r for r in mine if r.found]
            vals = [float(getattr(r, key)) for r in hits if getattr(r, key) is not None]
            print(f"{c:<22} {len(mine):>5} {len(hits):>5} | {_stats(vals)}")
    print("-- steps per CPU second (all steps of all runs, shrinking included; to first violation)")
    for c in configs:
        mine = [r for r in runs if r.config == c]
        hits = [r for r in mine if r.found and r.cpu_to_find]
        total = sum(r.steps_total for r in mine) / max(sum(r.cpu_total for r in mine), 1e-9)
        to_find = sum(r.steps_to_find or 0 for r in hits) / max(sum(r.cpu_to_find or 0 for r in hits), 1e-9)
        print(f"{c:<22} {total:>10,.0f} {to_find:>10,.0f}")
    for c in configs:
        bad = sorted({str(r.violated) for r in runs if r.config == c and r.found and r.violated != "no_foreign_read"})
        if bad:
            print(f"warning: {c} also failed on {bad}")


def load_runs(paths: list[Path]) -> list[Run]:
    """The runs saved in JSON lines files; a later run of the same configuration and seed replaces an earlier one."""
    runs: dict[tuple[str, int], Run] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                run = Run(**json.loads(line))
                runs[run.config, run.seed] = run
    return list(runs.values())


def main() -> None:
    """Run the configurations and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--configs",
        default="gen-default,hand-pre-default,hand-default,gen-16x256,hand-pre-16x256",
        help=f"comma-separated, among {', '.join(CONFIGS)}",
    )
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 per configuration")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--max-examples", type=int, default=20000, help="per run; a run that ends without a violation is a miss"
    )
    parser.add_argument("--steps", type=int, default=HypothesisOptions().steps, help="steps per example")
    parser.add_argument("--alloc", choices=("drawn", "fifo"), default="drawn", help="hand-written page choice")
    parser.add_argument(
        "--shrink",
        action="store_true",
        help="keep Hypothesis' shrink phase (the engine's default; slow): without it a run stops at the first violation",
    )
    parser.add_argument(
        "--no-explain",
        action="store_true",
        help="also leave out Hypothesis' explain phase (with it, every run after the first failure is traced)",
    )
    parser.add_argument(
        "--budget-minutes",
        type=float,
        default=25.0,
        help="per configuration: start no new seed after this much wall time",
    )
    parser.add_argument("--out", type=Path, default=Path("/tmp/hypothesis_bench.jsonl"), help="JSON lines, appended")
    parser.add_argument("--summarize", type=Path, nargs="+", help="print the tables of saved files and exit")
    args = parser.parse_args()
    if args.summarize:
        summarize(load_runs(args.summarize))
        return
    import hypothesis

    print(f"python {platform.python_version()}, hypothesis {hypothesis.__version__}, {platform.machine()}")
    print(
        f"max_examples={args.max_examples} steps={args.steps} alloc={args.alloc} shrink={args.shrink} explain={not args.no_explain} 16x256 params={BIG}"
    )
    runs: list[Run] = []
    for config in args.configs.split(","):
        if config not in CONFIGS:
            parser.error(f"unknown configuration {config!r} (known: {', '.join(CONFIGS)})")
        started = time.perf_counter()
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            if time.perf_counter() - started > args.budget_minutes * 60:
                print(f"{config}: budget spent, stopped before seed {seed}", flush=True)
                break
            run = run_one(config, seed, args)
            runs.append(run)
            with args.out.open("a") as f:
                f.write(json.dumps(asdict(run)) + "\n")
            print(
                f"{config} seed {seed}: {'found ' + str(run.violated) if run.found else 'MISS'} "
                f"cpu {run.cpu_to_find or 0:.2f}s wall {run.wall_to_find or 0:.2f}s to find "
                f"({run.examples_to_find} examples, {run.steps_to_find} steps); "
                f"returned after cpu {run.cpu_total:.2f}s wall {run.wall_total:.2f}s",
                flush=True,
            )
    summarize(runs)


if __name__ == "__main__":
    main()
