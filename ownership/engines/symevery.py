"""The symmetry promise checked on every state a reduced search expands.

:class:`EveryState` wraps the explorer's expansion: each generator of each
reduced domain (a transposition and a cycle, :func:`~ownership.engines.symcheck.generators`)
is applied to the state being expanded, and its successors up to symmetry
and its invariants are compared with the state's.  Past a size at which a
proof costs less, Z3 is asked once (:func:`~ownership.engines.symcheck.prove_symmetry`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ownership.engines.symcheck import (
    MAX_OUTCOMES,
    _check_perm,
    _fix,
    _generator_words,
    _Perm,
    generators,
    prove_symmetry,
)
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance, Successor

if TYPE_CHECKING:
    from ownership.symbolic.equivariance import Equivariance

PROOF_AFTER = 20_000
"""Expanded states after which a reduced search asks Z3 to prove the symmetry once (below it the per-state
check costs less than a proof; past it, a proof that holds ends the per-state checking)."""


class EveryState:
    """A reduced search's expansion, with the symmetry promise checked on every state it expands.

    Each generator ``g`` of each reduced domain is applied to the state the
    search expands (the stored representative of its orbit): every checked
    invariant must hold at ``g(s)`` as it does at ``s``, and for every action
    instance ``a`` the orbits (canonical keys) of the successors of ``g(a)``
    at ``g(s)`` must be those of ``a`` at ``s``, with the same events marked
    as violating.  That is what the reduced search relies on at the states it
    expands; it does not apply every renaming to every member of an orbit.
    A mismatch is OWN061 located at the action or invariant, named by the
    exact comparison of :func:`check_symmetry`.

    After :data:`PROOF_AFTER` states (a search large enough for the check to
    cost more than a proof) Z3 is asked once, with ``proof_seconds``, to prove
    the symmetry for every state (:func:`prove_symmetry`); if it does, the
    per-state checking stops.
    """

    def __init__(self, inst: Instance, key: Callable[[State], object], domains: Sequence[str],
                 invariants: Sequence[str], first_violation: Callable[[State], str | None],
                 expand: Callable[[State], Sequence[tuple[ActionInstance, Successor]]],
                 proof_after: int | None = PROOF_AFTER, proof_seconds: float | None = None) -> None:
        self.inst = inst
        self.key = key
        self.domains = tuple(domains)
        self.invariants = list(invariants)
        self.first_violation = first_violation
        self.inner = expand
        self.gens = generators(inst, self.domains)
        self.perms = [_Perm(inst, [(d, p)]) for d, p in self.gens]
        # Generators that rename no action argument leave every action instance in place.
        self.moves_actions = [any(m is not ai for m, ai in zip(g.mapped, inst.action_instances, strict=True))
                              for g in self.perms]
        self.states = 0
        self.proof_after = proof_after
        self.proof_seconds = proof_seconds
        self.proof: Equivariance | None = None
        self.checking = True
        self.resumed = 0
        """States checked again after a proof, because their integers left the range the proof covers."""
        from ownership.lang.types import BoolType, Enum, Ref, RefSet

        self.int_cells = [lay.offset + k for v in inst.spec.vars.values()
                          if not isinstance(v.type, (BoolType, Enum, Ref, RefSet))
                          for lay in [inst.layouts[v.name]] for k in range(lay.length)]

    def __call__(self, st: State) -> Sequence[tuple[ActionInstance, Successor]]:
        succs = self.inner(st)
        if not self.checking:
            if not self._beyond_proof(st):
                return succs
            self.resumed += 1
        self.states += 1
        if self.states == self.proof_after:
            self.proof = prove_symmetry(self.inst, self.domains, self.invariants, self.proof_seconds)
            self.checking = not self.proof.proved
        mine: dict[int, set[tuple[object, frozenset[str]]]] | None = None
        for g, moves in zip(self.perms, self.moves_actions, strict=True):
            pst = g(st)
            if pst == st:
                if not moves:
                    continue
                theirs_succs = succs
            else:
                bad = self.first_violation(pst)
                if bad is not None:
                    self._explain(g, st)
                theirs_succs = self.inner(pst)
            if not succs and not theirs_succs and self.inst.is_terminal(st) != self.inst.is_terminal(pst):
                self._explain(g, st, "the terminal predicate has different values")
            if mine is None:
                mine = self._orbits(succs)
            theirs = self._orbits(theirs_succs)
            for ai in self.inst.action_instances:
                if mine.get(ai.index, set()) != theirs.get(g.mapped[ai.index].index, set()):
                    self._explain(g, st)
        return succs

    def _orbits(self, succs: Sequence[tuple[ActionInstance, Successor]]) -> dict[int, set[tuple[object, frozenset[str]]]]:
        out: dict[int, set[tuple[object, frozenset[str]]]] = {}
        key = self.key
        for ai, sc in succs:
            out.setdefault(ai.index, set()).add((key(sc.state), frozenset(sc.violations or ())))
        return out

    def _beyond_proof(self, st: State) -> bool:
        """Whether ``st`` holds an integer outside the range the Z3 proof covers."""
        from ownership.symbolic.equivariance import INT_BITS

        bound = 1 << INT_BITS
        return any(not -bound < st[i] < bound for i in self.int_cells)

    def _explain(self, g: _Perm, st: State, what: str = "have different successors (up to symmetry), or mark "
                 "different events as violating") -> None:
        """Raise OWN061 for a mismatch at ``st`` under ``g``, located by the exact comparison."""
        inst = self.inst
        with inst.mode(choice_reduction=()):
            base: list[list[State] | None] = []
            for ai in inst.action_instances:
                got = inst.successors_capped(st, ai, MAX_OUTCOMES)
                base.append(None if got is None else [sc.state for sc in got])
            _check_perm(inst, g, st, base, self.invariants)
        raise OwnershipError(
            Code.SYMMETRY_MISMATCH,
            f"the spec depends on which element of symmetric domain {g.dom} is which: a reachable state and its "
            f"image under the renaming {g.shown} of {g.dom} {what}; {_fix(g.dom)}",
            inst.spec.file, inst.spec.line)

    def describe(self) -> str:
        """The note a result carries: what was checked, honestly."""
        if self.proof is not None and self.proof.proved:
            again = (f"; {self.resumed:,} later states with integers beyond its range checked one by one"
                     if self.resumed else "")
            return (f"{self.proof.describe()}, after checking the first {self.states - self.resumed:,} "
                    f"expanded states{again}")
        tried = f"; {self.proof.describe()}" if self.proof is not None else ""
        return (f"symmetry of {', '.join(self.domains)} checked on every one of {self.states:,} expanded states "
                f"({_generator_words(self.gens)}, applied to each state the search expanded; other members of "
                f"its orbit are not expanded){tried}")
