"""The solver the Z3 engines ask, and the parameter constraints every query starts from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import z3

from ownership.symbolic.encoding import SymbolicSpec, parameter_constraints


class SolverOptions(Protocol):
    """What this layer reads from an engine's options (``BmcOptions`` has both)."""

    @property
    def solver_timeout(self) -> float | None:
        """Seconds per solver call, or ``None``."""

    @property
    def where(self) -> Sequence[str]:
        """``--where`` constraints over the free parameters."""


def qf_bv(timeout: float | None) -> z3.Solver:
    """A bit-vector solver with ``timeout`` seconds per call (``None``: no limit)."""
    # Every formula is bit-vector logic: Z3's QF_BV solver bit-blasts to its SAT core,
    # incrementally under assumptions (several times faster than the general SMT core here).
    s = z3.SolverFor("QF_BV")
    if timeout is not None:
        s.set("timeout", max(1, int(timeout * 1000)))
    return s


def where(sym: SymbolicSpec, options: SolverOptions) -> list[z3.BoolRef]:
    """The free parameters' declared ranges and ``--where`` constraints, over ``sym``'s parameter terms."""
    return parameter_constraints(sym.inst, sym.param_terms, options.where)
