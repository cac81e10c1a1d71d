"""A proof with Z3 that renaming a symmetric domain commutes with a spec, for every typed state.

Symmetry reduction (the explorer's orbit representatives, bmc's symmetry
breaking) is sound when every permutation ``pi`` of a reduced domain maps the
transition relation onto itself and leaves every invariant's value and the
initial state unchanged.  Equivariance under generators of a group gives it
for the whole group (a composition of renamings that commute with the spec
commutes with it), so each reduced domain is checked under two generators of
its symmetric group: the transposition of its first two elements and the
cycle of all of them (the same permutation for two elements).

For every generator ``pi``, every action instance ``a`` and every typed state
``x`` (every state of the encoding, reachable or not) the solver is asked for
a counterexample to

* ``x -a-> y`` implies ``pi(x) -pi(a)-> pi(y)``, with the same events marked
  as violating (``pi(a)`` is ``a`` with its arguments in the domain renamed;
  the fresh choice terms of ``pi(a)`` are existentially quantified);
* every invariant has the same value at ``x`` and ``pi(x)``;

and the initial state must be fixed by ``pi``.  The implication for ``pi``
gives it for every power of ``pi`` and so for ``pi``'s inverse too: the
relation is mapped onto itself, not just into itself.  The encoding is the
unreduced one (``SymbolicSpec(symmetry=False)``: its alloc takes
interchangeable pages in any order).

What the proof covers: states whose integers are below ``2**INT_BITS`` in
magnitude and satisfy the bookkeeping lemmas proved of every reachable state
(:func:`~ownership.symbolic.lemmas.proven_lemmas`), on steps that compute no
integer outside :data:`PROOF_WIDTH` bits.  A counterexample may be
unreachable, so a failed (or unknown, or timed out) proof never refutes a
spec: the engines fall back to a weaker check or to no reduction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import z3

from ownership.lang.declarations import Domain
from ownership.lang.fields import strides
from ownership.lang.instance import Instance
from ownership.lang.permutation import Permutation, StateShape
from ownership.symbolic.encoding import ActionPaths, SymbolicSpec
from ownership.symbolic.lemmas import proven_lemmas
from ownership.symbolic.paths import Path
from ownership.symbolic.terms import WIDTH, SymbolicError, WidthError
from ownership.symbolic.unroll import _cells_read, substitute

PROOF_WIDTH = 32
"""Bits of the encoding's integers in the proof (narrower bit-vectors make far smaller SAT problems)."""

INT_BITS = 24
"""The proof covers states whose integers are below ``2**INT_BITS`` in magnitude (see :func:`_int_bounds`):
sums of up to 2**7 of them stay inside :data:`PROOF_WIDTH` bits."""

DEFAULT_SECONDS = 10.0
"""Wall-clock cap of the lemma mining a proof starts with (a timeout there only weakens the proof)."""

RESOURCE_BUDGET = 400_000_000
"""Z3 resource units (``rlimit``) every query of one proof shares, about 3 s on a 2020s core (the library's proofs that hold use 56-203 million).  A
budget in solver steps, not seconds, so whether a proof holds does not depend on the machine's load."""


@dataclass(frozen=True)
class Equivariance:
    """The outcome of :func:`prove_equivariance`: proved, or why not."""

    proved: bool
    domains: tuple[str, ...]
    actions: int
    generators: int
    seconds: float
    reason: str = ""
    """Why the proof does not hold: a (perhaps unreachable) counterexample, a timeout, an encoding failure."""

    def describe(self) -> str:
        """The note a result carries."""
        doms = ", ".join(self.domains)
        if self.proved:
            gens = "1 generator" if self.generators == 1 else f"{self.generators} generators"
            return (f"symmetry of {doms} proved by Z3 for every state ({self.actions} action instances, "
                    f"{gens}, {self.seconds:.1f}s)")
        return f"symmetry of {doms} not proved by Z3 ({self.reason}; {self.seconds:.1f}s)"


