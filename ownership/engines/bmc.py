"""Z3 engines: bounded model checking and k-induction proofs.

Both unroll the transition relation that :mod:`ownership.engines.symbolic`
derives from the spec's own Python code.  Every state of every unrolled step
is a vector of terms, one per cell of the concrete state tuple; step ``k``
picks one action path with the selector ``sel!k``; a cell's next value is an
``If`` chain over the paths that write it.

Every model the solver returns is turned into a trace by *replaying* its
actions and choices through the concrete semantics, and the solver's state
at every step is compared with the replayed state cell by cell: a difference
is an internal error naming the step and field (OWN041), never a trace shown.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import z3

from ownership.core.limits import raise_if_canceled, stop_in, stop_reason_of
from ownership.core.progress import Progress
from ownership.core.replay import build_trace
from ownership.core.result import ActionCoverage, CheckResult, CoverageKind, Stats, StopReason, Verdict
from ownership.core.trace import Trace
from ownership.engines.coverage import search_coverage, with_coverage
from ownership.engines.symcheck import precheck
from ownership.errors import Code, OwnershipError
from ownership.spec.instance import Instance, State
from ownership.spec.types import BoolType, Ref, RefSet

from .symbolic import (
    MAX_WIDTH,
    WIDTH,
    Path,
    SymbolicSpec,
    WidthError,
    conjunction,
    coverage_note,
    fits,
    int_of,
    parameter_constraints,
    to_z3,
)


@dataclass(frozen=True)
class BmcOptions:
    """Options of the Z3 engines."""

    max_depth: int = 30
    max_k: int = 2
    solver_timeout: float | None = None
    free: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    minimize: str | None = None
    maximize: str | None = None
    invariants: tuple[str, ...] | None = None
    symmetry: bool = True
    spacer: bool = True
    spacer_timeout: float = 600.0
    reach_states: int = 200_000
    """``prove``: largest explicit reachable set tried as an inductive invariant (0: never)."""

    @classmethod
    def from_settings(cls, settings: Any) -> BmcOptions:
        """The options of ``bmc`` and ``prove`` (one type: prove reads the k-induction fields, bmc the depth)."""
        if settings.engine == "prove" and (settings.max_depth is not None or settings.minimize or settings.maximize):
            raise OwnershipError(Code.BAD_OPTION, "prove covers executions of any length: it takes no --max-depth, "
                                 "--minimize or --maximize (use --engine bmc)")
        if settings.max_states is not None:
            if settings.engine == "prove":
                raise OwnershipError(Code.BAD_OPTION, "--max-states is an explorer limit; prove takes --max-k, "
                                     "--reach-states, --solver-timeout and --max-seconds")
            raise OwnershipError(Code.BAD_OPTION, "--max-states is an explorer limit; bmc takes --max-depth, "
                                 "--solver-timeout and --max-seconds")
        options = cls(
            max_depth=settings.max_depth if settings.max_depth is not None else cls.max_depth,
            max_k=settings.max_k, solver_timeout=settings.solver_timeout, free=tuple(settings.free),
            where=tuple(settings.where), minimize=settings.minimize, maximize=settings.maximize,
            invariants=settings.invariants, symmetry=settings.symmetry, spacer=settings.spacer,
            spacer_timeout=settings.spacer_timeout, reach_states=settings.reach_states,
        )
        options.validate()
        return options

    def validate(self) -> None:
        """Refuse values out of range (OWN015) and an optimised parameter that is not free."""
        from ownership import inputs

        inputs.check_count("--max-depth", self.max_depth, 0)
        inputs.check_count("--max-k", self.max_k, 0)
        inputs.check_count("--reach-states", self.reach_states, 0)
        inputs.check_seconds("--solver-timeout", self.solver_timeout)
        inputs.check_seconds("--spacer-timeout", self.spacer_timeout)
        inputs.check_optimised(self.free, self.minimize, self.maximize)


@dataclass
class _PathRef:
    action: int
    path: Path


def _free_constants(terms: Sequence[z3.ExprRef]) -> list[z3.ExprRef]:
    """The uninterpreted constants that occur in ``terms``."""
    seen: set[int] = set()
    out: list[z3.ExprRef] = []
    todo = list(terms)
    while todo:
        t = todo.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.append(t)
        todo.extend(t.children())
    return out


def _cells_read(terms: Sequence[z3.ExprRef], cell_of: dict[int, int]) -> set[int]:
    """Indices of the placeholder cells that occur in ``terms``."""
    return {cell_of[c.get_id()] for c in _free_constants(terms) if c.get_id() in cell_of}


@dataclass
class Unroller:
    """Per-step variables and constraints for one symbolic spec.

    The transition relation is built once over placeholder terms (current
    cells, next cells, the selector and the paths' fresh terms) and moved to
    each step with a single substitution: building it per step and per path
    cost more than the solver's early checks.  The paths of one step share
    their fresh terms, since exactly one path is taken per step.
    """

    sym: SymbolicSpec
    prefix: str = "s"
    stutter: bool = False
    overflow_points: z3.BoolRef | None = None
    """The overflow points to check (see :func:`live_overflows`); ``None``: all of them."""
    paths: list[_PathRef] = field(init=False)
    steps: list[list[z3.ExprRef]] = field(init=False)

    def __post_init__(self) -> None:
        self.paths = [_PathRef(a, p) for a, ap in enumerate(self.sym.actions) for p in ap.paths]
        self.steps = []
        self._writers: dict[int, list[int]] = {}
        for j, pr in enumerate(self.paths):
            for cell in pr.path.writes:
                self._writers.setdefault(cell, []).append(j)
        # Narrow selector: values -1 (stutter) .. len(paths) - 1, signed.
        self._sel_bits = max(2, len(self.paths).bit_length() + 1)
        aux: dict[int, z3.ExprRef] = {}
        for pr in self.paths:
            for a in pr.path.aux:
                aux.setdefault(a.get_id(), a)
        self._aux = list(aux.values())
        self._aux_maps: dict[int, list[tuple[z3.ExprRef, z3.ExprRef]]] = {}
        self._template: z3.BoolRef | None = None
        self._inv: dict[str, z3.BoolRef] = {}
        self._order: list[tuple[list[int], list[int]]] | None = None
        self._flag_cache: dict[tuple[str, ...], list[tuple[int, z3.BoolRef]]] = {}

    # -- variables ---------------------------------------------------------------
    def state(self, k: int) -> list[z3.ExprRef]:
        while len(self.steps) <= k:
            i = len(self.steps)
            self.steps.append([z3.Const(f"{self.prefix}{i}!{c}", s) for c, s in enumerate(self.sym.sorts)])
        return self.steps[k]

    def selector(self, k: int) -> z3.BitVecRef:
        return z3.BitVec(f"{self.prefix}sel!{k}", self._sel_bits)

    def aux_at(self, k: int) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
        """The step-``k`` copies of the paths' fresh terms (shared by the step's paths)."""
        if k not in self._aux_maps:
            self._aux_maps[k] = [(a, z3.Const(f"{self.prefix}{k}!{a}", a.sort())) for a in self._aux]
        return self._aux_maps[k]

    def _subst(self, k: int, j: int | None) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
        pairs = list(zip(self.sym.cells, self.state(k), strict=True))
        if j is not None and self._aux:
            pairs += self.aux_at(k)
        return pairs

    def at(self, expr: z3.ExprRef, k: int, j: int | None = None) -> z3.ExprRef:
        """``expr`` over placeholders (and path ``j``'s fresh terms) moved to step ``k``."""
        return z3.substitute(expr, *self._subst(k, j))

    # -- constraints ---------------------------------------------------------------
    def init(self, inst: Instance) -> list[z3.BoolRef]:
        x = self.state(0)
        return [x[i] == t for i, t in enumerate(self.sym.init_terms())]

    def _transition_template(self) -> z3.BoolRef:
        """The step relation over placeholders: ``x!i`` now, ``y!i`` next, ``sel!`` the path taken."""
        if self._template is None and self.stutter in self.sym.step_templates:
            self._template = self.sym.step_templates[self.stutter]
        if self._template is None:
            sel = z3.BitVec("sel!", self._sel_bits)
            lo = -1 if self.stutter else 0
            out: list[z3.BoolRef] = [sel >= lo, sel < len(self.paths)]
            for j, pr in enumerate(self.paths):
                conds = pr.path.pc + pr.path.constraints
                if conds:
                    out.append(z3.Implies(sel == j, z3.And(*conds)))
            for i, x in enumerate(self.sym.cells):
                nxt: z3.ExprRef = x
                for j in self._writers.get(i, ()):
                    nxt = z3.If(sel == j, self.sym.value_term(self.paths[j].path.writes[i], i), nxt)
                out.append(z3.Const(f"y!{i}", self.sym.sorts[i]) == nxt)
            self._template = conjunction(out)
            self.sym.step_templates[self.stutter] = self._template
        return self._template

    def transition(self, k: int) -> list[z3.BoolRef]:
        """Constraints for the step from state ``k`` to ``k + 1``."""
        template = self._transition_template()
        pairs = self._subst(k, None)
        pairs += [(z3.Const(f"y!{i}", s), v) for i, (s, v) in enumerate(zip(self.sym.sorts, self.state(k + 1), strict=True))]
        pairs.append((z3.BitVec("sel!", self._sel_bits), self.selector(k)))
        if self._aux:
            pairs += self.aux_at(k)
        return [z3.substitute(template, *pairs)]

    def invariant(self, name: str, k: int) -> z3.BoolRef:
        if name not in self._inv:
            self._inv[name] = self.sym.invariant_formula(name)
        return self.at(self._inv[name], k)

    def overflow(self, k: int) -> z3.BoolRef:
        """Some step from state ``k`` (with some choice) computes an integer the width cannot hold."""
        if self.overflow_points is None:
            self.overflow_points = z3.simplify(z3.Or(*self.sym.overflow_points()))
        if z3.is_false(self.overflow_points):
            return self.overflow_points
        return z3.substitute(self.overflow_points, *self._subst(k, None), *self.aux_at(k))

    def types(self, k: int) -> list[z3.BoolRef]:
        return self.sym.type_constraints(self.state(k))

    def _flagged(self, names: Sequence[str]) -> list[tuple[int, z3.BoolRef]]:
        key = tuple(names)
        if key not in self._flag_cache:
            self._flag_cache[key] = self.sym.flagged_paths(names)
        return self._flag_cache[key]

    def event_step(self, names: Sequence[str], k: int) -> z3.BoolRef:
        """The step into state ``k`` emits an event marked as violating one of ``names``."""
        if k == 0:
            return z3.BoolVal(False)
        sel = self.selector(k - 1)
        terms = [z3.And(sel == j, z3.substitute(c, *self._subst(k - 1, None), *self.aux_at(k - 1)))
                 for j, c in self._flagged(names)]
        return z3.Or(*terms) if terms else z3.BoolVal(False)

    def event_from(self, names: Sequence[str], k: int) -> z3.BoolRef:
        """Some step from state ``k`` emits an event marked as violating one of ``names``."""
        terms = [z3.substitute(c, *self._subst(k, None), *self.aux_at(k)) for _j, c in self._flagged(names)]
        return z3.Or(*terms) if terms else z3.BoolVal(False)

    def violation(self, names: Sequence[str], k: int) -> z3.BoolRef:
        """State ``k`` violates one of ``names``, or the step into it emits an event that does."""
        return z3.Or(*[z3.Not(self.invariant(n, k)) for n in names], self.event_step(names, k))

    # -- reductions (bmc only: they keep one execution per class, not every execution) --
    def _keys(self) -> list[tuple[int, ...]]:
        """Each path's action and non-page arguments: the order executions are normalised by."""
        spec = self.sym.inst.spec
        order = {n: i for i, n in enumerate(spec.actions)}
        keys = []
        for pr in self.paths:
            ap = self.sym.actions[pr.action]
            act = spec.actions[ap.action]
            args = tuple(
                a if isinstance(a, int) else -1
                for d, a in zip(act.arg_domains, ap.arg_values, strict=True)
                if d.name not in self.sym.reduced
            )
            keys.append((order[ap.action], *args))
        return keys

    def _order_tables(self) -> list[tuple[list[int], list[int]]]:
        """Per path ``a``: the paths independent of it, and those of them with a greater key."""
        if self._order is None:
            cell_of = {c.get_id(): i for i, c in enumerate(self.sym.cells)}
            reads: list[set[int]] = []
            writes: list[set[int]] = []
            for pr in self.paths:
                p = pr.path
                terms = [*p.pc, *p.constraints, *(to_z3(v, self.sym.sorts[c]) for c, v in p.writes.items())]
                if any(isinstance(a, z3.ExprRef) for a in self.sym.actions[pr.action].arg_values):
                    terms += [a for a in self.sym.actions[pr.action].arg_values if isinstance(a, z3.ExprRef)]
                reads.append(_cells_read(terms, cell_of))
                writes.append(set(p.writes))
            keys = self._keys()
            n = len(self.paths)
            self._order = []
            for a in range(n):
                indep = [b for b in range(n) if not writes[a] & (reads[b] | writes[b]) and not writes[b] & reads[a]]
                self._order.append((indep, [b for b in indep if keys[b] > keys[a]]))
        return self._order

    def commutation_order(self, k: int) -> list[z3.BoolRef]:
        """Partial-order reduction: independent steps appear in key order (lexicographic normal form).

        Two steps are independent when neither writes a cell the other reads
        or writes; then both orders reach the same state.  Among the orderings
        of an execution's independent steps only the lexicographically least
        (by action and non-page arguments) is searched: step ``k`` may not
        take path ``a`` if ``a`` could move back past a contiguous run of
        steps independent of it, the first of which has a greater key
        (Anisimov and Knuth's normal form of Mazurkiewicz traces).  The least
        of all same-length executions reaching a state satisfies this and the
        symmetry constraints at once, so the shortest violation is kept.
        ``E!k!a`` is that "could move back" flag.
        """
        if k == 0:
            return []
        tables = self._order_tables()
        prev, sel = self.selector(k - 1), self.selector(k)
        out: list[z3.BoolRef] = []
        for a, (indep, greater) in enumerate(tables):
            if not indep:
                continue
            e = z3.Bool(f"{self.prefix}E!{k}!{a}")
            terms: list[z3.BoolRef] = []
            if greater:
                terms.append(z3.Or(*[prev == b for b in greater]))
            if k > 1:
                terms.append(z3.And(z3.Bool(f"{self.prefix}E!{k - 1}!{a}"), z3.Or(*[prev == b for b in indep])))
            out.append(e == (z3.Or(*terms) if terms else z3.BoolVal(False)))
            out.append(z3.Implies(sel == a, z3.Not(e)))
        return out

    def first_use_order(self, k: int) -> list[z3.BoolRef]:
        """Symmetry breaking: elements of a symmetric argument domain are first used in index order.

        Renaming the elements of a symmetric domain maps executions to
        executions of the same length and preserves every invariant, so some
        renaming of any execution uses A before B before C; only those are
        searched.
        """
        if not self.sym.symmetry:
            return []
        out: list[z3.BoolRef] = []
        sel = self.selector(k)
        spec = self.sym.inst.spec
        lo = 0
        uses: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for ap in self.sym.actions:
            hi = lo + len(ap.paths)
            act = spec.actions[ap.action]
            for d, a in zip(act.arg_domains, ap.arg_values, strict=True):
                # Page-like domains are already ordered by the alloc encoding; breaking the
                # same symmetry twice would rule out real executions.
                if getattr(d, "symmetric", False) and isinstance(a, int) and hi > lo and d.name not in self.sym.reduced:
                    uses.setdefault((d.name, a), []).append((lo, hi))
            lo = hi
        for (dname, e), ranges in sorted(uses.items()):
            used = z3.Or(*[z3.And(sel >= a, sel < b) for a, b in ranges])
            seen = z3.Bool(f"{self.prefix}seen!{dname}!{e}!{k}")
            prev = z3.Bool(f"{self.prefix}seen!{dname}!{e}!{k - 1}") if k > 0 else z3.BoolVal(False)
            out.append(seen == z3.Or(prev, used))
            if e > 0 and (dname, e - 1) in uses:
                out.append(z3.Implies(used, z3.Bool(f"{self.prefix}seen!{dname}!{e - 1}!{k}")))
        return out


def pr_value(v: Any) -> Any:
    return v


# -- model -> trace -----------------------------------------------------------------


def _cell_value(model: z3.ModelRef, term: z3.ExprRef, vtype: Any) -> Any:
    val = model.eval(term, model_completion=True)
    if isinstance(vtype, BoolType):
        return z3.is_true(val)
    if isinstance(vtype, RefSet):
        return val.as_long()  # a bit mask, not a signed number
    n = int_of(val)
    if isinstance(vtype, Ref) and vtype.optional and n == -1:
        return None
    return n


def _cell_types(inst: Instance) -> list[Any]:
    out: list[Any] = []
    for v in inst.spec.vars.values():
        out.extend([v.type] * inst.layouts[v.name].length)
    return out


def _cell_names(inst: Instance) -> list[str]:
    return list(inst.cells(inst.init_state))


def extract(
    un: Unroller, model: z3.ModelRef, depth: int, inst_for: Any, engine: str, violation: str | None, *, cti: bool = False
) -> tuple[Trace, Instance]:
    """Turn a model of ``depth`` steps into a replayed, cross-checked trace."""
    sym = un.sym
    params = dict(sym.inst.param_values)
    for name, term in sym.param_terms.items():
        params[name] = int_of(model.eval(term, model_completion=True))
    inst: Instance = inst_for(params)
    types = _cell_types(inst)
    states: list[State] = [
        tuple(_cell_value(model, t, types[i]) for i, t in enumerate(un.state(k))) for k in range(depth + 1)
    ]
    path: list[tuple[int, list[Any]]] = []
    solver_states: list[State] = [states[0]]
    for k in range(depth):
        j = model.eval(un.selector(k), model_completion=True).as_signed_long()
        if j < 0:  # stutter step (padding used by --minimize/--maximize)
            continue
        pr = un.paths[j]
        ap = sym.actions[pr.action]
        args = []
        for a in ap.arg_values:
            args.append(int_of(model.eval(un.at(a, k), model_completion=True)) if isinstance(a, z3.ExprRef) else a)
        try:
            ai = inst.find_instance(ap.action, args)
        except KeyError:
            raise OwnershipError(Code.INTERNAL_REPLAY, f"{engine}: step {k + 1}: no action instance {ap.action}{tuple(args)}") from None
        picks: list[Any] = []
        for entry in pr.path.picks:
            if callable(entry):
                picks.extend(entry(lambda e, k=k, j=j: model.eval(un.at(e, k, j), model_completion=True)))
            else:
                picks.append(entry)
        path.append((ai.index, picks))
        solver_states.append(states[k + 1])
    # Replay first without judging the end, so a mismatch is reported at its step and field.
    trace = build_trace(inst, path, engine=engine, violation=None, start=states[0] if cti else None)
    names = _cell_names(inst)
    replayed = [inst.from_json(s) for s in trace.states]
    for k, (a, b) in enumerate(zip(solver_states, replayed, strict=True)):
        if a != b:
            i = next(i for i in range(len(a)) if a[i] != b[i])
            raise OwnershipError(
                Code.INTERNAL_REPLAY,
                f"{engine}: the solver's trace does not replay: after step {k}, field {names[i]} is {a[i]!r} "
                f"according to the solver but {b[i]!r} according to the spec's concrete semantics",
            )
    flagged = {e.violates for e in trace.steps[-1].events} if trace.steps else set()
    if violation is not None and violation not in flagged and inst.holds(replayed[-1], violation):
        raise OwnershipError(Code.INTERNAL_REPLAY, f"{engine}: the trace's final state satisfies {violation} on replay")
    return dataclasses.replace(trace, violation=violation), inst


# -- engines ------------------------------------------------------------------------


def _where(sym: SymbolicSpec, options: BmcOptions) -> list[z3.BoolRef]:
    return parameter_constraints(sym.inst, sym.param_terms, options.where)


def _checked(sym: SymbolicSpec, options: BmcOptions) -> list[str]:
    spec = sym.inst.spec
    names = list(options.invariants) if options.invariants is not None else list(spec.invariants)
    for n in names:
        if n not in spec.invariants:
            raise OwnershipError(Code.UNKNOWN_INVARIANT, f"spec {spec.name} has no invariant {n!r} (known: {', '.join(spec.invariants)})")
    return names


def _solver(options: BmcOptions) -> z3.Solver:
    # Every formula is bit-vector logic: Z3's QF_BV solver bit-blasts to its SAT core,
    # incrementally under assumptions (several times faster than the general SMT core here).
    s = z3.SolverFor("QF_BV")
    if options.solver_timeout is not None:
        s.set("timeout", max(1, int(options.solver_timeout * 1000)))
    return s


def proven_lemmas(sym: SymbolicSpec, options: BmcOptions) -> list[z3.BoolRef]:
    """The vocabulary's candidate lemmas that the solver proves invariant (Houdini).

    A candidate survives if it holds initially and, together with the other
    survivors, after any step from any state where they all hold; failing
    candidates are dropped until the set is 1-inductive.  Survivors hold in
    every reachable state, so assuming them at every step loses nothing.
    """
    own = sym.inst.spec.extensions.get("ownership")
    pools = list(getattr(own, "pools", ()))
    from ownership.vocab.symbolic import pool_lemmas

    cands = [f for pool in pools for _name, f in pool_lemmas(pool, sym.inst, sym.cells)]
    # Sign facts about integer cells (lengths, counts): they rule out the overflow
    # points that only a negative value could reach, such as negating the minimum.
    for i in sorted(sym.int_cells):
        cands += [sym.cells[i] >= 0, sym.cells[i] >= -1]
    if not cands:
        return []
    init = list(zip(sym.cells, sym.init_terms(), strict=True))
    cands = [c for c in cands if z3.is_true(z3.simplify(z3.substitute(c, *init)))]
    un = Unroller(sym, prefix="l")
    s = _solver(options)
    s.add(*_where(sym, options))
    s.add(*un.types(0))
    s.add(*un.transition(0))
    while cands:
        now = [un.at(c, 0) for c in cands]
        nxt = [un.at(c, 1) for c in cands]
        s.push()
        s.add(*now)
        s.add(z3.Or(*[z3.Not(c) for c in nxt]))
        answer = s.check()
        if answer == z3.unsat:
            s.pop()
            return cands
        if answer == z3.unknown:
            raise_if_canceled(s)
            s.pop()
            return []
        model = s.model()
        cands = [c for c, c1 in zip(cands, nxt, strict=True) if not z3.is_false(model.eval(c1, model_completion=True))]
        s.pop()
    return []


def live_overflows(sym: SymbolicSpec, lemmas: Sequence[z3.BoolRef], options: BmcOptions) -> z3.BoolRef:
    """The overflow points some state satisfying the proven ``lemmas`` can reach, as one formula.

    Dropping the others is sound because the lemmas hold in every state
    reached without an overflow, and the first overflow of any execution
    would happen in such a state: a point the lemmas exclude can never be
    the first, so never happens.  (A double free, say, makes a page's free
    count 2; where the lemmas prove counts stay 0 or 1, incrementing one
    cannot overflow.)
    """
    points = sym.overflow_points()
    s = _solver(options)
    s.add(*sym.type_constraints(sym.cells))
    s.add(*lemmas)

    def possible(f: z3.BoolRef) -> bool:
        s.push()
        s.add(f)
        answer = s.check()
        s.pop()
        return answer != z3.unsat  # unknown keeps the point: dropping needs a proof

    # One small check per point: checking the disjunction of the rest and harvesting every
    # point each model satisfies took 107 checks but 34 s on vllm_fork_double_free_fixed
    # (3,736 points), against 2.5 s for 3,737 small ones.
    live = [p for p in points if possible(p)] if points and possible(z3.Or(*points)) else []
    return z3.simplify(z3.Or(*live)) if live else z3.BoolVal(False)


def _first_failing(un: Unroller, model: z3.ModelRef, names: Sequence[str], k: int) -> str:
    """The first of ``names`` state ``k`` violates, or that an event of the step into it violates."""
    for n in names:
        if z3.is_false(model.eval(un.invariant(n, k), model_completion=True)):
            return n
        if z3.is_true(model.eval(un.event_step([n], k), model_completion=True)):
            return n
    return names[0]


def _instance_factory(inst: Instance) -> Any:
    def make(params: dict[str, int]) -> Instance:
        if params == inst.param_values:
            return inst
        return Instance(inst.spec, params)

    return make


def initial_width(inst: Instance, free: Sequence[str] = ()) -> int:
    """The integer width a spec is first encoded at: wide enough for every constant it starts with.

    Parameters, initial values and domain sizes bound the constants and counts
    the spec begins with; three more bits leave room for sums and differences.
    Anything that still does not fit is caught (``WidthError``, or an overflow
    found by the solver) and the spec is encoded again at twice the width.
    Free parameters range up to 2**62, so they take the full width at once.
    """
    if free:
        return WIDTH
    values: list[int] = [*inst.sizes.values()]
    values += [v for v in inst.param_values.values() if isinstance(v, int)]
    values += [v for v in inst.init_state if isinstance(v, int) and not isinstance(v, bool)]
    biggest = max((abs(v) for v in values), default=0)
    return max(8, biggest.bit_length() + 3)


def _widths(inst: Instance, options: BmcOptions) -> list[int]:
    w = initial_width(inst, options.free)
    out = []
    while w <= MAX_WIDTH:
        out.append(w)
        w *= 2
    return out


class _Reached:
    """Passes progress on and remembers the last phase and depth reported (for a stopped run's coverage)."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.depth = -1
        self.states = 0

    def __call__(self, p: Any) -> None:
        self.depth = max(self.depth, p.depth)
        self.states = max(self.states, getattr(p, "states", 0) or 0)
        if self.progress is not None:
            self.progress(p)


_STOPPED = (StopReason.TIME_LIMIT, StopReason.INTERRUPTED)
"""Stop reasons after which no more work is done (the coverage search would outlast the limit)."""


def _stopped(engine: str, inst: Instance, options: BmcOptions, start: float, reached: _Reached,
             exc: BaseException) -> CheckResult:
    """The UNKNOWN result of a solver run stopped by Ctrl-C, SIGTERM or the wall-clock limit."""
    reason = stop_reason_of(exc)
    if reached.depth < 0:
        what = "before the first solver query (while encoding the spec)"
    elif engine == "bmc":
        what = f"while checking depth {reached.depth}: every execution of up to {reached.depth - 1} steps was checked"
    else:
        what = f"at k={reached.depth} (no proof yet)" + (
            f", after enumerating {reached.states:,} reachable states" if reached.states else "")
    invs = tuple(options.invariants) if options.invariants is not None else tuple(inst.spec.invariants)
    return CheckResult(
        spec=inst.spec.name, engine=engine, verdict=Verdict.UNKNOWN, stop_reason=reason,
        stats=Stats(reached.states, 0, max(reached.depth, 0), time.perf_counter() - start),
        params=_shown_params(inst, options), invariants=invs, options=_opts(options),
        notes=(f"inconclusive: the run {reason.value} {what}",),
    )


def _widening(engine: str, inst: Instance, options: BmcOptions, start: float,
              run_at: Callable[[SymbolicSpec, list[str], list[str]], CheckResult]) -> CheckResult:
    """Run ``run_at(sym, invariants, widened)`` at each width until one holds every integer.

    ``run_at`` raises ``WidthError`` when a constant does not fit or an
    overflowing step is reachable; ``widened`` collects the reasons, for the
    result's notes.
    """
    names: list[str] = []
    widened: list[str] = []
    for width in _widths(inst, options):
        try:
            sym = SymbolicSpec(inst, options.free, options.symmetry, width)
            names = _checked(sym, options)
            return run_at(sym, names, widened)
        except WidthError as exc:
            widened.append(f"{width}-bit integers were too narrow ({exc})")
    return CheckResult(
        spec=inst.spec.name, engine=engine, verdict=Verdict.UNKNOWN, stop_reason=StopReason.SOLVER_UNKNOWN,
        stats=Stats(0, 0, 0, time.perf_counter() - start), params=_shown_params(inst, options),
        invariants=tuple(names), options=_opts(options),
        notes=(f"inconclusive: integers in this spec exceed {MAX_WIDTH} bits, the widest encoding", *widened),
    )


def bmc(inst: Instance, options: BmcOptions = BmcOptions(), progress: Any = None) -> CheckResult:
    """Bounded model checking: the shortest violation up to ``max_depth`` steps.

    Integers start narrow (:func:`initial_width`); a reachable step that would
    overflow them is one more violation to look for, and finding one restarts
    the search at twice the width, so every answer holds for Python's
    unbounded integers.
    """
    result = _bmc(inst, options, progress)
    if result.stop_reason in _STOPPED:
        return with_coverage(result, inst, ())  # stopped: no further search past the limit or the signal
    # The solver never enumerates states: a small concrete search, as deep as the bound, says which actions fire.
    return with_coverage(_coverage_note(result, options), inst,
                         search_coverage(inst, max_depth=options.max_depth, symmetry=options.symmetry))


def _coverage_note(result: CheckResult, options: BmcOptions) -> CheckResult:
    if not options.free:
        return result
    return dataclasses.replace(result, notes=(*result.notes, "the action counts are from a concrete search at the "
                                              "default values of the free parameters"))


def _bmc(inst: Instance, options: BmcOptions, progress: Any) -> CheckResult:
    """:func:`bmc` without the action counts (``prove`` runs it to find a shortest trace)."""
    start = time.perf_counter()
    reached = _Reached(progress)

    def run() -> CheckResult:
        note = precheck(inst, options.symmetry)
        if options.minimize or options.maximize:
            sym = SymbolicSpec(inst, options.free, options.symmetry)
            return _noted(_optimize(inst, sym, _checked(sym, options), options, start), note)
        return _noted(_widening("bmc", inst, options, start,
                                lambda sym, names, widened: _bmc_at(inst, sym, names, options, reached, start, widened)),
                      note)

    return _until_stopped("bmc", inst, options, start, reached, run)


def _until_stopped(engine: str, inst: Instance, options: BmcOptions, start: float, reached: _Reached,
                   run: Callable[[], CheckResult]) -> CheckResult:
    """``run()``, or the UNKNOWN result of Ctrl-C, SIGTERM or the wall-clock limit in any of its phases."""
    try:
        return run()
    except KeyboardInterrupt as exc:
        return _stopped(engine, inst, options, start, reached, exc)
    except Exception as exc:  # noqa: BLE001 - a stop that came out of a Z3 call; anything else is re-raised
        stop = stop_in(exc)
        if stop is None:
            raise
        return _stopped(engine, inst, options, start, reached, stop)


def _noted(result: CheckResult, note: str | None) -> CheckResult:
    """``result`` with the symmetry check's note added."""
    return result if note is None else dataclasses.replace(result, notes=(*result.notes, note))


def _bmc_at(inst: Instance, sym: SymbolicSpec, names: list[str], options: BmcOptions, progress: Any,
            start: float, widened: list[str]) -> CheckResult:
    lemmas = proven_lemmas(sym, options)
    un = Unroller(sym, overflow_points=live_overflows(sym, lemmas, options))
    solver = _solver(options)
    solver.add(*un.init(inst))
    solver.add(*_where(sym, options))
    solver.add(*[un.at(c, 0) for c in lemmas])
    opts = _opts(options)
    notes: list[str] = [f"{len(un.paths)} action paths from {len(sym.actions)} action instances",
                        *widened, coverage_note(sym.width)]

    def result(verdict: Verdict, reason: StopReason, depth: int, violated: str | None = None,
               trace: Trace | None = None, extra: Sequence[str] = ()) -> CheckResult:
        return CheckResult(
            spec=inst.spec.name, engine="bmc", verdict=verdict, stop_reason=reason,
            stats=Stats(0, 0, depth, time.perf_counter() - start), params=_shown_params(inst, options),
            invariants=tuple(names), violated=violated, trace=trace, options=opts, notes=tuple(notes + list(extra)),
            coverage_kind=CoverageKind.BOUNDED,
        )

    for k in range(options.max_depth + 1):
        # One solver for all depths; the depth-k question is asked under an assumption
        # literal, so what the solver learned at earlier depths is kept.  A step that would
        # overflow the integers counts as a violation too: it sends the search to a wider encoding.
        bad = z3.Bool(f"bad!{k}")
        overflow = un.overflow(k)
        solver.add(z3.Implies(bad, z3.Or(un.violation(names, k), overflow)))
        answer = solver.check(bad)
        if answer == z3.sat:
            model = solver.model()
            if z3.is_true(model.eval(overflow, model_completion=True)):
                raise WidthError(f"a step after {k} steps overflows them")
            bad_inv = _first_failing(un, model, names, k)
            trace, _ = extract(un, model, k, _instance_factory(inst), "bmc", bad_inv)
            return result(Verdict.VIOLATED, StopReason.VIOLATION, k, bad_inv, trace)
        if answer == z3.unknown:
            raise_if_canceled(solver)
            reason = solver.reason_unknown()
            return result(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, k, extra=[
                f"inconclusive: z3 answered unknown ({reason}) at depth {k}; no violation up to depth {k - 1}"])
        if k == options.max_depth:
            break
        # No state at depth <= k violates an invariant, so the shortest violation (if any)
        # passes only through states that satisfy them all: assume so (it prunes the search).
        solver.add(*[un.invariant(n, k) for n in names])
        solver.add(*un.transition(k))
        solver.add(*un.first_use_order(k))
        solver.add(*un.commutation_order(k))
        solver.add(*[un.at(c, k + 1) for c in lemmas])
        if progress is not None:
            progress(Progress(time.perf_counter() - start, depth=k + 1))
        # No path of k+1 steps: every execution ends within k steps, all of them checked.
        answer = solver.check()
        if answer == z3.unsat:
            notes.append(f"no execution is longer than {k} steps, so every reachable state was checked")
            return result(Verdict.PROVED, StopReason.EXHAUSTED, k)
        if answer == z3.unknown:
            raise_if_canceled(solver)
            return result(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, k, extra=[
                f"inconclusive: z3 answered unknown ({solver.reason_unknown()}) unrolling step {k + 1}"])
    return result(Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT, options.max_depth)


def _opts(options: BmcOptions) -> dict[str, Any]:
    d = asdict(options)
    d["symmetry"] = False
    return d


def _shown_params(inst: Instance, options: BmcOptions) -> dict[str, Any]:
    return {k: ("free" if k in options.free else v) for k, v in inst.param_values.items()}


def _optimize(inst: Instance, sym: SymbolicSpec, names: list[str], options: BmcOptions, start: float) -> CheckResult:
    """Extreme value of a free parameter over all violations within ``max_depth`` steps."""
    target = options.minimize or options.maximize
    assert target is not None
    if target not in sym.param_terms:
        raise OwnershipError(Code.BAD_OPTION, f"--minimize/--maximize {target}: also pass --free {target}")
    un = Unroller(sym, stutter=True)
    opt = z3.Optimize()
    if options.solver_timeout is not None:
        opt.set("timeout", max(1, int(options.solver_timeout * 1000)))
    opt.add(*un.init(inst))
    opt.add(*_where(sym, options))
    k_max = options.max_depth
    for k in range(k_max):
        opt.add(*un.transition(k))
    # Stutter steps (selector -1) pad shorter violations, so one query covers every depth.
    opt.add(z3.Or(*[z3.Not(un.invariant(n, k_max)) for n in names]))
    term = sym.param_terms[target]
    handle = opt.minimize(term) if options.minimize else opt.maximize(term)
    answer = opt.check()
    opts = _opts(options)
    shown = _shown_params(inst, options)
    if answer == z3.unsat:
        return CheckResult(inst.spec.name, "bmc", Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT,
                           Stats(0, 0, k_max, time.perf_counter() - start), shown, tuple(names), options=opts,
                           notes=(f"no value of {target} leads to a violation within {k_max} steps",))
    if answer == z3.unknown:
        raise_if_canceled(opt)
        return CheckResult(inst.spec.name, "bmc", Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN,
                           Stats(0, 0, k_max, time.perf_counter() - start), shown, tuple(names), options=opts,
                           notes=(f"inconclusive: z3 answered unknown ({opt.reason_unknown()})",))
    model = opt.model()
    value = int_of(model.eval(term, model_completion=True))
    del handle
    bad = _first_failing(un, model, names, k_max)
    trace, _ = extract(un, model, k_max, _instance_factory(inst), "bmc", bad)
    word = "smallest" if options.minimize else "largest"
    return CheckResult(inst.spec.name, "bmc", Verdict.VIOLATED, StopReason.VIOLATION,
                       Stats(0, 0, len(trace), time.perf_counter() - start), shown, tuple(names), violated=bad,
                       trace=trace, options=opts,
                       notes=(f"{word} {target} that violates {bad} within {k_max} steps: {value}",),
                       extremum=(target, value))


def prove(inst: Instance, options: BmcOptions = BmcOptions(), progress: Any = None) -> CheckResult:
    """Prove the invariants for executions of any length by k-induction (and Spacer).

    As in :func:`bmc`, integers start narrow and "no step overflows them" is
    proved along with the invariants; if it fails the proof restarts wider.
    """
    start = time.perf_counter()
    reached = _Reached(progress)

    def run() -> CheckResult:
        note = precheck(inst, options.symmetry)
        return _noted(_widening("prove", inst, options, start,
                                lambda sym, names, widened: _prove_at(inst, sym, names, options, reached, start, widened)),
                      note)

    result = _until_stopped("prove", inst, options, start, reached, run)
    if result.stop_reason in _STOPPED:
        return with_coverage(result, inst, result.actions)  # no coverage search past the limit or the signal
    actions = result.actions
    if not actions and result.stop_reason not in _STOPPED:
        # Proved by induction or Spacer (or refuted): no states were enumerated, so a small
        # concrete search says which actions fire.
        result = _coverage_note(result, options)
        actions = search_coverage(inst, symmetry=options.symmetry)
    return with_coverage(result, inst, actions)


def _prove_at(inst: Instance, sym: SymbolicSpec, chosen: list[str], options: BmcOptions, progress: Any,
              start: float, widened: list[str]) -> CheckResult:
    # The invariants proved are the chosen ones plus the helpers, which strengthen the
    # induction; only these are assumed along the path (assuming any other would be unsound).
    helpers = [n for n, i in inst.spec.invariants.items() if i.helper]
    all_invs = list(dict.fromkeys([*chosen, *helpers]))
    # Proven bookkeeping lemmas strengthen the induction (they rule out unreachable starts).
    lemmas = proven_lemmas(sym, options)
    overflows = live_overflows(sym, lemmas, options)
    base = Unroller(sym, prefix="b", overflow_points=overflows)
    base_solver = _solver(options)
    base_solver.add(*base.init(inst))
    base_solver.add(*_where(sym, options))
    opts = _opts(options)
    shown = _shown_params(inst, options)
    cti: Trace | None = None
    last_k = 0
    overflow_cti = False
    unreplayable_cti = False

    def done(verdict: Verdict, reason: StopReason, depth: int, notes: Sequence[str], violated: str | None = None,
             trace: Trace | None = None, states: int = 0, transitions: int = 0,
             actions: tuple[ActionCoverage, ...] = ()) -> CheckResult:
        return CheckResult(inst.spec.name, "prove", verdict, reason,
                           Stats(states, transitions, depth, time.perf_counter() - start),
                           shown, tuple(all_invs), violated=violated, trace=trace, options=opts,
                           notes=(*notes, *widened, coverage_note(sym.width)), actions=actions,
                           coverage_kind=CoverageKind.PROOF)

    def shortest_by_bmc() -> CheckResult:
        return _bmc(inst, dataclasses.replace(options, invariants=tuple(all_invs)), progress)

    def violated(found: CheckResult, notes: Sequence[str]) -> CheckResult:
        # ``found`` holds another engine's shortest trace, replayed when it was built.
        return done(Verdict.VIOLATED, StopReason.VIOLATION, found.stats.depth, notes, found.violated, found.trace,
                    actions=found.actions)

    def shortest_violation(notes: list[str], found_by: str) -> CheckResult:
        # A violation (or an overflow) is reachable; bmc finds the shortest one to show.
        found = shortest_by_bmc()
        if found.trace is not None:
            return violated(found, [*notes, f"{found_by} found a violation; the shortest trace is from bmc"])
        if _spacer(sym, inst, options, [], overflows)[0] == z3.unsat:
            raise WidthError(f"{found_by} found a step that overflows them")
        return done(Verdict.VIOLATED, StopReason.VIOLATION, last_k, [
            *notes, f"{found_by} found a violation deeper than {options.max_depth} steps; "
            "raise --max-depth with check --engine bmc to see a trace"])

    for k in range(0, options.max_k + 1):
        last_k = k
        # Base case at depth k (an overflowing step counts as a violation: it needs more bits).
        base_solver.push()
        overflow = base.overflow(k)
        base_solver.add(z3.Or(base.violation(all_invs, k), overflow))
        answer = base_solver.check()
        if answer == z3.sat:
            model = base_solver.model()
            if z3.is_true(model.eval(overflow, model_completion=True)):
                raise WidthError(f"a step after {k} steps overflows them")
            bad = _first_failing(base, model, all_invs, k)
            trace, _ = extract(base, model, k, _instance_factory(inst), "prove", bad)
            return done(Verdict.VIOLATED, StopReason.VIOLATION, k, [f"base case fails at depth {k}"], bad, trace)
        if answer == z3.unknown:
            raise_if_canceled(base_solver)
            return done(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, k,
                        [f"inconclusive: z3 answered unknown ({base_solver.reason_unknown()}) in the base case at depth {k}"])
        base_solver.pop()
        base_solver.add(*base.transition(k))
        if base_solver.check() == z3.unsat:
            return done(Verdict.PROVED, StopReason.EXHAUSTED, k,
                        [f"PROVED by bounded exhaustion: no execution is longer than {k} steps and none up to {k} violates"])
        # Inductive step of length k + 1 from an arbitrary state.
        step = Unroller(sym, prefix="i", overflow_points=overflows)
        s = _solver(options)
        s.add(*_where(sym, options))
        for i in range(k + 2):
            s.add(*step.types(i))
            s.add(*[step.at(c, i) for c in lemmas])
        for i in range(k + 1):
            s.add(*step.transition(i))
            s.add(*[step.invariant(n, i) for n in all_invs])
            s.add(z3.Not(step.event_step(all_invs, i)))
        overflow = step.overflow(k + 1)
        s.add(z3.Or(step.violation(all_invs, k + 1), overflow))
        for a in range(k + 2):
            for b in range(a + 1, k + 2):
                s.add(z3.Or(*[x != y for x, y in zip(step.state(a), step.state(b), strict=True)]))
        if progress is not None:
            progress(Progress(time.perf_counter() - start, depth=k))
        answer = s.check()
        if answer == z3.unsat:
            return done(Verdict.PROVED, StopReason.INDUCTION, k + 1,
                        [f"PROVED by {k + 1}-induction (simple paths): invariants hold for executions of any length"])
        if answer == z3.unknown:
            raise_if_canceled(s)
            return done(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, k,
                        [f"inconclusive: z3 answered unknown ({s.reason_unknown()}) in the induction step at k={k + 1}"])
        model = s.model()
        failing = [n for n in all_invs if z3.is_false(model.eval(step.invariant(n, k + 1), model_completion=True))
                   or z3.is_true(model.eval(step.event_step([n], k + 1), model_completion=True))]
        overflow_cti = not failing  # only the overflow check failed, from a state that may be unreachable
        cti = None
        if failing:
            try:
                cti, _ = extract(step, model, k + 1, _instance_factory(inst), "prove", failing[0], cti=True)
            except OwnershipError as exc:
                # The vocabulary's encodings need only agree with the concrete code on reachable
                # states (bmc's replays check that); this start state is one no execution reaches,
                # e.g. two pages in one page-table slot.  The induction failed all the same.
                if exc.code is not Code.INTERNAL_REPLAY:
                    raise
                unreplayable_cti = True
    notes = [f"k-induction did not close up to k={last_k + 1} (no violation in the first {last_k} steps)"]
    if options.reach_states > 0 and not options.free:
        last = [0.0]

        def report(states: int, transitions: int, depth: int, frontier: int) -> None:
            now = time.perf_counter()
            if progress is not None and now - last[0] >= 1.0:  # at most one line a second
                last[0] = now
                progress(Progress(now - start, states, transitions, depth, frontier))

        cert = _reachable_certificate(sym, inst, options, all_invs, overflows, report)
        if cert.outcome == "proved":
            return done(Verdict.PROVED, StopReason.INVARIANT_FOUND, cert.depth, [*notes, cert.note],
                        states=cert.states, transitions=cert.transitions, actions=cert.actions)
        if cert.outcome == "violated":
            # A state the concrete code reaches violates an invariant: breadth-first search
            # gives a shortest trace, replayed like every other.
            from ownership.engines.explore import ExploreOptions, explore

            found = explore(inst, ExploreOptions(invariants=tuple(all_invs)))
            if found.trace is not None:
                return violated(found, [*notes, cert.note, "the shortest trace is from breadth-first search"])
            raise OwnershipError(Code.ENGINE_DISAGREEMENT, "Z3 found a reachable state that violates "
                                 f"{cert.violated}, but breadth-first search found no violation")
        notes.append(cert.note)
    if options.spacer:
        answer, why = _spacer(sym, inst, options, all_invs, overflows)
        if answer == z3.sat:
            return done(Verdict.PROVED, StopReason.INVARIANT_FOUND, last_k, [
                *notes, "PROVED by Spacer (IC3/PDR): Z3 found an inductive invariant that implies every invariant, "
                "so they hold for executions of any length; a separate solver re-checked that it contains the "
                "initial states, is closed under every step and excludes every violation"])
        if answer == z3.unsat:
            return shortest_violation(notes, "Spacer")
        notes.append(f"Spacer (IC3/PDR) was inconclusive: {why}")
        if why.startswith(_REJECTED):
            # A rejected invariant is a wrong answer, and Spacer's answers have been seen to
            # depend on what the process solved before: a buggy spec must still get its trace.
            found = shortest_by_bmc()
            if found.trace is not None:
                return violated(found, [*notes, "bmc found a violation"])
            notes.append(f"bmc found no violation up to depth {found.stats.depth}")
    if cti is None and unreplayable_cti:
        notes.append("the counterexample to induction starts from a state that no execution reaches and that the "
                     "vocabulary's symbolic encoding does not model as the concrete code does (for example two pages "
                     "in one page-table slot), so it is not shown")
    if overflow_cti:
        notes.append(f"the induction step fails because, from a state that satisfies every invariant but may be "
                     f"unreachable, a step overflows {sym.width}-bit integers")
    notes += [
        "the trace below starts from a state that satisfies every invariant but may be unreachable: "
        "add a helper invariant (@spec.invariant(helper=True)) that rules it out",
    ]
    return done(Verdict.UNKNOWN, StopReason.INDUCTION_FAILED, last_k, notes, cti.violation if cti else None, cti)


_REJECTED = "Spacer's inductive invariant failed the independent check"


def _spacer(sym: SymbolicSpec, inst: Instance, options: BmcOptions, invariants: list[str],
            overflow_points: z3.BoolRef | None = None) -> tuple[Any, str]:
    """Ask Z3's Horn-clause engine for an inductive invariant (sat = proved, unsat = violated).

    The error states are those violating an invariant and those from which a
    step overflows the integer width (with ``invariants`` empty, only those).
    ``overflow_points`` are those :func:`live_overflows` left.  The proven
    lemmas themselves are not given to Spacer as facts, which made it
    several times slower here.
    """
    un = Unroller(sym, prefix="h", overflow_points=overflow_points)
    x, y = un.state(0), un.state(1)
    params = list(sym.param_terms.values())
    inv = z3.Function("Reach", *[c.sort() for c in x], *[p.sort() for p in params], z3.BoolSort())
    trans = un.transition(0)
    locals_ = [un.selector(0)] + [new for _old, new in un.aux_at(0)]
    s = z3.SolverFor("HORN")
    s.set("engine", "spacer")
    # With these rule-inlining passes on, Z3 (4.15) returned invariants for these clauses that
    # were not inductive (its own validate option agreed); every answer is re-checked below.
    s.set("xform.inline_linear", False)
    s.set("xform.inline_eager", False)
    budget = options.spacer_timeout if options.solver_timeout is None else min(options.spacer_timeout, options.solver_timeout)
    s.set("timeout", max(1, int(budget * 1000)))
    where = _where(sym, options)
    s.add(z3.ForAll(x + params, z3.Implies(z3.And(*un.init(inst), *where), inv(*x, *params))))
    s.add(z3.ForAll(x + y + params + locals_, z3.Implies(z3.And(inv(*x, *params), *trans), inv(*y, *params))))
    # A state from which a step emits an event marked as violating an invariant is an error state too.
    bad = z3.Or(*[z3.Not(un.invariant(n, 0)) for n in invariants], un.overflow(0), un.event_from(invariants, 0))
    known = {t.get_id() for t in [*x, *params]}
    choice = [c for c in _free_constants([bad]) if c.get_id() not in known]
    s.add(z3.ForAll(x + params + choice, z3.Implies(z3.And(inv(*x, *params), bad), False)))
    answer = s.check()
    if answer == z3.sat:
        # Check Spacer's invariant with an independent solver before calling anything proved.
        failed = _certificate_fails(s.model(), inv, un, inst, x, y, params, where, trans, bad, options)
        if failed:
            return z3.unknown, f"{_REJECTED} ({failed})"
    if answer == z3.unknown:
        raise_if_canceled(s)
    return answer, (s.reason_unknown() if answer == z3.unknown else "")


@dataclass(frozen=True)
class _ReachCertificate:
    outcome: str
    """"proved", "violated" (a reachable state violates ``violated``) or "skipped"."""
    note: str
    states: int = 0
    transitions: int = 0
    depth: int = 0
    violated: str | None = None
    actions: tuple[ActionCoverage, ...] = ()


def _reachable_certificate(sym: SymbolicSpec, inst: Instance, options: BmcOptions, invariants: list[str],
                           overflow_points: z3.BoolRef,
                           report: Callable[[int, int, int, int], None] | None = None) -> _ReachCertificate:
    """Try the explicitly enumerated reachable set as the inductive invariant, checked by Z3.

    Breadth-first search (concrete semantics) finds every reachable state;
    they become a decision diagram, and Z3 checks against the symbolic
    transition relation that the set is closed under every step and contains
    no violation and no overflow.  The search only proposes: a set that is
    incomplete, or a symbolic encoding that disagrees with the concrete code,
    fails the closure check and the proof moves on to Spacer.
    """
    from ownership.engines.diagram import build_diagram, reachable_states

    ints = sorted(sym.int_cells)

    def too_wide(st: State) -> list[int]:
        return [st[i] for i in ints if isinstance(st[i], int) and not fits(st[i], sym.width)]

    reach = reachable_states(inst, options.reach_states, lambda st: not too_wide(st), report)
    if reach.unfit is not None:
        # A value the concrete code reaches does not fit: no proof at this width can hold.
        raise WidthError(f"a reachable state holds {too_wide(reach.unfit)[0]}")
    if not reach.complete:
        return _ReachCertificate("skipped", f"the explicit reachable set was not tried: it has more than "
                                 f"{options.reach_states:,} states (raise --reach-states)")
    diagram = build_diagram(reach.states)
    if inst.init_state not in diagram:
        raise OwnershipError(Code.ENGINE_DISAGREEMENT, "the decision diagram of the reachable states lost the initial state")
    un = Unroller(sym, prefix="r", overflow_points=overflow_points)
    x = sym.cells
    tests: dict[tuple[int, Any], z3.BoolRef] = {}  # one "cell == value" term per pair, shared

    def test(cell: int, value: Any) -> z3.BoolRef:
        key = (cell, (type(value), value))
        if key not in tests:
            tests[key] = x[cell] == sym.value_term(value, cell)
        return tests[key]

    memo: list[z3.BoolRef] = [z3.BoolVal(True)]
    for cell, edges in diagram.nodes[1:]:
        by_child: dict[int, list[Any]] = {}
        for value, child in edges:
            by_child.setdefault(child, []).append(value)
        memo.append(z3.Or(*[z3.And(z3.Or(*[test(cell, v) for v in values]), memo[child])
                            for child, values in by_child.items()]))
    inside = memo[diagram.root]
    where = _where(sym, options)
    size = (f"{len(reach.states):,} states, every one within {reach.depth} steps of the initial state, "
            f"stored as a decision diagram of {diagram.size:,} nodes")

    def check(*formulas: z3.BoolRef) -> tuple[Any, z3.ModelRef | None]:
        s = _solver(options)
        s.add(*where, *un.types(0), *formulas)
        answer = s.check()
        if answer == z3.unknown:
            raise_if_canceled(s)
        return answer, (s.model() if answer == z3.sat else None)

    answer, model = check(un.at(inside, 0), z3.Or(*[z3.Not(un.invariant(n, 0)) for n in invariants],
                                                  un.event_from(invariants, 0)))
    if answer == z3.sat and model is not None:
        bad = next((n for n in invariants if z3.is_true(model.eval(un.event_from([n], 0), model_completion=True))),
                   None) or _first_failing(un, model, invariants, 0)
        return _ReachCertificate("violated", f"explicit search found {size}; Z3 found one that violates {bad}",
                                 violated=bad)
    if answer == z3.unknown:
        return _ReachCertificate("skipped", f"the explicit reachable set ({size}) was inconclusive: z3 answered "
                                 "unknown checking the invariants on it")
    answer, _ = check(un.at(inside, 0), un.overflow(0))
    if answer == z3.sat:
        raise WidthError("a step from a reachable state overflows them")
    closed, _ = check(un.at(inside, 0), *un.transition(0), z3.Not(un.at(inside, 1)))
    if closed != z3.unsat or answer != z3.unsat:
        why = ("z3 answered unknown" if z3.unknown in (closed, answer) else
               "a step of the symbolic transition relation leaves it, so the symbolic encoding allows a step "
               "the concrete code does not take (please report this)")
        return _ReachCertificate("skipped", f"the explicit reachable set ({size}) is not a proof: {why}")
    return _ReachCertificate("proved", (
        f"PROVED with the explicit reachable set as the inductive invariant: breadth-first search found {size}; "
        "Z3 checked against the symbolic transition relation that the set contains no violation, that no step "
        "from it overflows and that every step from it stays inside it, so the invariants hold for executions "
        "of any length"), len(reach.states), reach.transitions, reach.depth, actions=reach.actions)


def _certificate_fails(model: z3.ModelRef, inv: z3.FuncDeclRef, un: Unroller, inst: Instance, x: list[z3.ExprRef],
                       y: list[z3.ExprRef], params: list[z3.ExprRef], where: list[z3.BoolRef],
                       trans: list[z3.BoolRef], bad: z3.BoolRef, options: BmcOptions) -> str:
    """Which of "initial states are in it", "a step stays in it", "it excludes errors" fails, or ''."""
    interp = model[inv]
    if not isinstance(interp, z3.FuncInterp):
        return "no interpretation of the invariant in the model"

    def holds_at(args: list[z3.ExprRef]) -> z3.BoolRef:
        body = z3.substitute_vars(interp.else_value(), *args)
        for i in reversed(range(interp.num_entries())):
            entry = interp.entry(i)
            point = z3.And(*[a == entry.arg_value(j) for j, a in enumerate(args)])
            body = z3.If(point, entry.value(), body)
        return body

    now, nxt = holds_at([*x, *params]), holds_at([*y, *params])
    checks = [
        ("an initial state is outside it", [*un.init(inst), *where, z3.Not(now)]),
        ("a step leaves it", [*where, now, *trans, z3.Not(nxt)]),
        ("it contains an error state", [*where, now, bad]),
    ]
    for what, formulas in checks:
        s = _solver(options)
        s.add(*formulas)
        if s.check() != z3.unsat:
            return what
    return ""
