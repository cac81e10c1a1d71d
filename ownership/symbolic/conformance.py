"""Conformance of the Z3 encoding with the concrete semantics, state by state.

The explorer runs a spec's Python; bmc and prove run its symbolic paths
(:class:`~ownership.symbolic.encoding.SymbolicSpec`), in which every
vocabulary operation is a separately written encoding.  The two must mean
the same: :func:`check_conformance` takes concrete states and, for every
action instance, compares what the Python does there (every outcome of its
choices) with every successor the symbolic paths allow once the state's
values replace the placeholder cells.  The fresh terms of a path are
existential choices, so its successors are enumerated with Z3: find one,
block that assignment of the written cells and flags, ask again.  Every
invariant's value is compared on every state too.

A step is compared by its successor state and the invariants it flags.  A
flag on a step whose successor already violates that invariant changes no
verdict (the engines report the state either way), so only flags on a
successor that satisfies the invariant are compared.  The Python is the
reference: a difference is a fault of the encoding.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3
from z3.z3 import _to_expr_ref

from ownership.errors import OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance
from ownership.lang.types import BoolType, Ref, RefSet
from ownership.symbolic.encoding import ActionPaths, SymbolicSpec, initial_width
from ownership.symbolic.paths import Path
from ownership.symbolic.terms import MAX_WIDTH, WidthError, conjunction, int_of

WHOLE_STATE = "the state"
"""What an overflow names when a value of the state itself does not fit the width."""

MAX_OUTCOMES = 5000
"""Successors of one path in one state beyond which enumeration stops (an unconstrained fresh term)."""


@dataclass(frozen=True)
class Outcome:
    """One step's result: the successor state and the invariants the step flags (where they matter)."""

    state: State
    flags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Discrepancy:
    """Where the encoding and the Python disagree on one state.

    ``what`` is an action instance's label (``free_twice(A, P0)``) or
    ``invariant NAME``; for an action, ``only_concrete`` and
    ``only_symbolic`` are the outcomes one side has and the other lacks;
    ``detail`` says the rest (an invariant's two values, a symbolic path
    with too many outcomes).
    """

    state: State
    what: str
    only_concrete: tuple[Outcome, ...] = ()
    only_symbolic: tuple[Outcome, ...] = ()
    detail: str = ""

    def describe(self, inst: Instance) -> str:
        """Several readable lines: the state (as changes from the initial one), then each side's extra outcomes."""
        changed = inst.diff(inst.init_state, self.state)
        shown = ", ".join(f"{k}={new}" for k, _old, new in changed) or "the initial state"
        lines = [f"{self.what} in state {shown}"]
        if self.detail:
            lines.append(f"  {self.detail}")
        for side, outcomes in (("only concretely", self.only_concrete), ("only symbolically", self.only_symbolic)):
            for o in outcomes:
                step = ", ".join(f"{k}: {old} -> {new}" for k, old, new in inst.diff(self.state, o.state)) or "no change"
                flags = f" (flags {', '.join(sorted(o.flags))})" if o.flags else ""
                lines.append(f"  {side}: {step}{flags}")
        return "\n".join(lines)


@dataclass
class Conformance:
    """What :func:`check_conformance` found: the discrepancies, and what it could not compare."""

    discrepancies: list[Discrepancy] = field(default_factory=list)
    states: int = 0
    compared: int = 0
    """(state, action instance) pairs compared."""
    overflows: list[tuple[State, str]] = field(default_factory=list)
    """(state, what) the encoding's integers cannot hold even at their widest: not compared.

    ``what`` is an action instance's label, ``invariant NAME`` or
    :data:`WHOLE_STATE` (a cell's value does not fit).  With an encoding
    given to :func:`check_conformance`, at that encoding's width instead."""
    raised: list[tuple[State, str, str]] = field(default_factory=list)
    """(state, what, error) where the Python itself raises: nothing to compare (on a state no run reaches, say)."""
    refused: list[tuple[State, str]] = field(default_factory=list)
    """(state, action instance's label) of ``raised`` where the encoding refuses too: one of its error points
    (an overflow, a negative count) holds there, so the engines never take that step as a successor."""

    def describe(self, inst: Instance) -> str:
        """Every discrepancy, readable, or one line saying there is none."""
        if not self.discrepancies:
            return f"no discrepancy on {self.states} states ({self.compared} steps compared)"
        return "\n".join(d.describe(inst) for d in self.discrepancies)


