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
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import z3

from ownership.core.replay import build_trace
from ownership.core.result import ActionCoverage, CheckResult, Measure, Stats, StopReason, Verdict
from ownership.engines.coverage import with_coverage
from ownership.engines.search import BreadthFirst, Control, Limits, Stop, Visitor
from ownership.engines.symcheck import precheck
from ownership.engines.symmetry import make_canonicalizer, plan_symmetry
from ownership.errors import Code, OwnershipError, location_in
from ownership.lang.declarations import Domain, Params, Values
from ownership.lang.guard import Disabled, is_truth_value
from ownership.lang.instance import Instance, State
from ownership.lang.invariants import not_bool_error, select_invariants
from ownership.lang.successors import ActionInstance, Successor
from ownership.symbolic.encoding import parameter_constraints
from ownership.symbolic.paths import PathExplorer
from ownership.symbolic.terms import COVERAGE_NOTE, WIDTH, Sym, SymbolicError
from ownership.symbolic.view import CellView, SymField, flag_condition

if TYPE_CHECKING:
    from ownership.session.settings import Settings

MAX_VALUES = 256
"""Most values a parameter-dependent count may take where spec code needs an int."""

INTERN_BASE = -(1 << 62)
"""Terms are keyed by ``INTERN_BASE - term id`` so canonical keys stay tuples of ints."""


@dataclass(frozen=True)
class ParamOptions:
    """Options of the parametric explorer."""

    free: tuple[str, ...]
    where: tuple[str, ...] = ()
    minimize: str | None = None
    maximize: str | None = None
    max_depth: int | None = None
    max_states: int | None = None
    max_seconds: float | None = None
    symmetry: bool = True
    invariants: tuple[str, ...] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ParamOptions:
        """The options of ``check --free`` with the explorer."""
        if not settings.free:
            raise OwnershipError(Code.BAD_OPTION, "--minimize/--maximize need --free for that parameter")
        options = cls(free=tuple(settings.free), where=tuple(settings.where), minimize=settings.minimize,
                      maximize=settings.maximize, max_depth=settings.max_depth, max_states=settings.max_states,
                      max_seconds=settings.max_seconds, symmetry=settings.symmetry, invariants=settings.invariants)
        options.validate()
        return options

    def validate(self) -> None:
        """Refuse limits out of range and an optimised parameter that is not free."""
        from ownership import inputs

        inputs.check_search_limits(self.max_depth, self.max_states, self.max_seconds)
        inputs.check_optimised(self.free, self.minimize, self.maximize)


class _Solver:
    """Feasibility of parameter conditions (small formulas over the free parameters)."""

    def __init__(self, base: list[z3.BoolRef]) -> None:
        self.s = z3.Solver()
        self.s.add(*base)
        self.calls = 0

    def feasible(self, conds: Sequence[z3.BoolRef]) -> bool:
        self.calls += 1
        r = self.s.check(*conds) if conds else self.s.check()
        if r == z3.unknown:
            raise OwnershipError(Code.INTERNAL_REPLAY, f"z3 answered unknown on a parameter condition: {self.s.reason_unknown()}")
        return r == z3.sat

    def model(self, conds: Sequence[z3.BoolRef]) -> z3.ModelRef | None:
        return self.s.model() if self.feasible(conds) else None


class _Forker(PathExplorer):
    """Path explorer whose branches are pruned by the state's parameter condition."""

    def __init__(self, solver: _Solver) -> None:
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
        i = e.get_id()
        self.alive.setdefault(i, e)
        return i

    def branch(self, cond: z3.BoolRef) -> bool:
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


class _NoFork(PathExplorer):
    """For code that must not branch on a free parameter (value sets, domain sizes)."""

    def branch(self, cond: z3.BoolRef) -> bool:
        raise SymbolicError(f"it branches on {cond}")

    def decide(self, count: int, cond: z3.BoolRef | None = None) -> int:
        raise SymbolicError("it makes a choice")


