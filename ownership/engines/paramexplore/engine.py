"""The ``check --free`` explorer's entry: its options, the cases by domain size, and one result from them.

:func:`explore_params` checks the spec concretely first, splits the search
into one case per feasible domain size where a free parameter sets one, runs
:func:`~.space.search` on each and combines their results.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import z3

from ownership.core.result import ActionCoverage, CheckResult, Stats, Verdict
from ownership.engines.bmcprefix import audit_prefix
from ownership.engines.coverage import with_coverage
from ownership.engines.paramexplore.forking import MAX_VALUES, Forker, NoFork, Solver, View
from ownership.engines.paramexplore.report import explain_region
from ownership.engines.paramexplore.space import search
from ownership.engines.symcheck import precheck
from ownership.engines.symmetry import plan_symmetry
from ownership.errors import Code, OwnershipError
from ownership.lang.audit import data_changed
from ownership.lang.declarations import Params
from ownership.lang.instance import Instance
from ownership.lang.invariants import select_invariants
from ownership.symbolic.encoding import parameter_constraints
from ownership.symbolic.terms import WIDTH, Sym, SymbolicError

if TYPE_CHECKING:
    from ownership.session.settings import Settings


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
        if not settings.option("free"):
            raise OwnershipError(Code.BAD_OPTION, "--minimize/--maximize need --free for that parameter")
        options = cls(free=tuple(settings.option("free")), where=tuple(settings.option("where")), minimize=settings.option("minimize"),
                      maximize=settings.option("maximize"), max_depth=settings.max_depth, max_states=settings.max_states,
                      max_seconds=settings.max_seconds, symmetry=settings.symmetry, invariants=settings.invariants)
        options.validate()
        return options

    def validate(self) -> None:
        """Refuse limits out of range and an optimised parameter that is not free."""
        from ownership import inputs

        inputs.check_search_limits(self.max_depth, self.max_states, self.max_seconds)
        inputs.check_optimised(self.free, self.minimize, self.maximize)


def explore_params(inst: Instance, options: ParamOptions, progress: Any = None) -> CheckResult:
    """Breadth-first search over interleavings with the free parameters left symbolic (see :func:`_explore_params`).

    Its search runs spec code over parameter terms and keeps no concrete
    expansions to compare, so the determinism audit runs on a concrete
    breadth-first prefix at the parameters' values first, and the module-level
    data must be unchanged by the search (OWN066 otherwise).
    """
    audited = audit_prefix(inst)
    before = inst.module_data().snapshot()
    result = _explore_params(inst, options, progress)
    changed = data_changed(inst, before, "the free-parameter search")
    if changed is not None:
        raise changed
    return dataclasses.replace(result, notes=(*result.notes, audited))


def _explore_params(inst: Instance, options: ParamOptions, progress: Any = None) -> CheckResult:
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
    # and reduce by symmetry only where Z3 proved it for every state and every value of the free parameters.
    checked, reduce = precheck(inst, options.symmetry, options.free)
    if not reduce:
        options = dataclasses.replace(options, symmetry=False)
    terms = {n: z3.BitVec(f"param!{n}", WIDTH) for n in options.free}
    base = parameter_constraints(inst, terms, options.where)
    solver = Solver(base)
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
    inst: Instance, terms: dict[str, z3.BitVecRef], solver: Solver
) -> list[tuple[dict[str, int], z3.BoolRef, dict[str, int]]] | None:
    """Feasible domain sizes when free parameters set them, or ``None`` if none do."""
    env: dict[str, Any] = dict(inst.param_values)
    env.update({n: Sym(t, NoFork()) for n, t in terms.items()})
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


def _explore_case(inst: Instance, options: ParamOptions, terms: dict[str, z3.BitVecRef], base: list[z3.BoolRef],
                  progress: Any, start: float) -> tuple[CheckResult, z3.BoolRef | None]:
    solver = Solver(base)
    forker = Forker(solver)
    values: dict[str, Any] = dict(inst.param_values)
    values.update({n: Sym(t, forker) for n, t in terms.items()})
    params = Params(values)
    # The search merges choices among identical elements of the domains it reduces by sorting rows
    # (as BreadthFirst does by default); the view is told so once, when it is built.
    reduce = plan_symmetry(inst).sorted if options.symmetry else ()
    view = View(inst, params, forker, choice_reduction=reduce)
    checked = [inv.name for inv in select_invariants(inst, options.invariants)]
    return search(inst, options, view, forker, solver, terms, checked, start, progress)
