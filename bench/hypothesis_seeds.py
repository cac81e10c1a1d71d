"""Does the hypothesis engine find shallow bugs at its defaults?  Seeds found out of N, per spec.

    python bench/hypothesis_seeds.py                          # every tests/trust/hyp_*.py spec, 20 seeds
    python bench/hypothesis_seeds.py --seeds 5 tests/trust/hyp_retract_full.py
    python bench/hypothesis_seeds.py --max-seconds 20         # a run past 20 s counts as a miss
    python bench/hypothesis_seeds.py --exhaustive-states 0    # the random phase alone

For each spec it prints the reachable states and the depth of the shortest
violation (both from the explorer), then runs ``check_stateful`` at its
default options once per seed ``0 .. N-1`` and prints how many runs found a
violation, the median wall time, and how the engine answered (``exhaustive``
when it searched the whole space, ``sampled`` otherwise).  A spec the checks
refuse (an ``OwnershipError``) prints its code instead.  ``PYTHONPATH`` picks
the checkout whose engine is measured (this one by default).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: PYTHONPATH=/other/checkout measures that checkout's engine

from ownership.core.limits import limited  # noqa: E402
from ownership.core.result import CheckResult, CoverageKind, Verdict  # noqa: E402
from ownership.engines.explore import ExploreOptions, explore  # noqa: E402
from ownership.engines.hypothesis_engine.engine import check_stateful  # noqa: E402
from ownership.engines.hypothesis_engine.options import HypothesisOptions  # noqa: E402
from ownership.errors import OwnershipError  # noqa: E402
from ownership.lang.instance import Instance  # noqa: E402
from ownership.lang.loader import load_spec  # noqa: E402


def _shape(path: str) -> tuple[int, int | None]:
    """Reachable states (no symmetry reduction) and the depth of the shortest violation (``None``: none)."""
    inst = Instance(load_spec(path), {})
    full = explore(inst, ExploreOptions(symmetry=False, invariants=(), kernel="python"))
    found = explore(inst, ExploreOptions(symmetry=False, kernel="python"))
    return full.stats.states, (len(found.trace) if found.trace is not None else None)


def _one(path: str, seed: int, max_seconds: float, cap: int | None) -> tuple[CheckResult | str, float]:
    inst = Instance(load_spec(path), {})
    options = HypothesisOptions(seed=seed) if cap is None else HypothesisOptions(seed=seed, exhaustive_states=cap)
    start = time.monotonic()
    try:
        with limited(max_seconds):
            result: CheckResult | str = check_stateful(inst, options)
    except OwnershipError as exc:
        result = exc.code.label
    return result, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", help="spec files (default: tests/trust/hyp_*.py)")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="a run past this is stopped (a miss)")
    parser.add_argument("--exhaustive-states", type=int, default=None,
                        help="the breadth-first phase's cap (default: the engine's; 0: the random phase alone)")
    args = parser.parse_args(argv)
    specs = args.specs or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "trust").glob("hyp_*.py"))
    print(f"{'spec':<34} {'states':>7} {'depth':>5} {'found':>7} {'median s':>8}  answered")
    for path in specs:
        states, depth = _shape(path)
        found, times, how = 0, [], set()
        for seed in range(args.seeds):
            result, seconds = _one(path, seed, args.max_seconds, args.exhaustive_states)
            times.append(seconds)
            if isinstance(result, str):
                how.add(result)
                continue
            found += result.verdict is Verdict.VIOLATED
            how.add("exhaustive" if result.coverage_kind is CoverageKind.EXHAUSTIVE else "sampled")
        shown = "-" if depth is None else str(depth)
        print(f"{Path(path).stem:<34} {states:>7} {shown:>5} {found:>4}/{args.seeds:<2} "
              f"{statistics.median(times):>8.2f}  {', '.join(sorted(how))}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
