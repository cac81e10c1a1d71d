"""The explicitly enumerated reachable set, tried as the inductive invariant and checked by Z3.

Breadth-first search (concrete semantics) finds every reachable state; they
become a decision diagram, and Z3 checks against the symbolic transition
relation that the set is closed under every step and contains no violation
and no overflow.  The search only proposes: a set that is incomplete, or a
symbolic encoding that disagrees with the concrete code, fails the closure
check and the proof moves on to Spacer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import z3

from ownership.core.limits import raise_if_canceled
from ownership.core.result import StopReason
from ownership.engines import diagram as diagrams
from ownership.engines.prove.outcome import Kind, Outcome, stoppable
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.symbolic.encoding import SymbolicSpec
from ownership.symbolic.extract import first_failing
from ownership.symbolic.solver import qf_bv, where
from ownership.symbolic.terms import WidthError, fits
from ownership.symbolic.unroll import Unroller


def reachable_certificate(sym: SymbolicSpec, inst: Instance, options: BmcOptions, invariants: Sequence[str],
                          overflow_points: z3.BoolRef,
                          report: Callable[[int, int, int, int], None] | None = None) -> Outcome:
    """PROVED (the set is an inductive invariant), REFUTED (a reachable state violates ``violated``;
    no trace), UNKNOWN (not tried, or not a proof) or STOPPED.

    Raises ``WidthError`` when a reachable value or step does not fit the
    encoding's integers (encode again, wider).
    """
    return stoppable(lambda: _certificate(sym, inst, options, list(invariants), overflow_points, report))


def _certificate(sym: SymbolicSpec, inst: Instance, options: BmcOptions, invariants: list[str],
                 overflow_points: z3.BoolRef, report: Callable[[int, int, int, int], None] | None) -> Outcome:
    ints = sorted(sym.int_cells)

    def too_wide(st: State) -> list[int]:
        return [st[i] for i in ints if isinstance(st[i], int) and not fits(st[i], sym.width)]

    reach = diagrams.reachable_states(inst, options.reach_states, lambda st: not too_wide(st), report)
    if reach.unfit is not None:
        # A value the concrete code reaches does not fit: no proof at this width can hold.
        raise WidthError(f"a reachable state holds {too_wide(reach.unfit)[0]}")
    if not reach.complete:
        return Outcome(Kind.UNKNOWN, f"the explicit reachable set was not tried: it has more than "
                       f"{options.reach_states:,} states (raise --reach-states)")
    diagram = diagrams.build_diagram(reach.states)
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
    constraints = where(sym, options)
    size = (f"{len(reach.states):,} states, every one within {reach.depth} steps of the initial state, "
            f"stored as a decision diagram of {diagram.size:,} nodes")

    def check(*formulas: z3.BoolRef) -> tuple[Any, z3.ModelRef | None]:
        s = qf_bv(options.solver_timeout)
        s.add(*constraints, *un.types(0), *formulas)
        answer = s.check()
        if answer == z3.unknown:
            raise_if_canceled(s)
        return answer, (s.model() if answer == z3.sat else None)

    answer, model = check(un.at(inside, 0), z3.Or(*[z3.Not(un.invariant(n, 0)) for n in invariants],
                                                  un.event_from(invariants, 0)))
    if answer == z3.sat and model is not None:
        bad = next((n for n in invariants if z3.is_true(model.eval(un.event_from([n], 0), model_completion=True))),
                   None) or first_failing(un, model, invariants, 0)
        return Outcome(Kind.REFUTED, f"explicit search found {size}; Z3 found one that violates {bad}", violated=bad)
    if answer == z3.unknown:
        return Outcome(Kind.UNKNOWN, f"the explicit reachable set ({size}) was inconclusive: z3 answered "
                       "unknown checking the invariants on it")
    answer, _ = check(un.at(inside, 0), un.overflow(0))
    if answer == z3.sat:
        raise WidthError("a step from a reachable state overflows them")
    closed, _ = check(un.at(inside, 0), *un.transition(0), z3.Not(un.at(inside, 1)))
    if closed != z3.unsat or answer != z3.unsat:
        why = ("z3 answered unknown" if z3.unknown in (closed, answer) else
               "a step of the symbolic transition relation leaves it, so the symbolic encoding allows a step "
               "the concrete code does not take (please report this)")
        return Outcome(Kind.UNKNOWN, f"the explicit reachable set ({size}) is not a proof: {why}")
    return Outcome(Kind.PROVED, (
        f"PROVED with the explicit reachable set as the inductive invariant: breadth-first search found {size}; "
        "Z3 checked against the symbolic transition relation that the set contains no violation, that no step "
        "from it overflows and that every step from it stays inside it, so the invariants hold for executions "
        "of any length"), reach.depth, StopReason.INVARIANT_FOUND, states=len(reach.states),
        transitions=reach.transitions, actions=reach.actions)