def shown(inst: Instance, domain: str, perm: Sequence[int]) -> str:
    """A renaming in cycle-free arrow form: ``(A->B B->A)``."""
    names = inst.names[domain]
    return "(" + " ".join(f"{names[i]}->{names[p]}" for i, p in enumerate(perm) if p != i) + ")"


def _renamed_cells(sym: SymbolicSpec, domain: str, perm: Sequence[int]) -> list[z3.ExprRef]:
    """``pi(x)`` as terms over the placeholder cells: rows moved, references and set bits renamed."""
    shape = StateShape.of(sym.inst)
    cells = sym.cells
    out: list[z3.ExprRef] = list(cells)
    for var in shape.variables:
        targets = [var.offset]
        for d, n, st in zip(var.index, var.shape, strides(var.shape), strict=True):
            m = perm if d == domain else range(n)
            targets = [t + m[x] * st for t in targets for x in range(n)]
        for k, new in enumerate(targets):
            old = cells[var.offset + k]
            out[new] = _renamed_value(old, var.value_domain == domain, var.is_set, perm)
    return out


def _renamed_value(term: z3.ExprRef, named: bool, is_set: bool, perm: Sequence[int]) -> z3.ExprRef:
    if not named:
        return term
    if is_set:  # bit ``old`` of the mask becomes bit ``perm[old]``
        bits = [z3.Extract(old, old, term) for old in sorted(range(len(perm)), key=lambda o: perm[o])]
        return z3.Concat(*reversed(bits)) if len(bits) > 1 else bits[0]
    sort = term.sort()
    out: z3.ExprRef = term  # -1 (None) and anything else stays
    for old, new in enumerate(perm):
        out = z3.If(term == z3.BitVecVal(old, sort), z3.BitVecVal(new, sort), out)
    return out


def _int_bounds(sym: SymbolicSpec) -> list[z3.BoolRef]:
    """Integer cells below ``2**INT_BITS`` in magnitude.

    Without a bound, sums over a domain computed in index order overflow in
    one order and not in another at values no search reaches, and the proof
    would fail on them.
    """
    bound = 1 << INT_BITS
    return [z3.And(sym.cells[i] > -bound, sym.cells[i] < bound) for i in sorted(sym.int_cells)]


def _flag(p: Path, name: str) -> z3.BoolRef:
    conds = [c for n, c in p.flags if n == name]
    return z3.Or(*conds) if conds else z3.BoolVal(False)


def _step(sym: SymbolicSpec, ap: ActionPaths, nxt: Sequence[z3.ExprRef], flags: Sequence[tuple[str, z3.BoolRef]]) -> z3.BoolRef:
    """Some enabled, non-overflowing path of ``ap`` goes from the placeholder cells to ``nxt`` with ``flags``."""
    disj = []
    for p in ap.paths:
        conj: list[z3.BoolRef] = [*p.pc, *p.constraints, *(z3.Not(o) for o in p.overflows)]
        for i, x in enumerate(sym.cells):
            conj.append(nxt[i] == (sym.value_term(p.writes[i], i) if i in p.writes else x))
        conj += [f == _flag(p, n) for n, f in flags]
        disj.append(z3.And(*conj))
    return z3.Or(*disj) if disj else z3.BoolVal(False)


@dataclass(frozen=True)
class _LemmaOptions:
    """What lemma mining reads of an engine's options."""

    solver_timeout: float | None
    where: tuple[str, ...] = ()


