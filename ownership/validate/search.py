"""Trace validation: does some behaviour of the spec explain a recorded event log?

After Cirstea, Kuppe, Loillier and Merz, "Validating Traces of Distributed
Programs Against TLA+ Specifications" (2024): the log records only some
events and some variables, so validation is a constrained search.  The
search keeps, breadth-first, the set of *configurations* consistent with the
log so far: a spec state and the binding of the log's request ids and content
keys to elements of the spec's domains (the choice made at an id's first
appearance is part of the configuration).  Before each logged event it adds
every configuration reachable by up to ``max_gap`` internal steps (the
spec's internal actions, and those of the kinds ``unlogged`` says the log
does not record); then
each configuration takes the event's rule (:mod:`ownership.lang.logmap`): the
action with the logged arguments, kept when its guard holds and its effect
agrees with the logged fields.  An empty set rejects the log at that line;
its report is recomputed for a few of the configurations before the line:
every candidate action instance and why it failed.

The set is bounded (``max_configs``); a bound that dropped configurations
makes a later rejection inconclusive, never a false REJECTED.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Domain
from ownership.lang.evaluator import Evaluator
from ownership.lang.instance import Instance, State
from ownership.lang.logmap import LogIds, LogRule
from ownership.lang.successors import ActionInstance
from ownership.validate.eventlog import EventLog, LogEvent
from ownership.validate.renaming import Binding, Renamer, bind


@dataclass(frozen=True)
class ValidateOptions:
    """How far the search may go: internal steps between two events, configurations kept, states shown."""

    max_gap: int = 2
    max_configs: int = 10_000
    show_states: int = 3
    unlogged: tuple[str, ...] = ()
    """Event kinds the log does not record: their actions may run unlogged, as internal steps."""


@dataclass(frozen=True)
class Config:
    """A spec state with the log ids bound so far."""

    state: State
    reqs: Binding = ()
    keys: Binding = ()


@dataclass(frozen=True)
class Candidate:
    """One action instance tried for the rejected event in one configuration, and why it failed."""

    state: int
    action: str
    reason: str


@dataclass(frozen=True)
class Rejection:
    """The first log line no behaviour explains."""

    line: int
    seq: int
    event: dict[str, Any]
    step: str
    states: tuple[dict[str, Any], ...]
    configs: int
    candidates: tuple[Candidate, ...]
    initial: dict[str, Any] = field(default_factory=dict, compare=False)
    """The spec's initial state, named: the text report shows the cells that differ from it."""
    page_element: str = ""
    """The spec element standing for the page of ``step`` (``B10`` for page 10); empty when there is none."""


