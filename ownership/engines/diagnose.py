"""What every path to a violation has in common: necessary actions and the conditions they run under.

Builds the reachable state graph (networkx, the explorer's search
:class:`~ownership.engines.search.BreadthFirst` with its semantics and symmetry
reduction; states violating the invariant are targets and are
not expanded) and asks which transitions cannot be avoided on the way to a
violating state.  Removing transitions from the graph is exactly what adding
``require(not condition)`` to an action does, so every answer reads as "a
check here would block every path".

* An action name ``A`` is **necessary** when the violating states become
  unreachable once every ``A`` transition is removed.  When no single action
  is, the minimal pairs of action names that are (a *cut* of size 2) are
  reported instead.
* For a necessary action, a **condition** is a predicate on a transition:
  a field of the acting request in the state it runs in (``p_to_finish[r] =
  yes``), an order between two integer fields of that request
  (``kv_tokens[r] < d_input_len[r]``), a value argument (``prompt_len =
  6``), or which way an ``if`` in the action's code went (a *guard
  outcome*, found by tracing the lines the action executes).  A condition is
  necessary when removing only the ``A`` transitions that satisfy it still
  cuts every violation off, and it is reported only if some ``A`` transition
  in the graph does not satisfy it (otherwise it says nothing).  The
  conjunction of an action's necessary conditions that is still necessary is
  the narrowest description of the ``A`` step every violating path takes.
* A condition on fields the action never reads (on any of those steps) is
  **unchecked**; the first necessary action, in path order, where a given
  condition is unchecked is where a missing check would have caught every
  violating path (for the SGLang v0.5.21 leak: decode admission of a request
  with a pending rejection, and the commit of a transfer shorter than the
  reservation).

Everything is over the explored graph: when the state limit cuts it off,
:attr:`Diagnosis.complete` is false and the answer holds within that bound
only.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import operator
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

from ownership.engines.search import BreadthFirst, Control, Limits, Visitor
from ownership.errors import Code, OwnershipError
from ownership.spec.declarations import Action, Domain, Values
from ownership.spec.instance import Instance, State
from ownership.spec.invariants import select_invariants
from ownership.spec.successors import ActionInstance, Successor
from ownership.spec.types import BoolType, Enum, IntType

if TYPE_CHECKING:
    import networkx as nx

_SINK = -1  # one extra node every violating state points to: "a violation is reachable"
_MAX_CONDITIONS = 6  # conditions shown per action: the narrowest description, not every synonym


@dataclass(frozen=True)
class DiagnoseOptions:
    """Bounds of the state graph the diagnosis is computed over."""

    max_states: int = 200_000
    symmetry: bool = True
    max_pairs: int = 10
    """Most two-action cuts reported (only when no single action is necessary)."""


@dataclass(frozen=True)
class Condition:
    """A predicate on an action's transitions that every violating path satisfies at that action."""

    key: str
    """The condition without the action's argument names (``p_to_finish = yes``): same key, same fact."""
    text: str
    """As written for the action: ``p_to_finish[r] = yes``."""
    kind: str
    """``state`` (a field of the acting request), ``argument`` (a value argument) or ``branch`` (a guard outcome)."""
    fields: tuple[str, ...] = ()
    doc: str = ""
    """The first field's ``spec.var`` doc."""
    line: int | None = None
    """For a branch: the line of the ``if``."""
    source: str = ""
    """For a branch: the ``if`` line's text."""
    unchecked: bool = False
    """The action never reads any of ``fields`` on the violating paths' steps."""
    matching: int = 0
    """How many of the action's transitions in the graph satisfy it."""


@dataclass(frozen=True)
class NecessaryAction:
    """An action every path to the violation takes, with the narrowest description of that step."""

    action: str
    signature: str
    """``decode_pop_preallocated(r)``."""
    doc: str
    file: str | None
    line: int | None
    source: str
    """The ``def`` line."""
    depth: int
    """Fewest steps from the initial state to one of its steps on a violating path (orders the list)."""
    transitions: int
    """Its transitions in the graph."""
    on_violating_paths: int
    """Of those, how many lead on to a violating state."""
    conditions: tuple[Condition, ...]
    """The narrowest conjunction of necessary conditions (may be empty)."""
    first_unchecked: tuple[Condition, ...] = ()
    """Conditions unchecked here and not already necessary and unchecked at an earlier necessary action."""


