"""How a spec reads a recorded event log (``ownership validate``): ids onto domains, events onto actions.

A spec that can be validated against logs of a real run declares, once, how
the log's ids map onto its domains (:class:`LogIds`, ``spec.log_ids``), and,
per event kind of the log (``docs/event-log.md``), which action explains it
(:class:`LogRule`, ``spec.logs``):

* ``action``: the action the event stands for, or ``None`` for an event that
  changes no variable of the spec (then only ``where`` is checked);
* ``per_page``: the event is one call of the action per page of ``pages``, in
  the logged order (``free pages=[3, 5]`` is ``free_blocks(3)``, then
  ``free_blocks(5)``), with that page's ``content`` key;
* ``args``: an action argument bound to a logged field (``"req"``, ``"page"``,
  ``"content"``, ``"src_page"``) or to a constant; arguments not named range
  over their whole domain;
* ``changes``: variables whose changed cells must be exactly those of the
  event's page(s): ``changes=("ref_cnt",)`` on ``alloc`` means the action
  took the logged page, not another one;
* ``where``: ``fn(s, e) -> bool`` on the state after the step (``s``) and the
  event's values as elements of the spec's domains (``e.req``, ``e.page``,
  ``e.content``, ``e.pages``, ``e.contents``, ``e.src_page``).

The spec's internal steps are the actions the log does not record: those
``log_ids(internal=...)`` names (by default, every action no rule maps), and
those of the kinds a partial log is declared not to record
(``ownership validate --unlogged cache``).  ``ownership validate`` allows up
to ``--max-gap`` of them between two logged events.  Nothing here runs a spec; :mod:`ownership.validate` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.declarations import Domain

if TYPE_CHECKING:
    from ownership.lang.model import Spec

LOG_KINDS = ("alloc", "share", "write", "cache", "transfer", "read", "free", "finish")
"""The event kinds of the event log, version 1 (``docs/event-log.md``)."""
FIELDS = ("req", "page", "content", "src_page")
"""The logged values an action argument can be bound to."""
LOGS_KEY = "log_rules"
IDS_KEY = "log_ids"


@dataclass(frozen=True)
class LogNode:
    """A node (KV pool) of a log's header: what ``LogIds.params`` receives to size the instance."""

    name: str
    pages: int
    page_size: int
    reserved: tuple[int, ...]

    @property
    def usable(self) -> int:
        """Pages that can be handed out (``pages`` minus the reserved ones)."""
        return self.pages - len(self.reserved)


@dataclass(frozen=True)
class LogIds:
    """How a log's ids map onto the spec: page ids onto ``pages``, request ids onto ``req``, content keys onto ``content``.

    Page ids map directly: element ``i`` of ``pages`` is the ``i``-th page id of
    the header's node that is not reserved.  Request ids and content keys are
    bound to an unused element when they first appear (a request's element is
    released by its ``finish``, a content key's once no cell of the state
    names its element).  ``params(node)`` gives the parameter values the
    header's node asks for; a log whose values are outside the parameters'
    ranges is refused.
    """

    pages: Domain
    params: Callable[[LogNode], Mapping[str, int]] | None
    req: Domain | None
    content: Domain | None
    node: str | None
    internal: tuple[str, ...] | None
    """Actions that run unlogged between logged events; ``None``: every action no rule maps."""
    file: str | None
    line: int | None


@dataclass(frozen=True)
class LogRule:
    """Which action explains one kind of logged event (see the module docstring)."""

    kind: str
    action: str | None
    per_page: bool
    args: tuple[tuple[str, str | int], ...]
    changes: tuple[str, ...]
    where: Callable[[Any, Any], Any] | None
    file: str | None
    line: int | None

    def fields_used(self) -> set[str]:
        """The logged fields the rule reads: those its arguments are bound to, and those its ``where`` names.

        An id is bound to an element only when the rule reads it, so an event
        that merely mentions a content key (a read, in a spec without contents)
        does not take up an element.
        """
        used = {v for _, v in self.args if isinstance(v, str)}
        if self.where is not None:
            code = getattr(self.where, "__code__", None)
            names = set(code.co_names) if code is not None else {"req", "content"}
            used |= names & {"req", "content"}
            if "contents" in names:
                used.add("content")
        return used

    def describe(self) -> str:
        """``alloc -> get_new_blocks(num_blocks=1) per page``: the rule as the report names it."""
        shown = ", ".join(f"{k}={v}" for k, v in self.args)
        target = f"{self.action}({shown})" if self.action else "no action (a stutter)"
        return f"{self.kind} -> {target}{' per page' if self.per_page else ''}"


def _bad(spec: Spec, message: str) -> OwnershipError:
    file, line = caller_location(4)
    return OwnershipError(Code.LOG_RULE_INVALID, f"spec {spec.name}: {message}", file, line)