class _View(CellView):
    """Spec code's ``s``: concrete cells as Python values, parameter-dependent ones as terms."""

    symbolic = False

    def __init__(self, inst: Instance, params: Params, forker: _Forker) -> None:
        object.__setattr__(self, "_inst", inst)
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
        if domain is not None and domain.name in self._inst.view._reduce:
            options = self._inst.distinct_elements(domain.name, options, [self._ex.intern(v) for v in self._cells])
        value = options[self._ex.decide(len(options))]
        self.picks.append(value)
        return value



def explore_params(inst: Instance, options: ParamOptions, progress: Any = None) -> CheckResult:
    """Breadth-first search over interleavings with the free parameters left symbolic.

    A free parameter that sets a domain's size (a pool's page count from its
    token count) is split into cases, one per feasible size, each searched
    with that size fixed and the case's condition on the parameters.
    """
    spec = inst.spec
    start = time.perf_counter()
    for name in options.free:
        if name not in spec.params:
            raise OwnershipError(Code.UNKNOWN_PARAM, f"--free {name}: spec {spec.name} has no such parameter", spec.file, spec.line)
    # The symbolic-parameter view does not wrap elements: check the spec concretely first (OWN060/OWN061).
    checked = precheck(inst, options.symmetry)
    terms = {n: z3.BitVec(f"param!{n}", WIDTH) for n in options.free}
    base = parameter_constraints(inst, terms, options.where)
    solver = _Solver(base)
    if not solver.feasible([]):
        raise OwnershipError(Code.BAD_OPTION, "the --where constraints leave no parameter values")
    cases = _size_cases(inst, terms, solver)
    if cases is None:
        result, region = _explore_case(inst, options, terms, base, progress, start)
        if region is not None:
            result = dataclasses.replace(result, notes=(*result.notes, explain_region(inst, options, region)))
        if checked is not None:
            result = dataclasses.replace(result, notes=(*result.notes, checked))
        return with_coverage(result, inst, result.actions)
    outcomes: list[tuple[CheckResult, z3.BoolRef | None, str]] = []
    for sizes, cond, witness in cases:
        case_inst = Instance(spec, {**inst.param_values, **witness})
        label = ", ".join(f"{d} has {n}" for d, n in sizes.items())
        result, region = _explore_case(case_inst, options, terms, [*base, cond], progress, start)
        outcomes.append((result, None if region is None else z3.And(cond, region), label))
    combined = _combine(inst, options, outcomes, start)
    if checked is not None:
        combined = dataclasses.replace(combined, notes=(*combined.notes, checked))
    return with_coverage(combined, inst, _sum_actions([r.actions for r, _, _ in outcomes]))


def _sum_actions(per_case: list[tuple[ActionCoverage, ...]]) -> tuple[ActionCoverage, ...]:
    """Per-action counts added over the per-size cases (complete only if every case was)."""
    if not per_case or not per_case[0]:
        return ()
    out: list[ActionCoverage] = []
    for k, first in enumerate(per_case[0]):
        same = [case[k] for case in per_case]
        out.append(dataclasses.replace(
            first,
            enabled_states=sum(a.enabled_states or 0 for a in same),
            transitions=sum(a.transitions for a in same),
            states=sum(a.states for a in same),
            depth=max(a.depth for a in same),
            complete=all(a.complete for a in same),
        ))
    return tuple(out)


