"""What checking the symmetry promise on every expanded state costs, against the search alone and the old sample.

    PYTHONPATH=. python bench/symmetry_check_bench.py bench/peers/sglang_disagg_fix_model.py requests=3 decode_tokens=16

Prints CPU seconds of the reduced search without the check (the check
replaced by a pass-through), with the every-state check, and of the 80-state
sample the explorer used before.  Run by hand on a quiet machine.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

import ownership.engines.explore as explore_module
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.symcheck import check_symmetry
from ownership.lang.instance import Instance, State
from ownership.lang.loader import load_spec


class _PassThrough:
    """The every-state check's shape, checking nothing."""

    def __init__(self, inst: Instance, key: object, domains: Sequence[str], names: Sequence[str],
                 first_violation: object, expand: object) -> None:
        self.inner = expand

    def __call__(self, st: State) -> object:
        return self.inner(st)  # type: ignore[operator]

    def describe(self) -> str:
        return "not checked"


def main(argv: list[str]) -> None:
    spec = load_spec(argv[0])
    params = {k: int(v) for k, v in (a.split("=", 1) for a in argv[1:])}
    real = explore_module.EveryState
    for label, every in (("reduced search, no check", _PassThrough), ("reduced search + every-state check", real)):
        explore_module.EveryState = every  # type: ignore[assignment,misc]
        start = time.process_time()
        result = explore(Instance(spec, params), ExploreOptions(kernel="python"))
        print(f"{label}: {result.verdict.name}, {result.stats.states:,} states, {time.process_time() - start:.2f} CPU s")
    explore_module.EveryState = real  # type: ignore[misc]
    start = time.process_time()
    sample = check_symmetry(Instance(spec, params))
    print(f"old sample: {sample.describe()}, {time.process_time() - start:.2f} CPU s")


if __name__ == "__main__":
    main(sys.argv[1:])
