"""A necessary action's conditions written out, ranked and shortened, with where a check is missing."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from ownership.analysis.explain.conditions import Atom
from ownership.analysis.explain.diagnosis import Condition, NecessaryAction
from ownership.analysis.explain.graph import StateGraph, lost_states
from ownership.lang.declarations import Action
from ownership.lang.model import Spec

_MAX_CONDITIONS = 6  # conditions shown per action: the narrowest description, not every synonym


def _signature(act: Action) -> str:
    return f"{act.name}({', '.join(act.arg_names)})"


def _def_line(act: Action) -> str:
    try:
        lines, _ = inspect.getsourcelines(act.fn)
    except (OSError, TypeError):
        return f"def {_signature(act)}"
    for text in lines:
        if text.lstrip().startswith(("def ", "async def ")):
            return text.strip()
    return lines[0].strip() if lines else ""


@dataclass
class Found:
    """One necessary action before the conditions are written out."""

    act: Action
    ts: list[int]
    relevant: int
    depth: int
    chosen: list[tuple[Atom, frozenset[int]]]
    """The narrowest necessary conjunction, then weaker necessary comparisons."""
    read: set[str]
    """Fields of the acting elements the action read on its violating-path steps."""
    unread: set[str]
    """Texts of the conditions in ``chosen`` none of whose cells the action read on the steps they describe."""
    other_calls: list[tuple[list[tuple[Atom, frozenset[int]]], set[str]]]
    """Further steps every path also takes, each with its own conjunction (and its unread texts)."""
    steps: frozenset[int]
    """The transitions ``chosen`` matches (all of ``ts`` when it is empty)."""
    releases: bool = False
    """Some of those steps on a violating path give pages up."""


def describe(graph: StateGraph, found: list[Found]) -> tuple[NecessaryAction, ...]:
    """Write out each necessary action's conditions and find where a check is missing.

    A condition is *unchecked* at an action that never reads its fields, on
    no branch of the action's own code that matches the same steps, and on a
    field no necessary action reads at all on the violating paths: nothing on
    the way to the violation ever looks at it.  It is reported once, at the
    first necessary action in path order.
    """
    spec = graph.inst.spec
    read_anywhere = set().union(*(f.read for f in found)) if found else set()
    seen: set[frozenset[str]] = set()
    out: list[NecessaryAction] = []
    for f in found:
        conditions = _conditions(spec, f.chosen, f.unread, read_anywhere)
        others = tuple(_shorten(_conditions(spec, c, unread, read_anywhere)) for c, unread in f.other_calls)
        # Once per set of fields: the first action whose step depends on nobody reading them.
        first = tuple(c for c in conditions if c.unchecked and frozenset(c.fields) not in seen)
        seen.update(frozenset(c.fields) for c in conditions if c.unchecked)
        act = f.act
        out.append(
            NecessaryAction(
                action=act.name,
                signature=_signature(act),
                doc=act.doc.splitlines()[0] if act.doc else "",
                file=act.file,
                line=act.line,
                source=_def_line(act),
                depth=f.depth,
                transitions=len(f.ts),
                on_violating_paths=f.relevant,
                conditions=_shorten(conditions),
                first_unchecked=first,
                other_calls=others,
                releases=f.releases,
                collateral=lost_states(graph, set(f.steps)),
            )
        )
    return tuple(out)


def _conditions(spec: Spec, chosen: list[tuple[Atom, frozenset[int]]], unread: set[str],
                read_anywhere: set[str]) -> list[Condition]:
    """One conjunction written out; a condition is unchecked when nothing on the way reads its fields."""
    branch_sets = {b for a, b in chosen if a.kind == "branch"}
    out: list[Condition] = []
    for atom, blocked in chosen:
        unchecked = (
            bool(atom.fields)
            and atom.text in unread
            and not set(atom.fields) <= read_anywhere
            and blocked not in branch_sets
        )
        out.append(
            Condition(
                key=atom.key,
                text=atom.text,
                kind=atom.kind,
                fields=atom.fields,
                doc=spec.vars[atom.fields[0]].doc if atom.fields else "",
                line=atom.line,
                source=atom.source,
                unchecked=unchecked,
                matching=len(blocked),
            )
        )
    return out


def rank(actions: tuple[NecessaryAction, ...]) -> tuple[str, ...]:
    """The necessary actions' names, most likely fix point first (see :attr:`Diagnosis.fix_points`).

    Every necessary action's conditions, as a guard, cut every violation off
    the graph, so the order says which cut is the better fix:

    1. a step that gives pages up while its code reads a condition that is a
       missing check elsewhere: the code had the information and released
       anyway (an abort frees pages an RDMA write still fills);
    2. a missing check, in path order: a condition no step reads;
    3. a step that gives pages up: where a page goes wrong (the later read or
       write only shows it);
    4. the fewest other states lost by the check: the narrower fix.

    Ties keep path order.
    """
    order = {a.action: i for i, a in enumerate(actions)}

    def key(a: NecessaryAction) -> tuple[int, int, int, int]:
        tier = _tier(a, actions)
        if tier < 2:  # missing checks keep their path order, as the explanation lists them
            return (tier, 0, 0, order[a.action])
        return (2, not a.releases, a.collateral, order[a.action])

    return tuple(a.action for a in sorted(actions, key=key))


def _missing(actions: tuple[NecessaryAction, ...]) -> set[str]:
    """Keys of the conditions that are a missing check at some necessary action."""
    return {c.key for a in actions for c in a.first_unchecked}


def _known(a: NecessaryAction, actions: tuple[NecessaryAction, ...]) -> list[Condition]:
    """The conditions ``a``'s own code reads that are a missing check elsewhere (on any of its steps)."""
    missing = _missing(actions)
    conds = [*a.conditions, *(c for call in a.other_calls for c in call)]
    return [c for c in conds if c.key in missing and not c.unchecked]