def _size_cases(
    inst: Instance, terms: dict[str, z3.BitVecRef], solver: _Solver
) -> list[tuple[dict[str, int], z3.BoolRef, dict[str, int]]] | None:
    """Feasible domain sizes when free parameters set them, or ``None`` if none do."""
    env: dict[str, Any] = dict(inst.param_values)
    env.update({n: Sym(t, _NoFork()) for n, t in terms.items()})
    params = Params(env)
    exprs: dict[str, z3.ExprRef] = {}
    for d in inst.spec.domains.values():
        try:
            size = d.size if isinstance(d.size, int) else (env[d.size] if isinstance(d.size, str) else d.size(params))
        except SymbolicError as exc:
            raise OwnershipError(Code.BAD_OPTION, f"the size of domain {d.name} depends on a free parameter in a way "
                                 f"that cannot be split into cases ({exc}); fix that parameter with --param",
                                 inst.spec.file, inst.spec.line) from None
        if isinstance(size, Sym):
            exprs[d.name] = size.e
    if not exprs:
        return None
    names = list(exprs)
    found: list[tuple[int, ...]] = []
    while True:
        blocked = [z3.Not(z3.And(*[exprs[n] == v for n, v in zip(names, vals, strict=True)])) for vals in found]
        m = solver.model(blocked)
        if m is None:
            break
        found.append(tuple(m.eval(exprs[n], model_completion=True).as_signed_long() for n in names))
        if len(found) > MAX_VALUES:
            raise OwnershipError(Code.BAD_OPTION, f"free parameters allow more than {MAX_VALUES} sizes of "
                                 f"{', '.join(names)}: bound them with --where")
    cases = []
    for vals in sorted(found):
        cond = z3.And(*[exprs[n] == v for n, v in zip(names, vals, strict=True)])
        m = solver.model([cond])
        assert m is not None
        witness = {p: m.eval(t, model_completion=True).as_signed_long() for p, t in terms.items()}
        cases.append((dict(zip(names, vals, strict=True)), cond, witness))
    return cases


def _combine(inst: Instance, options: ParamOptions,
             outcomes: list[tuple[CheckResult, z3.BoolRef | None, str]], start: float) -> CheckResult:
    """One result from the per-size cases: the worst verdict, the best extreme value, the union region."""
    bad = [(r, region, label) for r, region, label in outcomes if r.verdict is Verdict.VIOLATED]
    total = Stats(sum(r.stats.states for r, _, _ in outcomes), sum(r.stats.transitions for r, _, _ in outcomes),
                  max(r.stats.depth for r, _, _ in outcomes), time.perf_counter() - start)
    case_notes = [f"{len(outcomes)} cases by domain size: " + "; ".join(
        f"{label}: {r.verdict.name}" for r, _, label in outcomes)]
    if not bad:
        worst = min(outcomes, key=lambda o: o[0].verdict)[0]
        return dataclasses.replace(worst, stats=total, notes=tuple(case_notes) + worst.notes)
    if options.minimize or options.maximize:
        pick = (min if options.minimize else max)(bad, key=lambda o: o[0].extremum[1] if o[0].extremum else 0)
    else:
        pick = bad[0]
    region = z3.Or(*[reg for _, reg, _ in bad if reg is not None])
    notes = [*case_notes, explain_region(inst, options, region)]
    return dataclasses.replace(pick[0], stats=total, notes=tuple(notes) + pick[0].notes)


