"""The spec representation: what a protocol declares.

A spec module builds one :class:`Spec` and registers on it

* integer **parameters** with defaults (``spec.param``),
* finite **domains** whose sizes derive from parameters (``spec.domain``),
* **state variables**, scalar or indexed by domains (``spec.var``),
* **actions**: plain Python functions ``fn(s, *args)`` whose arguments are
  annotated with domains; ``require(cond)`` is a guard, ``s.choose(xs)`` a
  nondeterministic choice,
* named **invariants**: functions ``fn(s) -> bool``.

The records those calls create live in :mod:`ownership.lang.declarations`,
the guard ``require`` in :mod:`ownership.lang.guard`; this module is the
builder that registers them, resolves action-argument annotations to domains
(:func:`argument_domain`) and derives one spec from another.  It runs a
little over 400 lines because it is one method per kind of declaration,
each refusing a bad declaration at the line that wrote it.

Nothing here executes a spec; :mod:`ownership.lang.instance` binds a spec to
concrete parameter values and runs it.  Engines only ever see those two.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ownership.errors import Code, OwnershipError, SpecWarning, caller_location
from ownership.lang.declarations import (
    Action,
    Derived,
    Domain,
    Expect,
    Invariant,
    Param,
    Params,
    SizeSpec,
    Source,
    Values,
    Var,
)
from ownership.lang.temporal import Fairness, Form, Property, declare
from ownership.lang.types import type_of


@dataclass(eq=False)
class Spec:
    """A protocol specification; one object per spec module, named ``spec``."""

    name: str
    summary: str = ""
    models: Source | None = None
    expect: Expect | None = None
    file: str | None = None
    line: int | None = None
    params: dict[str, Param] = field(default_factory=dict)
    domains: dict[str, Domain] = field(default_factory=dict)
    value_sets: dict[str, Values] = field(default_factory=dict)
    vars: dict[str, Var] = field(default_factory=dict)
    actions: dict[str, Action] = field(default_factory=dict)
    invariants: dict[str, Invariant] = field(default_factory=dict)
    done: Callable[..., Any] | None = None
    extensions: dict[str, Any] = field(default_factory=dict)
    derived_values: dict[str, Derived] = field(default_factory=dict)
    helpers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    """Functions declared with :meth:`helper`, which a derived spec may replace."""
    warnings: list[SpecWarning] = field(default_factory=list)
    """What loading the spec file warned about (a function that looks like an unregistered action)."""
    properties: dict[str, Property] = field(default_factory=dict)
    """Temporal properties (:mod:`ownership.lang.temporal`): leads_to, always_eventually, eventually_always."""
    fairness: dict[str, Fairness] = field(default_factory=dict)
    """Fair actions by name (weak or strong, per action instance); an action not named is not fair."""
    accepted_mutants: dict[str, str] = field(default_factory=dict)
    """Mutant ids (see ``ownership mutate``) this spec accepts as survivors, with the reason.
    Not inherited by :meth:`derive`: each file answers for the mutants of its own code."""

    def __post_init__(self) -> None:
        if self.file is None:
            self.file, self.line = caller_location(3)

    # -- declarations -------------------------------------------------------
    def _error(self, message: str, line: int | None = None) -> OwnershipError:
        file, here = caller_location(3)
        return OwnershipError(Code.SPEC_INVALID, f"spec {self.name}: {message}", file, line or here)

    def param(self, name: str, default: int, doc: str = "", *, min: int | None = None, max: int | None = None) -> Param:  # noqa: A002
        """Declare an integer parameter (``--param NAME=VALUE`` overrides it).

        An instance may use the values ``min..max``.  Without ``min`` a
        parameter is a count or a size: its lower bound is 0, and 1 once a
        domain is sized by it (``spec.domain("Req", "requests")``).  Declare
        ``min=`` to allow less (a negative offset; ``min=0`` for a domain that
        may be empty).  A bound that is not an int, ``min > max`` or a default
        outside the range is refused here (OWN007); a value outside it is
        refused when an instance is built, at this line (OWN011).
        """
        if name in self.params:
            raise self._error(f"parameter {name} declared twice")
        if isinstance(default, bool) or not isinstance(default, int):
            raise self._error(f"parameter {name}: default must be an int, got {default!r}")
        p = Param.declare(self.name, name, default, doc, min, max, *caller_location(2))
        self.params[name] = p
        return p

    def domain(
        self,
        name: str,
        size: SizeSpec,
        *,
        symmetric: bool = False,
        names: Callable[[int], str] | Sequence[str] | None = None,
        doc: str = "",
        ordered: bool = False,
    ) -> Domain:
        """Declare a finite domain; see :class:`Domain`.

        ``symmetric=True``: elements are interchangeable (opaque, reduced by
        symmetry); ``ordered=True``: elements are ints whose order matters
        (never reduced).  The two exclude each other.
        """
        if name in self.domains or name in self.value_sets:
            raise self._error(f"domain {name} declared twice")
        if symmetric and ordered:
            raise self._error(
                f"domain {name} cannot be both symmetric (interchangeable elements) and ordered "
                "(elements whose order matters): drop one"
            )
        if isinstance(size, str) and size not in self.params:
            raise self._error(f"domain {name}: size names unknown parameter {size!r}")
        if isinstance(size, str):  # a count that sizes a domain: at least 1 unless declared otherwise
            self.params[size] = self.params[size].sizing(self.name, name, *caller_location(2))
        d = Domain(name, size, symmetric, names, doc, ordered)
        self.domains[name] = d
        return d

    def derived(self, name: str, formula: str, doc: str = "") -> Derived:
        """Declare a quantity computed from parameters by ``formula`` (see :class:`Derived`)."""
        try:
            compile(formula, "<formula>", "eval")
        except SyntaxError as exc:
            raise self._error(f"derived {name}: formula does not parse: {exc.msg}") from None
        d = Derived(name, formula, doc)
        self.derived_values[name] = d
        return d

    def values(self, name: str, values: Callable[[Params], Sequence[int]], doc: str = "") -> Values:
        """Declare a finite set of parameter-derived ints usable as an action argument."""
        v = Values(name, values, doc)
        self.value_sets[name] = v
        return v

    def var(
        self,
        name: str,
        type: Any,  # noqa: A002 - reads as a declaration
        *,
        per: Domain | Sequence[Domain] = (),
        init: Any = None,
        doc: str = "",
        ghost: bool = False,
    ) -> Var:
        """Declare a state variable, scalar or indexed ``per`` one or more domains.

        ``init`` is the initial value of every entry (``None`` for an optional
        reference).  Ghost variables record history for invariants (which
        request read which content); they are state like any other.
        """
        reserved = ("params", "choose", "emit", "flag", "all", "names", "size", "name_of", "cur", "events",
                    "recording", "symbolic", "terminal", "checks")
        if name in self.vars or name in reserved:
            raise self._error(f"state variable {name} declared twice or shadows a view method")
        if not name.isidentifier() or name.startswith("_"):
            raise self._error(f"state variable name {name!r} must be an identifier not starting with _")
        index = (per,) if isinstance(per, Domain) else tuple(per)
        for d in index:
            if not isinstance(d, Domain):
                raise self._error(f"variable {name}: per= must be domains, got {d!r}")
        try:
            vtype = type_of(type)
        except TypeError as exc:
            raise self._error(f"variable {name}: {exc}") from None
        _, line = caller_location(2)
        v = Var(name, vtype, index, init, doc, ghost, line)
        self.vars[name] = v
        return v

    def derive(
        self,
        name: str,
        *,
        summary: str | None = None,
        models: Source | None = None,
        expect: Expect | None = None,
    ) -> Spec:
        """A copy of this spec under a new name, to patch with :meth:`replace`.

        This is how a fixed version is written as the diff from the shipped
        one: the derived spec shares every declaration and replaces only the
        actions the fix changed, so a reviewer reads exactly the patch.

        Only :meth:`replace` changes what the derived spec runs.  A plain
        ``def`` in the derived file named like a function the base's code
        calls is never run (the base's code looks names up in its own module);
        loading the file refuses it (OWN008, see :mod:`ownership.lang.reach`).
        """
        file, line = caller_location(2)
        return Spec(
            name,
            summary=self.summary if summary is None else summary,
            models=self.models if models is None else models,
            expect=self.expect if expect is None else expect,
            file=file,
            line=line,
            params=dict(self.params),
            domains=dict(self.domains),
            value_sets=dict(self.value_sets),
            vars=dict(self.vars),
            actions=dict(self.actions),
            invariants=dict(self.invariants),
            done=self.done,
            extensions=dict(self.extensions),
            derived_values=dict(self.derived_values),
            helpers=dict(self.helpers),
            properties=dict(self.properties),
            fairness=dict(self.fairness),
        )

    def replace(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: replace the existing action or helper of the same name (see :meth:`derive`).

        Replacing a helper changes it for everything this spec runs that calls
        it: its actions, and also the invariants and the ``@spec.terminal``
        predicate inherited from the base, so a helper the terminal predicate
        calls changes which states count as idle in this spec.  The spec it
        was derived from keeps its own.  A replaced action keeps the
        fairness the base declared for it; :meth:`fair` changes it.
        """
        if fn.__name__ in self.helpers:
            self.helpers[fn.__name__] = fn
            return _dispatcher(fn)
        if fn.__name__ not in self.actions:
            raise self._error(
                f"replace: no action or @spec.helper {fn.__name__} to replace (use @spec.action for a new one)",
                fn.__code__.co_firstlineno,
            )
        del self.actions[fn.__name__]
        return self.action(fn)

    def helper(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: a function of the state view that actions call and derived specs may replace.

        ``fn(s, ...)`` is called as usual; the call runs the version of the
        spec being checked (``s``'s spec), so a fix confined to a helper, such
        as ``lock_handle``, is written as a replaced helper and no action that
        calls it needs copying.
        """
        name = fn.__name__
        if name in self.helpers or name in self.actions:
            raise self._error(f"helper {name} declared twice", fn.__code__.co_firstlineno)
        self.helpers[name] = fn
        return _dispatcher(fn)

    def action(self, fn: Callable[..., Any] | None = None, *, may_be_dead: str | None = None,
               fair: str | None = None) -> Any:
        """Decorator: register ``fn(s, arg: Domain, ...)`` as an action.

        Bare (``@spec.action``) or with arguments:
        ``@spec.action(may_be_dead="only runs when the pool is larger")``
        declares that the action may never fire at some instances, so a safe
        verdict in which it never fired is not reported as vacuous (the
        reason is shown by ``ownership list``).  ``fair="weak"`` or
        ``fair="strong"`` says the engine never puts the action off for ever
        (per instance: ``free(r)`` for each ``r``; see
        :mod:`ownership.lang.temporal`): what temporal properties assume.
        """
        if fn is not None:
            if not callable(fn):
                raise OwnershipError(Code.BAD_MAY_BE_DEAD, "@spec.action takes keyword arguments only "
                                     '(e.g. @spec.action(may_be_dead="why"))', *caller_location(2))
            return self._register_action(fn, None)
        reason = None if may_be_dead is None and fair is not None else self._dead_reason(
            may_be_dead, "@spec.action(may_be_dead=...)")
        fairness = None if fair is None else Fairness.parse(fair, caller_location(2))

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            out = self._register_action(f, reason)
            if fairness is not None:
                self.fairness[f.__name__] = fairness
            return out

        return register

    def fair(self, action: str, kind: str = "weak") -> None:
        """Declare action ``action`` fair (``"weak"`` or ``"strong"``), e.g. an action inherited from a base spec.

        A derived spec inherits its base's fairness; this changes it for
        this spec only.
        """
        where = caller_location(2)
        if action not in self.actions:
            known = ", ".join(self.actions) or "none yet"
            raise OwnershipError(Code.PROPERTY_INVALID, f"spec {self.name}: fair names no action {action!r} "
                                 f"(known: {known}; declare it after the action)", *where)
        self.fairness[action] = Fairness.parse(kind, where)

    def leads_to(self, when: Callable[..., Any], then: Callable[..., Any], *, each: Domain | None = None,
                 name: str | None = None) -> Property:
        """Declare ``when ~> then``: whenever ``when`` holds, ``then`` holds then or later (on fair paths).

        With ``each=Req`` both take the element too and the property is
        checked for every element.  See :mod:`ownership.lang.temporal`.
        """
        return self._property(Form.LEADS_TO, when, then, each, name)

    def always_eventually(self, holds: Callable[..., Any], *, each: Domain | None = None,
                          name: str | None = None) -> Property:
        """Declare ``[]<>holds``: ``holds`` is true again and again on every fair path."""
        return self._property(Form.ALWAYS_EVENTUALLY, None, holds, each, name)

    def eventually_always(self, holds: Callable[..., Any], *, each: Domain | None = None,
                          name: str | None = None) -> Property:
        """Declare ``<>[]holds``: on every fair path ``holds`` is true from some point on."""
        return self._property(Form.EVENTUALLY_ALWAYS, None, holds, each, name)

    def _property(self, form: Form, when: Callable[..., Any] | None, then: Callable[..., Any],
                  each: Domain | None, name: str | None) -> Property:
        where = caller_location(3)
        prop = declare(self.name, form, when, then, each, name, where)
        if prop.name in self.properties or prop.name in self.invariants:
            raise OwnershipError(Code.PROPERTY_INVALID, f"spec {self.name}: property {prop.name} declared twice "
                                 "(or named like an invariant)", *where)
        self.properties[prop.name] = prop
        return prop

    def may_be_dead(self, name: str, *, reason: str) -> None:
        """Declare that action ``name`` may never fire (see :meth:`action`), e.g. for an inherited action."""
        reason = self._dead_reason(reason, f"may_be_dead({name!r}, reason=...)")
        if name not in self.actions:
            known = ", ".join(self.actions) or "none yet"
            raise OwnershipError(Code.BAD_MAY_BE_DEAD, f"spec {self.name}: may_be_dead names no action {name!r} "
                                 f"(known: {known}; declare it after the action)", *caller_location(2))
        self.actions[name] = dataclasses.replace(self.actions[name], may_be_dead=reason)

    def _dead_reason(self, reason: object, where: str) -> str:
        if not isinstance(reason, str) or not reason.strip():
            raise OwnershipError(Code.BAD_MAY_BE_DEAD, f"spec {self.name}: {where} needs a reason: a non-empty "
                                 f"string saying why the action may never fire, got {reason!r}", *caller_location(3))
        return reason.strip()

    def _register_action(self, fn: Callable[..., Any], may_be_dead: str | None) -> Callable[..., Any]:
        where = (fn.__code__.co_filename, fn.__code__.co_firstlineno)
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if not params:
            raise OwnershipError(Code.SPEC_INVALID, f"spec {self.name}: action {fn.__name__} must take the state "
                                 "view as its first argument", *where)
        names: list[str] = []
        doms: list[Domain | Values] = []
        for p in params[1:]:
            annotation = argument_domain(p.annotation, self, fn.__globals__)
            if annotation is None:
                raise OwnershipError(
                    Code.SPEC_INVALID,
                    f"spec {self.name}: action {fn.__name__}: argument {p.name} must be annotated with a domain "
                    f"(e.g. `{p.name}: Req` or `{p.name}: Annotated[Element, Req]`)",
                    *where,
                )
            names.append(p.name)
            doms.append(annotation)
        if fn.__name__ in self.actions:
            raise OwnershipError(Code.SPEC_INVALID, f"spec {self.name}: action {fn.__name__} declared twice", *where)
        self.actions[fn.__name__] = Action(
            fn.__name__,
            fn,
            tuple(names),
            tuple(doms),
            inspect.getdoc(fn) or "",
            fn.__code__.co_filename,
            fn.__code__.co_firstlineno,
            may_be_dead,
        )
        return fn

    def invariant(self, fn: Callable[..., Any] | None = None, *, name: str | None = None, helper: bool = False) -> Any:
        """Decorator: register ``fn(s) -> bool`` as a named invariant.

        ``helper=True`` marks an auxiliary invariant: checked like the others,
        and available to strengthen induction proofs.
        """

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            n = name or f.__name__
            if n in self.invariants:
                raise self._error(f"invariant {n} declared twice", f.__code__.co_firstlineno)
            self.invariants[n] = Invariant(
                n, f, inspect.getdoc(f) or "", f.__code__.co_filename, f.__code__.co_firstlineno, helper
            )
            return f

        return register(fn) if fn is not None else register

    def terminal(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: ``fn(s) -> bool`` says a state where nothing is pending.

        With deadlock checking on, a state where no action is enabled and
        ``fn`` is false is reported as a deadlock.
        """
        self.done = fn
        return fn

    def log_ids(self, *, pages: Domain, params: Callable[[Any], Mapping[str, int]] | None = None,
                req: Domain | None = None, content: Domain | None = None, node: str | None = None,
                internal: Sequence[str] | None = None) -> Any:
        """Declare how a recorded event log's ids map onto this spec's domains (``ownership validate``).

        See :class:`ownership.lang.logmap.LogIds` and ``docs/validate.md``.
        """
        from ownership.lang.logmap import declare_ids

        return declare_ids(self, pages, params, req, content, node, internal)

    def logs(self, kind: str, action: str | None = None, *, per_page: bool = False,
             args: Mapping[str, str | int] | None = None, changes: str | Sequence[str] = (),
             where: Callable[[Any, Any], Any] | None = None) -> Any:
        """Declare which action explains a logged event of ``kind`` (``ownership validate``).

        See :class:`ownership.lang.logmap.LogRule` and ``docs/validate.md``.
        """
        from ownership.lang.logmap import declare_rule

        return declare_rule(self, kind, action, per_page, args, changes, where)

    def accept_mutant(self, mutant: str, *, reason: str) -> None:
        """Accept a surviving mutant of this spec file (``ownership mutate``), saying why.

        ``mutant`` is the id ``ownership mutate`` prints (``action+3 delete-require: ...``)
        or that id without its ``+line`` offset.  An accepted survivor is reported
        as accepted, not as a survivor.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise self._error(f"accept_mutant {mutant!r}: give a reason")
        self.accepted_mutants[mutant] = reason

    # -- queries ------------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`OwnershipError` if the spec cannot be checked."""
        if not self.invariants and not self.properties:
            raise OwnershipError(
                Code.SPEC_NO_INVARIANTS,
                f"spec {self.name} declares no invariants: add @spec.invariant functions, "
                "use ownership.vocab's built-in ones, or state a temporal property (spec.leads_to, ...)",
                self.file,
                self.line,
            )
        if not self.actions:
            raise OwnershipError(Code.SPEC_INVALID, f"spec {self.name} declares no actions", self.file, self.line)
        for inv in self.invariants.values():
            if getattr(inv.fn, "needs_terminal", False) and self.done is None:
                raise OwnershipError(
                    Code.SPEC_INVALID,
                    f"spec {self.name}: invariant {inv.name} needs to know when nothing is in flight: "
                    "declare a @spec.terminal predicate (or pass idle= to own.invariants)",
                    self.file,
                    self.line,
                )
        if (self.expect is not None and self.expect.violates is not None
                and self.expect.violates not in self.invariants and self.expect.violates not in self.properties):
            raise OwnershipError(
                Code.SPEC_INVALID,
                f"spec {self.name} expects a violation of {self.expect.violates!r}, which is not one of its "
                f"invariants or properties ({', '.join([*self.invariants, *self.properties])})",
                self.file,
                self.line,
            )

    def default_params(self) -> dict[str, int]:
        """Every parameter at its default value."""
        return {n: p.default for n, p in self.params.items()}


def argument_domain(annotation: Any, spec: Spec, namespace: Mapping[str, Any]) -> Domain | Values | None:
    """The domain or value set an action argument is annotated with, or ``None``.

    Accepts the domain itself (``r: Req``), its declared name or an expression
    as a string (``from __future__ import annotations``; ``trie.Node``), and
    ``Annotated[Element, Req]``, the form a type checker accepts, since ``Req``
    is a value, not a type.
    """
    if isinstance(annotation, str):
        found = spec.domains.get(annotation) or spec.value_sets.get(annotation)
        if found is not None:
            return found
        try:
            annotation = eval(annotation, dict(namespace))  # noqa: S307 - the spec's own annotation
        except Exception:  # noqa: BLE001
            return None
    if isinstance(annotation, (Domain, Values)):
        return annotation
    for meta in getattr(annotation, "__metadata__", ()):  # typing.Annotated
        if isinstance(meta, (Domain, Values)):
            return meta
    return None


def _dispatcher(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for helper ``fn`` that runs the version of the spec ``s`` belongs to."""
    name = fn.__name__

    @functools.wraps(fn)
    def call(s: Any, *args: Any, **kwargs: Any) -> Any:
        return s._inst.spec.helpers[name](s, *args, **kwargs)

    call.__dict__[HELPER_MARK] = name  # what reading the spec follows (ownership.lang.reach)
    return call


HELPER_MARK = "__ownership_helper__"
"""The attribute naming the helper a dispatcher stands in for."""


def dispatched_helper(fn: Any) -> str | None:
    """The name of the helper ``fn`` dispatches to, if it is a helper's stand-in."""
    name = getattr(fn, "__dict__", {}).get(HELPER_MARK)
    return name if isinstance(name, str) else None
