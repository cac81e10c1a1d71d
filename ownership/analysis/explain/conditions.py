"""Candidate conditions on an action's transitions: its arguments, the cells it names, guard outcomes.

A cell is named the way the action's code can name it: ``kv_tokens[r]``
(indexed by an argument), ``pending[r, p]`` (a table over two domains, both
positions given by arguments), ``rdma_pending[owner[h], p]`` (a position given
by a reference field of an argument), ``x`` (a scalar, so an action without
arguments still has conditions).  A position no argument names is a
concrete element (``pending[A, p]``) when the element's name means the same
in every state of the graph (its domain is not reduced by symmetry), and
quantified (``pending[x, p] = yes for some x in Req``, which every
permutation of the elements preserves) when the domain has several.  Those partly named cells are only
considered for tables the action reads.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.analysis.explain.graph import StateGraph, Transition
from ownership.analysis.explain.trace import Branch, branches
from ownership.lang.declarations import Action, Domain, Values, Var
from ownership.lang.fields import strides
from ownership.lang.instance import Instance
from ownership.lang.types import BoolType, Enum, IntType, Ref

_MAX_PATTERNS = 64  # ways of naming one table's cells per action: beyond that the list says nothing useful

States = list[tuple[Any, ...]]


@dataclass(frozen=True)
class Atom:
    """One candidate condition: its key and wording, and the test on a transition."""

    key: str
    text: str
    kind: str
    fields: tuple[str, ...]
    test: Callable[[Transition], bool]
    line: int | None = None
    source: str = ""
    ordering: bool = False
    """A ``<`` between two fields."""
    cells: Callable[[Transition], frozenset[int]] | None = None
    """The state positions the condition looks at on a transition (for "does the action read it")."""


@dataclass(frozen=True)
class Term:
    """How an action's code names an element: an argument (``p``) or a reference field of one (``owner[p]``)."""

    text: str
    key: str
    """The same without argument names, when they do not matter (``owner[Page]``)."""
    domain: str
    value: Callable[[tuple[Any, ...], Transition], int | None]
    cells: Callable[[Transition], frozenset[int]]


@dataclass(frozen=True)
class Pattern:
    """A cell of ``var`` named through terms, concrete elements, or ``None`` for a quantified position."""

    var: Var
    positions: tuple[Term | int | None, ...]
    text: str
    key: str
    quantifier: str = ""
    """``" for some x in Req"``: how the quantified positions read."""

    @property
    def bound(self) -> bool:
        """Every position named by the action's own terms (a field of the acting elements)."""
        return all(isinstance(p, Term) for p in self.positions)


def _show(inst: Instance, vtype: Any, value: Any) -> str:
    try:
        return str(vtype.show(value, inst.names))
    except Exception:  # noqa: BLE001 - a value type that cannot show this value
        return repr(value)


def _arg_term(act: Action, j: int) -> Term:
    dom = act.arg_domains[j]
    assert isinstance(dom, Domain)
    same = sum(1 for d in act.arg_domains if d is dom)
    # The key drops the argument's name unless two arguments share the domain (fork(parent, child)).
    return Term(
        act.arg_names[j], dom.name if same == 1 else act.arg_names[j], dom.name,
        lambda _state, t: int(t.ai.args[j]), lambda _t: frozenset(),
    )


def terms(inst: Instance, act: Action) -> list[Term]:
    """The elements ``act`` can name: its domain arguments, then reference fields indexed by one of them."""
    args = [_arg_term(act, j) for j, d in enumerate(act.arg_domains) if isinstance(d, Domain)]
    out = list(args)
    for var in inst.spec.vars.values():
        if var.ghost or not isinstance(var.type, Ref) or len(var.index) != 1:
            continue
        off = inst.layouts[var.name].offset
        for a in args:
            if a.domain != var.index[0].name:
                continue
            out.append(Term(
                f"{var.name}[{a.text}]", f"{var.name}[{a.key}]", var.type.domain,
                _ref_value(off, a), _ref_cells(off, a),
            ))
    return out