def symbolic_spec(inst: Instance, width: int | None = None) -> SymbolicSpec:
    """The encoding conformance is checked against: no symmetry ordering, at :func:`initial_width` or ``width``.

    Twice as wide (as the engines do) while a constant of the spec does not fit.
    """
    w = initial_width(inst) if width is None else width
    while True:
        try:
            return SymbolicSpec(inst, (), symmetry=False, width=w)
        except WidthError:
            if w * 2 > MAX_WIDTH:
                raise
            w *= 2


@dataclass
class _PathTerms:
    """One enabled path, prepared once: its condition, written cells as terms, flags."""

    cond: z3.BoolRef
    writes: list[tuple[int, z3.ExprRef]]
    flags: list[tuple[str, z3.BoolRef]]
    has_aux: bool


def _prepare(sym: SymbolicSpec, path: Path) -> _PathTerms:
    conds = [*path.pc, *path.constraints]
    cond = conjunction(conds) if conds else z3.BoolVal(True)
    writes = [(i, sym.value_term(v, i)) for i, v in sorted(path.writes.items())]
    return _PathTerms(cond, writes, list(path.flags), bool(path.aux))


class _Substitution:
    """The placeholder cells replaced by one state's values, through Z3's C API.

    ``z3.substitute`` checks every pair's sorts in Python on each call; the
    pairs are the same for every term of a state, so they are built once.
    """

    def __init__(self, cells: Sequence[z3.ExprRef], values: Sequence[z3.ExprRef]) -> None:
        self.ctx = cells[0].ctx if cells else z3.main_ctx()
        self.n = len(cells)
        self.src = (z3.Ast * self.n)(*[c.as_ast() for c in cells])
        self.dst = (z3.Ast * self.n)(*[v.as_ast() for v in values])
        self.keep = list(values)  # the values' references must outlive the arrays

    def __call__(self, term: z3.ExprRef) -> z3.ExprRef:
        """``term`` with the state's values in, simplified."""
        ref = self.ctx.ref()
        out = z3.Z3_substitute(ref, term.as_ast(), self.n, self.src, self.dst)
        return _to_expr_ref(z3.Z3_simplify(ref, out), self.ctx)


def _value(term: z3.ExprRef, vtype: Any) -> Any:
    """A numeral or truth value of a cell's sort as the Python value the concrete state holds."""
    if isinstance(vtype, BoolType):
        return z3.is_true(term)
    if isinstance(vtype, RefSet):
        return term.as_long()  # type: ignore[attr-defined]  # a bit mask, not a signed number
    n = int_of(term)
    if isinstance(vtype, Ref) and vtype.optional and n == -1:
        return None
    return n


