"""Temporal properties and fairness: what must eventually happen, and which steps may not be put off for ever.

A safety invariant says nothing bad is ever seen; a temporal property says
something good eventually is: every page a finished request holds is freed,
every admitted request finishes or fails.  Three forms, each over infinite
paths (a state where no action can run is taken to stay where it is for ever):

* ``leads_to(P, Q)`` (TLA+'s ``P ~> Q``): whenever ``P`` holds, ``Q`` holds
  then or later;
* ``always_eventually(P)`` (``[]<>P``): ``P`` holds again and again, never
  false from some point on;
* ``eventually_always(P)`` (``<>[]P``): from some point on ``P`` holds for ever.

Each may be stated per element (``each=Req``): the functions then take the
element as their second argument and the property must hold for every element.

Whether something "eventually" happens depends on which paths count: a
scheduler that could run ``free_pages`` but never does is not a bug in the
protocol.  Fairness says which steps the engine never puts off for ever
(TLA+'s WF and SF), per action instance (``free_pages(r)`` for each ``r``):

* ``weak``: a step that stays enabled is eventually taken;
* ``strong``: a step enabled again and again (even if not continuously) is
  eventually taken.

The default is no fairness on any action: a path only has to keep moving while
some action can run (what TLA+'s ``WF_vars(Next)`` gives), so a property that
needs an action to happen says so with ``@spec.action(fair="weak")`` or
:meth:`~ownership.lang.model.Spec.fair`.  Environment steps (a request
arriving, a client aborting) are usually left unfair: nothing obliges them.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Domain
from ownership.lang.guard import describe_type, is_truth_value


class Fairness(enum.Enum):
    """How an action instance may not be put off for ever (TLA+'s WF and SF)."""

    WEAK = "weak"
    """Continuously enabled from some point on implies taken again and again."""
    STRONG = "strong"
    """Enabled again and again implies taken again and again."""

    @classmethod
    def parse(cls, value: object, where: tuple[str | None, int | None]) -> Fairness:
        """``"weak"``/``"strong"`` (or a member) as a member; OWN114 naming the place otherwise."""
        if isinstance(value, Fairness):
            return value
        for member in cls:
            if value == member.value:
                return member
        raise OwnershipError(Code.PROPERTY_INVALID, f"fair= takes \"weak\" or \"strong\", got {value!r}", *where)


class Form(enum.Enum):
    """The shape of a temporal property."""

    LEADS_TO = "leads_to"
    ALWAYS_EVENTUALLY = "always_eventually"
    EVENTUALLY_ALWAYS = "eventually_always"


@dataclass(frozen=True)
class Property:
    """A named temporal property of a spec (see the module docstring for the forms).

    ``when`` is ``P`` of ``leads_to(P, Q)`` (``None`` for the other forms);
    ``then`` is ``Q`` of ``leads_to`` and ``P`` of the others.  With ``each``
    both take the element as their second argument.
    """

    name: str
    form: Form
    when: Callable[..., Any] | None
    then: Callable[..., Any]
    each: Domain | None
    doc: str
    file: str | None
    line: int | None

    def formula(self) -> str:
        """The property in TLA+-like notation: ``\\A r: done(r) ~> freed(r)``."""
        arg = "(r)" if self.each is not None else ""
        then = f"{_name(self.then)}{arg}"
        if self.form is Form.LEADS_TO:
            assert self.when is not None
            body = f"{_name(self.when)}{arg} ~> {then}"
        elif self.form is Form.ALWAYS_EVENTUALLY:
            body = f"[]<>{then}"
        else:
            body = f"<>[]{then}"
        return f"\\A r \\in {self.each.name}: {body}" if self.each is not None else body

    def functions(self) -> tuple[Callable[..., Any], ...]:
        """The spec functions the property runs (for the purity and reach checks)."""
        return (self.then,) if self.when is None else (self.when, self.then)


def _name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", "P")
    return "P" if name == "<lambda>" else name


def declare(spec_name: str, form: Form, when: Callable[..., Any] | None, then: Callable[..., Any],
            each: Domain | None, name: str | None, where: tuple[str | None, int | None]) -> Property:
    """Build a :class:`Property`, refusing malformed declarations with OWN114 at the caller's line."""
    for role, fn in (("when", when), ("then", then)):
        if fn is None and (role == "then" or form is Form.LEADS_TO):
            raise OwnershipError(Code.PROPERTY_INVALID, f"spec {spec_name}: {form.value} needs a function for {role}",
                                 *where)
        if fn is not None and not callable(fn):
            raise OwnershipError(Code.PROPERTY_INVALID, f"spec {spec_name}: {form.value}'s {role} must be a function "
                                 f"of the state{' and the element' if each is not None else ''}, got {fn!r}", *where)
    if each is not None and not isinstance(each, Domain):
        raise OwnershipError(Code.PROPERTY_INVALID, f"spec {spec_name}: each= takes a domain (e.g. each=Req), "
                             f"got {each!r}", *where)
    arity = 2 if each is not None else 1
    for fn in (when, then):
        if fn is None:
            continue
        try:
            params = [p for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty]
        except (TypeError, ValueError):
            continue
        if len(params) != arity:
            takes = "(s, r)" if each is not None else "(s)"
            raise OwnershipError(
                Code.PROPERTY_INVALID,
                f"spec {spec_name}: {form.value}: {_name(fn)} takes {len(params)} argument(s), expected {takes}"
                + (f" because of each={each.name}" if each is not None else " (add each=Domain to state it per element)"),
                *where)
    if name is None:
        parts = [_name(f) for f in (when, then) if f is not None]
        if "P" in parts:
            raise OwnershipError(Code.PROPERTY_INVALID, f"spec {spec_name}: a {form.value} of lambdas needs name=",
                                 *where)
        name = "_leads_to_".join(parts) if form is Form.LEADS_TO else f"{form.value}_{parts[0]}"
    doc = inspect.getdoc(then) or ""
    return Property(name, form, when, then, each, doc, *where)


def truth(prop: Property, role: str, value: object) -> bool:
    """The truth of what one of ``prop``'s functions returned; OWN065 unless it is a bool."""
    if value is True or value is False:
        return value
    if is_truth_value(value):
        return bool(value)
    raise OwnershipError(Code.SPEC_NOT_BOOL, f"property {prop.name}: {role} returned {describe_type(value)}, "
                         "not a bool", prop.file, prop.line)