def _ref_value(off: int, a: Term) -> Callable[[tuple[Any, ...], Transition], int | None]:
    def value(state: tuple[Any, ...], t: Transition) -> int | None:
        i = a.value(state, t)
        v = state[off + i] if i is not None else None
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return value


def _ref_cells(off: int, a: Term) -> Callable[[Transition], frozenset[int]]:
    # Only a direct argument indexes a reference field here, so the cell is known without the state.
    return lambda t: frozenset({off + int(a.value((), t) or 0)})


def _quantified_name(dom: Domain, taken: set[str]) -> str:
    base = dom.name[0].lower()
    name = base
    while name in taken:
        name += "'"
    taken.add(name)
    return name


def patterns(inst: Instance, act: Action, symmetry: bool, read_vars: set[str]) -> list[Pattern]:
    """Every way ``act`` names a cell of a boolean, integer or enum variable.

    Fully named cells (scalars, fields of the arguments) always; tables over
    several domains with at least one position named by a term; any other
    cells only for variables in ``read_vars`` (read by the action).
    """
    ts = terms(inst, act)
    books = _bookkeeping(inst)
    out: list[Pattern] = []
    for var in inst.spec.vars.values():
        if var.ghost or not isinstance(var.type, BoolType | IntType | Enum):
            continue  # references name elements, which symmetry makes arbitrary
        choices: list[list[Term | int | None]] = []
        # A table some position of which the action names (``pending[x, p]`` for ``evict(p)``)
        # is about the acting element even where the code never reads it: that is a missing check.
        partial = var.name in read_vars or (
            len(var.index) > 1 and var.name not in books and any(t.domain == d.name for t in ts for d in var.index)
        )
        for dom in var.index:
            named: list[Term | int | None] = [t for t in ts if t.domain == dom.name]
            if partial:
                size = inst.sizes[dom.name]
                # An element's name means the same in every state unless symmetry permutes it.
                stable = size == 1 or not (symmetry and dom.symmetric)
                if stable and (size == 1 or var.name in read_vars):  # unread: "for some" says it all
                    named.extend(range(size))
                if size > 1:
                    named.append(None)  # "for some": true of every permutation, so always meaningful
            choices.append(named)
        combos = [c for c in itertools.islice(itertools.product(*choices), 4 * _MAX_PATTERNS)
                  if var.name in read_vars or any(isinstance(p, Term) for p in c) or not c]
        if len(combos) > _MAX_PATTERNS:
            combos = [c for c in combos if all(isinstance(p, Term) for p in c)][:_MAX_PATTERNS]
        for combo in combos:
            out.append(_pattern(inst, act, var, combo))
    return out


def _pattern(inst: Instance, act: Action, var: Var, combo: tuple[Term | int | None, ...]) -> Pattern:
    taken = set(act.arg_names)
    texts: list[str] = []
    keys: list[str] = []
    quantified: list[str] = []
    for dom, p in zip(var.index, combo, strict=True):
        if isinstance(p, Term):
            texts.append(p.text)
            keys.append(p.key)
        elif p is None:
            name = _quantified_name(dom, taken)
            texts.append(name)
            keys.append(f"some {dom.name}")
            quantified.append(f"{name} in {dom.name}")
        else:
            texts.append(inst.names[dom.name][p])
            keys.append(inst.names[dom.name][p])
    if not combo:
        text = key = var.name
    else:
        text = f"{var.name}[{', '.join(texts)}]"
        one_arg = len(combo) == 1 and isinstance(combo[0], Term) and combo[0].key == var.index[0].name
        # The historical short key for a field of the (only) acting element: ``p_to_finish``.
        key = var.name if one_arg else f"{var.name}[{', '.join(keys)}]"
    quantifier = f" for some {', '.join(quantified)}" if quantified else ""
    return Pattern(var, combo, text, key, quantifier)


