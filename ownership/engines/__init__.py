"""Checking engines.  Each takes an :class:`~ownership.spec.instance.Instance`
and options and returns a :class:`~ownership.core.result.CheckResult`.

Engines import their solvers (z3, hypothesis) inside their own modules, so
listing or loading specs never pays for them.
"""

from __future__ import annotations

from typing import Any

from ownership.core.result import CheckResult
from ownership.errors import Code, OwnershipError
from ownership.spec.instance import Instance

ENGINE_NAMES = ("explore", "bmc", "hypothesis", "all")
"""Engines ``--engine`` accepts (``all`` runs every engine and compares them)."""


def run_engine(name: str, inst: Instance, options: Any, progress: Any = None) -> CheckResult:
    """Run the engine called ``name`` on ``inst`` with that engine's options object."""
    if name == "explore":
        if getattr(options, "free", ()):
            from ownership.engines.paramexplore import explore_params

            return explore_params(inst, options, progress)
        from ownership.engines.explore import explore

        return explore(inst, options, progress)
    if name == "bmc":
        from ownership.engines.bmc import bmc

        return bmc(inst, options, progress)
    if name == "hypothesis":
        from ownership.engines.stateful import check_stateful

        return check_stateful(inst, options, progress)
    raise OwnershipError(Code.BAD_OPTION, f"unknown engine {name!r} (available: {', '.join(ENGINE_NAMES)})")


def compare(results: list[CheckResult]) -> str | None:
    """Why engines disagree, or ``None``: verdict class, invariant, shortest length."""
    decided = [r for r in results if r.verdict.name in ("VIOLATED", "PROVED")]
    if len({r.verdict for r in decided}) > 1:
        return "; ".join(f"{r.engine} says {r.verdict.name}" for r in decided)
    if any(r.extremum is not None for r in results):
        return None  # an optimised trace is padded to the depth bound, not a shortest one
    # Random testing shrinks its traces but does not promise a shortest one.
    violated = [r for r in results if r.trace is not None and r.verdict.name == "VIOLATED" and r.engine != "hypothesis"]
    if len({len(r.trace) for r in violated if r.trace is not None}) > 1:
        return "; ".join(f"{r.engine} found a {len(r.trace)}-step trace" for r in violated if r.trace is not None)
    return None
