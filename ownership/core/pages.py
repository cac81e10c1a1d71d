"""The pages of a trace as the story and the pictures see them: pools, marks, violations, beats.

:func:`pool_shapes` gives the schema's pools whose variables are in the
trace's states (:class:`PoolShape`), with their marks; :func:`keepers` and
:func:`pending` read what the marks say about a page; :func:`violations`
locates every event that breaks an invariant (:class:`Violation`);
:class:`Beat` is one step of a bug story in words.  :mod:`ownership.core.story`
builds the story from these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.core.events import Event
from ownership.core.schema import PageMark
from ownership.core.trace import Trace


@dataclass(frozen=True)
class PoolShape:
    """A pool of the trace's schema whose state variables are all there: what the renderers draw."""

    name: str
    pages: tuple[str, ...]
    free: str
    holders: str
    content: str
    """``""`` for a pool that does not track whose KV a page holds (a block table's blocks)."""
    slot: str
    marks: tuple[PageMark, ...] = ()
    """The pool's marks whose variables are in the trace's states."""

    @property
    def shared(self) -> bool:
        """Pages may have several holders: the pool counts references (it has a ``count`` mark)."""
        return any(m.role == "count" for m in self.marks)


def pool_shapes(trace: Trace) -> tuple[PoolShape, ...]:
    """The schema's pools whose variables really are in the trace's states."""
    out: list[PoolShape] = []
    for raw in trace.schema.pools or ():
        if raw.name is None or raw.pages is None or raw.free is None or raw.holders is None:
            continue
        marks = tuple(m for m in raw.marks if isinstance(trace.initial.get(m.var), Mapping))
        pool = PoolShape(raw.name, raw.pages, raw.free, raw.holders, raw.content or "", raw.slot or "", marks)
        needed = (pool.free, pool.holders) + ((pool.content,) if pool.content else ())
        if all(isinstance(trace.initial.get(v), Mapping) for v in needed):
            out.append(pool)
    return tuple(out)


def cell(state: Mapping[str, Any], var: str, key: str) -> Any:
    """``state[var][key]``, or ``None`` when ``var`` is not a table."""
    table = state.get(var)
    return table.get(key) if isinstance(table, Mapping) else None


def truthy(value: Any) -> bool:
    """Whether a mark's value is set: true, non-zero, non-empty, not ``None``."""
    return value is not None and value is not False and value != 0 and value != [] and value != {}


def keepers(state: Mapping[str, Any], pool: PoolShape, page: str) -> list[tuple[PageMark, Any]]:
    """The ``keeper`` marks that hold ``page`` in ``state`` (a cache, a tree, a job), with their values."""
    out = []
    for m in pool.marks:
        if m.role == "keeper":
            value = cell(state, m.var, page)
            if truthy(value):
                out.append((m, value))
    return out


def pending(state: Mapping[str, Any], mark: PageMark, page: str) -> list[str]:
    """The elements with an outstanding operation on ``page`` under a ``pending`` mark.

    The variable is indexed by (element, page), a nested table in the state
    JSON; one indexed the other way round (page, element) is read too.
    """
    table = state.get(mark.var)
    if not isinstance(table, Mapping):
        return []
    inner = table.get(page)
    if isinstance(inner, Mapping):
        return [str(k) for k, v in inner.items() if truthy(v)]
    return [str(k) for k, row in table.items() if isinstance(row, Mapping) and truthy(row.get(page))]


@dataclass(frozen=True)
class Violation:
    """An event that breaks an invariant, located in the trace."""

    step: int
    pos: int
    """Index of the event within its step."""
    event: Event
    invariant: str
    primary: bool

    @property
    def pool(self) -> str | None:
        pool = self.event.get("pool")
        return str(pool) if pool is not None else None

    @property
    def page(self) -> str | None:
        page = self.event.get("page")
        if page is None and self.event.get("pages"):
            page = self.event.get("pages")[0]
        return str(page) if page is not None else None


@dataclass(frozen=True)
class Beat:
    """One step of the story, in words (``"A frees D0 (decode_finish(A)); ..."``)."""

    step: int | None
    """The step it happened at (``None``: a fact about the trace, such as a page never written)."""
    text: str


def violations(trace: Trace) -> tuple[Violation, ...]:
    """Events that break an invariant; one breaking the trace's own is primary.

    The primary one is the first such event of the last step (the step that
    reached the violating state), else the latest one anywhere.
    """
    found = [
        (i, pos, e) for i, step in enumerate(trace.steps, start=1) for pos, e in enumerate(step.events) if e.violates
    ]
    own = [k for k, (_, _, e) in enumerate(found) if e.violates == trace.violation]
    in_last = [k for k in own if found[k][0] == len(trace.steps)]
    primary = in_last[0] if in_last else (own[-1] if own else None)
    return tuple(Violation(i, pos, e, str(e.violates), k == primary) for k, (i, pos, e) in enumerate(found))


def events_before(trace: Trace, j: int, flag: Violation) -> Sequence[Event]:
    """Step ``j``'s events, cut just before ``flag``'s event when ``j`` is its step."""
    events = trace.steps[j - 1].events
    return events[: flag.pos] if j == flag.step else events


def earlier(trace: Trace, flag: Violation) -> list[tuple[int, Event]]:
    """Every event before ``flag``'s, latest first, with its step."""
    return [(j, e) for j in range(flag.step, 0, -1) for e in reversed(events_before(trace, j, flag))]


def show_value(value: Any) -> str:
    """A state value in a story line (``-``, ``true``, ``{A,B}``)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "{" + ",".join(str(v) for v in value) + "}"
    return str(value)