@dataclass(frozen=True)
class Diagnosis:
    """The diagnosis of one invariant over one bounded state graph."""

    spec: str
    invariant: str
    params: str
    states: int
    transitions: int
    violating_states: int
    complete: bool
    """False when the state limit cut the graph off: everything holds within the explored bound only."""
    max_states: int
    symmetry: bool
    necessary: tuple[NecessaryAction, ...]
    """In path order (earliest first)."""
    cuts: tuple[tuple[str, str], ...] = ()
    """Minimal pairs of action names, when no single action is necessary."""
    initial_violates: bool = False

    @property
    def missing_checks(self) -> tuple[NecessaryAction, ...]:
        """The necessary actions that are the first to run under an unchecked condition."""
        return tuple(a for a in self.necessary if a.first_unchecked)

    def coverage(self) -> str:
        """What the diagnosis was computed over, in one clause."""
        bound = (
            "the complete reachable state graph"
            if self.complete
            else f"the first {self.states:,} states only (state limit {self.max_states:,} reached: "
            "the diagnosis holds within this explored bound only)"
        )
        sym = " (up to symmetry)" if self.symmetry else ""
        return (
            f"over {bound}: {self.states:,} states{sym}, {self.transitions:,} transitions, "
            f"{self.violating_states:,} violating {self.invariant}"
        )


# -- the graph ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Transition:
    src: int
    dst: int
    ai: ActionInstance
    picks: tuple[Any, ...]


@dataclass
class _Graph:
    """States, transitions and the networkx graph over them (edges list transition indices)."""

    inst: Instance
    states: list[tuple[Any, ...]]
    depth: list[int]
    trans: list[_Transition]
    bad: set[int]
    complete: bool
    g: nx.DiGraph


class _Builder(Visitor):
    """Records states, depths and transitions; states violating the invariant are targets, not expanded."""

    def __init__(self, inst: Instance, invariant: str, search: BreadthFirst) -> None:
        self.inst = inst
        self.invariant = invariant
        self.search = search
        self.states: list[tuple[Any, ...]] = []
        self.depth: list[int] = []
        self.trans: list[_Transition] = []
        self.bad: set[int] = set()

    def on_state(self, node: int, state: State, depth: int) -> Control | None:
        self.states.append(state)
        self.depth.append(depth)
        if not self.inst.holds(state, self.invariant):
            self.bad.add(node)  # a target: the paths that matter end here
            return Control.PRUNE
        return None

    def on_edge(self, src: int, action: ActionInstance, succ: Successor, dst: int) -> None:
        self.trans.append(_Transition(src, dst, action, succ.picks))

    def on_flagged(self, src: int, action: ActionInstance, succ: Successor, depth: int) -> Control | None:
        if self.invariant not in succ.violations or not self.inst.holds(succ.state, self.invariant):
            return None
        # Only an event of the step shows the violation: the step itself is a target,
        # so it gets a node of its own (its state is fine when reached another way).
        target = self.search.tree.add(src, action.index, succ.picks)
        self.states.append(succ.state)
        self.depth.append(depth)
        self.bad.add(target)
        self.trans.append(_Transition(src, target, action, succ.picks))
        return Control.HANDLED


def _build(inst: Instance, invariant: str, options: DiagnoseOptions) -> _Graph:
    import networkx as nx

    # At the state limit the states found are still expanded, and new ones dropped.
    limits = Limits(max_states=options.max_states, drop_when_full=True)
    search = BreadthFirst(inst, symmetry=options.symmetry, limits=limits, catch_stops=False)
    builder = _Builder(inst, invariant, search)
    complete = search.run(builder).complete
    states, trans, bad = builder.states, builder.trans, builder.bad
    g = nx.DiGraph()
    g.add_nodes_from(range(len(states)))
    for i, t in enumerate(trans):
        if g.has_edge(t.src, t.dst):
            g.edges[t.src, t.dst]["t"].append(i)
        else:
            g.add_edge(t.src, t.dst, t=[i])
    for b in bad:
        g.add_edge(b, _SINK, t=[])
    return _Graph(inst, states, builder.depth, trans, bad, complete, g)


