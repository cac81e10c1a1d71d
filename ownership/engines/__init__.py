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

ENGINE_NAMES = ("explore",)
"""Engines ``--engine`` accepts."""


def run_engine(name: str, inst: Instance, options: Any, progress: Any = None) -> CheckResult:
    """Run the engine called ``name`` on ``inst``."""
    if name == "explore":
        from ownership.engines.explore import explore

        return explore(inst, options, progress)
    raise OwnershipError(Code.BAD_OPTION, f"unknown engine {name!r} (available: {', '.join(ENGINE_NAMES)})")
