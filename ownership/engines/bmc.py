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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import z3

from ownership.core.replay import build_trace
from ownership.core.result import CheckResult, Stats, StopReason, Verdict
from ownership.core.trace import Trace
from ownership.errors import Code, OwnershipError
from ownership.spec.instance import Instance, State
from ownership.spec.types import BoolType, Ref, RefSet

from .symbolic import COVERAGE_NOTE, Path, SymbolicSpec, int_of, parameter_constraints, to_z3


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


@dataclass
class _PathRef:
    action: int
    path: Path


def _cells_read(terms: Sequence[z3.ExprRef], cell_of: dict[int, int]) -> set[int]:
    """Indices of the placeholder cells that occur in ``terms``."""
    seen: set[int] = set()
    out: set[int] = set()
    todo = list(terms)
    while todo:
        t = todo.pop()
        i = t.get_id()
        if i in seen:
            continue
        seen.add(i)
        if i in cell_of:
            out.add(cell_of[i])
        else:
            todo.extend(t.children())
    return out


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
        return [x[i] == to_z3(v, self.sym.sorts[i]) for i, v in enumerate(inst.init_state)]

    def _transition_template(self) -> z3.BoolRef:
        """The step relation over placeholders: ``x!i`` now, ``y!i`` next, ``sel!`` the path taken."""
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
                    nxt = z3.If(sel == j, to_z3(self.paths[j].path.writes[i], self.sym.sorts[i]), nxt)
                out.append(z3.Const(f"y!{i}", self.sym.sorts[i]) == nxt)
            self._template = z3.And(*out)
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

    def types(self, k: int) -> list[z3.BoolRef]:
        return self.sym.type_constraints(self.state(k))

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
    if violation is not None and inst.holds(replayed[-1], violation):
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
    if not pools:
        return []
    from ownership.vocab.symbolic import pool_lemmas

    cands = [f for pool in pools for _name, f in pool_lemmas(pool, sym.inst, sym.cells)]
    init = list(zip(sym.cells, (to_z3(v, srt) for v, srt in zip(sym.inst.init_state, sym.sorts, strict=True)), strict=True))
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
            s.pop()
            return []
        model = s.model()
        cands = [c for c, c1 in zip(cands, nxt, strict=True) if not z3.is_false(model.eval(c1, model_completion=True))]
        s.pop()
    return []


def _first_failing(un: Unroller, model: z3.ModelRef, names: Sequence[str], k: int) -> str:
    for n in names:
        if z3.is_false(model.eval(un.invariant(n, k), model_completion=True)):
            return n
    return names[0]


def _instance_factory(inst: Instance) -> Any:
    def make(params: dict[str, int]) -> Instance:
        if params == inst.param_values:
            return inst
        return Instance(inst.spec, params)

    return make


def bmc(inst: Instance, options: BmcOptions = BmcOptions(), progress: Any = None) -> CheckResult:
    """Bounded model checking: the shortest violation up to ``max_depth`` steps."""
    start = time.perf_counter()
    sym = SymbolicSpec(inst, options.free, options.symmetry)
    names = _checked(sym, options)
    if options.minimize or options.maximize:
        return _optimize(inst, sym, names, options, start)
    un = Unroller(sym)
    solver = _solver(options)
    solver.add(*un.init(inst))
    solver.add(*_where(sym, options))
    lemmas = proven_lemmas(sym, options)
    solver.add(*[un.at(c, 0) for c in lemmas])
    opts = _opts(options)
    notes: list[str] = [f"{len(un.paths)} action paths from {len(sym.actions)} action instances", COVERAGE_NOTE]

    def result(verdict: Verdict, reason: StopReason, depth: int, violated: str | None = None,
               trace: Trace | None = None, extra: Sequence[str] = ()) -> CheckResult:
        return CheckResult(
            spec=inst.spec.name, engine="bmc", verdict=verdict, stop_reason=reason,
            stats=Stats(0, 0, depth, time.perf_counter() - start), params=_shown_params(inst, options),
            invariants=tuple(names), violated=violated, trace=trace, options=opts, notes=tuple(notes + list(extra)),
        )

    for k in range(options.max_depth + 1):
        # One solver for all depths; the depth-k question is asked under an assumption
        # literal, so what the solver learned at earlier depths is kept.
        bad = z3.Bool(f"bad!{k}")
        solver.add(z3.Implies(bad, z3.Or(*[z3.Not(un.invariant(n, k)) for n in names])))
        answer = solver.check(bad)
        if answer == z3.sat:
            model = solver.model()
            bad_inv = _first_failing(un, model, names, k)
            trace, _ = extract(un, model, k, _instance_factory(inst), "bmc", bad_inv)
            return result(Verdict.VIOLATED, StopReason.VIOLATION, k, bad_inv, trace)
        if answer == z3.unknown:
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
            progress(_Progress(k + 1, time.perf_counter() - start))
        # No path of k+1 steps: every execution ends within k steps, all of them checked.
        answer = solver.check()
        if answer == z3.unsat:
            notes.append(f"no execution is longer than {k} steps, so every reachable state was checked")
            return result(Verdict.PROVED, StopReason.EXHAUSTED, k)
        if answer == z3.unknown:
            return result(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, k, extra=[
                f"inconclusive: z3 answered unknown ({solver.reason_unknown()}) unrolling step {k + 1}"])
    return result(Verdict.BOUNDED_OK, StopReason.DEPTH_LIMIT, options.max_depth)


