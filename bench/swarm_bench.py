"""The random engine as a swarm: one process against N workers on the same budget (run by hand).

    python bench/swarm_bench.py                                   # the default spec, 1 and 2 workers
    python bench/swarm_bench.py --spec specs/sglang_pd_abort_inflight_fixed.py --examples 400 --workers 1,2,4

Each run is ``ownership check SPEC --engine hypothesis --seed S --max-states 1
--max-examples N --workers W`` as a user runs it (a fresh process: the
workers' start-up counts), on a spec the walks and examples do not break, so
every run spends its whole budget.  Prints wall and CPU seconds, the steps
and distinct states covered and the speed-up over one process.  Figures go
in docs/benchmarks.md; run on a quiet machine.
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COVERED = re.compile(r"\(([\d,]+) random\s+steps, ([\d,]+) distinct states")


def run(spec: Path, examples: int, workers: int, seed: int) -> tuple[float, float, int, int]:
    """Wall seconds, CPU seconds of the run and its children, steps and distinct states covered."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "ownership", "check", str(spec), "--engine", "hypothesis", "--seed", str(seed),
         "--max-states", "1", "--max-examples", str(examples), "--workers", str(workers), "--no-render",
         "--no-progress", "--allow-vacuous", "--out", "/tmp/swarm-bench-out"],
        capture_output=True, text=True, check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = " ".join(out.stdout.split())
    found = COVERED.search(text)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"unexpected run (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")
    return wall, cpu, int(found[1].replace(",", "")), int(found[2].replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=ROOT / "specs" / "sglang_pd_abort_inflight_fixed.py")
    parser.add_argument("--examples", type=int, default=400)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rows = []
    for w in (int(x) for x in args.workers.split(",")):
        rows.append((w, *run(args.spec, args.examples, w, args.seed)))
    base = rows[0][1]
    print(f"{args.spec.name}, {args.examples} examples and {5 * args.examples} walks, seed {args.seed}")
    print(f"{'workers':>7} {'wall s':>8} {'cpu s':>8} {'steps':>9} {'states':>8} {'speed-up':>8}")
    for w, wall, cpu, steps, states in rows:
        print(f"{w:>7} {wall:>8.1f} {cpu:>8.1f} {steps:>9,} {states:>8,} {base / wall:>7.2f}x")


if __name__ == "__main__":
    main()