def explain_region(inst: Instance, options: ParamOptions, region: z3.BoolRef) -> str:
    """Describe the violating parameter values with the spec's own formulas, if one fits exactly.

    Tries ``P >= D``, ``P < D`` and conjunctions of two of them, for the
    prompt-like parameters ``P`` (those feeding an action's value set) and the
    spec's derived formulas ``D``; prints a description only when Z3 proves it
    equivalent to the region under the parameter constraints.
    """
    spec = inst.spec
    terms = {n: z3.BitVec(f"param!{n}", WIDTH) for n in options.free}
    base = parameter_constraints(inst, terms, options.where)
    dummy = PathExplorer()
    env: dict[str, Any] = dict(inst.param_values)
    env.update({n: Sym(t, dummy) for n, t in terms.items()})

    def value(x: Any) -> z3.ExprRef:
        return x.e if isinstance(x, Sym) else z3.BitVecVal(int(x), WIDTH)

    def zmin(*xs: Any) -> Any:
        out = xs[0]
        for x in xs[1:]:
            out = Sym(z3.If(value(x) < value(out), value(x), value(out)), dummy)
        return out

    def zmax(*xs: Any) -> Any:
        out = xs[0]
        for x in xs[1:]:
            out = Sym(z3.If(value(x) > value(out), value(x), value(out)), dummy)
        return out

    derived = []
    for d in spec.derived_values.values():
        try:
            v = eval(d.formula, {"__builtins__": {}, "min": zmin, "max": zmax, "ceil_div": lambda a, b: -(-a // b)}, dict(env))  # noqa: S307
        except Exception:  # noqa: BLE001 - a formula the symbolic values cannot evaluate
            continue
        derived.append((d, value(v)))
    # Parameters that feed an action's value set (prompt lengths): the usual left-hand sides.
    codes = [c for c in (getattr(vs.values, "__code__", None) for vs in spec.value_sets.values()) if c is not None]
    prompt_like = sorted({n for n in spec.params if any(n in c.co_names for c in codes)})
    atoms: list[tuple[str, z3.BoolRef]] = []
    for p in prompt_like:
        pv = value(env[p])
        for d, dv in derived:
            atoms.append((f"{p} >= {d.name}", pv >= dv))
            atoms.append((f"{p} < {d.name}", pv < dv))
    s = z3.Solver()
    s.add(*base)

    def equivalent(h: z3.BoolRef) -> bool:
        return s.check(z3.Xor(h, region)) == z3.unsat

    for text, h in atoms:
        if equivalent(h):
            return "unsafe exactly when " + text + _formulas(derived, text)
    for (t1, h1), (t2, h2) in itertools.combinations(atoms, 2):
        if equivalent(z3.And(h1, h2)):
            return f"unsafe exactly when {t1} and {t2}" + _formulas(derived, t1 + t2)
    m = s.model() if s.check(region) == z3.sat else None
    example = ", ".join(f"{n}={m.eval(t, model_completion=True).as_signed_long()}" for n, t in terms.items()) if m else "?"
    return f"unsafe for some values, for example {example} (no one-line description in the spec's formulas fits)"


def _formulas(derived: list[tuple[Any, z3.ExprRef]], used: str) -> str:
    parts = [f"{d.name} = {d.formula}" for d, _ in derived if d.name in used]
    return f" ({'; '.join(parts)})" if parts else ""


def _explore_case(inst: Instance, options: ParamOptions, terms: dict[str, z3.BitVecRef], base: list[z3.BoolRef],
                  progress: Any, start: float) -> tuple[CheckResult, z3.BoolRef | None]:
    solver = _Solver(base)
    forker = _Forker(solver)
    values: dict[str, Any] = dict(inst.param_values)
    values.update({n: Sym(t, forker) for n, t in terms.items()})
    params = Params(values)
    view = _View(inst, params, forker)
    checked = [inv.name for inv in select_invariants(inst, options.invariants)]
    return _search(inst, options, view, forker, solver, terms, checked, start, progress)


@dataclass
class _Node:
    parent: int
    action: int
    picks: tuple[Any, ...]
    pc: tuple[z3.BoolRef, ...]


class _Space(Visitor):
    """The parametric state space for the breadth-first search, and the visitor collecting violations.

    A state is ``(cells, parameter condition)``; it is keyed by its canonical
    cells (terms by id) and the condition.  Every violation is collected and
    the search goes on: the union of violating parameter regions (for
    ``--minimize`` and the region description) needs all of them, and a
    violating state's successors may violate for further parameter values.
    """

    def __init__(self, inst: Instance, view: _View, forker: _Forker, solver: _Solver, checked: list[str],
                 canon: Callable[[Any], Any] | None) -> None:
        self.inst, self.view, self.forker, self.solver = inst, view, forker, solver
        self.checked = checked
        self.canon = canon
        self.instances = _action_instances(inst, view)
        self.steps = [ActionInstance(k, act, tuple(args), act.name) for k, (act, args) in enumerate(self.instances)]
        self.pcs: list[tuple[z3.BoolRef, ...]] = []
        self.flags_of: dict[int, list[tuple[str, z3.BoolRef]]] = {}
        self.violations: list[tuple[int, str, z3.BoolRef]] = []
        self.pending: tuple[str, z3.BoolRef] | None = None
        self.search: BreadthFirst | None = None

    def key(self, state: tuple[Any, ...]) -> Any:
        cells, pc = state
        forker = self.forker
        pc_key = forker.term_id(z3.simplify(z3.And(*pc))) if pc else 0
        interned = tuple(forker.intern(v) for v in cells)
        return (interned if self.canon is None else self.canon(interned), pc_key)

    def run(self, fn: Callable[[], Any], state: tuple[Any, ...], pc: tuple[z3.BoolRef, ...]) -> list[tuple[bool, Any, list[Any], tuple[Any, ...], tuple[z3.BoolRef, ...], list[tuple[str, z3.BoolRef]]]]:
        """Every path of ``fn`` from ``state``: (enabled, result, picks, new cells, path condition, flagged events).

        Collected in full before returning: the forker is reused by the
        invariant checks of each new state, so no run may be left suspended.
        """
        forker, view, spec = self.forker, self.view, self.inst.spec
        forker.base = list(pc)

        def reset() -> None:
            object.__setattr__(view, "_cells", list(state))
            view.picks.clear()
            view.flags.clear()

        try:
            return [
                (enabled, result, list(view.picks), tuple(view._cells), tuple(forker.pc), list(view.flags))
                for enabled, result in forker.run(fn, reset)
            ]
        except (OwnershipError, Disabled):
            raise
        except Exception as exc:  # noqa: BLE001 - spec code
            raise OwnershipError(Code.SPEC_RUNTIME, f"spec code under --free raised {type(exc).__name__}: {exc}",
                                 spec.file, location_in(spec.file, exc) if spec.file else None) from None

    def expand(self, state: tuple[Any, ...]) -> list[tuple[ActionInstance, Successor]]:
        """Every feasible outcome of every action instance in ``state``, under its parameter condition."""
        cells, pc = state
        out: list[tuple[ActionInstance, Successor]] = []
        self.flags_of.clear()
        for step, (act, args) in zip(self.steps, self.instances, strict=True):
            for enabled, _res, picks, new_cells, path_pc, flags in self.run(_call(act.fn, self.view, args), cells, pc):
                if not enabled:
                    continue
                names = tuple(n for n in self.checked if any(f == n for f, _c in flags))
                sc = Successor((new_cells, tuple(pc) + path_pc), tuple(picks), (), names)
                if names:
                    self.flags_of[id(sc)] = flags
                out.append((step, sc))
        return out

    def violation(self, state: tuple[Any, ...], pc: tuple[z3.BoolRef, ...]) -> tuple[str, z3.BoolRef] | None:
        spec, view, solver = self.inst.spec, self.view, self.solver
        for name in self.checked:
            inv = spec.invariants[name]
            bad: list[z3.BoolRef] = []
            object.__setattr__(view, "reading", inv)
            try:
                outcomes = list(self.run(_call(inv.fn, view, ()), state, pc))
            finally:
                object.__setattr__(view, "reading", None)
            for enabled, result, _picks, _cells, path_pc, _flags in outcomes:
                if not enabled:
                    continue
                if not is_truth_value(result):
                    raise not_bool_error(inv, result)
                holds = result.e if isinstance(result, Sym) else z3.BoolVal(bool(result))
                bad.append(z3.And(*path_pc, z3.Not(holds)) if path_pc else z3.Not(holds))
            cond = z3.simplify(z3.Or(*bad)) if bad else z3.BoolVal(False)
            if not z3.is_false(cond) and solver.feasible([*pc, cond]):
                return name, cond
        return None

    def on_state(self, node: int, state: State, depth: int) -> Stop | None:
        cells, pc = state
        self.pcs.append(pc)
        if self.pending is not None:
            self.violations.append((node, *self.pending))
            self.pending = None
        bad = self.violation(cells, pc)
        if bad:
            self.violations.append((node, bad[0], bad[1]))
            if node == 0:  # violated initially: nothing to search
                return Stop(StopReason.VIOLATION, 0, 0)
        return None

    def on_flagged(self, src: int, action: ActionInstance, succ: Successor, depth: int) -> Control | None:
        # An event of this step is marked as violating a checked invariant:
        # for the parameter values where its condition holds, the step violates it.
        flags = self.flags_of[id(succ)]
        name = succ.violations[0]
        _cells, new_pc = succ.state
        cond = z3.simplify(z3.Or(*[c for f, c in flags if f == name]))
        if z3.is_false(cond) or not self.solver.feasible([*new_pc, cond]):
            return None
        assert self.search is not None
        if self.key(succ.state) in self.search.seen:
            # The state was reached before, but not by this violating step:
            # the step needs a node of its own for its trace.
            node = self.search.tree.add(src, action.index, succ.picks)
            self.pcs.append(new_pc)
            self.violations.append((node, name, cond))
            return Control.HANDLED
        self.pending = (name, cond)  # recorded with the new state's node (on_state, next)
        return None


def _search(inst: Instance, options: ParamOptions, view: _View, forker: _Forker, solver: _Solver,
            terms: dict[str, z3.BitVecRef], checked: list[str], start: float,
            progress: Any) -> tuple[CheckResult, z3.BoolRef | None]:
    spec = inst.spec
    plan = plan_symmetry(inst)
    space = _Space(inst, view, forker, solver, checked, make_canonicalizer(inst, plan) if options.symmetry else None)
    # The time limit counts from the start of the whole run, checked after every state (each may take seconds).
    left = None if options.max_seconds is None else options.max_seconds - (time.perf_counter() - start)
    limits = Limits(max_depth=options.max_depth, max_states=options.max_states, max_seconds=left, check_every=1)
    search = BreadthFirst(inst, symmetry=options.symmetry, limits=limits, progress=progress, key=space.key,
                          expand=space.expand, init=(tuple(inst.init_state), ()))
    space.search = search
    # The tally counts by position in the explorer's own action instances (value arguments may be terms).
    positions = {name: k for k, name in enumerate(spec.actions)}
    search.tally.act_of = [positions[act.name] for act, _args in space.instances]
    outcome = search.run(space)
    tree, violations = search.tree, space.violations
    nodes = [_Node(tree.parent[i], tree.action[i], tree.picks.get(i, ()), space.pcs[i]) for i in range(len(tree))]
    first = bool(violations) and violations[0][0] == 0 and outcome.stop.reason is StopReason.VIOLATION
    reason = outcome.stop.reason
    stop = None if reason in (StopReason.EXHAUSTED, StopReason.VIOLATION) else reason
    depth = outcome.level
    transitions, expanded = outcome.transitions, outcome.expanded
    instances = space.instances
    elapsed = time.perf_counter() - start
    shown = {k: ("free" if k in options.free else v) for k, v in inst.param_values.items()}
    opts = asdict(options)
    opts["symmetry"] = search.reduced
    notes = [f"free parameters {', '.join(options.free)}: interleavings explicit, parameter values symbolic "
             f"({solver.calls:,} solver calls)", COVERAGE_NOTE]
    stats = Stats(len(nodes), transitions, depth, elapsed)
    # Exact over the parameter regions searched: an action no region lets fire never fires for any value.
    actions = search.tally.coverage(inst, Measure.EXACT, expanded, depth, stop is None and not first)
    if not violations:
        if stop is None:
            scope = " and ".join([f"{n} in its declared range" for n in options.free] + list(options.where))
            notes.append(f"PROVED for every value with {scope}")
            return CheckResult(spec.name, "explore", Verdict.PROVED, StopReason.EXHAUSTED, stats, shown,
                               tuple(checked), options=opts, notes=tuple(notes), actions=actions), None
        verdict = Verdict.BOUNDED_OK if stop is StopReason.DEPTH_LIMIT else Verdict.UNKNOWN
        return CheckResult(spec.name, "explore", verdict, stop, stats, shown, tuple(checked), options=opts,
                           notes=tuple(notes), actions=actions), None
    region = z3.Or(*[z3.And(*nodes[n].pc, cond) for n, _name, cond in violations])
    found = _report(inst, options, violations, nodes, instances, solver, terms, stats, shown, checked, opts, notes)
    return dataclasses.replace(found, actions=actions), region


def _call(fn: Callable[..., Any], view: _View, args: Sequence[Any]) -> Callable[[], Any]:
    def call() -> Any:
        return fn(view, *args)

    return call


def _action_instances(inst: Instance, view: _View) -> list[tuple[Any, tuple[Any, ...]]]:
    out: list[tuple[Any, tuple[Any, ...]]] = []
    nofork = Params({k: (Sym(v.e, _NoFork()) if isinstance(v, Sym) else v) for k, v in vars(view.params).items()})
    for act in inst.spec.actions.values():
        ranges: list[list[Any]] = []
        for d in act.arg_domains:
            if isinstance(d, Values):
                try:
                    vals = [Sym(v.e, view._ex) if isinstance(v, Sym) else v for v in d.values(nofork)]
                except (SymbolicError, TypeError) as exc:
                    raise OwnershipError(
                        Code.BAD_OPTION,
                        f"value set {d.name} depends on a free parameter in a way that needs a branch ({exc}); "
                        "list the values explicitly (e.g. [p.short, p.long]) or fix the parameter with --param",
                        inst.spec.file, inst.spec.line,
                    ) from None
                uniq: list[Any] = []
                for v in vals:
                    if isinstance(v, Sym) or v not in [u for u in uniq if not isinstance(u, Sym)]:
                        uniq.append(v)
                ranges.append(uniq)
            else:
                ranges.append(list(range(inst.sizes[d.name])))
        for args in itertools.product(*ranges):
            out.append((act, tuple(args)))
    return out


def _report(inst: Instance, options: ParamOptions, violations: list[tuple[int, str, z3.BoolRef]],
            nodes: list[_Node], instances: list[tuple[Any, tuple[Any, ...]]], solver: _Solver,
            terms: dict[str, z3.BitVecRef], stats: Stats, shown: dict[str, Any], checked: list[str],
            opts: dict[str, Any], notes: list[str]) -> CheckResult:
    spec = inst.spec
    regions = [z3.And(*nodes[n].pc, cond) for n, _name, cond in violations]
    target = options.minimize or options.maximize
    extremum = None
    if target is not None:
        if target not in terms:
            raise OwnershipError(Code.BAD_OPTION, f"--minimize/--maximize {target}: also pass --free {target}")
        opt = z3.Optimize()
        opt.add(*solver.s.assertions())
        opt.add(z3.Or(*regions))
        t = terms[target]
        # Parameters are non-negative, so the unsigned order of the bit-vector is the integer order.
        opt.minimize(t) if options.minimize else opt.maximize(t)
        if opt.check() != z3.sat:
            raise OwnershipError(Code.INTERNAL_REPLAY, f"z3 could not optimise {target}: {opt.reason_unknown()}")
        model = opt.model()
        extremum = (target, model.eval(t, model_completion=True).as_signed_long())
    else:
        model = solver.model([z3.Or(*regions)])
        assert model is not None
    # Pick the shallowest violating state whose region contains the chosen values.
    chosen = None
    for (n, name, _cond), region in zip(violations, regions, strict=True):
        if z3.is_true(model.eval(region, model_completion=True)):
            chosen = (n, name)
            break
    if chosen is None:
        raise OwnershipError(Code.INTERNAL_REPLAY, "no violating state admits the optimal parameter values")
    n, name = chosen
    params = dict(inst.param_values)
    for p, t in terms.items():
        params[p] = model.eval(t, model_completion=True).as_signed_long()
    concrete = Instance(spec, params)
    path: list[tuple[int, list[Any]]] = []
    node = n
    while node > 0:
        act, args = instances[nodes[node].action]
        real_args = [model.eval(a.e, model_completion=True).as_signed_long() if isinstance(a, Sym) else a for a in args]
        ai = concrete.find_instance(act.name, real_args)
        path.append((ai.index, list(nodes[node].picks)))
        node = nodes[node].parent
    path.reverse()
    trace = build_trace(concrete, path, engine="explore", violation=name)
    notes = list(notes)
    if extremum is not None:
        word = "smallest" if options.minimize else "largest"
        notes.append(f"{word} {extremum[0]} that violates {name}: {extremum[1]:,}")
    notes.append(f"{len(violations)} violating parameter region(s); the trace uses " +
                 ", ".join(f"{p}={params[p]:,}" for p in terms))
    return CheckResult(spec.name, "explore", Verdict.VIOLATED, StopReason.VIOLATION,
                       Stats(stats.states, stats.transitions, len(trace), stats.seconds), shown, tuple(checked),
                       violated=name, trace=trace, options=opts, notes=tuple(notes), extremum=extremum)