class _Checker:
    """The encoding's paths prepared once, compared with the Python state by state."""

    def __init__(self, inst: Instance, sym: SymbolicSpec) -> None:
        self.inst = inst
        self.sym = sym
        self.types: list[Any] = []
        for v in inst.spec.vars.values():
            self.types.extend([v.type] * inst.layouts[v.name].length)
        self.by_call: dict[tuple[str, tuple[Any, ...]], ActionPaths] = {
            (ap.action, ap.arg_values): ap for ap in sym.actions}
        self.paths: dict[int, list[_PathTerms]] = {
            id(ap): [_prepare(sym, p) for p in ap.paths] for ap in sym.actions}
        self.overflow: dict[int, z3.BoolRef | None] = {
            id(ap): z3.Or(*ap.overflows) if ap.overflows else None for ap in sym.actions}
        self.invariants = {name: sym.invariant_formula(name) for name in sym.invariants}
        inv_overflows = {name: [o for p in paths for o in p.overflows] for name, paths in sym.invariants.items()}
        self.inv_overflow = {name: z3.Or(*o) if o else None for name, o in inv_overflows.items()}

    # -- the two sides --------------------------------------------------------------
    def concrete(self, state: State, ai: ActionInstance) -> set[Outcome]:
        return {self._outcome(sc.state, sc.violations) for sc in self.inst.successors_of(state, ai)}

    def _outcome(self, state: State, flags: Iterable[str]) -> Outcome:
        # A flag matters only where the successor itself satisfies the invariant.
        return Outcome(state, frozenset(f for f in flags if self.inst.holds(state, f)))

    def symbolic(self, state: State, ap: ActionPaths, sub: _Substitution) -> tuple[set[Outcome], str]:
        out: set[Outcome] = set()
        notes: list[str] = []
        for k, pt in enumerate(self.paths[id(ap)]):
            cond = sub(pt.cond)
            if z3.is_false(cond):
                continue
            writes = [(i, sub(t)) for i, t in pt.writes]
            flags = [(n, sub(c)) for n, c in pt.flags]
            if not pt.has_aux and z3.is_true(cond):
                out.add(self._assemble(state, writes, flags, None))
                continue
            found, complete = self._enumerate(state, cond, writes, flags)
            out |= found
            if not complete:
                notes.append(f"path {k} allows more than {MAX_OUTCOMES} successors (an unconstrained choice?)")
        return out, "; ".join(notes)

    def _assemble(self, state: State, writes: Sequence[tuple[int, z3.ExprRef]],
                  flags: Sequence[tuple[str, z3.BoolRef]], model: z3.ModelRef | None) -> Outcome:
        def ev(t: z3.ExprRef) -> z3.ExprRef:
            return model.eval(t, model_completion=True) if model is not None else t

        new = list(state)
        for i, t in writes:
            new[i] = _value(ev(t), self.types[i])
        return self._outcome(tuple(new), {n for n, c in flags if z3.is_true(ev(c))})

    def _enumerate(self, state: State, cond: z3.BoolRef, writes: Sequence[tuple[int, z3.ExprRef]],
                   flags: Sequence[tuple[str, z3.BoolRef]]) -> tuple[set[Outcome], bool]:
        """Every successor the path allows: its fresh terms are existential, so block each found and ask again."""
        solver = z3.SolverFor("QF_BV")
        solver.add(cond)
        shown = [t for _i, t in writes] + [c for _n, c in flags]
        out: set[Outcome] = set()
        for _ in range(MAX_OUTCOMES):
            if solver.check() != z3.sat:
                return out, True
            model = solver.model()
            out.add(self._assemble(state, writes, flags, model))
            values = [model.eval(t, model_completion=True) for t in shown]
            differs = [t != v for t, v in zip(shown, values, strict=True)]
            if not differs:
                return out, True
            solver.add(z3.Or(*differs))
        return out, False

    def _holds_somewhere(self, formula: z3.ExprRef | None, sub: _Substitution | None) -> bool:
        if formula is None:
            return False
        f = sub(formula) if sub is not None else z3.simplify(formula)
        if z3.is_false(f) or z3.is_true(f):
            return z3.is_true(f)
        solver = z3.SolverFor("QF_BV")
        solver.add(f)
        return solver.check() == z3.sat

    # -- one state ---------------------------------------------------------------------
    def check(self, state: State, report: Conformance, only: Collection[str] | None = None) -> None:
        """Compare every invariant and action instance on ``state`` (``only`` those named, on a second pass)."""
        try:
            sub = _Substitution(self.sym.cells, [self.sym.value_term(v, i) for i, v in enumerate(state)])
        except WidthError:
            report.overflows.append((state, WHOLE_STATE))
            return
        if only is None:
            report.states += 1
        for name, formula in self.invariants.items():
            if only is None or f"invariant {name}" in only:
                self._check_invariant(state, name, formula, sub, report)
        for ai in self.inst.action_instances:
            if only is not None and ai.label not in only:
                continue
            ap = self.by_call.get((ai.action.name, ai.args))
            try:
                concrete = self.concrete(state, ai)
            except OwnershipError as exc:
                report.raised.append((state, ai.label, exc.message))
                if ap is not None and self._holds_somewhere(self.overflow[id(ap)], sub):
                    report.refused.append((state, ai.label))
                continue
            if ap is None:
                if concrete:
                    report.discrepancies.append(Discrepancy(state, ai.label, tuple(concrete), (),
                                                            "the encoding has no such action instance"))
                continue
            if self._holds_somewhere(self.overflow[id(ap)], sub):
                report.overflows.append((state, ai.label))
                continue
            try:  # an invariant judging a flag may raise on a successor only the encoding has
                symbolic, note = self.symbolic(state, ap, sub)
            except OwnershipError as exc:
                report.raised.append((state, ai.label, exc.message))
                continue
            report.compared += 1
            if concrete != symbolic or note:
                report.discrepancies.append(Discrepancy(
                    state, ai.label, tuple(sorted(concrete - symbolic, key=repr)),
                    tuple(sorted(symbolic - concrete, key=repr)), note))

    def _check_invariant(self, state: State, name: str, formula: z3.BoolRef,
                         sub: _Substitution, report: Conformance) -> None:
        if self._holds_somewhere(self.inv_overflow[name], sub):
            report.overflows.append((state, f"invariant {name}"))
            return
        try:
            concrete = self.inst.holds(state, name)
        except OwnershipError as exc:
            report.raised.append((state, f"invariant {name}", exc.message))
            return
        f = sub(formula)
        if z3.is_true(f) or z3.is_false(f):
            symbolic = "holds" if z3.is_true(f) else "fails"
        else:  # the formula has choices of its own: it may both hold and fail
            symbolic = "holds" if self._holds_somewhere(f, None) else "fails"
            if symbolic == "holds" and self._holds_somewhere(z3.Not(f), None):
                symbolic = "both holds and fails"
        if symbolic != ("holds" if concrete else "fails"):
            report.discrepancies.append(Discrepancy(
                state, f"invariant {name}",
                detail=f"{'holds' if concrete else 'fails'} concretely, {symbolic} symbolically"))