def _cell_offsets(inst: Instance, pat: Pattern, state: tuple[Any, ...], t: Transition) -> list[int] | None:
    """The positions ``pat`` denotes on ``t`` (several when quantified), or ``None`` when a reference is empty."""
    lay = inst.layouts[pat.var.name]
    st = strides(lay.shape)
    ranges: list[Sequence[int]] = []
    for dom, p in zip(pat.var.index, pat.positions, strict=True):
        if isinstance(p, Term):
            v = p.value(state, t)
            if v is None:
                return None
            ranges.append((v,))
        elif p is None:
            ranges.append(range(inst.sizes[dom.name]))
        else:
            ranges.append((p,))
    return [lay.offset + sum(i * s for i, s in zip(idx, st, strict=True)) for idx in itertools.product(*ranges)]


Offsets = Callable[[Transition], "list[int] | None"]


def offsets(inst: Instance, states: States, pat: Pattern) -> Offsets:
    """``_cell_offsets`` of ``pat`` on a transition, computed once per transition (conditions test each often)."""
    memo: dict[int, list[int] | None] = {}

    def of(t: Transition) -> list[int] | None:
        k = id(t)
        if k not in memo:
            memo[k] = _cell_offsets(inst, pat, states[t.src], t)
        return memo[k]

    return of


def pattern_cells(pat: Pattern, offs: Offsets) -> Callable[[Transition], frozenset[int]]:
    """The positions a pattern looks at on a transition, including the reference fields naming it."""

    def cells(t: Transition) -> frozenset[int]:
        refs = [c for p in pat.positions if isinstance(p, Term) for c in p.cells(t)]
        return frozenset(offs(t) or ()) | frozenset(refs)

    return cells


def _pattern_is(states: States, offs: Offsets, value: Any) -> Callable[[Transition], bool]:
    def test(t: Transition) -> bool:
        state = states[t.src]
        o = offs(t)
        return o is not None and any(state[i] == value for i in o)

    return test


def _patterns_compare(states: States, oa: Offsets, ob: Offsets, fn: Callable[[Any, Any], Any]) -> Callable[[Transition], bool]:
    def test(t: Transition) -> bool:
        state = states[t.src]
        a, b = oa(t), ob(t)
        return a is not None and b is not None and bool(fn(state[a[0]], state[b[0]]))

    return test


def _bookkeeping(inst: Instance) -> set[str]:
    """The page pools' own accounting (free counts, holders, slots): every allocation reads them all."""
    own = inst.spec.extensions.get("ownership")
    names = (getattr(p, a, None) for p in getattr(own, "pools", ()) for a in ("free_var", "holders_var", "slot_var"))
    return {n for n in names if isinstance(n, str)}


def _read_beyond_bound(
    inst: Instance, act: Action, states: States, ts: Sequence[Transition],
    reads_of: dict[int, frozenset[int]], symmetry: bool,
) -> set[str]:
    """Variables some of ``ts`` read at a cell the action's terms do not name (``pending[A, p]`` for ``evict(p)``).

    Only for those are partly named cells candidates: a table read only at the
    acting elements' own cells says nothing more about other elements.
    """
    books = _bookkeeping(inst)
    owner: dict[int, str] = {}
    for v in inst.spec.vars.values():
        if v.index and v.name not in books:
            lay = inst.layouts[v.name]
            owner.update((o, v.name) for o in range(lay.offset, lay.offset + lay.length))
    tables = set(owner.values())
    bound: dict[str, list[Offsets]] = {}
    for p in patterns(inst, act, symmetry, set()):
        if p.bound and p.var.name in tables:
            bound.setdefault(p.var.name, []).append(offsets(inst, states, p))
    out: set[str] = set()
    for t in ts:
        by_var: dict[str, set[int]] = {}
        for o in reads_of.get(id(t), frozenset()):
            name = owner.get(o)
            if name is not None and name not in out:
                by_var.setdefault(name, set()).add(o)
        for name, read in by_var.items():
            named = {o for of in bound.get(name, ()) for o in of(t) or ()}
            if read - named:
                out.add(name)
    return out


