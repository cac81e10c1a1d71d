"""What a violation under ``--free`` says: the violating parameter region, described and replayed.

:func:`report` picks the parameter values (optimised for ``--minimize`` /
``--maximize``) and the shallowest violating state admitting them, and
replays that path through the concrete semantics; :func:`explain_region`
describes the region with the spec's own derived formulas when one fits
exactly.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import z3

from ownership.core.replay import build_trace
from ownership.core.result import CheckResult, Stats, StopReason, Verdict
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.symbolic.encoding import parameter_constraints
from ownership.symbolic.paths import PathExplorer
from ownership.symbolic.terms import WIDTH, Sym

if TYPE_CHECKING:
    from ownership.engines.paramexplore.engine import ParamOptions
    from ownership.engines.paramexplore.forking import Solver
    from ownership.engines.paramexplore.space import Node


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


def report(inst: Instance, options: ParamOptions, violations: list[tuple[int, str, z3.BoolRef]],
            nodes: list[Node], instances: list[tuple[Any, tuple[Any, ...]]], solver: Solver,
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
