"""The transition relation of a :class:`~ownership.symbolic.encoding.SymbolicSpec`, unrolled step by step.

Every state of every unrolled step is a vector of terms, one per cell of the
concrete state tuple; step ``k`` picks one action path with the selector
``sel!k``; a cell's next value is an ``If`` chain over the paths that write
it.  Also the reductions bmc adds (partial-order and symmetry breaking).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import z3

from ownership.lang.instance import Instance
from ownership.symbolic.encoding import SymbolicSpec
from ownership.symbolic.paths import Path
from ownership.symbolic.terms import conjunction, to_z3


@dataclass
class PathRef:
    """One enabled path of the action instance numbered ``action`` (the selector counts these)."""

    action: int
    path: Path


def free_constants(terms: Sequence[z3.ExprRef]) -> list[z3.ExprRef]:
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


def substitute(expr: z3.ExprRef, pairs: Sequence[tuple[z3.ExprRef, z3.ExprRef]]) -> z3.ExprRef:
    """``z3.substitute(expr, *pairs)`` without its checks in Python.

    The unrolling substitutes a hundred pairs (cells, fresh terms) of
    matching sorts, by construction, several times per step; ``z3.substitute``
    wraps and compares both sorts of every pair first, which cost more than
    the substitution.
    """
    n = len(pairs)
    if n == 0:
        return expr
    src = (z3.Ast * n)(*[a.as_ast() for a, _ in pairs])
    dst = (z3.Ast * n)(*[b.as_ast() for _, b in pairs])
    ctx = expr.ctx
    return z3.z3._to_expr_ref(z3.Z3_substitute(ctx.ref(), expr.as_ast(), n, src, dst), ctx)


def _cells_read(terms: Sequence[z3.ExprRef], cell_of: dict[int, int]) -> set[int]:
    """Indices of the placeholder cells that occur in ``terms``.

    Walks the terms through Z3's C API by AST id: a Python wrapper per subterm
    (:func:`free_constants`) made this most of the time spent building bmc's
    partial-order reduction.  The raw ASTs stay alive while ``terms`` do.
    """
    if not terms:
        return set()
    c = terms[0].ctx.ref()
    app_kind = z3.Z3_APP_AST
    seen: set[int] = set()
    out: set[int] = set()
    todo = [t.as_ast() for t in terms]
    while todo:
        a = todo.pop()
        i = z3.Z3_get_ast_id(c, a)
        if i in seen:
            continue
        seen.add(i)
        if i in cell_of:
            out.add(cell_of[i])
            continue
        if z3.Z3_get_ast_kind(c, a) != app_kind:
            continue
        app = z3.Z3_to_app(c, a)
        todo.extend(z3.Z3_get_app_arg(c, app, k) for k in range(z3.Z3_get_app_num_args(c, app)))
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
    overflow_points: z3.BoolRef | None = None
    """The overflow points to check (see :func:`live_overflows`); ``None``: all of them."""
    paths: list[PathRef] = field(init=False)
    steps: list[list[z3.ExprRef]] = field(init=False)

    def __post_init__(self) -> None:
        self.paths = [PathRef(a, p) for a, ap in enumerate(self.sym.actions) for p in ap.paths]
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
        self._commutation: dict[bool, tuple[z3.BoolRef, list[int]]] = {}

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
        return substitute(expr, self._subst(k, j))

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
        return [substitute(template, pairs)]

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
        return substitute(self.overflow_points, self._subst(k, None) + self.aux_at(k))

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
        terms = [z3.And(sel == j, substitute(c, self._subst(k - 1, None) + self.aux_at(k - 1)))
                 for j, c in self._flagged(names)]
        return z3.Or(*terms) if terms else z3.BoolVal(False)

    def event_from(self, names: Sequence[str], k: int) -> z3.BoolRef:
        """Some step from state ``k`` emits an event marked as violating one of ``names``."""
        terms = [substitute(c, self._subst(k, None) + self.aux_at(k)) for _j, c in self._flagged(names)]
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
                # A flag's condition is read too: a step whose flag depends on a cell another step writes
                # violates in one order and not in the other, so the two may not be reordered.
                terms = [*p.pc, *p.constraints, *(c for _n, c in p.flags),
                         *(to_z3(v, self.sym.sorts[c]) for c, v in p.writes.items())]
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
        template, flags = self._commutation_template(k > 1)
        pairs = [(z3.BitVec("cprev!", self._sel_bits), self.selector(k - 1)),
                 (z3.BitVec("csel!", self._sel_bits), self.selector(k))]
        for a in flags:
            pairs.append((z3.Bool(f"cE!{a}"), z3.Bool(f"{self.prefix}E!{k}!{a}")))
            if k > 1:
                pairs.append((z3.Bool(f"cEp!{a}"), z3.Bool(f"{self.prefix}E!{k - 1}!{a}")))
        return [substitute(template, pairs)] if flags else []

    def _commutation_template(self, chained: bool) -> tuple[z3.BoolRef, list[int]]:
        """:meth:`commutation_order` over placeholders, built once (per step it cost thousands of term
        constructions): ``cprev!``/``csel!`` the previous and current selectors, ``cEp!a``/``cE!a`` the
        flags of the previous and current step (``chained``: there is a previous step's flag to extend).
        Also the paths that have a flag."""
        if chained not in self._commutation:
            tables = self._order_tables()
            prev, sel = z3.BitVec("cprev!", self._sel_bits), z3.BitVec("csel!", self._sel_bits)
            is_prev = [prev == b for b in range(len(self.paths))]
            out: list[z3.BoolRef] = []
            flags: list[int] = []
            for a, (indep, greater) in enumerate(tables):
                if not indep:
                    continue
                flags.append(a)
                e = z3.Bool(f"cE!{a}")
                terms: list[z3.BoolRef] = []
                if greater:
                    terms.append(z3.Or(*[is_prev[b] for b in greater]))
                if chained:
                    terms.append(z3.And(z3.Bool(f"cEp!{a}"), z3.Or(*[is_prev[b] for b in indep])))
                out.append(e == (z3.Or(*terms) if terms else z3.BoolVal(False)))
                out.append(z3.Implies(sel == a, z3.Not(e)))
            self._commutation[chained] = (conjunction(out) if out else z3.BoolVal(True), flags)
        return self._commutation[chained]

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
