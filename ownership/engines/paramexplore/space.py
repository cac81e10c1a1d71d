"""The parametric state space searched breadth-first, and the visitor that collects its violations.

A state is ``(cells, parameter condition)``.  :func:`search` runs the
explorer's :class:`~ownership.engines.search.BreadthFirst` over it and turns
the outcome into a result: PROVED for every parameter value when exhausted,
else the violating regions handed to :func:`~.report.report`.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import z3

from ownership.core.result import CheckResult, Measure, Stats, StopReason, Verdict
from ownership.engines.paramexplore.forking import Forker, NoFork, Solver, View
from ownership.engines.paramexplore.report import report
from ownership.engines.search import BreadthFirst, Control, Limits, Stop, Visitor
from ownership.engines.symmetry import make_canonicalizer, plan_symmetry
from ownership.errors import Code, OwnershipError, location_in
from ownership.lang.declarations import Params, Values
from ownership.lang.guard import Disabled, is_truth_value
from ownership.lang.instance import Instance, State
from ownership.lang.invariants import not_bool_error, step_member_error
from ownership.lang.successors import ActionInstance, Successor
from ownership.symbolic.terms import COVERAGE_NOTE, Sym, SymbolicError

if TYPE_CHECKING:
    from ownership.engines.paramexplore.engine import ParamOptions


@dataclass
class Node:
    """A node of the search tree: its parent, the action instance that reached it, the picks, its parameter condition."""

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

    def __init__(self, inst: Instance, view: View, forker: Forker, solver: Solver, checked: list[str],
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
            for enabled, result, _picks, _cells, path_pc, flags in outcomes:
                if flags:  # a helper of the invariant flagged: no step carries it (OWN064)
                    raise step_member_error(inv, "calls s.flag(...) or s.emit(..., violates=...)", inv.file, inv.line)
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


def search(inst: Instance, options: ParamOptions, view: View, forker: Forker, solver: Solver,
            terms: dict[str, z3.BitVecRef], checked: list[str], start: float,
            progress: Any) -> tuple[CheckResult, z3.BoolRef | None]:
    spec = inst.spec
    plan = plan_symmetry(inst)
    space = _Space(inst, view, forker, solver, checked, make_canonicalizer(inst, plan) if options.symmetry else None)
    # The time limit counts from the start of the whole run, checked after every state (each may take seconds).
    left = None if options.max_seconds is None else options.max_seconds - (time.perf_counter() - start)
    limits = Limits(max_depth=options.max_depth, max_states=options.max_states, max_seconds=left, check_every=1)
    search = BreadthFirst(inst, symmetry=options.symmetry, limits=limits, progress=progress, key=space.key,
                          reduce=sorted(view.choice_reduction), expand=space.expand, init=(tuple(inst.init_state), ()))
    space.search = search
    # The tally counts by position in the explorer's own action instances (value arguments may be terms).
    positions = {name: k for k, name in enumerate(spec.actions)}
    search.tally.act_of = [positions[act.name] for act, _args in space.instances]
    outcome = search.run(space)
    tree, violations = search.tree, space.violations
    nodes = [Node(tree.parent[i], tree.action[i], tree.picks.get(i, ()), space.pcs[i]) for i in range(len(tree))]
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
    found = report(inst, options, violations, nodes, instances, solver, terms, stats, shown, checked, opts, notes)
    return dataclasses.replace(found, actions=actions), region


def _call(fn: Callable[..., Any], view: View, args: Sequence[Any]) -> Callable[[], Any]:
    def call() -> Any:
        return fn(view, *args)

    return call


def _action_instances(inst: Instance, view: View) -> list[tuple[Any, tuple[Any, ...]]]:
    out: list[tuple[Any, tuple[Any, ...]]] = []
    nofork = Params({k: (Sym(v.e, NoFork()) if isinstance(v, Sym) else v) for k, v in vars(view.params).items()})
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
