"""Candidate conditions on an action's transitions: its arguments, the acting element's fields, guard outcomes."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.analysis.explain.graph import StateGraph, Transition
from ownership.analysis.explain.trace import Branch, branches
from ownership.lang.declarations import Action, Values
from ownership.lang.instance import Instance
from ownership.lang.types import BoolType, Enum, IntType


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


def _show(inst: Instance, vtype: Any, value: Any) -> str:
    try:
        return str(vtype.show(value, inst.names))
    except Exception:  # noqa: BLE001 - a value type that cannot show this value
        return repr(value)


def candidate_conditions(graph: StateGraph, act: Action, ts: Sequence[int], lines_of: dict[int, frozenset[int]]) -> list[Atom]:
    """Candidate conditions for ``act``'s transitions ``ts`` (each holds on some but not all of them)."""
    inst = graph.inst
    spec = inst.spec
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
            continue
        # Fields of the acting element: spec variables indexed by this argument's domain alone.
        fields = [v for v in spec.vars.values() if not v.ghost and len(v.index) == 1 and v.index[0] is dom]
        for var in fields:
            if not isinstance(var.type, BoolType | IntType | Enum):
                continue  # references name elements, which symmetry makes arbitrary
            off = inst.layouts[var.name].offset
            seen = sorted({states[trans[i].src][off + trans[i].ai.args[j]] for i in ts}, key=repr)
            for value in seen:
                shown = _show(inst, var.type, value)
                keep(
                    Atom(
                        f"{var.name} = {shown}",
                        f"{var.name}[{arg_names[j]}] = {shown}",
                        "state",
                        (var.name,),
                        _field_is(states, off, j, value),
                    )
                )
        ints = [v for v in fields if isinstance(v.type, IntType)]
        for a, b in itertools.combinations(ints, 2):
            oa, ob = inst.layouts[a.name].offset, inst.layouts[b.name].offset
            an, bn = f"{a.name}[{arg_names[j]}]", f"{b.name}[{arg_names[j]}]"
            for op, fn in (("<", operator.lt), (">", operator.gt), ("=", operator.eq), ("!=", operator.ne)):
                # "x > y" is written "y < x": every comparison reads smaller-first.
                text = f"{bn} < {an}" if op == ">" else f"{an} {op} {bn}"
                key = f"{b.name} < {a.name}" if op == ">" else f"{a.name} {op} {b.name}"
                keep(
                    Atom(
                        key,
                        text,
                        "state",
                        (a.name, b.name),
                        _fields_compare(states, oa, ob, j, fn),
                        ordering=op in ("<", ">"),
                    )
                )
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


def _field_is(states: list[tuple[Any, ...]], off: int, j: int, value: Any) -> Callable[[Transition], bool]:
    return lambda t: bool(states[t.src][off + t.ai.args[j]] == value)


def _fields_compare(
    states: list[tuple[Any, ...]], oa: int, ob: int, j: int, fn: Callable[[Any, Any], Any]
) -> Callable[[Transition], bool]:
    return lambda t: bool(fn(states[t.src][oa + t.ai.args[j]], states[t.src][ob + t.ai.args[j]]))


def _branch_went(lines_of: dict[int, frozenset[int]], br: Branch, outcome: bool) -> Callable[[Transition], bool]:
    # In a loop the body may run on some iterations only: "true" means it ran at least once.
    return lambda t: br.line in lines_of[id(t)] and (br.body in lines_of[id(t)]) == outcome