class _Deadline:
    """The proof's budget: seconds for lemma mining, deterministic Z3 resource units for the queries."""

    def __init__(self, seconds: float, units: int = RESOURCE_BUDGET) -> None:
        self.end = time.perf_counter() + seconds
        self.units = units
        self.last: int | None = None
        """Z3's resource count after the last query: the count is the context's, so use is its growth."""

    def solver(self, quantified: bool) -> z3.Solver:
        """A fresh solver limited to the units left; ``TimeoutError`` when none are."""
        if self.last is None:
            probe = z3.Solver()
            probe.check()
            self.last = _resource_count(probe)
        if self.units <= 0:
            raise TimeoutError
        s = z3.Solver() if quantified else z3.SolverFor("QF_BV")
        s.set("rlimit", self.units)
        return s

    def check(self, s: z3.Solver) -> z3.CheckSatResult:
        """``s.check()``, its resource use taken from the budget."""
        answer = s.check()
        count = _resource_count(s)
        self.units -= max(count - (self.last or 0), 1)
        self.last = count
        return answer


def _resource_count(s: z3.Solver) -> int:
    """Z3's ``rlimit count`` as a solver's statistics report it (0 when absent)."""
    stats = s.statistics()
    return next((int(stats.get_key_value(k)) for k in stats.keys() if k == "rlimit count"), 0)


