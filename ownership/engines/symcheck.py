"""An independent check that a spec really is symmetric in the domains it declares symmetric.

Symmetry reduction (in explore, bmc and prove) is sound only if every
permutation ``pi`` of a reduced domain commutes with the spec: the successors
of ``pi(s)`` are the ``pi``-images of the successors of ``s`` (action by
action, with the action's arguments permuted too) and every invariant has
the same value on ``pi(s)`` as on ``s``.  Opaque elements
(:mod:`ownership.lang.elements`) refuse arithmetic and ordering, but a spec
can still depend on element order without either: taking the first free page
of ``s.all(Page)``, or writing the int literal ``1`` into a reference.

This module tests the promise directly on a sample of reachable states (a
small breadth-first search without symmetry, deterministic) under a
transposition and one seeded random permutation per domain.  A mismatch is
``error[OWN061]`` naming the action or invariant, the cell that differs, and
the fix (``ordered=True``).  It is a sampled check: it cannot prove
symmetry, but it catches order dependencies the sample reaches.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ownership.core.result import StopReason
from ownership.engines.search import BreadthFirst, Stop, Visitor
from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Domain
from ownership.lang.instance import Instance, State
from ownership.lang.permutation import Permutation
from ownership.lang.successors import ActionInstance

if TYPE_CHECKING:
    from ownership.symbolic.equivariance import Equivariance

DEFAULT_SAMPLE = 80
"""States sampled by default: enough to reach past the first allocations, cheap next to a search."""

MAX_OUTCOMES = 400
"""Runs of one action in one state beyond which that (state, action) pair is skipped (wide ``s.choose``)."""

BUDGET = 60_000
"""Action runs in all, after which the check stops and reports how many states it covered."""



@dataclass(frozen=True)
class SymmetryCheck:
    """What the check covered: reported in a result's notes."""

    states: int
    domains: tuple[str, ...]
    skipped: int = 0

    def describe(self) -> str:
        text = f"symmetry of {', '.join(self.domains)} checked on {self.states} states"
        if self.skipped:
            text += f" ({self.skipped} action outcomes with more than {MAX_OUTCOMES} choices left out)"
        return text


def symmetric_domains(inst: Instance) -> list[str]:
    """The symmetric domains of ``inst`` with at least two elements (the ones a reduction could merge)."""
    return [d.name for d in inst.spec.domains.values() if d.symmetric and inst.sizes[d.name] >= 2]


def permuter(inst: Instance, domain: str, perm: Sequence[int]) -> Callable[[State], State]:
    """The map ``s -> pi(s)`` for the permutation ``perm`` (old index -> new index) of ``domain``."""
    return Permutation.of(inst, {domain: perm}).apply


def _permuted_instances(inst: Instance, domain: str, perm: Sequence[int]) -> list[ActionInstance]:
    """``pi(ai)`` for every action instance: arguments of ``domain`` mapped through ``perm``."""
    by_key = {(ai.action.name, ai.args): ai for ai in inst.action_instances}
    out = []
    for ai in inst.action_instances:
        args = tuple(
            perm[a] if isinstance(d, Domain) and d.name == domain else a
            for d, a in zip(ai.action.arg_domains, ai.args, strict=True)
        )
        out.append(by_key[(ai.action.name, args)])
    return out