def candidate_conditions(
    graph: StateGraph,
    act: Action,
    ts: Sequence[int],
    lines_of: dict[int, frozenset[int]],
    reads_of: dict[int, frozenset[int]] | None = None,
    symmetry: bool = True,
) -> list[Atom]:
    """Candidate conditions for ``act``'s transitions ``ts`` (each holds on some but not all of them)."""
    inst = graph.inst
    states = graph.states
    trans = graph.trans
    out: list[Atom] = []

    def keep(atom: Atom) -> None:
        hits = sum(1 for i in ts if atom.test(trans[i]))
        if 0 < hits < len(ts):
            out.append(atom)

    arg_names = act.arg_names
    for j, dom in enumerate(act.arg_domains):
        if isinstance(dom, Values):
            for value in sorted({trans[i].ai.args[j] for i in ts}):
                keep(Atom(f"{arg_names[j]} = {value}", f"{arg_names[j]} = {value}", "argument", (), _arg_is(j, value)))
    read = _read_beyond_bound(inst, act, states, [trans[i] for i in ts], reads_of or {}, symmetry)
    pats = patterns(inst, act, symmetry, read)
    offs_of = {id(p): offsets(inst, states, p) for p in pats}
    for pat in pats:
        offs = offs_of[id(pat)]
        seen: set[Any] = set()
        for i in ts:
            seen.update(states[trans[i].src][o] for o in offs(trans[i]) or ())
        if pat.quantifier and isinstance(pat.var.type, BoolType):
            seen &= {True}  # "some x is set" is what a guard says; "some x is not" rarely is
        for value in sorted(seen, key=repr):
            shown = _show(inst, pat.var.type, value)
            keep(Atom(
                f"{pat.key} = {shown}",
                f"{pat.text} = {shown}{pat.quantifier}",
                "state",
                (pat.var.name,),
                _pattern_is(states, offs, value),
                cells=pattern_cells(pat, offs),
            ))
    # Orders between two integer cells of the same elements (``kv_tokens[r] < d_input_len[r]``).
    ints = [p for p in pats if isinstance(p.var.type, IntType) and p.bound]
    for a, b in itertools.combinations(ints, 2):
        if a.positions != b.positions:
            continue
        oa, ob = offs_of[id(a)], offs_of[id(b)]
        ca, cb = pattern_cells(a, oa), pattern_cells(b, ob)
        for op, fn in (("<", operator.lt), (">", operator.gt), ("=", operator.eq), ("!=", operator.ne)):
            # "x > y" is written "y < x": every comparison reads smaller-first.
            text = f"{b.text} < {a.text}" if op == ">" else f"{a.text} {op} {b.text}"
            key = f"{b.key} < {a.key}" if op == ">" else f"{a.key} {op} {b.key}"
            keep(Atom(
                key, text, "state", (a.var.name, b.var.name),
                _patterns_compare(states, oa, ob, fn),
                ordering=op in ("<", ">"),
                cells=lambda t, ca=ca, cb=cb: ca(t) | cb(t),  # type: ignore[misc]
            ))
    for br in branches(act):
        for outcome in (True, False):
            word = "true" if outcome else "false"
            keep(
                Atom(
                    f"{act.name}:{br.line} {word}",
                    f"line {br.line} `{br.source}` is {word}",
                    "branch",
                    (),
                    _branch_went(lines_of, br, outcome),
                    br.line,
                    br.source,
                )
            )
    return out


def _arg_is(j: int, value: Any) -> Callable[[Transition], bool]:
    return lambda t: bool(t.ai.args[j] == value)


def _branch_went(lines_of: dict[int, frozenset[int]], br: Branch, outcome: bool) -> Callable[[Transition], bool]:
    # In a loop the body may run on some iterations only: "true" means it ran at least once.
    return lambda t: br.line in lines_of[id(t)] and (br.body in lines_of[id(t)]) == outcome