def prove_equivariance(inst: Instance, gens: Sequence[tuple[str, Sequence[int]]],
                       invariants: Sequence[str] | None = None, *, seconds: float = DEFAULT_SECONDS,
                       free: Sequence[str] = ()) -> Equivariance:
    """Try to prove that the renamings ``gens`` (domain, old index -> new index) commute with ``inst``.

    ``gens`` should generate the group of each domain (see the module
    docstring); the domains are reported in the order they first appear.
    ``free`` parameters stay symbolic, so a proof holds for all their values.

    Never raises for a spec it cannot encode or a proof it cannot finish:
    the result then says why it is not proved.  Ctrl-C and the time limit
    of a check (``KeyboardInterrupt``) still propagate.
    """
    start = time.perf_counter()
    doms = tuple(dict.fromkeys(d for d, _ in gens))

    def done(reason: str = "", actions: int = 0) -> Equivariance:
        return Equivariance(not reason, doms, actions, len(gens), time.perf_counter() - start, reason)

    for d, perm in gens:
        if Permutation.of(inst, {d: perm}).apply(inst.init_state) != inst.init_state:
            return done(f"the initial state is not fixed by the renaming {shown(inst, d, perm)} of {d}")
    try:
        sym = SymbolicSpec(inst, tuple(free), symmetry=False, width=WIDTH if free else PROOF_WIDTH)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - anything the encoding cannot do means "not proved", never a pass
        from ownership.core.limits import stop_in

        stop = stop_in(exc)
        if stop is not None:
            raise stop from None
        return done(f"the spec has no Z3 encoding: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    names = list(inst.spec.invariants) if invariants is None else [n for n in invariants if n in inst.spec.invariants]
    deadline = _Deadline(seconds)
    try:
        # Facts proved of every reachable state (the vocabulary's bookkeeping: a page's slot is
        # unique, its free count 0 or 1) rule out unreachable states on which an encoding that
        # walks pages in index order would break ties by index.
        lemmas = proven_lemmas(sym, _LemmaOptions(max(0.001, deadline.end - time.perf_counter())))
        for d, perm in gens:
            reason = _check_generator(sym, d, perm, names, deadline, lemmas)
            if reason:
                return done(reason, len(sym.actions))
    except TimeoutError:
        return done("the proof ran out of its budget of Z3 resource units", len(sym.actions))
    except (WidthError, SymbolicError) as exc:
        return done(f"the encoding failed: {exc}", len(sym.actions))
    return done("", len(sym.actions))


def _check_generator(sym: SymbolicSpec, domain: str, perm: Sequence[int], names: Sequence[str],
                     deadline: _Deadline, lemmas: Sequence[z3.BoolRef]) -> str:
    """An empty string if ``perm`` of ``domain`` commutes with every action and invariant, else why not."""
    inst = sym.inst
    what = f"under the renaming {shown(inst, domain, perm)} of {domain}"
    px = _renamed_cells(sym, domain, perm)
    to_px = list(zip(sym.cells, px, strict=True))
    types = [*sym.type_constraints(sym.cells), *_int_bounds(sym), *lemmas]
    # Cells the renaming moves or renames: what reads or writes none of them commutes with it
    # trivially (an action whose arguments it also leaves alone), so no query is needed.
    touched = {i for i, (x, y) in enumerate(to_px) if not x.eq(y)}
    cell_of = {c.get_id(): i for i, c in enumerate(sym.cells)}
    for name in names:
        inv = sym.invariant_formula(name)
        ovf = [o for p in sym.invariants[name] for o in p.overflows]
        if not _cells_read([inv, *ovf], cell_of) & touched:
            continue
        # A fresh solver per query: Z3's incremental mode skips the preprocessing that makes these fast.
        s = deadline.solver(False)
        s.add(*types, inv != substitute(inv, to_px))
        for o in ovf:
            s.add(z3.Not(o), z3.Not(substitute(o, to_px)))
        answer = deadline.check(s)
        if answer != z3.unsat:
            return _why(answer, f"invariant {name} may differ at a state and its image {what}")
    by_key = {(ap.action, ap.arg_values): ap for ap in sym.actions}
    spec = inst.spec
    ys = [z3.Const(f"eqv!y!{i}", s) for i, s in enumerate(sym.sorts)]
    pys = [substitute(t, list(zip(sym.cells, ys, strict=True))) for t in _renamed_cells(sym, domain, perm)]
    for ap in sym.actions:
        act = spec.actions[ap.action]
        args = tuple(perm[a] if isinstance(dom, Domain) and dom.name == domain else a
                     for dom, a in zip(act.arg_domains, ap.arg_values, strict=True))
        image = by_key[(ap.action, args)]
        if image is ap and not _footprint(sym, ap, cell_of) & touched:
            continue
        flag_names = sorted({n for p in (*ap.paths, *image.paths) for n, _ in p.flags})
        flags = [(n, z3.Bool(f"eqv!flag!{n}")) for n in flag_names]
        here = _step(sym, ap, ys, flags)
        # The image's step from pi(x) to pi(y), its fresh terms renamed apart from this step's.
        aux = {a.get_id(): a for p in image.paths for a in p.aux}
        fresh = [(a, z3.Const(f"eqv!aux!{k}", a.sort())) for k, a in enumerate(aux.values())]
        there = substitute(substitute(_step(sym, image, pys, flags), fresh), to_px)
        bound = [b for _, b in fresh]
        s = deadline.solver(bool(bound))
        s.add(*types, here, z3.ForAll(bound, z3.Not(there)) if bound else z3.Not(there))
        answer = deadline.check(s)
        if answer != z3.unsat:
            label = f"{ap.action}({', '.join(_arg(inst, d, a) for d, a in zip(act.arg_domains, ap.arg_values, strict=True))})"
            return _why(answer, f"action {label} may step where its image {what} cannot")
    return ""


def _footprint(sym: SymbolicSpec, ap: ActionPaths, cell_of: dict[int, int]) -> set[int]:
    """The cells an action instance's paths read or write."""
    terms: list[z3.ExprRef] = []
    cells: set[int] = set()
    for p in ap.paths:
        terms += [*p.pc, *p.constraints, *p.overflows, *(c for _, c in p.flags)]
        terms += [sym.value_term(v, i) for i, v in p.writes.items()]
        cells.update(p.writes)
    return cells | _cells_read(terms, cell_of)


def _arg(inst: Instance, dom: object, a: object) -> str:
    if isinstance(dom, Domain) and isinstance(a, int):
        return str(inst.names[dom.name][a])
    return str(a)


def _why(answer: z3.CheckSatResult, what: str) -> str:
    if answer == z3.sat:
        return f"Z3 found a state, perhaps unreachable, where {what}"
    return f"Z3 could not decide whether {what}"