def check_conformance(inst: Instance, states: Iterable[State], sym: SymbolicSpec | None = None) -> Conformance:
    """Compare the Python and the encoding ``sym`` on every state of ``states``, every action and invariant.

    ``sym`` defaults to :func:`symbolic_spec` (no symmetry ordering: the
    Python makes every choice, and so must the encoding); then whatever
    overflows the encoding's integers is compared again at twice the width,
    as the engines widen.  The Python runs without recording and without
    choice reduction, as an unreduced search would run it.
    """
    widen = sym is None
    sym = sym if sym is not None else symbolic_spec(inst)
    report = Conformance()
    todo: list[tuple[State, Collection[str] | None]] = [(state, None) for state in states]
    while todo:
        checker = _Checker(inst, sym)
        found = Conformance()
        with inst.mode(recording=False, choice_reduction=()):
            for state, only in todo:
                checker.check(state, found, only)
        report.discrepancies += found.discrepancies
        report.raised += found.raised
        report.refused += found.refused
        report.states += found.states
        report.compared += found.compared
        if not widen or not found.overflows or sym.width * 2 > MAX_WIDTH:
            report.overflows += found.overflows
            break
        # As the engines do: what overflows is checked again at twice the width.
        again: dict[State, set[str] | None] = {}
        for state, what in found.overflows:
            if what == WHOLE_STATE:
                again[state] = None
            else:
                named = again.setdefault(state, set())
                if named is not None:
                    named.add(what)
        todo = list(again.items())
        sym = symbolic_spec(inst, sym.width * 2)
    return report
