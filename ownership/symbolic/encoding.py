"""A spec's actions and invariants as sets of symbolic paths over placeholder cells.

:class:`SymbolicSpec` runs every action instance and invariant once per path
on a :class:`~ownership.symbolic.view.SymView`; the result is the material
of the transition relation (:mod:`ownership.symbolic.unroll`).  The
ownership vocabulary encodes each of its operations directly (fresh choice
terms and ``If`` terms, see :mod:`ownership.vocab.encodings`) instead of
forking page by page.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from ownership.errors import Code, OwnershipError, location_in
from ownership.lang.declarations import Params, Values
from ownership.lang.guard import is_truth_value
from ownership.lang.instance import Instance
from ownership.lang.invariants import check_invariant_code, not_bool_error, step_member_error
from ownership.lang.types import BoolType, Enum, Ref, RefSet
from ownership.symbolic.merge import rewrite
from ownership.symbolic.paths import Path, PathExplorer, PathExplosionError
from ownership.symbolic.terms import WIDTH, Sym, SymbolicError, WidthError, fits, sort_of, to_z3
from ownership.symbolic.view import SymParams, SymView


@dataclass
class ActionPaths:
    """The paths of one action instance."""

    action: str
    arg_values: tuple[Any, ...]  # ints or z3 terms (Values domains over free parameters)
    paths: list[Path]
    overflows: list[z3.BoolRef] = field(default_factory=list)
    """When some path of the action, enabled or not, leaves the integer range."""


@dataclass
class SymbolicSpec:
    """A spec's actions and invariants as sets of symbolic paths over placeholder cells."""

    inst: Instance
    free: tuple[str, ...]
    symmetry: bool = True
    width: int = WIDTH
    """Bits of every integer cell and intermediate (see :data:`WIDTH` and :func:`initial_width`)."""
    sorted_domains: Collection[str] = ()
    """The symmetric domains the symmetry plan reduces by sorting rows (pages): with ``symmetry``,
    the alloc encoding takes their interchangeable elements in index order."""
    params: Params = field(init=False)
    reduced: set[str] = field(init=False)
    sorts: list[z3.SortRef] = field(init=False)
    cells: list[z3.ExprRef] = field(init=False)
    explorer: PathExplorer = field(init=False)
    actions: list[ActionPaths] = field(init=False)
    invariants: dict[str, list[Path]] = field(init=False)
    param_terms: dict[str, z3.ArithRef] = field(init=False)
    step_templates: dict[bool, z3.BoolRef] = field(init=False, default_factory=dict)
    """The step relation over placeholders, with and without stuttering, built once per encoding
    (see ``Unroller``; prove builds a dozen unrollers)."""

    def __post_init__(self) -> None:
        inst = self.inst
        spec = inst.spec
        for name in self.free:
            if name not in spec.params:
                raise OwnershipError(Code.UNKNOWN_PARAM, f"--free {name}: spec {spec.name} has no such parameter", spec.file, spec.line)
        if self.free and self.width < WIDTH:
            raise ValueError("free parameters are encoded at full width")
        self.param_terms = {n: z3.BitVec(f"param!{n}", self.width) for n in self.free}
        self.explorer = PathExplorer(self.width)
        values: dict[str, Any] = dict(inst.param_values)
        for n, t in self.param_terms.items():
            values[n] = Sym(t, self.explorer)
        self.params = SymParams(values)
        self._check_sizes_fixed()
        self.sorts = []
        self.int_cells: set[int] = set()
        for v in spec.vars.values():
            lay = inst.layouts[v.name]
            if not isinstance(v.type, (BoolType, RefSet, Enum, Ref)):
                self.int_cells.update(range(lay.offset, lay.offset + lay.length))
            self.sorts.extend([sort_of(v.type, inst.sizes, self.width)] * lay.length)
        self.cells = [z3.Const(f"x!{i}", s) for i, s in enumerate(self.sorts)]
        self.cell_types = self.type_constraints(self.cells)
        self.reduced = set(self.sorted_domains) if self.symmetry else set()
        self._merged: dict[int, Callable[..., Any]] = {}
        self.view = SymView(self)
        self.explorer.view = self.view
        self.explorer.merging = True
        self.actions = []
        for act in spec.actions.values():
            ranges: list[list[Any]] = []
            for d in act.arg_domains:
                if isinstance(d, Values):
                    try:
                        vals = list(d.values(self.params))
                    except SymbolicError as exc:
                        raise self._error(f"values {d.name}", exc, act.file) from None
                    ranges.append(_dedupe(vals))
                else:
                    ranges.append(list(range(inst.sizes[d.name])))
            for args in itertools.product(*ranges):
                call = _bind(self.merged(act.fn), self.view, [Sym(a, self.explorer) if isinstance(a, z3.ExprRef) else a for a in args])
                paths = self._paths(call, f"action {act.name}", act.file)
                # A disabled path's overflow counts too: its guard may sit on a wrapped comparison.
                overflows = [z3.And(o, *p.constraints) for p in paths for o in p.overflows]
                self.actions.append(ActionPaths(act.name, tuple(args), [p for p in paths if p.enabled], overflows))
        self.invariants = {}
        for inv in spec.invariants.values():
            check_invariant_code(inv, spec.vars)  # OWN064: s.flag, s.emit or s.events in the invariant's own code
            self.invariants[inv.name] = self._paths(_bind(self.merged(inv.fn), self.view, []), f"invariant {inv.name}", inv.file)
            for p in self.invariants[inv.name]:
                if p.flags:
                    # A helper the invariant calls flagged a violation: no step carries it, so it would be dropped.
                    raise step_member_error(inv, "calls s.flag(...) or s.emit(..., violates=...)", inv.file, inv.line)
                if p.enabled and not is_truth_value(p.result):
                    raise not_bool_error(inv, p.result)
                if p.writes:
                    # As in the concrete semantics (Instance.check_unchanged): an invariant only reads.
                    raise OwnershipError(
                        Code.SPEC_IMPURE,
                        f"invariant {inv.name} writes the state: invariants must only read it, or a later "
                        "invariant sees a state that is not the one reached",
                        inv.file, inv.line,
                    )

    def merged(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` rewritten so that its ``and``/``or``/``not``/``if`` merge paths (:mod:`ownership.symbolic.merge`)."""
        if id(fn) not in self._merged:
            self._merged[id(fn)] = rewrite(fn)
        return self._merged[id(fn)]

    def _check_sizes_fixed(self) -> None:
        """Domain sizes must not depend on free parameters (the unrolling has fixed width)."""
        spec = self.inst.spec
        probe = PathExplorer()
        env: dict[str, Any] = dict(self.inst.param_values)
        env.update({n: Sym(t, probe) for n, t in self.param_terms.items()})
        params = Params(env)
        for d in spec.domains.values():
            try:
                size = d.size if isinstance(d.size, int) else (env[d.size] if isinstance(d.size, str) else d.size(params))
                depends = isinstance(size, Sym) or bool(probe.trail)
            except (SymbolicError, TypeError):
                depends = True
            if depends:
                raise OwnershipError(
                    Code.BAD_OPTION,
                    f"a free parameter sets the size of domain {d.name}, which must be fixed for the Z3 engines; "
                    "fix it with --param, or use the explorer (check --free) which splits sizes into cases",
                    spec.file,
                    spec.line,
                )

    def _error(self, what: str, exc: Exception, file: str | None) -> OwnershipError:
        from ownership.core.limits import stop_in

        stop = stop_in(exc)
        if stop is not None:  # Ctrl-C, SIGTERM or the time limit inside a Z3 call: not a spec error
            raise stop
        return OwnershipError(
            Code.SPEC_RUNTIME,
            f"{what} cannot run symbolically: {type(exc).__name__}: {exc}",
            file,
            location_in(file, exc) if file else None,
        )

    def _paths(self, fn: Callable[[], Any], what: str, file: str | None) -> list[Path]:
        out: list[Path] = []
        view = self.view
        try:
            for enabled, result in self.explorer.run(fn, view.reset):
                out.append(
                    Path(
                        pc=list(self.explorer.pc),
                        writes=dict(view.writes),
                        aux=list(view.aux),
                        constraints=list(view.constraints),
                        picks=list(view.picks),
                        result=result,
                        enabled=enabled,
                        overflows=list(self.explorer.overflows),
                        flags=list(view.flags),
                    )
                )
        except (OwnershipError, WidthError):
            raise
        except PathExplosionError as exc:
            from ownership.core.limits import stop_in

            stop = stop_in(exc)
            if stop is not None:
                raise stop from None
            where = exc.hottest or (file, None)
            raise OwnershipError(Code.SPEC_RUNTIME, f"{what} cannot run symbolically: {exc}", where[0], where[1]) from None
        except Exception as exc:  # noqa: BLE001 - spec code
            raise self._error(what, exc, file) from None
        return out

    # -- formulas ---------------------------------------------------------------
    def invariant_formula(self, name: str) -> z3.BoolRef:
        """The invariant as one formula over the placeholder cells."""
        return self._formula(self.invariants[name])

    def predicate_formula(self, fn: Callable[..., Any], args: Sequence[Any], what: str, file: str | None,
                          line: int | None) -> z3.BoolRef:
        """A state predicate ``fn(s, *args)`` (a temporal property's function) as one formula over the cells.

        It is held to an invariant's rules: it only reads (OWN067), flags
        nothing (OWN064) and returns a bool (OWN065).
        """
        paths = self._paths(_bind(self.merged(fn), self.view, list(args)), what, file)
        for p in paths:
            if p.writes:
                raise OwnershipError(Code.SPEC_IMPURE, f"{what} writes the state: it must only read it", file, line)
            if p.flags:
                raise OwnershipError(Code.SPEC_INVALID, f"{what} flags a violation: a property only judges a state",
                                     file, line)
            if p.enabled and not is_truth_value(p.result):
                raise OwnershipError(Code.SPEC_NOT_BOOL, f"{what} returned {type(p.result).__name__}, not a bool",
                                     file, line)
        return self._formula(paths)

    def _formula(self, paths: Sequence[Path]) -> z3.BoolRef:
        disj = []
        for p in paths:
            if not p.enabled:
                continue
            r = p.result
            val = to_z3(r, z3.BoolSort()) if isinstance(r, Sym) else z3.BoolVal(bool(r))
            disj.append(z3.And(*p.pc, val) if p.pc else val)
        return z3.simplify(z3.Or(*disj)) if disj else z3.BoolVal(False)

    def flagged_paths(self, names: Sequence[str]) -> list[tuple[int, z3.BoolRef]]:
        """``(path index, condition)`` for each enabled action path that emits an event violating one of ``names``.

        Path indices count the enabled paths of every action in order (the
        numbering of the engines' step selector).  The condition is over the
        placeholder cells and the path's fresh terms.
        """
        out: list[tuple[int, z3.BoolRef]] = []
        j = 0
        for ap in self.actions:
            for p in ap.paths:
                conds = [c for n, c in p.flags if n in names]
                if conds:
                    cond = z3.simplify(z3.And(z3.Or(*conds), *p.pc, *p.constraints))
                    if not z3.is_false(cond):
                        out.append((j, cond))
                j += 1
        return out

    def value_term(self, value: Any, cell: int) -> z3.ExprRef:
        """A cell's value as a term of its sort; ``WidthError`` if an integer does not fit."""
        if cell in self.int_cells and isinstance(value, int) and not fits(value, self.width):
            raise WidthError(f"value {value} does not fit {self.width} bits")
        return to_z3(value, self.sorts[cell])

    def init_terms(self) -> list[z3.ExprRef]:
        """The initial state as terms (``WidthError`` if it does not fit the width)."""
        return [self.value_term(v, i) for i, v in enumerate(self.inst.init_state)]

    def overflow_points(self) -> list[z3.BoolRef]:
        """Each condition under which an action or invariant computes an out-of-range integer.

        Over the placeholder cells and the paths' fresh terms (which the
        engines rename per step, as for the transition relation).
        """
        disj: list[z3.BoolRef] = []
        for ap in self.actions:
            disj.extend(ap.overflows)
        for paths in self.invariants.values():
            for p in paths:
                disj.extend(p.overflows)
        return list({d.get_id(): d for d in disj}.values())

    def type_constraints(self, cells: Sequence[z3.ExprRef]) -> list[z3.BoolRef]:
        """Range constraints every state satisfies (enum members, element references)."""
        out: list[z3.BoolRef] = []
        spec = self.inst.spec
        for v in spec.vars.values():
            lay = self.inst.layouts[v.name]
            for k in range(lay.length):
                c = cells[lay.offset + k]
                if isinstance(v.type, Enum):
                    out.append(z3.And(c >= 0, c < len(v.type.members)))
                elif isinstance(v.type, Ref):
                    lo = -1 if v.type.optional else 0
                    out.append(z3.And(c >= lo, c < self.inst.sizes[v.type.domain]))
        return out


def _bind(fn: Callable[..., Any], view: SymView, args: Sequence[Any]) -> Callable[[], Any]:
    def call() -> Any:
        return fn(view, *args)

    return call


def _dedupe(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    seen: set[Any] = set()
    for v in values:
        if isinstance(v, Sym):
            out.append(v.e)
            continue
        if v not in seen:
            seen.add(v)
            out.append(int(v))
    return out


def parameter_constraints(inst: Instance, terms: dict[str, z3.BitVecRef], where: Sequence[str]) -> list[z3.BoolRef]:
    """Declared ranges of the free parameters (within the full-width encoding, :data:`WIDTH` bits) and ``--where``."""
    out: list[z3.BoolRef] = []
    cap = 1 << (WIDTH - 2)
    for name, t in terms.items():
        p = inst.spec.params[name]
        if p.max is not None and p.max > cap:
            raise OwnershipError(Code.BAD_OPTION, f"--free {name}: its declared maximum {p.max} is beyond the "
                                 f"solver's range (at most {cap}); fix it with --param", inst.spec.file, inst.spec.line)
        out.append(t >= (p.min if p.min is not None else 0))
        out.append(t <= (p.max if p.max is not None else cap))
    env: dict[str, Any] = dict(inst.param_values)
    env.update(terms)
    env.update({"And": z3.And, "Or": z3.Or, "Not": z3.Not})
    for text in where:
        try:
            expr = eval(text, {"__builtins__": {}}, dict(env))  # noqa: S307 - the user's own constraint over parameters
        except Exception as exc:  # noqa: BLE001
            raise OwnershipError(Code.BAD_OPTION, f"--where {text!r}: {type(exc).__name__}: {exc}") from None
        if not isinstance(expr, z3.BoolRef):
            raise OwnershipError(Code.BAD_OPTION, f"--where {text!r} is not a condition on free parameters")
        out.append(expr)
    return out


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