class _Cutter:
    """Answers "is a violation still reachable without these transitions?" on the relevant subgraph."""

    def __init__(self, graph: _Graph) -> None:
        import networkx as nx

        self.nx = nx
        g = graph.g
        # Only states that can still reach a violation matter for reachability of one.
        relevant = nx.ancestors(g, _SINK) | {_SINK}
        self.h = g.subgraph(relevant)
        self.relevant = relevant
        self.edges = [(u, v, set(d["t"])) for u, v, d in self.h.edges(data=True) if d["t"]]

    def reachable_without(self, blocked: set[int]) -> bool:
        """Whether a violation stays reachable from the initial state with ``blocked`` transitions removed."""
        if 0 not in self.relevant:
            return False
        hidden = [(u, v) for u, v, ts in self.edges if ts <= blocked]
        view = self.nx.restricted_view(self.h, [], hidden)
        return bool(self.nx.has_path(view, 0, _SINK))


# -- what a transition did --------------------------------------------------------------


@dataclass(frozen=True)
class _Branch:
    line: int
    body: int
    source: str


def _branches(act: Action) -> list[_Branch]:
    """The ``if`` statements in the action's own code (not in helpers it calls), with absolute lines."""
    try:
        lines, first = inspect.getsourcelines(act.fn)
    except (OSError, TypeError):
        return []
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return []
    out: list[_Branch] = []
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        return []
    for node in ast.walk(fn):
        if isinstance(node, ast.If):
            line = first + node.lineno - 1
            out.append(_Branch(line, first + node.body[0].lineno - 1, lines[node.lineno - 1].strip()))
    return out


