"""A necessary action's conditions written out, ranked and shortened, with where a check is missing."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from ownership.analysis.explain.conditions import Atom
from ownership.analysis.explain.diagnosis import Condition, NecessaryAction
from ownership.analysis.explain.graph import StateGraph
from ownership.lang.declarations import Action

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
    """Fields of the acting element the action read on its violating-path steps."""


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
        branch_sets = {b for a, b in f.chosen if a.kind == "branch"}
        conditions: list[Condition] = []
        for atom, blocked in f.chosen:
            unchecked = (
                bool(atom.fields)
                and not set(atom.fields) & f.read
                and not set(atom.fields) <= read_anywhere
                and blocked not in branch_sets
            )
            conditions.append(
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
            )
        )
    return tuple(out)


def _shorten(conditions: list[Condition]) -> tuple[Condition, ...]:
    """At most a few conditions per action: unchecked and guard outcomes first, then single fields."""
    rank = {True: 0, False: 1}
    ordered = sorted(
        enumerate(conditions),
        key=lambda ic: (rank[ic[1].unchecked], ic[1].kind != "branch", len(ic[1].fields) != 1, ic[0]),
    )
    keep = sorted(i for i, _ in ordered[:_MAX_CONDITIONS])
    return tuple(conditions[i] for i in keep)
