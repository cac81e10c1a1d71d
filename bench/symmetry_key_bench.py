"""Benchmark of the symmetry key (run by hand): key alone, key with its Permutation, and applying it.

    PYTHONPATH=. python bench/symmetry_key_bench.py

For a few library specs with symmetry on, samples reachable states (the
symmetry check's breadth-first sample, no reduction) and reports microseconds
per state, best of five passes, for ``make_canonicalizer`` (the explorer's hot
path), ``make_canonical_permuter`` and the permuter plus ``Permutation.apply``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ownership.engines.symcheck import _sample
from ownership.engines.symmetry import make_canonical_permuter, make_canonicalizer, plan_symmetry
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

ROOT = Path(__file__).resolve().parent.parent
SPECS = ("sglang_disagg_v0_5_21", "sglang_single_node", "vllm_nixl_multi_handle_failure_fixed",
         "sglang_pd_abort_inflight_fixed")


def per_state(f: Callable[[Any], Any], states: Sequence[Any]) -> float:
    """Microseconds per call of ``f`` over ``states``, best of five passes."""
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for s in states:
            f(s)
        best = min(best, time.perf_counter() - t)
    return best / len(states) * 1e6


def main() -> None:
    for name in SPECS:
        inst = Instance(load_spec(ROOT / "specs" / f"{name}.py"))
        plan = plan_symmetry(inst)
        states = _sample(inst, 2000)
        key = make_canonicalizer(inst, plan)
        canon = make_canonical_permuter(inst, plan)
        print(f"{name} ({len(states)} states): key {per_state(key, states):.2f} us, "
              f"key+perm {per_state(canon, states):.2f} us, "
              f"key+perm+apply {per_state(lambda s, c=canon: c(s)[1].apply(s), states):.2f} us")


if __name__ == "__main__":
    main()