@dataclass(frozen=True)
class _Progress:
    depth: int
    seconds: float
    states: int = 0
    transitions: int = 0
    frontier: int = 0


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
    """Prove the invariants for executions of any length by k-induction (and Spacer)."""
    start = time.perf_counter()
    sym = SymbolicSpec(inst, options.free, options.symmetry)
    chosen = _checked(sym, options)
    # The invariants proved are the chosen ones plus the helpers, which strengthen the
    # induction; only these are assumed along the path (assuming any other would be unsound).
    helpers = [n for n, i in inst.spec.invariants.items() if i.helper]
    all_invs = list(dict.fromkeys([*chosen, *helpers]))
    base = Unroller(sym, prefix="b")
    base_solver = _solver(options)
    base_solver.add(*base.init(inst))
    base_solver.add(*_where(sym, options))
    # Proven bookkeeping lemmas strengthen the induction (they rule out unreachable starts).
    lemmas = proven_lemmas(sym, options)
    opts = _opts(options)
    shown = _shown_params(inst, options)
    cti: Trace | None = None
    last_k = 0

    def done(verdict: Verdict, reason: StopReason, depth: int, notes: Sequence[str], violated: str | None = None,
             trace: Trace | None = None) -> CheckResult:
        return CheckResult(inst.spec.name, "prove", verdict, reason, Stats(0, 0, depth, time.perf_counter() - start),
                           shown, tuple(all_invs), violated=violated, trace=trace, options=opts,
                           notes=(*notes, COVERAGE_NOTE))

    for k in range(0, options.max_k + 1):
        last_k = k
        # Base case at depth k.
        base_solver.push()
        base_solver.add(z3.Or(*[z3.Not(base.invariant(n, k)) for n in all_invs]))
        answer = base_solver.check()
        if answer == z3.sat:
            model = base_solver.model()
            bad = _first_failing(base, model, all_invs, k)
            trace, _ = extract(base, model, k, _instance_factory(inst), "prove", bad)
            return done(Verdict.VIOLATED, StopReason.VIOLATION, k, [f"base case fails at depth {k}"], bad, trace)
        if answer == z3.unknown:
            return done(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, k,
                        [f"inconclusive: z3 answered unknown ({base_solver.reason_unknown()}) in the base case at depth {k}"])
        base_solver.pop()
        base_solver.add(*base.transition(k))
        if base_solver.check() == z3.unsat:
            return done(Verdict.PROVED, StopReason.EXHAUSTED, k,
                        [f"PROVED by bounded exhaustion: no execution is longer than {k} steps and none up to {k} violates"])
        # Inductive step of length k + 1 from an arbitrary state.
        step = Unroller(sym, prefix="i")
        s = _solver(options)
        s.add(*_where(sym, options))
        for i in range(k + 2):
            s.add(*step.types(i))
            s.add(*[step.at(c, i) for c in lemmas])
        for i in range(k + 1):
            s.add(*step.transition(i))
            s.add(*[step.invariant(n, i) for n in all_invs])
        s.add(z3.Or(*[z3.Not(step.invariant(n, k + 1)) for n in all_invs]))
        for a in range(k + 2):
            for b in range(a + 1, k + 2):
                s.add(z3.Or(*[x != y for x, y in zip(step.state(a), step.state(b), strict=True)]))
        if progress is not None:
            progress(_Progress(k, time.perf_counter() - start))
        answer = s.check()
        if answer == z3.unsat:
            return done(Verdict.PROVED, StopReason.INDUCTION, k + 1,
                        [f"PROVED by {k + 1}-induction (simple paths): invariants hold for executions of any length"])
        if answer == z3.unknown:
            return done(Verdict.UNKNOWN, StopReason.SOLVER_UNKNOWN, k,
                        [f"inconclusive: z3 answered unknown ({s.reason_unknown()}) in the induction step at k={k + 1}"])
        model = s.model()
        bad = _first_failing(step, model, all_invs, k + 1)
        cti, _ = extract(step, model, k + 1, _instance_factory(inst), "prove", bad, cti=True)
    notes = [f"k-induction did not close up to k={last_k + 1} (no violation in the first {last_k} steps)"]
    if options.spacer:
        answer, why = _spacer(sym, inst, options, all_invs)
        if answer == z3.sat:
            return done(Verdict.PROVED, StopReason.INVARIANT_FOUND, last_k, [
                *notes, "PROVED by Spacer (IC3/PDR): Z3 found an inductive invariant that implies every invariant, "
                "so they hold for executions of any length"])
        if answer == z3.unsat:
            # A violation exists; find the shortest one to show it.
            found = bmc(inst, dataclasses.replace(options, invariants=tuple(all_invs)), progress)
            if found.trace is not None:
                return done(Verdict.VIOLATED, StopReason.VIOLATION, found.stats.depth,
                            [*notes, "Spacer found a violation; the shortest trace is from bmc"], found.violated,
                            found.trace)
            return done(Verdict.VIOLATED, StopReason.VIOLATION, last_k, [
                *notes, f"Spacer found a violation deeper than {options.max_depth} steps; "
                "raise --max-depth with check --engine bmc to see a trace"])
        notes.append(f"Spacer (IC3/PDR) was inconclusive: {why}")
    notes += [
        "the trace below starts from a state that satisfies every invariant but may be unreachable: "
        "add a helper invariant (@spec.invariant(helper=True)) that rules it out",
    ]
    return done(Verdict.UNKNOWN, StopReason.INDUCTION_FAILED, last_k, notes, cti.violation if cti else None, cti)