class _Sampler(Visitor):
    """Keeps the first ``limit`` states found and stops there."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.order: list[State] = []

    def on_state(self, node: int, state: State, depth: int) -> Stop | None:
        self.order.append(state)
        return Stop(StopReason.STATE_LIMIT) if len(self.order) >= self.limit else None


def _sample(inst: Instance, limit: int) -> list[State]:
    """Up to ``limit`` reachable states, breadth-first without state merging (deterministic).

    Choices among identical elements are reduced while sampling (it keeps wide
    allocations cheap and every state found is still reachable).
    """
    sampler = _Sampler(limit)
    BreadthFirst(inst, symmetry=False, reduce=symmetric_domains(inst), catch_stops=False).run(sampler)
    return sampler.order


def _fix(domain: str) -> str:
    return (f"if the protocol really depends on which element of {domain} it is, declare the domain ordered "
            f"(`spec.domain(..., ordered=True)` / `own.pool(..., ordered=True)`), which turns symmetry reduction off for it")


def _closest_cell(inst: Instance, want: State, got: Sequence[State]) -> str:
    """The first cell in which ``want`` differs from the nearest state of ``got``."""
    if not got:
        return ""
    best = min(got, key=lambda g: sum(1 for a, b in zip(want, g, strict=True) if a != b))
    diff = inst.diff(best, want)
    return diff[0][0] if diff else ""


def check_symmetry(
    inst: Instance,
    domains: Sequence[str] | None = None,
    *,
    sample: int = DEFAULT_SAMPLE,
    seed: int = 0,
    invariants: Sequence[str] | None = None,
) -> SymmetryCheck:
    """Raise ``OwnershipError(OWN061)`` if a permutation of a symmetric domain does not commute with the spec.

    ``domains`` defaults to every symmetric domain with two or more
    elements; ``invariants`` to every invariant.  Returns what was checked.
    """
    doms = list(symmetric_domains(inst) if domains is None else domains)
    # Unknown names are the search's to report (OWN012); only known ones are checked here.
    inv_names = [n for n in invariants if n in inst.spec.invariants] if invariants is not None else [
        i.name for i in inst.invariants]
    rng = random.Random(seed)
    with inst.mode(recording=False):
        # The sample runs spec code concretely, so it also surfaces OWN060 (arithmetic
        # or ordering on elements) for engines that never run the spec concretely.
        states = _sample(inst, sample)
        # Two checks per state, each permuting every domain at once (a transposition of
        # each, then a seeded random permutation of each); a mismatch is then narrowed
        # down to one domain.  Checking domains one by one would cost 2x per domain.
        transpositions: list[tuple[str, list[int]]] = []
        randoms: list[tuple[str, list[int]]] = []
        for dom in doms:
            n = inst.sizes[dom]
            transposition = [1, 0, *range(2, n)]
            shuffled = list(range(n))
            rng.shuffle(shuffled)
            transpositions.append((dom, transposition))
            randoms.append((dom, shuffled if shuffled not in (transposition, list(range(n))) else transposition))
        checks = [_Perm(inst, transpositions)] if doms else []
        if randoms != transpositions:
            checks.append(_Perm(inst, randoms))
        covered = 0
        skipped = 0
        work = 0
        for st in states:
            if work > BUDGET:
                break
            covered += 1
            # The outcomes of every action in st, computed once for every permutation.
            base: list[list[State] | None] = []
            for ai in inst.action_instances:
                got = inst.successors_capped(st, ai, MAX_OUTCOMES) if checks else []
                base.append(None if got is None else [sc.state for sc in got])
                work += MAX_OUTCOMES if got is None else max(1, len(got))
                skipped += got is None
            for check in checks:
                try:
                    work += _check_perm(inst, check, st, base, inv_names)
                except OwnershipError:
                    # Name the one domain whose renaming breaks the spec, if there is one.
                    for part in check.parts:
                        _check_perm(inst, _Perm(inst, [part]), st, base, inv_names)
                    raise
    return SymmetryCheck(covered, tuple(doms), skipped)


class _Perm:
    """A renaming of one or more domains at once: the state map and the action-instance map."""

    def __init__(self, inst: Instance, parts: list[tuple[str, list[int]]]) -> None:
        self.parts = parts
        # The parts rename different domains, so one permutation renames them all at once.
        self.pi = Permutation.of(inst, dict(parts))
        index = list(range(len(inst.action_instances)))
        for d, p in parts:
            step = _permuted_instances(inst, d, p)
            index = [step[k].index for k in index]
        self.mapped = [inst.action_instances[k] for k in index]
        self.dom = ", ".join(d for d, _ in parts)
        self.shown = " ".join(
            "(" + " ".join(f"{inst.names[d][i]}->{inst.names[d][p[i]]}" for i in range(len(p)) if p[i] != i) + ")"
            for d, p in parts
        )

    def __call__(self, st: State) -> State:
        return self.pi.apply(st)


def _check_perm(inst: Instance, check: _Perm, st: State, base: list[list[State] | None], inv_names: list[str]) -> int:
    """Check one renaming on one state; returns the number of action runs it took."""
    dom, shown, pi, mapped = check.dom, check.shown, check, check.mapped
    pst = pi(st)
    where = f"in a reachable state and its image under the renaming {shown} of {dom}"
    for name in inv_names:
        if inst.holds(st, name) != inst.holds(pst, name):
            inv = inst.spec.invariants[name]
            raise OwnershipError(
                Code.SYMMETRY_MISMATCH,
                f"invariant {name} depends on which element of symmetric domain {dom} is which: it has "
                f"different values {where}; {_fix(dom)}",
                inv.file,
                inv.line,
            )
    work = 0
    for ai in inst.action_instances:
        outcomes = base[ai.index]
        if outcomes is None:
            continue
        want = Counter(pi(t) for t in outcomes)
        other = mapped[ai.index]
        image = inst.successors_capped(pst, other, MAX_OUTCOMES + 1 + len(outcomes))
        work += len(outcomes) + 1
        got = Counter(sc.state for sc in image) if image is not None else Counter()
        if want == got:
            continue
        missing = list((want - got).elements())
        extra = list((got - want).elements())
        if image is None:
            raise OwnershipError(
                Code.SYMMETRY_MISMATCH,
                f"action {ai.action.name} depends on which element of symmetric domain {dom} is which: {where}, "
                f"{other.label} in the image has many more choices than {ai.label}; {_fix(dom)}",
                ai.action.file,
                ai.action.line,
            )
        if missing:
            cell = _closest_cell(inst, missing[0], list(got))
            what = (f"{other.label} is disabled in the image" if not got else
                    f"{other.label} in the image does not reach the image of an outcome of {ai.label}")
        else:
            cell = _closest_cell(inst, extra[0], list(want))
            what = f"{other.label} in the image has an outcome that is no image of an outcome of {ai.label}"
        detail = f" (cell {cell} differs)" if cell else ""
        raise OwnershipError(
            Code.SYMMETRY_MISMATCH,
            f"action {ai.action.name} depends on which element of symmetric domain {dom} is which: {where}, "
            f"{what}{detail}; it may pick elements by their order (the first free one of s.all({dom})) or name "
            f"one by an int; {_fix(dom)}",
            ai.action.file,
            ai.action.line,
        )
    return work


def generators(inst: Instance, domains: Sequence[str]) -> list[tuple[str, list[int]]]:
    """Per domain, a transposition and an n-cycle (one permutation for two elements): they generate its group."""
    out: list[tuple[str, list[int]]] = []
    for d in domains:
        n = inst.sizes[d]
        if n >= 2:
            out.append((d, [1, 0, *range(2, n)]))
        if n > 2:
            out.append((d, [*range(1, n), 0]))
    return out


def _generator_words(gens: Sequence[tuple[str, Sequence[int]]]) -> str:
    return "a transposition and a cycle of each domain" if any(len(p) > 2 for _, p in gens) else "the swap of the two elements"


def prove_symmetry(inst: Instance, domains: Sequence[str], invariants: Sequence[str] | None = None,
                   seconds: float | None = None, free: Sequence[str] = ()) -> Equivariance:
    """The Z3 proof (:mod:`ownership.symbolic.equivariance`) that ``domains`` are symmetric in ``inst``.

    ``free`` parameters stay symbolic: the proof then holds for all their values.
    """
    from ownership.symbolic.equivariance import DEFAULT_SECONDS, prove_equivariance

    return prove_equivariance(inst, generators(inst, domains), invariants,
                              seconds=DEFAULT_SECONDS if seconds is None else seconds, free=free)


def precheck(inst: Instance, reduce: bool, free: Sequence[str] = ()) -> tuple[str | None, bool]:
    """Before a symbolic engine: run the spec concretely on a sample, and decide whether symmetry may be broken.

    The Z3 view does not wrap elements, so the sample is what surfaces
    OWN060 (and OWN061 where a sampled reachable state breaks the promise)
    for bmc and prove.  With ``reduce``, symmetry is broken only if Z3 proves
    it holds for every state (:func:`prove_symmetry`, every symmetric domain:
    bmc breaks the symmetry of argument domains too); otherwise the engine
    runs without symmetry breaking.  ``free`` parameters stay symbolic in
    the proof.  Returns the note and whether to reduce.
    """
    doms = symmetric_domains(inst) if reduce else []
    check_symmetry(inst, doms)
    if not doms:
        return None, False
    from ownership.engines.symevery import check_reachable

    if not free:
        # Without free parameters a concrete check of every reachable state establishes what the engines
        # need for this instance, and for the library's sizes it costs far less than the Z3 proof.
        first = check_reachable(inst, doms)
        if first is not None:
            return first, True
    proof = prove_symmetry(inst, doms, free=free)
    if proof.proved:
        return proof.describe(), True
    checked = check_reachable(inst, doms) if free else None
    if checked is not None:
        others = (f" (other values of the free parameter{'s' if len(free) > 1 else ''} {', '.join(free)} are not "
                  "covered by this check)") if free else ""
        return f"{proof.describe()}; {checked}{others}", True
    return f"{proof.describe()}: searched without symmetry breaking", False
