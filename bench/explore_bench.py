"""Benchmark of the explicit-state engine (run by hand; figures go in docs/benchmarks.md).

    python bench/explore_bench.py            # default size and 3 requests x 8 decode pages
    python bench/explore_bench.py --quick    # default size only

Reports distinct states, transitions, seconds and distinct states per second
for exhaustive checks of sglang_disagg_v0_5_21, with and without symmetry
reduction, and the wall time of the v0.5.19 counterexample from the command
line (interpreter start and imports included).
"""

from __future__ import annotations

import argparse
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

from ownership.engines.explore import ExploreOptions, explore
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

ROOT = Path(__file__).resolve().parent.parent
V22 = ROOT / "specs" / "sglang_disagg_v0_5_21.py"
V21 = ROOT / "specs" / "sglang_disagg_v0_5_19.py"

SIZES = {
    "default (2 req x 4 decode pages)": {},
    "3 req x 8 decode pages": {"requests": 3, "decode_pool_tokens": 16},
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="per exhaustive check")
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, one core")
    spec = load_spec(V22)
    sizes = dict(list(SIZES.items())[:1]) if args.quick else SIZES
    print(f"{'instance':<34} {'symmetry':<9} {'verdict':<11} {'states':>10} {'transitions':>12} {'seconds':>8} {'states/s':>9}")
    for label, params in sizes.items():
        for symmetry in (True, False):
            inst = Instance(spec, params)
            r = explore(inst, ExploreOptions(symmetry=symmetry, max_seconds=args.max_seconds))
            s = r.stats
            print(
                f"{label:<34} {'on' if symmetry else 'off':<9} {r.verdict.name:<11} {s.states:>10,} "
                f"{s.transitions:>12,} {s.seconds:>8.2f} {s.states_per_second:>9,.0f}"
            )
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "ownership", "check", str(V21), "--no-render", "--out", "/tmp/ownership-bench"],
            capture_output=True,
            check=False,
        )
        runs.append(time.perf_counter() - t)
    runs.sort()
    print(f"v0.5.19 counterexample from the command line (no picture): median {runs[2]:.2f}s of 5 runs")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process: {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
