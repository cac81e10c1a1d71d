"""Benchmark of the runtime ownership monitor (run by hand; figures go in docs/benchmarks.md).

    python bench/monitor_bench.py              # per-event cost only (any environment)
    .venvs/sglang/bin/python bench/monitor_bench.py --sglang   # and the SGLang workload on vs off

Per-event cost: the events of ``examples/logs/sglang-clean.jsonl`` (a real
SGLang run) fed to fresh monitors through the event methods, repeated, with
no log and with the log written to an in-memory file; also the cost per page
(events carry several pages each).  The SGLang workload: the 2,000-request
loop of ``examples/real_engines/sglang_workload.py`` in one process, monitor
off, on without a log, on with a log, alternating, best of ``--repeat``.
Times are process CPU time (``time.process_time``), not wall time: the
machines these run on are shared.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ownership.monitor import Monitor  # noqa: E402 - after the path set-up

LOG = ROOT / "examples" / "logs" / "sglang-clean.jsonl"


def _calls(events: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for e in events:
        args = {k: v for k, v in e.items() if k not in ("seq", "event")}
        out.append((e["event"], args))
    return out


def per_event(repeat: int) -> dict[str, float]:
    """µs per event and per page, replaying a real log through fresh monitors."""
    lines = LOG.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    calls = _calls([json.loads(line) for line in lines[1:]])
    pages = sum(len(a.get("pages", ())) + len(a.get("src_pages", ())) for _, a in calls)
    result: dict[str, float] = {"events": float(len(calls)), "pages_per_event": pages / len(calls)}
    for label, with_log in (("no log", False), ("with log", True)):
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            for _ in range(repeat):
                m = Monitor(header["nodes"], log=io.StringIO() if with_log else None)
                for kind, args in calls:
                    getattr(m, kind)(**args)
            best = min(best, time.process_time() - start)
        n = repeat * len(calls)
        result[f"us_per_event ({label})"] = best / n * 1e6
        result[f"us_per_page ({label})"] = best / (repeat * pages) * 1e6
    return result


def workload(repeat: int, requests: int) -> dict[str, float]:
    """CPU seconds of the SGLang loop (best of ``repeat``), monitor off / on / on with a log, alternating."""
    import warnings

    warnings.filterwarnings("ignore")
    from examples.real_engines import sglang_workload as wl

    w = wl.Workload(requests=requests)
    best = {"off": float("inf"), "on": float("inf"), "on+log": float("inf")}
    events = 0
    for _ in range(repeat):
        for label in best:
            stats, _ = wl.run(w, monitored=label != "off", log=io.StringIO() if label == "on+log" else None)
            best[label] = min(best[label], stats.cpu_seconds)
            events = stats.events or events
    return {"events": float(events), **{f"cpu seconds ({k})": v for k, v in best.items()},
            "slowdown (on)": best["on"] / best["off"], "slowdown (on+log)": best["on+log"] / best["off"],
            "us_per_event added (on)": (best["on"] - best["off"]) / events * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sglang", action="store_true", help="also time the SGLang workload (needs SGLang)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}")
    for k, v in per_event(200).items():
        print(f"  {k}: {v:.3f}")
    if args.sglang:
        for k, v in workload(args.repeat, args.requests).items():
            print(f"  workload {k}: {v:.3f}")


if __name__ == "__main__":
    main()
