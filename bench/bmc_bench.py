"""Benchmark of the Z3 engines (run by hand; figures go in docs/benchmarks.md).

    python bench/bmc_bench.py                 # every measurement, each capped (see --cap)
    python bench/bmc_bench.py --quick         # depth profile and default-size counterexample only
    python bench/bmc_bench.py --cap 1800      # seconds allowed per measurement
    python bench/bmc_bench.py --quick --solver-only   # also bmc without its concrete prefix (every depth asked of Z3)

Prints, with wall and CPU seconds (the CPU figure is the process's own time,
which is what to compare on a shared machine):

* the depth BMC reaches over time on ``sglang_disagg_v0_5_19`` (default size);
* the time to its counterexample at the default size and at 3 requests x 8
  decode pages, next to the explorer's time on the same instance (with
  ``--solver-only``, also bmc with no concrete search of the first depths,
  ``prefix_states=0``: every depth is asked of the solver);
* the time of ``prove`` on ``sglang_disagg_v0_5_21`` and how it closed, with the
  reachable set and without it (``prove-spacer``: k-induction, then Spacer).

Each measurement runs in a child process so that a cap can stop it cleanly.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
BUGGY = SPECS / "sglang_disagg_v0_5_19.py"
FIXED = SPECS / "sglang_disagg_v0_5_21.py"
SIZES: dict[str, dict[str, int]] = {
    "default (2 requests x 4 decode pages)": {},
    "3 requests x 8 decode pages": {"requests": 3, "decode_pool_tokens": 16},
}


def _child(kind: str, spec: str, params: dict[str, int], out: Any) -> None:
    """Run one measurement and send its figures back through ``out``."""
    from ownership.engines.bmc import bmc
    from ownership.engines.explore import ExploreOptions, explore
    from ownership.engines.prove import prove
    from ownership.engines.z3run import BmcOptions
    from ownership.lang.instance import Instance
    from ownership.lang.loader import load_spec

    wall0, cpu0 = time.perf_counter(), time.process_time()

    def progress(p: Any) -> None:
        if kind.startswith("bmc"):
            out.send(("depth", p.depth, time.perf_counter() - wall0, time.process_time() - cpu0))

    try:
        inst = Instance(load_spec(Path(spec)), params)
        if kind == "explore":
            r = explore(inst, ExploreOptions())
        elif kind == "bmc":
            r = bmc(inst, BmcOptions(max_depth=30), progress)
        elif kind == "bmc-solver-only":
            r = bmc(inst, BmcOptions(max_depth=30, prefix_states=0), progress)
        elif kind == "prove-spacer":
            r = prove(inst, BmcOptions(reach_states=0))
        else:
            r = prove(inst, BmcOptions())
    except Exception as exc:  # noqa: BLE001 - reported as the measurement's outcome
        out.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    out.send(("done", r.verdict.name, r.stop_reason.name, r.stats.depth, len(r.trace) if r.trace else None,
              list(r.notes), time.perf_counter() - wall0, time.process_time() - cpu0))


def measure(kind: str, spec: Path, params: dict[str, int], cap: float, show_depths: bool = False) -> dict[str, Any]:
    """One capped measurement; returns its figures (``capped`` when the cap stopped it)."""
    parent, child = mp.Pipe()
    proc = mp.Process(target=_child, args=(kind, str(spec), params, child))
    start = time.perf_counter()
    proc.start()
    result: dict[str, Any] = {"capped": True, "depth": 0}
    while time.perf_counter() - start < cap:
        if parent.poll(1.0):
            msg = parent.recv()
            if msg[0] == "error":
                result = {"capped": False, "error": msg[1]}
                break
            if msg[0] == "depth":
                result["depth"] = msg[1]
                if show_depths:
                    print(f"    depth {msg[1]:>2} reached after {msg[2]:7.1f} s wall, {msg[3]:7.1f} s CPU", flush=True)
            else:
                _, verdict, reason, depth, length, notes, wall, cpu = msg
                result = {"capped": False, "verdict": verdict, "reason": reason, "depth": depth,
                          "length": length, "notes": notes, "wall": wall, "cpu": cpu}
                break
        elif not proc.is_alive():
            break
    if proc.is_alive():
        proc.terminate()
    proc.join()
    return result


def _line(label: str, r: dict[str, Any], cap: float) -> str:
    if "error" in r:
        return f"  {label}: failed: {r['error']}"
    if r["capped"]:
        return f"  {label}: stopped at the {cap:.0f} s cap (depth {r['depth']} reached)"
    length = f", trace of {r['length']} steps" if r["length"] is not None else ""
    return f"  {label}: {r['verdict']} ({r['reason']}, depth {r['depth']}{length}) in {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="default size only, no prove")
    ap.add_argument("--solver-only", action="store_true", help="also bmc with every depth asked of the solver")
    ap.add_argument("--cap", type=float, default=900.0, help="seconds allowed per measurement (default 900)")
    args = ap.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}, {time.strftime('%Y-%m-%d')}")
    sizes = dict(list(SIZES.items())[:1]) if args.quick else SIZES
    for label, params in sizes.items():
        print(f"\nsglang_disagg_v0_5_19, {label}")
        e = measure("explore", BUGGY, params, args.cap)
        print(_line("explore", e, args.cap))
        b = measure("bmc", BUGGY, params, args.cap, show_depths=True)
        print(_line("bmc", b, args.cap))
        if "cpu" in e and "cpu" in b:
            print(f"  bmc / explore: {b['cpu'] / max(e['cpu'], 1e-9):.1f}x CPU")
        if args.solver_only:
            z = measure("bmc-solver-only", BUGGY, params, args.cap, show_depths=True)
            print(_line("bmc, solver only", z, args.cap))
    if not args.quick:
        print("\nprove sglang_disagg_v0_5_21 (default size)")
        for kind in ("prove", "prove-spacer"):
            p = measure(kind, FIXED, {}, args.cap)
            print(_line(kind, p, args.cap))
            for note in p.get("notes", []):
                if "PROVED" in note or "did not close" in note:
                    print(f"    {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