def _tier(a: NecessaryAction, actions: tuple[NecessaryAction, ...]) -> int:
    """Which rule of :func:`rank` places ``a``: 0 gives pages up knowing, 1 a missing check, 2 the rest."""
    if a.releases and _known(a, actions):
        return 0
    return 1 if a.first_unchecked else 2


def fix_reason(a: NecessaryAction, actions: tuple[NecessaryAction, ...]) -> str:
    """Why :func:`rank` puts ``a`` where it is, in one clause (for the ``likeliest fix first`` line).

    ``actions`` are all the diagnosis' necessary actions: whether a
    condition is a missing check, and how ``a`` compares on the other states
    its check loses, depend on the others.
    """
    tier = _tier(a, actions)
    if tier == 0:
        known = ", ".join(dict.fromkeys(c.text for c in _known(a, actions)))
        return f"it gives pages up although its code reads {known}, which no other step on the way checks"
    if tier == 1:
        return f"no step on the way reads {', '.join(c.text for c in a.first_unchecked)}: the check is missing here"
    rest = [b for b in actions if b is not a and _tier(b, actions) == 2 and b.releases == a.releases]
    lost = "no other state" if a.collateral == 0 else f"{a.collateral:,} other state{'s' if a.collateral != 1 else ''}"
    fewest = ", the fewest" if rest and all(a.collateral < b.collateral for b in rest) else ""
    if a.releases:
        return f"it gives pages up, which is where a page goes wrong; a check here loses {lost}{fewest}"
    return f"a check here loses {lost}{fewest}"


def _shorten(conditions: list[Condition]) -> tuple[Condition, ...]:
    """At most a few conditions per action: unchecked and guard outcomes first, then single fields."""
    rank = {True: 0, False: 1}
    ordered = sorted(
        enumerate(conditions),
        key=lambda ic: (rank[ic[1].unchecked], ic[1].kind != "branch", len(ic[1].fields) != 1, ic[0]),
    )
    keep = sorted(i for i, _ in ordered[:_MAX_CONDITIONS])
    return tuple(conditions[i] for i in keep)