def _trace_run(inst: Instance, t: _Transition, state: tuple[Any, ...]) -> tuple[frozenset[int], frozenset[int]]:
    """Re-run one transition; the lines of the action's own code it executed and the cells it read."""
    code: CodeType = t.ai.action.fn.__code__
    executed: set[int] = set()

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            executed.add(frame.f_lineno)
        return local

    def global_(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    reads: list[int] = inst.view._reads
    reads.clear()
    previous = sys.gettrace()
    sys.settrace(global_)
    try:
        sc = inst.run_with_picks(state, t.ai, t.picks)
    finally:
        sys.settrace(previous)
    if sc is None:  # pragma: no cover - the graph's own transition always re-runs
        raise OwnershipError(Code.INTERNAL_REPLAY, f"transition {t.ai.label} does not re-run", inst.spec.file)
    return frozenset(executed), frozenset(reads)


# -- conditions -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Atom:
    key: str
    text: str
    kind: str
    fields: tuple[str, ...]
    test: Callable[[_Transition], bool]
    line: int | None = None
    source: str = ""
    ordering: bool = False
    """A ``<`` between two fields."""


def _show(inst: Instance, vtype: Any, value: Any) -> str:
    try:
        return str(vtype.show(value, inst.names))
    except Exception:  # noqa: BLE001 - a value type that cannot show this value
        return repr(value)


def _atoms(graph: _Graph, act: Action, ts: Sequence[int], lines_of: dict[int, frozenset[int]]) -> list[_Atom]:
    """Candidate conditions for ``act``'s transitions ``ts`` (each holds on some but not all of them)."""
    inst = graph.inst
    spec = inst.spec
    states = graph.states
    trans = graph.trans
    out: list[_Atom] = []

    def keep(atom: _Atom) -> None:
        hits = sum(1 for i in ts if atom.test(trans[i]))
        if 0 < hits < len(ts):
            out.append(atom)

    arg_names = act.arg_names
    for j, dom in enumerate(act.arg_domains):
        if isinstance(dom, Values):
            for value in sorted({trans[i].ai.args[j] for i in ts}):
                keep(_Atom(f"{arg_names[j]} = {value}", f"{arg_names[j]} = {value}", "argument", (), _arg_is(j, value)))
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
                    _Atom(
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
                    _Atom(
                        key,
                        text,
                        "state",
                        (a.name, b.name),
                        _fields_compare(states, oa, ob, j, fn),
                        ordering=op in ("<", ">"),
                    )
                )
    for br in _branches(act):
        for outcome in (True, False):
            word = "true" if outcome else "false"
            keep(
                _Atom(
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


def _arg_is(j: int, value: Any) -> Callable[[_Transition], bool]:
    return lambda t: bool(t.ai.args[j] == value)


def _field_is(states: list[tuple[Any, ...]], off: int, j: int, value: Any) -> Callable[[_Transition], bool]:
    return lambda t: bool(states[t.src][off + t.ai.args[j]] == value)


def _fields_compare(
    states: list[tuple[Any, ...]], oa: int, ob: int, j: int, fn: Callable[[Any, Any], Any]
) -> Callable[[_Transition], bool]:
    return lambda t: bool(fn(states[t.src][oa + t.ai.args[j]], states[t.src][ob + t.ai.args[j]]))


def _branch_went(lines_of: dict[int, frozenset[int]], br: _Branch, outcome: bool) -> Callable[[_Transition], bool]:
    # In a loop the body may run on some iterations only: "true" means it ran at least once.
    return lambda t: br.line in lines_of[id(t)] and (br.body in lines_of[id(t)]) == outcome


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


# -- the diagnosis ----------------------------------------------------------------------


def diagnose(inst: Instance, invariant: str, options: DiagnoseOptions = DiagnoseOptions()) -> Diagnosis:
    """What every path from the initial state to a state violating ``invariant`` has in common."""
    select_invariants(inst, (invariant,))
    graph = _build(inst, invariant, options)
    base: dict[str, Any] = dict(
        spec=inst.spec.name,
        invariant=invariant,
        params=inst.describe_params(),
        states=len(graph.states),
        transitions=len(graph.trans),
        violating_states=len(graph.bad),
        complete=graph.complete,
        max_states=options.max_states,
        symmetry=options.symmetry,
    )
    if not graph.bad or 0 in graph.bad:
        return Diagnosis(**base, necessary=(), initial_violates=0 in graph.bad)
    cutter = _Cutter(graph)
    by_name: dict[str, list[int]] = {}
    for i, t in enumerate(graph.trans):
        by_name.setdefault(t.ai.action.name, []).append(i)
    order = list(inst.spec.actions)
    necessary_names = [n for n, ts in by_name.items() if not cutter.reachable_without(set(ts))]
    found = [_necessary(graph, cutter, inst.spec.actions[n], by_name[n]) for n in necessary_names]
    found.sort(key=lambda f: (f.depth, order.index(f.act.name)))
    cuts: list[tuple[str, str]] = []
    if not found:
        relevant = sorted({graph.trans[i].ai.action.name for _u, _v, ts in cutter.edges for i in ts}, key=order.index)
        for a, b in itertools.combinations(relevant, 2):
            if not cutter.reachable_without(set(by_name[a]) | set(by_name[b])):
                cuts.append((a, b))
                if len(cuts) >= options.max_pairs:
                    break
    return Diagnosis(**base, necessary=_describe(graph, found), cuts=tuple(cuts))


@dataclass
class _Found:
    """One necessary action before the conditions are written out."""

    act: Action
    ts: list[int]
    relevant: int
    depth: int
    chosen: list[tuple[_Atom, frozenset[int]]]
    """The narrowest necessary conjunction, then weaker necessary comparisons."""
    read: set[str]
    """Fields of the acting element the action read on its violating-path steps."""


def _necessary(graph: _Graph, cutter: _Cutter, act: Action, ts: list[int]) -> _Found:
    """The narrowest necessary conjunction of conditions for one necessary action."""
    trans = graph.trans
    relevant_ts = [i for i in ts if trans[i].dst in cutter.relevant]
    # Trace every transition of this action once: lines (guard outcomes) and cells read.
    lines_of: dict[int, frozenset[int]] = {}
    reads_of: dict[int, frozenset[int]] = {}
    with graph.inst.mode(recording=False):
        for i in ts:
            t = trans[i]
            lines_of[id(t)], reads_of[id(t)] = _trace_run(graph.inst, t, graph.states[t.src])
    necessary: list[tuple[_Atom, frozenset[int]]] = []
    for atom in _atoms(graph, act, ts, lines_of):
        blocked = frozenset(i for i in ts if atom.test(trans[i]))
        if not cutter.reachable_without(set(blocked)):
            necessary.append((atom, blocked))
    # Narrowest first; a condition joins the conjunction if it narrows it and the
    # conjunction still cuts every path, or if it matches exactly the same steps as
    # one already in (a synonym).  Conditions merely implied by it are left out,
    # except comparisons, which say how two fields relate (a length check).
    necessary.sort(key=lambda ab: (len(ab[1]), ab[0].kind != "state", ab[0].key))
    chosen: list[tuple[_Atom, frozenset[int]]] = []
    current = frozenset(ts)
    for atom, blocked in necessary:
        narrowed = current & blocked
        if any(blocked == b for _, b in chosen):
            chosen.append((atom, blocked))
        elif narrowed != current and not cutter.reachable_without(set(narrowed)):
            chosen.append((atom, blocked))
            current = narrowed
    # Implied but worth saying: which way the action's code went, and orderings.
    chosen += [(a, b) for a, b in necessary if (a.kind == "branch" or a.ordering) and (a, b) not in chosen]
    chosen = _drop_duplicate_comparisons(chosen)
    on_path = [i for i in relevant_ts if i in current] or relevant_ts
    depth = min((graph.depth[trans[i].src] for i in on_path), default=0)
    return _Found(act, ts, len(relevant_ts), depth, chosen, _fields_read(graph, [trans[i] for i in on_path], reads_of))


def _drop_duplicate_comparisons(chosen: list[tuple[_Atom, frozenset[int]]]) -> list[tuple[_Atom, frozenset[int]]]:
    """One comparison per pair of fields and set of steps (``a < b`` says all ``a != b`` would)."""
    out: list[tuple[_Atom, frozenset[int]]] = []
    seen: set[tuple[frozenset[str], frozenset[int]]] = set()
    for a, b in sorted(chosen, key=lambda ab: not ab[0].ordering):
        if len(a.fields) == 2:
            k = (frozenset(a.fields), b)
            if k in seen:
                continue
            seen.add(k)
        out.append((a, b))
    return [ab for ab in chosen if ab in out]


def _describe(graph: _Graph, found: list[_Found]) -> tuple[NecessaryAction, ...]:
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


def _fields_read(graph: _Graph, ts: Iterable[_Transition], reads_of: dict[int, frozenset[int]]) -> set[str]:
    """Names of the acting element's fields the action read on any of ``ts``."""
    inst = graph.inst
    out: set[str] = set()
    for t in ts:
        for var in inst.spec.vars.values():
            if len(var.index) != 1:
                continue
            off = inst.layouts[var.name].offset
            for j, dom in enumerate(t.ai.action.arg_domains):
                if isinstance(dom, Domain) and var.index[0] is dom and off + t.ai.args[j] in reads_of[id(t)]:
                    out.add(var.name)
    return out


def diagnose_result(spec: Any, result: Any, options: DiagnoseOptions = DiagnoseOptions()) -> Diagnosis:
    """Diagnose the invariant a check found violated, at the parameter values of its trace.

    ``spec`` is the checked :class:`~ownership.spec.model.Spec`, ``result`` its
    :class:`~ownership.core.result.CheckResult`.  A deadlock, or a result
    without a violated invariant, is OWN013 (there is nothing to diagnose).
    """
    violated = getattr(result, "violated", None)
    if violated is None or violated not in spec.invariants:
        what = "a deadlock" if violated == "deadlock" else "no violated invariant"
        raise OwnershipError(Code.BAD_OPTION, f"nothing to diagnose: {spec.name} has {what}", spec.file)
    params = dict(result.trace.params) if result.trace is not None else {}
    return diagnose(Instance(spec, params), violated, options)
