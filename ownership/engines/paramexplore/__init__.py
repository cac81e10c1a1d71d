"""Explicit interleavings, symbolic parameters: ``check --free NAME`` with the explorer.

The breadth-first search of the explorer
(:class:`~ownership.engines.search.BreadthFirst`), except that the free
parameters are Z3 terms: its successor function forks on them.  Cells hold plain values where the spec
computed them from constants, and terms where they depend on a free
parameter (a prompt length, a reserved page count).  Wherever spec code
needs a truth value or an integer from a term (``if``, ``require``,
``range(n)``), execution forks on the feasible outcomes and the state
carries the accumulated *parameter condition*.  A state is thus "these
values, for every parameter choice satisfying this condition".

Interleavings stay explicit (with the usual symmetry reduction), so the
search is as cheap as the explorer's times the number of parameter regions,
instead of an unrolled SAT problem.  A violation yields a condition on the
parameters; ``--minimize``/``--maximize`` optimise over the union of those
conditions with Z3, and the chosen values are replayed through the concrete
semantics like every other counterexample.  An exhausted search proves the
invariants for *every* value of the free parameters (within their declared
range and ``--where``) at this instance.

Modules: :mod:`.forking` (the solver, the forking path explorer and the
view over terms), :mod:`.space` (the parametric state space and the visitor
collecting violations), :mod:`.report` (the violating region: its
description and its replayed trace) and :mod:`.engine` (``ParamOptions``,
``explore_params``: the cases by domain size and their combined result).
"""

from ownership.engines.paramexplore.engine import ParamOptions, explore_params
from ownership.engines.paramexplore.report import explain_region

__all__ = ["ParamOptions", "explain_region", "explore_params"]
