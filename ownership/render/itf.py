"""Export a trace in the Informal Trace Format (ITF) of Apalache and Quint.

ITF (https://apalache-mc.org/docs/adr/015adr-trace.html) is a JSON format for
traces that other tools read: Quint's model-based testing drivers, trace
viewers, test generators.  The mapping from a trace's named JSON states:

* a state is an ITF record: one field per state variable, plus
  ``#meta: {"index": i}``;
* integers become ``{"#bigint": "123"}`` (ITF does not trust JSON numbers);
  booleans and strings stay as they are;
* a table indexed by domain elements (``{"A": ..., "B": ...}``) becomes a map
  ``{"#map": [["A", ...], ["B", ...]]}``; tables indexed by two domains
  become maps of maps;
* a list (the only lists in states are sets of elements, such as a page's
  holders) becomes ``{"#set": [...]}``;
* ITF has no null: an absent optional reference (no content, no foreign
  read) is written as the string ``"-"``, the same mark the rest of the tool
  prints for it.

Quint's model-based testing convention adds two variables to every state:
``mbt::actionTaken`` (the action's name, ``"init"`` for state 0) and
``mbt::nondetPicks``, a ``#map`` from argument position (``"0"``, ``"1"``,
...) to the argument's value, plus ``"picks"``: the list of
nondeterministic choices the action made (which free page went to which
slot), as the chosen values (page numbers for page choices).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ownership.core.trace import Trace, TraceKind

ITF_DESCRIPTION_URL = "https://apalache-mc.org/docs/adr/015adr-trace.html"
"""Where the format is described (ITF's ``format-description``)."""

NONE = "-"
"""How an absent value (JSON null) is written: ITF has no null."""

ACTION_TAKEN = "mbt::actionTaken"
NONDET_PICKS = "mbt::nondetPicks"


def to_itf_value(value: Any) -> Any:
    """One state value in ITF form; see the module docstring for the mapping."""
    if value is None:
        return NONE
    if isinstance(value, bool):  # before int: bool is an int subclass
        return value
    if isinstance(value, int):
        return {"#bigint": str(value)}
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {"#map": [[to_itf_value(k), to_itf_value(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return {"#set": [to_itf_value(v) for v in value]}
    if isinstance(value, float) and value.is_integer():
        return {"#bigint": str(int(value))}
    raise TypeError(f"cannot express {type(value).__name__} value {value!r} in ITF")


def _picks(args: Sequence[Any], picks: Sequence[int]) -> dict[str, Any]:
    entries: list[list[Any]] = [[str(i), to_itf_value(a)] for i, a in enumerate(args)]
    # Picks are an ordered sequence (one per s.choose call): an ITF list, not a set.
    entries.append(["picks", [to_itf_value(p) for p in picks]])
    return {"#map": entries}


def trace_to_itf(trace: Trace) -> dict[str, Any]:
    """The ITF document for ``trace`` (a JSON-ready dict)."""
    names = list(trace.initial)
    meta: dict[str, Any] = {
        "format": "ITF",
        "format-description": ITF_DESCRIPTION_URL,
        "source": trace.spec_path or trace.spec,
        "description": _description(trace),
        "spec": trace.spec,
        "engine": trace.engine,
        "parameters": dict(trace.params),
    }
    if trace.violation is not None:
        meta["invariant"] = trace.violation
    if trace.kind is TraceKind.DEADLOCK:
        meta["deadlock"] = True
    if trace.kind is TraceKind.LASSO and trace.violation is not None:
        del meta["invariant"]
        meta["property"] = trace.violation
    states: list[dict[str, Any]] = []
    for i, state in enumerate(trace.states):
        out: dict[str, Any] = {"#meta": {"index": i}}
        for name in names:
            out[name] = to_itf_value(state.get(name))
        if i == 0:
            out[ACTION_TAKEN] = "init"
            out[NONDET_PICKS] = {"#map": []}
        else:
            step = trace.steps[i - 1]
            out[ACTION_TAKEN] = step.action
            out[NONDET_PICKS] = _picks(step.args, step.picks)
        states.append(out)
    document: dict[str, Any] = {"#meta": meta, "vars": [*names, ACTION_TAKEN, NONDET_PICKS], "states": states}
    if trace.kind is TraceKind.LASSO and trace.loop is not None:
        # ITF's loop: the last state is followed by states[loop].  Our last state *is* the loop's first
        # one again, so it is left out (unless nothing can run there: then it is followed by itself).
        if trace.loop < len(trace.steps):
            states.pop()
            meta["loop-action"] = trace.steps[-1].action
        document["loop"] = trace.loop
    return document


def _description(trace: Trace) -> str:
    n = len(trace.steps)
    steps = f"{n} step{'s' if n != 1 else ''}"
    by = f" found by {trace.engine}" if trace.engine else ""
    if trace.kind is TraceKind.LASSO:
        return f"lasso breaking {trace.violation} in {trace.spec} ({steps}, looping back to state {trace.loop}){by}"
    if trace.violation is not None:
        return f"counterexample to {trace.violation} in {trace.spec} ({steps}){by}"
    if trace.kind is TraceKind.DEADLOCK:
        return f"deadlock in {trace.spec} after {steps}{by}"
    return f"trace of {trace.spec} ({steps}){by}"


def write_itf(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as an ITF file (creating its directory); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(trace_to_itf(trace), indent=1) + "\n", encoding="utf-8")
    return p