def _spacer(sym: SymbolicSpec, inst: Instance, options: BmcOptions, invariants: list[str]) -> tuple[Any, str]:
    """Ask Z3's Horn-clause engine for an inductive invariant (sat = proved, unsat = violated)."""
    un = Unroller(sym, prefix="h")
    x, y = un.state(0), un.state(1)
    params = list(sym.param_terms.values())
    inv = z3.Function("Reach", *[c.sort() for c in x], *[p.sort() for p in params], z3.BoolSort())
    trans = un.transition(0)
    locals_ = [un.selector(0)] + [new for _old, new in un.aux_at(0)]
    s = z3.SolverFor("HORN")
    s.set("engine", "spacer")
    budget = options.spacer_timeout if options.solver_timeout is None else min(options.spacer_timeout, options.solver_timeout)
    s.set("timeout", max(1, int(budget * 1000)))
    where = _where(sym, options)
    s.add(z3.ForAll(x + params, z3.Implies(z3.And(*un.init(inst), *where), inv(*x, *params))))
    s.add(z3.ForAll(x + y + params + locals_, z3.Implies(z3.And(inv(*x, *params), *trans), inv(*y, *params))))
    good = z3.And(*[un.invariant(n, 0) for n in invariants])
    s.add(z3.ForAll(x + params, z3.Implies(z3.And(inv(*x, *params), z3.Not(good)), False)))
    answer = s.check()
    return answer, (s.reason_unknown() if answer == z3.unknown else "")