def declare_ids(spec: Spec, pages: Any, params: Any, req: Any, content: Any, node: Any, internal: Any) -> LogIds:
    """Check and store a ``spec.log_ids(...)`` declaration (OWN092 at its line when malformed)."""
    if IDS_KEY in spec.extensions:
        raise _bad(spec, "log_ids declared twice")
    for what, d in (("pages", pages), ("req", req), ("content", content)):
        if d is not None and (not isinstance(d, Domain) or spec.domains.get(d.name) is not d):
            raise _bad(spec, f"log_ids({what}=...) takes a domain of this spec, got {d!r}")
    if pages is None:
        raise _bad(spec, "log_ids needs pages=, the domain the log's page ids map onto")
    if params is not None and not callable(params):
        raise _bad(spec, f"log_ids(params=...) takes a function of the header's node, got {params!r}")
    if node is not None and not isinstance(node, str):
        raise _bad(spec, f"log_ids(node=...) takes a node name, got {node!r}")
    if internal is not None:
        if isinstance(internal, str) or not all(isinstance(a, str) for a in internal):
            raise _bad(spec, f"log_ids(internal=...) takes a tuple of action names, got {internal!r}")
        for a in internal:
            if a not in spec.actions:
                raise _bad(spec, f"log_ids(internal=...) names {a!r}, not an action of the spec (declare it first)")
        internal = tuple(internal)
    file, line = caller_location(3)
    ids = LogIds(pages, params, req, content, node, internal, file, line)
    spec.extensions[IDS_KEY] = ids
    return ids


def declare_rule(spec: Spec, kind: Any, action: Any, per_page: Any, args: Any, changes: Any, where: Any) -> LogRule:
    """Check and store a ``spec.logs(...)`` declaration (OWN092 at its line when malformed)."""
    ids: LogIds | None = spec.extensions.get(IDS_KEY)
    if ids is None:
        raise _bad(spec, "declare spec.log_ids(...) before spec.logs(...)")
    if kind not in LOG_KINDS:
        raise _bad(spec, f"logs: {kind!r} is not an event kind of the log (known: {', '.join(LOG_KINDS)})")
    rules: tuple[LogRule, ...] = spec.extensions.get(LOGS_KEY, ())
    if any(r.kind == kind for r in rules):
        raise _bad(spec, f"logs: event kind {kind!r} mapped twice")
    bound = dict(args or {})
    if action is not None:
        act = spec.actions.get(action) if isinstance(action, str) else None
        if act is None:
            raise _bad(spec, f"logs({kind!r}): {action!r} is not an action of the spec (declare it first; "
                             f"known: {', '.join(spec.actions)})")
        domains = dict(zip(act.arg_names, act.arg_domains, strict=True))
        for arg, value in bound.items():
            if arg not in domains:
                raise _bad(spec, f"logs({kind!r}): action {action} has no argument {arg!r} "
                                 f"(its arguments: {', '.join(act.arg_names) or 'none'})")
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise _bad(spec, f"logs({kind!r}): args[{arg!r}] must be a logged field or an int, got {value!r}")
            if isinstance(value, str):
                want = {"req": ids.req, "page": ids.pages, "src_page": ids.pages, "content": ids.content}.get(value)
                if value not in FIELDS:
                    raise _bad(spec, f"logs({kind!r}): args[{arg!r}]={value!r} is not a logged field "
                                     f"(known: {', '.join(FIELDS)})")
                if want is None or domains[arg] is not want:
                    raise _bad(spec, f"logs({kind!r}): argument {arg} is drawn from {domains[arg].name}, but the "
                                     f"log's {value} maps onto {want.name if want else 'no domain (log_ids)'}")
    elif bound:
        raise _bad(spec, f"logs({kind!r}): args= needs an action")
    if any(v in ("page", "content", "src_page") for v in bound.values()) and not per_page:
        raise _bad(spec, f"logs({kind!r}): binding an argument to one page or content needs per_page=True")
    names = (changes,) if isinstance(changes, str) else tuple(changes or ())
    for name in names:
        if name not in spec.vars:
            raise _bad(spec, f"logs({kind!r}): changes names {name!r}, not a variable of the spec")
        if ids.pages not in spec.vars[name].index:
            raise _bad(spec, f"logs({kind!r}): changes names {name!r}, which is not indexed by {ids.pages.name} "
                             "(changes= says which pages' cells the step changes)")
    if where is not None and not callable(where):
        raise _bad(spec, f"logs({kind!r}): where= takes a function (s, e) -> bool, got {where!r}")
    file, line = caller_location(3)
    rule = LogRule(kind, action, bool(per_page), tuple(bound.items()), names, where, file, line)
    spec.extensions[LOGS_KEY] = (*rules, rule)  # a new tuple: a derived spec's rules stay its own
    return rule


def log_ids(spec: Spec) -> LogIds | None:
    """The spec's ``log_ids`` declaration, if any."""
    return spec.extensions.get(IDS_KEY)


def log_rules(spec: Spec) -> dict[str, LogRule]:
    """The spec's ``logs`` rules by event kind."""
    return {r.kind: r for r in spec.extensions.get(LOGS_KEY, ())}