@dataclass
class ValidationResult:
    """What validating one log against one spec found."""

    spec: str
    log: str
    verdict: str
    """``VALIDATED``, ``REJECTED`` or ``UNKNOWN`` (the configuration bound dropped some, then none was left)."""
    events: int
    params: dict[str, int]
    seconds: float = 0.0
    kept_max: int = 0
    kept_final: int = 0
    internal: tuple[str, ...] = ()
    truncated_at: int | None = None
    rejection: Rejection | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 validated, 1 rejected, 3 inconclusive."""
        return {"VALIDATED": 0, "REJECTED": 1}.get(self.verdict, 3)


class Validator:
    """One validation run: an instance, the spec's log declarations and a log."""

    def __init__(self, inst: Instance, ids: LogIds, rules: dict[str, LogRule], log: EventLog, node: str,
                 options: ValidateOptions) -> None:
        self.inst, self.ids, self.rules, self.log, self.node, self.opts = inst, ids, rules, log, node, options
        # Its own view, never recording: events are not part of what a log is checked against.
        self.eval = inst.evaluator(recording=False)
        header_node = log.header.nodes[node]
        usable = [p for p in range(header_node.pages) if p not in header_node.reserved]
        self.page_elem = {p: i for i, p in enumerate(usable)}
        mapped = {r.action for r in rules.values()}
        unlogged = {rules[k].action for k in options.unlogged if k in rules}
        declared = ids.internal
        self.internal = [ai for ai in inst.action_instances
                         if ai.action.name in unlogged
                         or (ai.action.name not in mapped if declared is None else ai.action.name in declared)]
        self._index: dict[tuple[str, tuple[int, ...]], dict[tuple[int, ...], list[ActionInstance]]] = {}
        self.by_action: dict[str, list[ActionInstance]] = {}
        for ai in inst.action_instances:
            self.by_action.setdefault(ai.action.name, []).append(ai)
        self.renamers = {d.name: Renamer(inst, d) for d in (ids.req, ids.content) if d is not None}
        self.page_of_cell: dict[int, int] = {}
        for e, cells in enumerate(inst.element_cells[ids.pages.name]):
            for c in cells:
                self.page_of_cell[c] = e

    # -- the elements behind log ids ------------------------------------------------
    def _bind(self, d: Domain | None, key: str | None, binding: Binding, state: State,
              release_unnamed: bool) -> list[tuple[int | None, Binding]]:
        if d is None or key is None:
            return [(None, binding)]
        return bind(self.renamers[d.name], key, binding, state, release_unnamed)

    def _element(self, d: Domain | None, e: int | None) -> Any:
        if d is None or e is None:
            return None
        elems = self.inst.elements.get(d.name)
        return elems[e] if elems else e

    # -- one step of one event ---------------------------------------------------------
    def steps(self, ev: LogEvent) -> list[tuple[str, int | None, str | None, int | None]]:
        """The event as the rule's steps: (what it is called, page id, content key, source page id)."""
        rule = self.rules.get(ev.kind)
        if rule is not None and rule.per_page:  # no pages: no call
            return [(f"page {p}", p, ev.content[i] if ev.content else None,
                     ev.src_pages[i] if ev.src_pages else None) for i, p in enumerate(ev.pages)]
        return [("", None, None, None)]

    def apply(self, c: Config, ev: LogEvent, step: tuple[str, int | None, str | None, int | None],
              why: list[tuple[str, str]] | None = None) -> list[Config]:
        """The configurations ``c`` becomes by taking one step of ``ev``; ``why`` collects the failures."""
        rule = self.rules.get(ev.kind)
        if rule is None:
            if why is not None:
                why.append(("-", f"spec {self.inst.spec.name} maps no action to {ev.kind} events (spec.logs)"))
            return []
        _, page, key, src = step
        if ev.node is not None and ev.node != self.node:
            if why is not None:
                why.append(("-", f"node {ev.node!r} is not the node the spec models ({self.node!r})"))
            return []
        for p in (page, src):
            if p is not None and p not in self.page_elem:
                if why is not None:
                    why.append(("-", f"page {p} is reserved on node {self.node!r}: no spec element stands for it"))
                return []
        out: list[Config] = []
        uses = rule.fields_used()
        req_key = ev.req if "req" in uses or ev.kind == "finish" else None
        req_options = self._bind(self.ids.req, req_key, c.reqs, c.state, False)
        key_options = self._bind(self.ids.content, key if "content" in uses else None, c.keys, c.state, True)
        if why is not None:
            for options, d, what in ((req_options, self.ids.req, f"request {ev.req!r}"),
                                     (key_options, self.ids.content, f"content key {key!r}")):
                if not options and d is not None:
                    why.append(("-", f"no element of {d.name} is free for {what}: all "
                                     f"{self.inst.sizes[d.name]} stand for ids still in use (a larger instance: --param)"))
        for req, reqs in req_options:
            for content, keys in key_options:
                if ev.kind == "finish":
                    reqs = tuple(x for x in reqs if x[0] != ev.req)
                values = {"req": req, "page": self.page_elem.get(page) if page is not None else None,
                          "content": content, "src_page": self.page_elem.get(src) if src is not None else None}
                e = self._event_values(ev, values, keys)
                for state in self._run(rule, c.state, ev, values, e, why):
                    out.append(Config(state, reqs, keys))
        return out

    def canonical(self, c: Config) -> Config:
        """``c`` with the unbound elements of its symmetric domains renamed canonically (see :mod:`.renaming`)."""
        state = c.state
        for d, binding in ((self.ids.req, c.reqs), (self.ids.content, c.keys)):
            if d is not None and d.symmetric:
                state = self.renamers[d.name].canonical(state, {e for _, e in binding})
        return c if state is c.state else Config(state, c.reqs, c.keys)

    def _event_values(self, ev: LogEvent, values: dict[str, int | None], keys: Binding) -> SimpleNamespace:
        """What a rule's ``where`` sees: the event's values as elements of the spec's domains."""
        pages = self.ids.pages
        bound = dict(keys)
        return SimpleNamespace(
            kind=ev.kind, req=self._element(self.ids.req, values["req"]),
            page=self._element(pages, values["page"]), content=self._element(self.ids.content, values["content"]),
            src_page=self._element(pages, values["src_page"]),
            pages=[self._element(pages, self.page_elem.get(p)) for p in ev.pages],
            contents=[self._element(self.ids.content, bound.get(k)) for k in (ev.content or ())],
            fields=ev.raw,
        )

    def _run(self, rule: LogRule, state: State, ev: LogEvent, values: dict[str, int | None], e: SimpleNamespace,
             why: list[tuple[str, str]] | None) -> Iterator[State]:
        if rule.action is None:
            if self._where(rule, state, e, why, rule.kind):
                yield state
            return
        fixed: list[tuple[int, int]] = []
        act = self.inst.spec.actions[rule.action]
        for arg, value in rule.args:
            pos = act.arg_names.index(arg)
            got = values[value] if isinstance(value, str) else value
            if got is None:
                continue  # not logged: the argument ranges over its domain
            fixed.append((pos, got))
        expect = ({values["page"]} if rule.per_page and values["page"] is not None
                  else {self.page_elem[p] for p in ev.pages if p in self.page_elem})
        candidates = self._instances(rule.action, fixed)
        if not candidates and why is not None:
            shown = ", ".join(f"{act.arg_names[pos]}={v}" for pos, v in fixed)
            why.append((rule.action, f"no instance of {rule.action} has the logged arguments ({shown})"))
        for ai in candidates:
            succs = self.eval.successors(state, ai)
            if not succs and why is not None:
                why.append((ai.label, _guard_reason(self.eval, state, ai)))
            for succ in succs:
                bad = self._changes(rule, state, succ.state, expect)
                if bad is not None:
                    if why is not None:
                        why.append((ai.label, bad))
                    continue
                if self._where(rule, succ.state, e, why, ai.label):
                    yield succ.state

    def _instances(self, action: str, fixed: list[tuple[int, int]]) -> list[ActionInstance]:
        """The instances of ``action`` with these (argument position, value) pairs, through a per-position index."""
        positions = tuple(pos for pos, _ in fixed)
        index = self._index.get((action, positions))
        if index is None:
            index = {}
            for ai in self.by_action[action]:
                index.setdefault(tuple(ai.args[p] for p in positions), []).append(ai)
            self._index[(action, positions)] = index
        return index.get(tuple(v for _, v in fixed), [])

    def _changes(self, rule: LogRule, before: State, after: State, expect: set[int]) -> str | None:
        """Why the step's changed cells of ``rule.changes`` are not exactly the event's pages, or ``None``."""
        names = self.inst.names[self.ids.pages.name]
        for var in rule.changes:
            lay = self.inst.layouts[var]
            changed = {self.page_of_cell[k] for k in range(lay.offset, lay.offset + lay.length)
                       if before[k] != after[k]}
            if changed != expect:
                shown = ", ".join(names[i] for i in sorted(changed)) or "nothing"
                want = ", ".join(names[i] for i in sorted(expect)) or "nothing"
                return f"effect disagrees with the log: it changes {var} at {shown}, the log says {want}"
        return None

    def _where(self, rule: LogRule, state: State, e: SimpleNamespace, why: list[tuple[str, str]] | None,
               label: str) -> bool:
        if rule.where is None:
            return True
        view = self.eval.at(state)
        try:
            ok = bool(rule.where(view, e))
        except OwnershipError:
            raise
        except Exception as exc:  # noqa: BLE001 - spec code is user code
            raise OwnershipError(Code.SPEC_RUNTIME, f"the where= of spec.logs({rule.kind!r}) raised "
                                 f"{type(exc).__name__}: {exc} (it sees e.req and e.content only when it names "
                                 "them itself)", rule.file, rule.line) from None
        if not ok and why is not None:
            why.append((label, f"effect disagrees with the log: the rule's where= ({_source_line(rule)}) is false "
                               "after the step"))
        return ok

    # -- the search ------------------------------------------------------------------------
    def closure(self, configs: dict[Config, None]) -> tuple[dict[Config, None], bool]:
        """``configs`` and every configuration up to ``max_gap`` internal steps from them (those first).

        The second value says whether the bound (``max_configs``, for the
        internal steps' configurations too) cut the closure short.
        """
        seen = dict(configs)
        frontier = list(configs)
        for _ in range(self.opts.max_gap):
            nxt: list[Config] = []
            for c in frontier:
                for ai in self.internal:
                    for succ in self.eval.successors(c.state, ai):
                        n = self.canonical(Config(succ.state, c.reqs, c.keys))
                        if n not in seen:
                            if len(seen) >= self.opts.max_configs:
                                return seen, True
                            seen[n] = None
                            nxt.append(n)
            if not nxt:
                break
            frontier = nxt
        return seen, False

    def run(self, progress: Callable[[int, int], None] | None = None) -> ValidationResult:
        """Validate the whole log."""
        inst = self.inst
        start = time.monotonic()
        result = ValidationResult(inst.spec.name, self.log.path, "VALIDATED", len(self.log.events),
                                  dict(inst.param_values), internal=tuple(sorted({ai.action.name for ai in self.internal})))
        configs: dict[Config, None] = {Config(inst.init_state): None}
        last = start
        for n, ev in enumerate(self.log.events, start=1):
            now = time.monotonic()
            if progress is not None and now - last >= 1.0:
                progress(n, len(configs))
                last = now
            current, cut = self.closure(configs)
            if cut and result.truncated_at is None:
                result.truncated_at = ev.line
            for step in self.steps(ev):
                nxt: dict[Config, None] = {}
                for c in current:
                    for k in self.apply(c, ev, step):
                        nxt[k] = None
                if len(nxt) > 1:  # renamings merge only where there is more than one (a lone one may stay as is)
                    nxt = dict.fromkeys(self.canonical(k) for k in nxt)
                if not nxt:
                    result.rejection = self._reject(ev, step, list(current))
                    result.verdict = "UNKNOWN" if result.truncated_at is not None else "REJECTED"
                    break
                current = nxt
            if result.rejection is not None:
                break
            if len(current) > self.opts.max_configs:
                current = dict.fromkeys(list(current)[: self.opts.max_configs])
                if result.truncated_at is None:
                    result.truncated_at = ev.line
            configs = current
            result.kept_max = max(result.kept_max, len(configs))
        result.kept_final = len(configs) if result.rejection is None else 0
        result.seconds = time.monotonic() - start
        return result

    def _reject(self, ev: LogEvent, step: tuple[str, int | None, str | None, int | None],
                before: Sequence[Config]) -> Rejection:
        shown = list(before[: self.opts.show_states])
        candidates: list[Candidate] = []
        for i, c in enumerate(shown):
            why: list[tuple[str, str]] = []
            self.apply(c, ev, step, why)
            seen: set[tuple[str, str]] = set()
            for label, reason in why:
                if (label, reason) not in seen:
                    seen.add((label, reason))
                    candidates.append(Candidate(i, label, reason))
        states = tuple(self.describe(c) for c in shown)
        page = step[1]
        element = self.page_elem.get(page) if page is not None else None
        return Rejection(ev.line, ev.seq, ev.raw, step[0], states, len(before), tuple(candidates),
                         self.inst.to_json(self.inst.init_state),
                         self.inst.names[self.ids.pages.name][element] if element is not None else "")

    def describe(self, c: Config) -> dict[str, Any]:
        """A configuration in named form: the state (as trace.json writes it) and the id bindings."""
        names = self.inst.names
        out: dict[str, Any] = {"state": self.inst.to_json(c.state)}
        if self.ids.req is not None:
            out["requests"] = {k: names[self.ids.req.name][e] for k, e in c.reqs}
        if self.ids.content is not None:
            out["content"] = {k: names[self.ids.content.name][e] for k, e in c.keys}
        return out


def _source_line(rule: LogRule) -> str:
    """Where a rule was declared, ``file:line`` (relative to the working directory when inside it)."""
    return f"{_shown_path(rule.file)}:{rule.line}"


def _shown_path(path: str | None) -> str:
    if path is None:
        return "?"
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _guard_reason(ev: Evaluator, state: State, ai: ActionInstance) -> str:
    """``guard false: require(...) (file:line)``: the guard that disabled ``ai`` in ``state``."""
    where = ev.disabled_at(state, ai)
    if where is None:
        return "guard false (no choice of the action is possible here)"
    file, line, text = where
    return f"guard false: {text} ({_shown_path(file)}:{line})"
