"""What a trace stores about its spec's shape, so it can be drawn without loading the spec.

:func:`ownership.core.replay.trace_schema` writes a :class:`TraceSchema`
when the trace is built: each action's source line and summary, the spec's
summary and, for a spec with page pools, the request domain, each pool's
variables and pages, the per-request variables and the ghosts.  In
``trace.json`` it is the object ``extra.schema``, whose shape
``ownership/schemas/trace.schema.json`` publishes; :meth:`TraceSchema.from_json`
checks a hand-edited one against it (a schema of the wrong shape would
otherwise crash a renderer) and :meth:`TraceSchema.to_json` writes it back key
for key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ownership.core import formats


@dataclass(frozen=True)
class ActionInfo:
    """An action's ``def`` line and the first line of its docstring."""

    line: int | None = None
    doc: str | None = None


MARK_ROLES = ("keeper", "count", "pending", "flag")
"""What a :class:`PageMark`'s variable says about a page.

* ``keeper``: indexed by page; a true, non-zero or non-empty value means
  something other than a request's page table holds the page (a prefix cache,
  a radix tree, a job's own reference), so the page is neither free nor lost;
* ``count``: indexed by page; a number drawn next to the page (a reference count);
* ``pending``: indexed by (some domain, page); true while an operation of that
  domain's element on the page is outstanding (a posted read or write, a
  transfer handle);
* ``flag``: indexed by page; true marks the page with the label (published,
  deregistered, tombstoned).
"""


@dataclass(frozen=True)
class PageMark:
    """A state variable the vocabulary asks renderers to draw on a pool's pages."""

    var: str
    role: str
    label: str


@dataclass(frozen=True)
class PoolSchema:
    """A page pool: its name, pages, and the state variables that hold its bookkeeping."""

    name: str | None = None
    pages: tuple[str, ...] | None = None
    free: str | None = None
    holders: str | None = None
    slot: str | None = None
    content: str | None = None
    marks: tuple[PageMark, ...] = ()
    """Further per-page variables to draw (cache holds, reference counts, pending operations)."""


@dataclass(frozen=True)
class TraceSchema:
    """The spec's shape as a trace stores it; the ownership part is ``None`` for a spec without pools."""

    actions: Mapping[str, ActionInfo] = field(default_factory=dict)
    summary: str | None = None
    requests: tuple[str, ...] | None = None
    """The request domain's element names."""
    request_domain: str | None = None
    pools: tuple[PoolSchema, ...] | None = None
    per_request: tuple[str, ...] | None = None
    """State variables indexed by the request domain alone (drawn in the request's lane)."""
    ghosts: tuple[str, ...] | None = None
    """Ghost variables (the checker's bookkeeping, hidden from step tables)."""
    known: bool = True
    """False for a trace that stores no schema at all."""

    def to_json(self) -> dict[str, Any]:
        """The ``extra.schema`` object (empty for an unknown schema)."""
        if not self.known:
            return {}
        out: dict[str, Any] = {
            "actions": {name: {"line": a.line, "doc": a.doc} for name, a in self.actions.items()},
            "summary": self.summary,
        }
        if self.requests is not None:
            out["requests"] = list(self.requests)
            out["request_domain"] = self.request_domain
            out["pools"] = [_pool_json(p) for p in self.pools or ()]
            out["per_request"] = list(self.per_request or ())
            out["ghosts"] = list(self.ghosts or ())
        return out

    @staticmethod
    def from_json(data: Any) -> TraceSchema:
        """The schema in ``data``; raises ``ValueError`` saying what is wrong with a malformed one.

        Its shape is ``$defs/trace_schema`` of the published trace schema, which
        :meth:`Trace.from_json` checks with the whole trace; this checks again
        for a schema read on its own.
        """
        problem = formats.problem("trace", data, "trace_schema")
        if problem is not None:
            raise ValueError(problem.sentence("the schema", prefix=False))
        if not data:
            return UNKNOWN_SCHEMA

        def names_in(obj: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
            return None if obj.get(key) is None else tuple(obj[key])

        def names(key: str) -> tuple[str, ...] | None:
            return names_in(data, key)

        pools = data.get("pools")
        return TraceSchema(
            actions={name: ActionInfo(a.get("line"), a.get("doc")) for name, a in (data.get("actions") or {}).items()},
            summary=data.get("summary"),
            requests=names("requests"),
            request_domain=data.get("request_domain"),
            pools=None if pools is None else tuple(
                PoolSchema(p.get("name"), names_in(p, "pages"), p.get("free"), p.get("holders"), p.get("slot"),
                           p.get("content"),
                           tuple(PageMark(m["var"], m["role"], m["label"]) for m in p.get("marks") or ()))
                for p in pools
            ),
            per_request=names("per_request"),
            ghosts=names("ghosts"),
        )


def _pool_json(p: PoolSchema) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "pages": list(p.pages or ()), "free": p.free, "holders": p.holders,
                           "slot": p.slot, "content": p.content}
    if p.marks:  # absent rather than empty, so traces of specs without marks keep their bytes
        out["marks"] = [{"var": m.var, "role": m.role, "label": m.label} for m in p.marks]
    return out


UNKNOWN_SCHEMA = TraceSchema(known=False)
"""The schema of a trace that stores none (hand-written, or from a tool that does not write one)."""
