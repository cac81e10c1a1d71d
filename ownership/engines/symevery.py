"""The symmetry promise checked on every state a reduced search expands.

:class:`EveryState` wraps the explorer's expansion: each generator of each
reduced domain (a transposition and a cycle, :func:`~ownership.engines.symcheck.generators`)
is applied to the state being expanded, and its successors up to symmetry
and its invariants are compared with the state's.  Past a size at which a
proof costs less, Z3 is asked once (:func:`~ownership.engines.symcheck.prove_symmetry`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ownership.engines.symcheck import (
    MAX_OUTCOMES,
    _check_perm,
    _fix,
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
                 proof_after: int | None = PROOF_AFTER, proof_seconds: float | None = None,
                 expands_violations: bool = False) -> None:
        self.inst = inst
        self.expands_violations = expands_violations
        """Whether the search expands states that violate an invariant (then ``s`` and ``g(s)`` are compared)."""
        self.key = key
        self.domains = tuple(domains)
        self.invariants = list(invariants)
        self.first_violation = first_violation
        self.inner = expand
        self.gens = generators(inst, self.domains)
        parts, self.coverage = checked_renamings(inst, self.domains)
        self.perms = [_Perm(inst, part) for part in parts]
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
        images: dict[State, Sequence[tuple[ActionInstance, Successor]]] = {}
        for g, moves in zip(self.perms, self.moves_actions, strict=True):
            pst = g(st)
            if pst == st:
                if not moves:
                    continue
                theirs_succs = succs
            elif pst in images:
                theirs_succs = images[pst]  # another renaming with the same image: its expansion once
            else:
                bad = self.first_violation(pst)
                if bad is not None and (not self.expands_violations or bad != self.first_violation(st)):
                    self._explain(g, st)
                theirs_succs = images[pst] = self.inner(pst)
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
        return describe_checks([self.summary()])

    def summary(self) -> dict[str, Any]:
        """What was checked, as picklable data (a worker of a sharded search sends it back)."""
        return {"domains": self.domains, "coverage": self.coverage, "states": self.states, "resumed": self.resumed,
                "proof": None if self.proof is None else self.proof.describe(),
                "proved": bool(self.proof is not None and self.proof.proved)}


def describe_checks(summaries: Sequence[dict[str, Any]]) -> str:
    """The note of one or several checks (:meth:`EveryState.summary`; one per worker of a sharded search)."""
    first = summaries[0]
    states = sum(x["states"] for x in summaries)
    resumed = sum(x["resumed"] for x in summaries)
    by = f" (by {len(summaries)} workers, each on the states it owns)" if len(summaries) > 1 else ""
    proved = next((x for x in summaries if x["proved"]), None)
    if proved is not None:
        again = f"; {resumed:,} later states with integers beyond its range checked one by one" if resumed else ""
        return f"{proved['proof']}, after checking the first {states - resumed:,} expanded states{by}{again}"
    tried = f"; {first['proof']}" if first["proof"] is not None else ""
    return (f"symmetry of {', '.join(first['domains'])} checked on every one of {states:,} expanded states{by} "
            f"({first['coverage']}){tried}")


FULL_GROUP = 24
"""Renamings of all the reduced domains at once up to which every one of them is applied to every expanded
state (3 requests: 6; 4 requests: 24; 3 requests and 2 pages: 12).  Applying every renaming at every state
the search keeps is what makes the reduction sound: every reachable state is a renaming of one of them."""


FULL_DOMAIN = 6
"""Renamings of one domain up to which all of them are applied when the domains together have too many
(3 elements): each costs an expansion per state, and 4 elements would make it 23."""


def checked_renamings(inst: Instance, domains: Sequence[str]) -> tuple[list[list[tuple[str, list[int]]]], str]:
    """The renamings the check applies to each expanded state, and the words that say what that covers.

    Every renaming of the reduced domains together when there are at most
    :data:`FULL_GROUP` (sound); otherwise every renaming of each domain with
    at most 3 elements on its own, and a transposition and a cycle of each
    larger one (renamings that move several domains at once are not applied).
    """
    identity = {d: list(range(inst.sizes[d])) for d in domains}
    total = 1
    for d in domains:
        total *= math.factorial(inst.sizes[d])
    if total <= FULL_GROUP:
        per_domain = [[(d, list(p)) for p in itertools.permutations(range(inst.sizes[d]))] for d in domains]
        every = [[(d, p) for d, p in combo if p != identity[d]] for combo in itertools.product(*per_domain)]
        return [c for c in every if c], (f"every one of its {total - 1} renamings applied to each state the "
                                         "search expanded: every reachable state is one of those renamed")
    out: list[list[tuple[str, list[int]]]] = []
    small, large = [], []
    for d in domains:
        n = inst.sizes[d]
        if math.factorial(n) <= FULL_DOMAIN:
            small.append(d)
            out += [[(d, list(p))] for p in itertools.permutations(range(n)) if list(p) != identity[d]]
        else:
            large.append(d)
            out += [[(d, p)] for _, p in generators(inst, [d])]
    words = []
    if small:
        words.append(f"every renaming of {', '.join(small)} on its own")
    if large:
        words.append(f"a transposition and a cycle of {', '.join(large)}")
    return out, (f"{' and '.join(words)}, applied to each state the search expanded; the {total - 1:,} renamings "
                 "of all the domains together are too many to apply, so an order dependence that only a "
                 "renaming of several domains at once shows can be missed")


FALLBACK_STATES = 20_000
"""Reduced states a symbolic engine's fallback search may take to check the symmetry promise on every reachable
state at the instance's parameter values, when Z3 could not prove it (past it, no reduction)."""


def check_reachable(inst: Instance, domains: Sequence[str], cap: int = FALLBACK_STATES) -> str | None:
    """Check the symmetry promise on every reachable state of ``inst`` by a reduced search, if it has at most ``cap``.

    For bmc, prove and ``--free`` when Z3 does not prove the symmetry: the
    promise the engines need is about reachable states, and a small instance
    can have them all expanded and checked (as explore does).  Returns the
    note when the search covered every reachable state, ``None`` when it did
    not (too large, or spec code that raised past a violation: the engine then
    runs without reduction).  A mismatch is OWN061, as in explore.
    """
    from ownership.core.result import StopReason
    from ownership.engines.search import BreadthFirst, Limits, Visitor
    from ownership.engines.symmetry import make_canonicalizer

    names = list(inst.spec.invariants)

    def first_violation(st: State) -> str | None:
        # Every invariant's value, not the first violated one: the search goes on past violations.
        values = tuple(inst.holds(st, n) for n in names)
        return None if all(values) else repr(values)

    search = BreadthFirst(inst, symmetry=True, limits=Limits(max_states=cap))
    every = EveryState(inst, make_canonicalizer(inst, search.plan, exact=True), domains, names, first_violation,
                       search.expand, proof_after=None, expands_violations=True)
    search.expand = every
    try:
        outcome = search.run(Visitor())
    except OwnershipError as exc:
        if exc.code in (Code.SYMMETRY_MISMATCH, Code.SYMMETRY_BROKEN):
            raise
        return None  # past a violation the spec may raise; the engine will find the violation unreduced
    if outcome.stop.reason is not StopReason.EXHAUSTED:
        return None
    return f"{every.describe()}, which were all the reachable states at the instance's parameter values"
