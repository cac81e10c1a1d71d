"""The declarations a spec is made of: parameters, domains, value sets, variables, actions, invariants.

Small frozen records that :class:`~ownership.lang.model.Spec` creates and
holds, plus the values engines pass to spec code (:class:`Params`), the
source a spec models (:class:`Source`) and its expected verdict
(:class:`Expect`, :func:`safe`, :func:`violates`).  Nothing here executes a spec.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ownership.errors import Code, OwnershipError
from ownership.lang.types import ValueType


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for non-negative integers, as engines compute page counts."""
    return -(-a // b)


class Params:
    """Read-only parameter values, reached in spec code as ``s.params.NAME``."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.__dict__.update(values)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("parameters are read-only")

    def as_dict(self) -> dict[str, int]:
        """The values as a plain dict."""
        return dict(self.__dict__)

    def __getattr__(self, name: str) -> int:
        # Only reached for a name that is not a parameter; declared so a type
        # checker knows that `s.params.NAME` is an int.
        raise AttributeError(f"no parameter {name!r}")


SizeSpec = int | str | Callable[[Params], int]


@dataclass(frozen=True)
class Param:
    """A named integer parameter with a default, overridable with ``--param``.

    ``min`` and ``max`` bound the values an instance may use.  A parameter is
    a count or a size unless its declaration says otherwise, so
    :meth:`Spec.param <ownership.lang.model.Spec.param>` gives one declared
    without ``min`` the lower bound 0, and 1 once it sizes a domain
    (``implicit_min`` records that the bound was not written).  ``file`` and
    ``line`` are where it was declared: a value out of range is refused there.
    """

    name: str
    default: int
    doc: str = ""
    min: int | None = None
    max: int | None = None
    file: str | None = field(default=None, compare=False)
    line: int | None = field(default=None, compare=False)
    implicit_min: bool = field(default=False, compare=False)
    sizes: str = field(default="", compare=False)
    """The domain this parameter sizes, when that gave it its lower bound of 1."""

    @classmethod
    def declare(cls, spec: str, name: str, default: int, doc: str, lo: int | None, hi: int | None,
                file: str | None, line: int | None) -> Param:
        """The parameter ``spec.param`` declares, or OWN007 at its line if its range cannot hold."""
        for bound, value in (("min", lo), ("max", hi)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise OwnershipError(Code.PARAM_DECLARATION, f"spec {spec}: parameter {name}: {bound}= must be "
                                     f"an int or None, got {value!r}", file, line)
        if lo is not None and hi is not None and lo > hi:
            raise OwnershipError(Code.PARAM_DECLARATION, f"spec {spec}: parameter {name}: min={lo} is above "
                                 f"max={hi}, so no value is allowed", file, line)
        p = cls(name, default, doc, 0 if lo is None else lo, hi, file, line, implicit_min=lo is None)
        if not p.allows(default):
            hint = (f"declare min={default} (or lower) if negative values mean something" if lo is None
                    else "change the default or the range")
            raise OwnershipError(Code.PARAM_DECLARATION, f"spec {spec}: parameter {name}: default {default} is "
                                 f"outside its range ({p.range_text()}); {hint}", file, line)
        return p

    def sizing(self, spec: str, domain: str, file: str | None, line: int | None) -> Param:
        """This parameter once ``domain`` is sized by it: at least 1 if no ``min`` was declared (else OWN007)."""
        if not self.implicit_min or (self.min is not None and self.min >= 1):
            return self
        if self.default < 1:
            raise OwnershipError(
                Code.PARAM_DECLARATION,
                f"spec {spec}: domain {domain} is sized by parameter {self.name}, whose default {self.default} "
                f"leaves it empty: give the parameter a default of at least 1, or declare min=0 on it if an "
                f"empty {domain} is meant", file, line,
            )
        return dataclasses.replace(self, min=1, sizes=domain)

    def allows(self, value: int) -> bool:
        """Whether ``value`` is within ``min..max``."""
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def range_text(self) -> str:
        """``1..6``, ``>= 0``, ``<= 9`` or ``any int``."""
        lo, hi = self.min, self.max
        if lo is not None and hi is not None:
            return f"{lo}..{hi}"
        if lo is not None:
            return f">= {lo}"
        return f"<= {hi}" if hi is not None else "any int"

    def checked(self, value: object) -> int:
        """``value`` as this parameter's int, or OWN011 at the declaration naming the value and the range.

        A bool, a float, a string or any other non-integer is refused rather
        than converted (``int(2.7)`` would silently check the instance 2).
        """
        # Named in the message too: a caller may relocate the error (validate puts it at the log's header).
        where = f", declared at {os.path.basename(self.file)}:{self.line}" if self.file and self.line else ""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise OwnershipError(
                Code.BAD_PARAM, f"parameter {self.name}={value!r} is not an integer{where}: give a whole number "
                f"({self.range_text()})", self.file, self.line,
            )
        v = int(value)
        if self.allows(v):
            return v
        if self.implicit_min and self.min is not None and v < self.min:
            if self.sizes:
                why = (f"it sizes domain {self.sizes}, which needs an element; give a value >= {self.min}, or "
                       f"declare min=0 on it if an empty {self.sizes} is meant")
            else:
                why = (f"a parameter declared without min= is a count or a size; give a value >= {self.min}, or "
                       f"declare min={v} (or lower) on it if negative values are meant")
        else:
            why = f"give a value in {self.range_text()}"
        raise OwnershipError(
            Code.BAD_PARAM, f"parameter {self.name}={v} is outside its range ({self.range_text()}){where}: {why}",
            self.file, self.line,
        )


@dataclass(frozen=True, eq=False)
class Domain:
    """A finite set of interchangeable or distinct things: requests, pages, nodes.

    ``size`` is an int, the name of a parameter, or a function of the
    parameters.  ``symmetric`` declares that the spec treats all elements
    alike (never names one in particular, never orders them), which lets the
    explorer merge states that differ only by a permutation of elements.
    Spec code then sees its elements as opaque :class:`~ownership.lang.elements.Element`
    objects (equality and indexing only).  ``ordered`` declares the opposite
    on purpose: elements are ints whose order and arithmetic mean something
    (slot adjacency, contiguous ranges), and no symmetry reduction applies.
    """

    name: str
    size: SizeSpec
    symmetric: bool = False
    names: Callable[[int], str] | Sequence[str] | None = None
    doc: str = ""
    ordered: bool = False

    def resolve_size(self, params: Params) -> int:
        """Number of elements for these parameter values."""
        if isinstance(self.size, int):
            return self.size
        if isinstance(self.size, str):
            return int(getattr(params, self.size))
        return int(self.size(params))

    def element_names(self, n: int) -> list[str]:
        """Display names of the ``n`` elements."""
        if self.names is None:
            prefix = self.name[0].lower()
            return [f"{prefix}{i}" for i in range(n)]
        if callable(self.names):
            return [self.names(i) for i in range(n)]
        given = list(self.names)
        return [given[i] if i < len(given) else f"{self.name[0].lower()}{i}" for i in range(n)]


@dataclass(frozen=True)
class Values:
    """A finite domain of parameter-derived integers (e.g. prompt lengths).

    Action arguments annotated with it range over ``values(params)``; the
    values are ints, not element indices.
    """

    name: str
    values: Callable[[Params], Sequence[int]]
    doc: str = ""


@dataclass(frozen=True)
class Derived:
    """A named quantity computed from parameters, written as a formula.

    ``limit = spec.derived("max_req_input_len", "min(context_len - 1, pool_tokens - 1)")``;
    spec code calls ``limit(s)``.  Reports print the formula next to its value,
    so a parameter search can say *why* a boundary is where it is.
    """

    name: str
    formula: str
    doc: str = ""
    code: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        # Compiled once: actions call the formula on every step.
        object.__setattr__(self, "code", compile(self.formula, f"<derived {self.name}>", "eval"))

    def evaluate(self, params: Params | dict[str, Any]) -> Any:
        """The value for these parameter values (ints, or solver terms for free parameters)."""
        env = params if isinstance(params, dict) else vars(params)
        return eval(self.code, {"__builtins__": {}, "min": min, "max": max, "ceil_div": ceil_div}, dict(env))  # noqa: S307

    def __call__(self, s: Any) -> Any:
        return self.evaluate(s.params)


@dataclass(frozen=True)
class Var:
    """A state variable: a scalar or a table indexed by one or more domains."""

    name: str
    type: ValueType
    index: tuple[Domain, ...]
    init: Any
    doc: str = ""
    ghost: bool = False
    line: int | None = None


@dataclass(frozen=True)
class Action:
    """A transition: a function of the state view and domain-typed arguments."""

    name: str
    fn: Callable[..., Any]
    arg_names: tuple[str, ...]
    arg_domains: tuple[Domain | Values, ...]
    doc: str
    file: str | None
    line: int | None
    may_be_dead: str | None = None
    """Why the action may never fire (declared by the spec); ``None``: a dead action is a warning."""


@dataclass(frozen=True)
class Invariant:
    """A named safety property, ``fn(s) -> bool`` (true in every reachable state)."""

    name: str
    fn: Callable[..., Any]
    doc: str
    file: str | None
    line: int | None
    helper: bool = False


@dataclass(frozen=True)
class Source:
    """The real code a spec models: engine, version and file/function references."""

    engine: str
    version: str = ""
    where: tuple[str, ...] = ()
    links: tuple[str, ...] = ()

    def describe(self) -> str:
        """``SGLang 0.5.19: decode.py DecodePreallocQueue.pop_preallocated, ...``."""
        head = f"{self.engine} {self.version}".strip()
        return f"{head}: {', '.join(self.where)}" if self.where else head


@dataclass(frozen=True)
class Expect:
    """The verdict a spec is known to have: safe, or violating one invariant."""

    violates: str | None = None

    @property
    def safe(self) -> bool:
        return self.violates is None

    def describe(self) -> str:
        return "safe" if self.violates is None else f"violates {self.violates}"


def safe() -> Expect:
    """Expected verdict: no invariant is violated."""
    return Expect(None)


def violates(invariant: str) -> Expect:
    """Expected verdict: ``invariant`` is violated."""
    return Expect(invariant)
