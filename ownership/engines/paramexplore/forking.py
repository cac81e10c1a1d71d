"""Forking on free parameters: spec code runs over Z3 terms and branches on their feasible outcomes.

:class:`Solver` decides the feasibility of parameter conditions;
:class:`Forker` is the path explorer that forks wherever spec code needs a
truth value or an integer from a term (pruned by the state's parameter
condition); :class:`NoFork` is for code that must not fork (value sets,
domain sizes); :class:`View` is spec code's ``s``, whose cells hold plain
values or terms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import z3

from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Domain, Params
from ownership.lang.guard import Disabled
from ownership.lang.instance import Instance
from ownership.symbolic.paths import PathExplorer
from ownership.symbolic.terms import Sym, SymbolicError
from ownership.symbolic.view import CellView, SymField, flag_condition

MAX_VALUES = 256
"""Most values a parameter-dependent count may take where spec code needs an int."""

INTERN_BASE = -(1 << 62)
"""Terms are keyed by ``INTERN_BASE - term id`` so canonical keys stay tuples of ints."""


class Solver:
    """Feasibility of parameter conditions (small formulas over the free parameters)."""

    def __init__(self, base: list[z3.BoolRef]) -> None:
        self.s = z3.Solver()
        self.s.add(*base)
        self.calls = 0

    def feasible(self, conds: Sequence[z3.BoolRef]) -> bool:
        """Whether ``conds`` can hold together with the base constraints (Z3 answering unknown is refused)."""
        self.calls += 1
        r = self.s.check(*conds) if conds else self.s.check()
        if r == z3.unknown:
            raise OwnershipError(Code.INTERNAL_REPLAY, f"z3 answered unknown on a parameter condition: {self.s.reason_unknown()}")
        return r == z3.sat

    def model(self, conds: Sequence[z3.BoolRef]) -> z3.ModelRef | None:
        """Parameter values satisfying ``conds`` and the base constraints, or ``None``."""
        return self.s.model() if self.feasible(conds) else None


class Forker(PathExplorer):
    """Path explorer whose branches are pruned by the state's parameter condition."""

    def __init__(self, solver: Solver) -> None:
        super().__init__()
        self.solver = solver
        self.base: list[z3.BoolRef] = []
        self.cache: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        self.branches: dict[tuple[int, tuple[int, ...]], tuple[bool, bool]] = {}
        # Z3 reuses the id of a freed term, so every term whose id is used as a key
        # is kept alive here for the whole search.
        self.alive: dict[int, z3.ExprRef] = {}

    def intern(self, v: Any) -> Any:
        """A state cell as a hashable, orderable key (terms by their id)."""
        if isinstance(v, z3.ExprRef):
            i = v.get_id()
            self.alive.setdefault(i, v)
            return INTERN_BASE - i
        return v

    def term_id(self, e: z3.ExprRef) -> int:
        """The id of ``e``, kept alive for the search so that no other term reuses it."""
        i = e.get_id()
        self.alive.setdefault(i, e)
        return i

    def branch(self, cond: z3.BoolRef) -> bool:
        """The truth of ``cond`` on this path: forks where both outcomes are feasible."""
        cond = z3.simplify(cond)
        if z3.is_true(cond):
            return True
        if z3.is_false(cond):
            return False
        ctx = self.base + self.pc
        key = (self.term_id(cond), tuple(self.term_id(c) for c in ctx))
        known = self.branches.get(key)
        if known is None:
            known = (self.solver.feasible([*ctx, cond]), self.solver.feasible([*ctx, z3.Not(cond)]))
            self.branches[key] = known
        can_true, can_false = known
        if can_true and not can_false:
            return True
        if can_false and not can_true:
            return False
        if not (can_true or can_false):
            raise Disabled  # an infeasible path: drop it
        return self.decide(2, cond) == 0

    def concretize(self, term: z3.ExprRef) -> int:
        """An integer value of ``term``: forks once per feasible value, in ascending order."""
        ctx = self.base + self.pc
        key = (self.term_id(term), tuple(self.term_id(c) for c in ctx))
        values = self.cache.get(key)
        if values is None:
            found: list[int] = []
            while True:
                m = self.solver.model([*ctx, *[term != v for v in found]])
                if m is None:
                    break
                found.append(m.eval(term, model_completion=True).as_signed_long())
                if len(found) > MAX_VALUES:
                    raise SymbolicError(
                        f"{term} takes more than {MAX_VALUES} values where spec code needs a concrete integer "
                        "(a count or an index); bound it with --where"
                    )
            values = sorted(found)
            self.cache[key] = values
        if not values:
            raise Disabled
        value = values[self.decide(len(values))]
        self.pc.append(term == value)
        return value


class NoFork(PathExplorer):
    """For code that must not branch on a free parameter (value sets, domain sizes)."""

    def branch(self, cond: z3.BoolRef) -> bool:
        raise SymbolicError(f"it branches on {cond}")

    def decide(self, count: int, cond: z3.BoolRef | None = None) -> int:
        raise SymbolicError("it makes a choice")


class View(CellView):
    """Spec code's ``s``: concrete cells as Python values, parameter-dependent ones as terms."""

    symbolic = False

    def __init__(self, inst: Instance, params: Params, forker: Forker, choice_reduction: Iterable[str] = ()) -> None:
        object.__setattr__(self, "_inst", inst)
        # Fixed for the view's life: the domains whose identical elements one choice stands for
        # (those the search reduces by sorting rows; see BreadthFirst's ``reduce``).
        object.__setattr__(self, "choice_reduction", frozenset(choice_reduction))
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "_ex", forker)
        object.__setattr__(self, "_cells", [])
        object.__setattr__(self, "picks", [])
        object.__setattr__(self, "flags", [])
        object.__setattr__(self, "_scalars", {})
        object.__setattr__(self, "reading", None)  # the invariant being evaluated: it may not write
        for lay in inst.layouts.values():
            if not lay.shape:
                self._scalars[lay.name] = lay.offset
            else:
                object.__setattr__(self, lay.name, SymField(self, lay.offset, lay.shape))

    def read_cell(self, pos: int) -> Any:
        v = self._cells[pos]
        return Sym(v, self._ex) if isinstance(v, z3.ExprRef) else v

    def write_cell(self, pos: int, value: Any) -> None:
        inv = self.reading
        if inv is not None:
            # As in the concrete semantics (Instance.check_unchanged): an invariant only reads.
            raise OwnershipError(
                Code.SPEC_IMPURE,
                f"invariant {inv.name} writes the state: invariants must only read it, or a later invariant "
                "sees a state that is not the one reached", inv.file, inv.line,
            )
        if isinstance(value, Sym):
            e = z3.simplify(value.e)
            value = e.as_signed_long() if isinstance(e, z3.BitVecNumRef) else (
                z3.is_true(e) if z3.is_bool(e) and (z3.is_true(e) or z3.is_false(e)) else e)
        self._cells[pos] = value

    def flag(self, invariant: str, when: Any = True) -> None:
        """This path violates ``invariant`` where ``when`` holds (together with the path's condition)."""
        cond = flag_condition(self._inst, invariant, when)
        if cond is not None:
            self.flags.append((invariant, cond))

    def choose(self, options: Sequence[Any], label: str = "choice", *, domain: Domain | None = None) -> Any:
        if not options:
            raise Disabled
        if domain is not None and domain.name in self.choice_reduction:
            options = self._inst.distinct_elements(domain.name, options, [self._ex.intern(v) for v in self._cells])
        value = options[self._ex.decide(len(options))]
        self.picks.append(value)
        return value
