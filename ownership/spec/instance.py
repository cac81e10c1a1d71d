"""A spec bound to concrete parameter values, and its concrete semantics.

An :class:`Instance` fixes every parameter, so every domain has a size and
every state is a flat tuple of ints/bools/None laid out variable by variable.
It runs actions (enumerating every outcome of ``s.choose``), evaluates
invariants, and converts states to and from their JSON form.  Every engine's
counterexample is replayed through :meth:`Instance.successors_of` before it is
shown: this module is the reference semantics.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ownership.errors import Code, OwnershipError, SpecWarning, caller_location, location_in
from ownership.spec.declarations import Action, Domain, Invariant, Params, Values
from ownership.spec.elements import Element, ix, spec_frame_location, type_error
from ownership.spec.guard import Disabled, describe_type, is_truth_value
from ownership.spec.model import Spec
from ownership.spec.purity import check_static
from ownership.spec.types import BoolType, Enum, IntType, Ref, RefSet

State = tuple[Any, ...]
"""A concrete state: one flat tuple, variables laid out in declaration order."""

AUDIT_FIRST = 32
"""Expansions whose every action :meth:`Instance.expand` runs twice (the determinism audit)..."""
AUDIT_EVERY = 64
"""... and after those, one expansion in this many."""


@dataclass(frozen=True)
class Event:
    """Something an action did that a picture should show (a read, a write).

    ``kind`` is e.g. ``"read"``; ``fields`` hold display-ready values and
    ``violates`` names the invariant this event breaks, if any.
    """

    kind: str
    fields: tuple[tuple[str, Any], ...]
    violates: str | None = None

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.fields:
            if k == key:
                return v
        return default

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, **dict(self.fields)}
        if self.violates:
            out["violates"] = self.violates
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Event:
        rest = {k: v for k, v in data.items() if k not in ("kind", "violates")}
        return Event(str(data["kind"]), tuple(rest.items()), data.get("violates"))


@dataclass(frozen=True)
class Layout:
    """Where one variable lives in the flat state tuple."""

    name: str
    offset: int
    shape: tuple[int, ...]

    @property
    def length(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of a table with this shape (the layout of every indexed variable)."""
    out: list[int] = []
    acc = 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


class Field1:
    """``s.var[i]`` for a variable indexed by one domain.

    Every read position is logged in ``reads``: the explorer uses the log to
    skip re-running an action whose guard failed on the same cell values.
    An index is an int or an :class:`Element` of the variable's domain; every
    write goes through ``put``, the variable's type check (see :func:`value_checker`).
    """

    __slots__ = ("_cells", "off", "n", "reads", "dom", "var", "put")

    def __init__(self, cur: list[Any], off: int, n: int, reads: list[int], dom: str = "", var: str = "",
                 put: Callable[[Any], Any] | None = None) -> None:
        self._cells = cur
        self.off = off
        self.n = n
        self.reads = reads
        self.dom = dom
        self.var = var
        self.put = put or _identity

    def _key(self, i: Any) -> int:
        return _index_of(self.var, self.dom, self.n, i)

    def __getitem__(self, i: Any) -> Any:
        if i.__class__ is int:
            if not 0 <= i < self.n:
                raise IndexError(f"index {i} out of range 0..{self.n - 1}")
            pos = self.off + i
        elif i.__class__ is Element and i._domain == self.dom:
            pos = self.off + i._i
        else:
            pos = self.off + self._key(i)
        self.reads.append(pos)
        return self._cells[pos]

    def __setitem__(self, i: Any, value: Any) -> None:
        if i.__class__ is int:
            if not 0 <= i < self.n:
                raise IndexError(f"index {i} out of range 0..{self.n - 1}")
            self._cells[self.off + i] = self.put(value)
        elif i.__class__ is Element and i._domain == self.dom:
            self._cells[self.off + i._i] = self.put(value)
        else:
            self._cells[self.off + self._key(i)] = self.put(value)

    def __iter__(self) -> Iterator[Any]:
        self.reads.extend(range(self.off, self.off + self.n))
        return iter(self._cells[self.off : self.off + self.n])

    def __len__(self) -> int:
        return self.n


class Field1Ref(Field1):
    """A :class:`Field1` whose cells name elements of a symmetric domain: reads give :class:`Element` objects."""

    __slots__ = ("elems",)

    def __init__(self, cur: list[Any], off: int, n: int, reads: list[int], dom: str, var: str,
                 put: Callable[[Any], Any], elems: Sequence[Element]) -> None:
        super().__init__(cur, off, n, reads, dom, var, put)
        self.elems = elems

    def __getitem__(self, i: Any) -> Any:
        v = Field1.__getitem__(self, i)
        return v if v is None else self.elems[v]

    def __iter__(self) -> Iterator[Any]:
        elems = self.elems
        return iter([v if v is None else elems[v] for v in Field1.__iter__(self)])


class FieldN:
    """``s.var[i, j]`` for a variable indexed by several domains."""

    __slots__ = ("_cells", "off", "shape", "strides", "reads", "doms", "var", "put")

    def __init__(self, cur: list[Any], off: int, shape: tuple[int, ...], reads: list[int],
                 doms: tuple[str, ...] = (), var: str = "", put: Callable[[Any], Any] | None = None) -> None:
        self._cells = cur
        self.off = off
        self.shape = shape
        self.reads = reads
        self.strides = strides(shape)
        self.doms = doms or ("",) * len(shape)
        self.var = var
        self.put = put or _identity

    def _pos(self, key: tuple[Any, ...]) -> int:
        if not isinstance(key, tuple) or len(key) != len(self.shape):
            raise IndexError(f"index with {len(self.shape)} elements, e.g. s.var[a, b]")
        pos = self.off
        for k, n, st, dom in zip(key, self.shape, self.strides, self.doms, strict=True):
            if k.__class__ is int:
                if not 0 <= k < n:
                    raise IndexError(f"index {k} out of range 0..{n - 1}")
                pos += k * st
            elif k.__class__ is Element and k._domain == dom:
                pos += k._i * st
            else:
                pos += _index_of(self.var, dom, n, k) * st
        return pos

    def __getitem__(self, key: tuple[Any, ...]) -> Any:
        pos = self._pos(key)
        self.reads.append(pos)
        return self._cells[pos]

    def __setitem__(self, key: tuple[Any, ...], value: Any) -> None:
        self._cells[self._pos(key)] = self.put(value)


class FieldNRef(FieldN):
    """A :class:`FieldN` whose cells name elements of a symmetric domain."""

    __slots__ = ("elems",)

    def __init__(self, cur: list[Any], off: int, shape: tuple[int, ...], reads: list[int], doms: tuple[str, ...],
                 var: str, put: Callable[[Any], Any], elems: Sequence[Element]) -> None:
        super().__init__(cur, off, shape, reads, doms, var, put)
        self.elems = elems

    def __getitem__(self, key: tuple[Any, ...]) -> Any:
        v = FieldN.__getitem__(self, key)
        return v if v is None else self.elems[v]


class _TooMany(Exception):  # noqa: N818 - a control-flow signal
    """Raised inside :meth:`Instance.successors_capped` when the choices are too wide."""


def _identity(value: Any) -> Any:
    return value


def _plain(value: Any) -> Any:
    """An event field with elements replaced by their indices."""
    if value.__class__ is Element:
        return value._i
    if isinstance(value, (list, tuple)) and any(v.__class__ is Element for v in value):
        return type(value)(ix(v) for v in value)
    return value


def _index_of(var: str, dom: str, n: int, key: Any) -> int:
    """The slow path of indexing: an element of another domain, a bool, or not an index at all."""
    if key.__class__ is Element:
        raise type_error(
            f"indexes {var} (declared per {dom}) with {key._name}, an element of {key._domain}"
        )
    if isinstance(key, int) and not isinstance(key, bool):
        if not 0 <= key < n:
            raise IndexError(f"index {key} out of range 0..{n - 1}")
        return int(key)
    raise type_error(f"indexes {var} (declared per {dom}) with {key!r}, which is not an element of {dom}")


def _describe_type(vtype: Any) -> str:
    if isinstance(vtype, Enum):
        return f"Enum {vtype.name} ({', '.join(vtype.members)})"
    if isinstance(vtype, Ref):
        return f"Optional({vtype.domain})" if vtype.optional else vtype.domain
    if isinstance(vtype, RefSet):
        return f"SetOf({vtype.domain})"
    return "bool" if isinstance(vtype, BoolType) else "int" if isinstance(vtype, IntType) else repr(vtype)


def value_checker(var: Any, sizes: Mapping[str, int]) -> Callable[[Any], Any]:
    """The write check of ``var``: returns the value to store (an element's index) or raises OWN062.

    Built once per variable so the hot path is one call and a class test.
    """
    vtype = var.type
    name = var.name

    def bad(value: Any, why: str = "") -> OwnershipError:
        shown = value._name if value.__class__ is Element else repr(value)
        file, line = spec_frame_location(3)
        return OwnershipError(
            Code.BAD_VALUE,
            f"writes {shown} into state variable {name}, declared {_describe_type(vtype)}{why}",
            file,
            line,
        )

    if isinstance(vtype, BoolType):
        def put_bool(value: Any) -> Any:
            if value is True or value is False:
                return value
            raise bad(value, ": write True or False (e.g. `bool(x)` or a comparison)")
        return put_bool
    if isinstance(vtype, IntType):
        def put_int(value: Any) -> Any:
            if value.__class__ is int or value.__class__ is bool:
                return value
            if isinstance(value, int) and value.__class__ is not Element:
                return int(value)
            raise bad(value, "" if value.__class__ is not Element else
                      f": a reference to an element needs the type {value._domain} or Optional({value._domain})")
        return put_int
    if isinstance(vtype, Enum):
        count = len(vtype.members)

        def put_enum(value: Any) -> Any:
            if value.__class__ is int and 0 <= value < count:
                return value
            raise bad(value, f": use a member such as {vtype.name}.{vtype.members[0]}")
        return put_enum
    if isinstance(vtype, Ref):
        dom = vtype.domain
        n = sizes[dom]
        optional = vtype.optional

        def put_ref(value: Any) -> Any:
            if value.__class__ is Element:
                if value._domain == dom:
                    return value._i
                raise bad(value, f": {value._name} is an element of {value._domain}")
            if value is None:
                if optional:
                    return None
                raise bad(value, f": None needs the type Optional({dom})")
            if value.__class__ is int and 0 <= value < n:
                # An int naming an element of a symmetric domain is accepted (the trusted
                # vocabulary and test harnesses pass indices); spec code naming one
                # element this way is caught by the permutation check (OWN061).
                return value
            raise bad(value)
        return put_ref
    if isinstance(vtype, RefSet):
        limit = 1 << sizes[vtype.domain]

        def put_set(value: Any) -> Any:
            if value.__class__ is int and 0 <= value < limit:
                return value
            raise bad(value, f": a bitmask of {sizes[vtype.domain]} elements (0..{limit - 1})")
        return put_set
    return _identity


def invariant_value(inv: Invariant, value: object) -> bool:
    """The truth of what invariant ``inv`` returned; OWN065 unless it is a bool.

    A list, a generator or a non-zero count is always true, so an invariant
    returning one could never fail and every check would say PROVED.
    """
    if value is True:
        return True
    if value is False:
        return False
    if is_truth_value(value):
        return bool(value)
    raise not_bool_error(inv, value)


def not_bool_error(inv: Invariant, value: object) -> OwnershipError:
    """OWN065 for invariant ``inv`` returning ``value``."""
    hint = (" (a list or a generator is true whenever it is non-empty, so the invariant could never fail: "
            "return all(...) or any(...) of the condition)") if not isinstance(value, (int, type(None))) else ""
    return OwnershipError(
        Code.SPEC_NOT_BOOL,
        f"invariant {inv.name} returned {describe_type(value)}, not a bool{hint}",
        inv.file,
        inv.line,
    )


def known_invariant(spec: Spec, name: str) -> None:
    """OWN004, at the spec line, unless ``name`` is an invariant of ``spec``.

    An event marked ``violates=`` with a name the spec does not declare (a
    typo, a renamed invariant) would silently never be a violation.
    """
    if name in spec.invariants:
        return
    file, line = spec_frame_location(3)
    raise OwnershipError(
        Code.SPEC_INVALID,
        f"an event is marked violates={name!r}, but spec {spec.name} declares no invariant {name!r} "
        f"(known: {', '.join(spec.invariants)}): such an event could never be a violation",
        file,
        line,
    )


def select_invariants(inst: Instance, names: Sequence[str] | None) -> tuple[Invariant, ...]:
    """The invariants an engine checks: those ``names`` (``--invariant``), or all of them by default.

    OWN012, at the spec line (where its invariants are declared), for a
    name the spec does not have: a typo must not check nothing and pass.
    """
    spec = inst.spec
    if names is None:
        return tuple(spec.invariants.values())
    for name in names:
        if name not in spec.invariants:
            known = ", ".join(spec.invariants) or "none"
            raise OwnershipError(Code.UNKNOWN_INVARIANT, f"spec {spec.name} has no invariant {name!r} (known: {known})",
                                 spec.file, spec.line)
    return tuple(spec.invariants[name] for name in names)


def raw_cells_error() -> OwnershipError:
    """``s.cur``: the raw cell list is the engines' own, and reading it hides reads from the checker.

    The explorer skips re-running a disabled action when the cells its guard
    read are unchanged; a read that bypasses the variables is not in that log,
    so such a spec could be skipped in states where it would fire.
    """
    file, line = caller_location(3)
    return OwnershipError(
        Code.SPEC_IMPURE,
        "s.cur is not part of the view: read state through its variables (s.var[i], s.scalar), "
        "so the checker sees every cell an action or invariant depends on",
        file,
        line,
    )


class ViewBase:
    """What every engine's ``s`` offers spec code besides its state cells.

    Subclasses set ``_inst`` (the :class:`Instance`); the concrete view, the
    symbolic view and the parametric explorer's view differ only in how cells
    are stored.
    """

    _inst: Instance
    recording = False

    def all(self, domain: Domain) -> range:
        """Every element of ``domain`` (as indices)."""
        return range(self._inst.sizes[domain.name])

    def size(self, domain: Domain) -> int:
        """Number of elements of ``domain``."""
        return self._inst.sizes[domain.name]

    def name_of(self, domain: Domain, element: Any) -> str:
        """Display name of an element (``"-"`` for None, ``"?"`` for a symbolic one)."""
        if element is None:
            return "-"
        if element.__class__ is Element:
            return element._name
        return self._inst.names[domain.name][element] if isinstance(element, int) else "?"

    def terminal(self) -> bool:
        """The spec's ``@spec.terminal`` predicate on this state (nothing in flight)."""
        done = self._inst.spec.done
        if done is None:
            raise OwnershipError(Code.SPEC_INVALID, "no @spec.terminal predicate declared", self._inst.spec.file, self._inst.spec.line)
        return bool(done(self))

    def checks(self, invariant: str) -> bool:
        """Whether the spec checks ``invariant`` (events only flag what is checked)."""
        return invariant in self._inst.spec.invariants

    def emit(self, kind: str, violates: str | None = None, **fields: Any) -> None:
        """Record an event for the trace picture; only views that record keep it.

        ``violates=X`` makes the step a violation of invariant ``X`` (when it
        is checked) in every engine, recording or not.
        """
        if violates is not None:
            self.flag(violates)

    def _known(self, invariant: str) -> None:
        """OWN004 unless ``invariant`` is one of the spec's: a misspelt name would never be a violation."""
        known_invariant(self._inst.spec, invariant)

    def flag(self, invariant: str, when: Any = True) -> None:
        """This step violates ``invariant`` (if ``when``): what ``emit(..., violates=X)`` records.

        Vocabulary code calls it where the event itself is only built while
        recording; under the Z3 engines ``when`` may be a symbolic bool, which
        records the condition without forking the path.
        """
        return None


class View(ViewBase):
    """The ``s`` that actions and invariants receive.

    Variables are attributes (``s.d_state[r]``, ``s.clock``), parameters are
    ``s.params.NAME``, domains are iterated with ``s.all(Req)``.  Writes go to
    a private copy of the state, so a disabled action leaves nothing behind.
    """

    symbolic = False
    """True only under the Z3 engine (vocabulary operations check it)."""

    def __init__(self, instance: Instance) -> None:
        object.__setattr__(self, "_inst", instance)
        object.__setattr__(self, "_cells", [None] * instance.width)
        object.__setattr__(self, "params", instance.params)
        object.__setattr__(self, "events", [])
        object.__setattr__(self, "_picks", [])
        object.__setattr__(self, "_counts", [])
        object.__setattr__(self, "_prefix", [])
        object.__setattr__(self, "_chosen", [])
        object.__setattr__(self, "_forced", None)
        object.__setattr__(self, "_chooser", None)
        object.__setattr__(self, "_reduce", frozenset())
        object.__setattr__(self, "recording", True)
        object.__setattr__(self, "_scalars", {})
        object.__setattr__(self, "_scalar_put", {})
        object.__setattr__(self, "_scalar_wrap", {})
        object.__setattr__(self, "_reads", [])
        object.__setattr__(self, "_flags", [])
        cur = self._cells
        reads = self._reads
        for lay in instance.layouts.values():
            var = instance.spec.vars[lay.name]
            put = value_checker(var, instance.sizes)
            ref = var.type.refers_to() if isinstance(var.type, Ref) else None
            elems = instance.elements.get(ref) if ref is not None else None
            doms = tuple(d.name for d in var.index)
            if not lay.shape:
                self._scalars[lay.name] = lay.offset
                self._scalar_put[lay.name] = put
                if elems is not None:
                    self._scalar_wrap[lay.name] = elems
            elif len(lay.shape) == 1:
                if elems is not None:
                    field: Any = Field1Ref(cur, lay.offset, lay.shape[0], reads, doms[0], lay.name, put, elems)
                else:
                    field = Field1(cur, lay.offset, lay.shape[0], reads, doms[0], lay.name, put)
                object.__setattr__(self, lay.name, field)
            elif elems is not None:
                object.__setattr__(self, lay.name, FieldNRef(cur, lay.offset, lay.shape, reads, doms, lay.name, put, elems))
            else:
                object.__setattr__(self, lay.name, FieldN(cur, lay.offset, lay.shape, reads, doms, lay.name, put))

    def __getattr__(self, name: str) -> Any:
        scalars = object.__getattribute__(self, "_scalars")
        if name in scalars:
            self._reads.append(scalars[name])
            v = self._cells[scalars[name]]
            if v is not None and name in self._scalar_wrap:
                return self._scalar_wrap[name][v]
            return v
        if name == "cur":
            raise raw_cells_error()
        raise AttributeError(f"spec has no state variable or view method {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._scalars:
            self._cells[self._scalars[name]] = self._scalar_put[name](value)
            return
        raise AttributeError(f"cannot assign {name!r}: not a scalar state variable")

    def choose(self, options: Sequence[Any], label: str = "choice", *, domain: Domain | None = None) -> Any:
        """Nondeterministic choice: every option is explored as its own successor.

        An empty ``options`` disables the action.  Options should be domain
        elements or ints (the trace records the chosen value).  Passing the
        ``domain`` of the options lets a symmetry-reducing search try only one
        of several elements that are indistinguishable right now.
        """
        if not options:
            raise Disabled
        pos = len(self._picks)
        forced = self._forced
        if forced is not None:
            # Replaying a recorded trace: take the recorded value if it is allowed here
            # (traces hold plain indices, options may be elements).
            plain = [ix(o) for o in options]
            if pos >= len(forced) or forced[pos] not in plain:
                raise Disabled
            value = options[plain.index(forced[pos])]
            self._picks.append(0)
            self._counts.append(1)
            self._chosen.append(ix(value))
            return value
        chooser = self._chooser
        if chooser is not None:
            # A random search (Hypothesis) draws the value itself.
            value = chooser(options)
            self._picks.append(next(k for k, o in enumerate(options) if o is value or (o.__class__ is not Element and o == value)))
            self._counts.append(len(options))
            self._chosen.append(ix(value))
            return value
        if domain is not None and domain.name in self._reduce:
            options = self._inst.distinct_elements(domain.name, options, self._cells)
        idx = self._prefix[pos] if pos < len(self._prefix) else 0
        value = options[idx]
        self._picks.append(idx)
        self._counts.append(len(options))
        self._chosen.append(value._i if value.__class__ is Element else value)
        return value

    def emit(self, kind: str, violates: str | None = None, **fields: Any) -> None:
        """Record an event for the trace picture (reads, writes, replies).

        Searches turn recording off (``s.recording`` is false) because events
        are rebuilt when the trace is replayed; code that computes costly
        event fields can check ``s.recording`` first.
        """
        if violates is not None and violates not in self._flags:
            # Kept whether or not recording: a violating event is a violation in every engine.
            if violates not in self._inst.spec.invariants:
                known_invariant(self._inst.spec, violates)
            self._flags.append(violates)
        if self.recording:
            # Events hold plain values (indices), as traces and JSON do.
            self.events.append(Event(kind, tuple((k, _plain(v)) for k, v in fields.items()), violates))

    def all(self, domain: Domain) -> Any:
        """Every element of ``domain``: :class:`Element` objects for a symmetric domain, else ints."""
        return self._inst.all_of[domain.name]

    def flag(self, invariant: str, when: Any = True) -> None:
        """This step violates ``invariant`` if ``when`` (see :meth:`ViewBase.flag`)."""
        if when and invariant not in self._flags:
            if invariant not in self._inst.spec.invariants:
                known_invariant(self._inst.spec, invariant)
            self._flags.append(invariant)


@dataclass(frozen=True)
class ActionInstance:
    """An action with concrete arguments, e.g. ``decode_prealloc(B)``."""

    index: int
    action: Action
    args: tuple[int, ...]
    label: str
    call: tuple[Any, ...] = ()
    """The arguments spec code receives: ``args`` with symmetric-domain indices as :class:`Element` objects."""


@dataclass(frozen=True)
class Successor:
    """One outcome of running an action instance: the new state and what it did."""

    state: State
    picks: tuple[Any, ...]
    events: tuple[Event, ...]
    violations: tuple[str, ...] = ()
    """Invariants an event of this step was marked as violating (``s.emit(..., violates=X)``), in order."""


def _range(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f"{lo}..{hi}"
    return f">= {lo}" if lo is not None else f"<= {hi}"


class Instance:
    """A spec with every parameter fixed: the concrete semantics engines share."""

    def __init__(self, spec: Spec, overrides: Mapping[str, int] | None = None) -> None:
        spec.validate()
        check_static(spec)
        self.spec = spec
        values = spec.default_params()
        for name, value in (overrides or {}).items():
            if name not in spec.params:
                known = ", ".join(spec.params) or "none"
                raise OwnershipError(
                    Code.UNKNOWN_PARAM, f"spec {spec.name} has no parameter {name!r} (known: {known})", spec.file, spec.line
                )
            values[name] = int(value)
        for name, p in spec.params.items():
            v = values[name]
            if (p.min is not None and v < p.min) or (p.max is not None and v > p.max):
                raise OwnershipError(
                    Code.BAD_PARAM, f"parameter {name}={v} is outside its range ({_range(p.min, p.max)})", spec.file, spec.line
                )
        self.param_values = values
        self.params = Params(values)
        self.sizes: dict[str, int] = {}
        self.names: dict[str, Sequence[str]] = {}
        for d in spec.domains.values():
            try:
                n = d.resolve_size(self.params)
            except Exception as exc:  # noqa: BLE001 - user code
                raise OwnershipError(Code.BAD_PARAM, f"size of domain {d.name}: {exc}", spec.file, spec.line) from None
            if n < 0:
                raise OwnershipError(Code.BAD_PARAM, f"domain {d.name} has negative size {n}", spec.file, spec.line)
            self.sizes[d.name] = n
            self.names[d.name] = d.element_names(n)
        # One opaque element per element of each symmetric domain (see ownership.spec.elements).
        self.elements: dict[str, tuple[Element, ...]] = {
            d.name: tuple(Element(d.name, i, self.names[d.name][i]) for i in range(self.sizes[d.name]))
            for d in spec.domains.values()
            if d.symmetric
        }
        self.all_of: dict[str, Sequence[Any]] = {
            d.name: self.elements.get(d.name) or range(self.sizes[d.name]) for d in spec.domains.values()
        }
        self.value_sets: dict[str, list[int]] = {}
        for vs in spec.value_sets.values():
            self.value_sets[vs.name] = sorted(set(int(x) for x in vs.values(self.params)))
        self.layouts: dict[str, Layout] = {}
        off = 0
        for var in spec.vars.values():
            shape = tuple(self.sizes[d.name] for d in var.index)
            lay = Layout(var.name, off, shape)
            self.layouts[var.name] = lay
            off += lay.length
        self.width = off
        # Positions of every cell indexed by each element (one domain axis at a time).
        self.element_cells: dict[str, list[list[int]]] = {}
        for d in spec.domains.values():
            cells: list[list[int]] = [[] for _ in range(self.sizes[d.name])]
            for var in spec.vars.values():
                lay = self.layouts[var.name]
                axes = [x.name for x in var.index]
                if axes.count(d.name) != 1:
                    continue
                for k, key in enumerate(itertools.product(*[range(n) for n in lay.shape])):
                    cells[key[axes.index(d.name)]].append(lay.offset + k)
            self.element_cells[d.name] = cells
        self.init_state: State = tuple(
            itertools.chain.from_iterable([v.init] * self.layouts[v.name].length for v in spec.vars.values())
        )
        self.action_instances: list[ActionInstance] = []
        for act in spec.actions.values():
            ranges = [self._arg_values(d) for d in act.arg_domains]
            for args in itertools.product(*ranges):
                label = self.format_call(act, args)
                call = tuple(
                    self.elements[d.name][a] if isinstance(d, Domain) and d.name in self.elements else a
                    for d, a in zip(act.arg_domains, args, strict=True)
                )
                self.action_instances.append(ActionInstance(len(self.action_instances), act, tuple(args), label, call))
        self.invariants = list(spec.invariants.values())
        self.view = View(self)
        self._footprints: list[tuple[Callable[[State], Any], Any] | None] = [None] * len(self.action_instances)
        self.warnings: dict[tuple[Any, ...], SpecWarning] = {}
        """Warnings raised while actions ran (e.g. an impossible allocation), once per place; results carry them."""
        self._expanded = 0

    def add_warning(self, warning: SpecWarning) -> None:
        """Record ``warning`` for this instance's results (the first one per code, place and subject)."""
        self.warnings.setdefault((warning.code, warning.file, warning.line, warning.subject), warning)

    # -- helpers ------------------------------------------------------------
    def _arg_values(self, d: Domain | Values) -> list[int]:
        if isinstance(d, Values):
            return self.value_sets[d.name]
        return list(range(self.sizes[d.name]))

    def format_arg(self, d: Domain | Values, value: int) -> str:
        if isinstance(d, Values):
            return str(value)
        return self.names[d.name][value]

    def format_call(self, act: Action, args: Sequence[int]) -> str:
        shown = ", ".join(self.format_arg(d, a) for d, a in zip(act.arg_domains, args, strict=True))
        return f"{act.name}({shown})"

    def parse_arg(self, d: Domain | Values, text: Any) -> int:
        """Inverse of :meth:`format_arg`; raises ``ValueError``."""
        if isinstance(d, Values):
            if isinstance(text, bool) or not isinstance(text, int) or text not in self.value_sets[d.name]:
                raise ValueError(f"{text!r} is not one of {self.value_sets[d.name]}")
            return text
        try:
            return self.names[d.name].index(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an element of {d.name}") from None

    def find_instance(self, name: str, args: Sequence[int]) -> ActionInstance:
        for ai in self.action_instances:
            if ai.action.name == name and ai.args == tuple(args):
                return ai
        raise KeyError(name)

    def _runtime_error(self, what: str, exc: Exception, file: str | None) -> OwnershipError:
        line = location_in(file, exc) if file else None
        return OwnershipError(
            Code.SPEC_RUNTIME, f"{what} raised {type(exc).__name__}: {exc}", file or self.spec.file, line
        )

    # -- semantics ------------------------------------------------------------
    def successors_of(self, state: State, ai: ActionInstance) -> list[Successor]:
        """Every outcome of ``ai`` in ``state`` (empty if it is disabled).

        Each ``s.choose`` call forks: the action is re-run from ``state`` with
        each sequence of picks until every combination has been tried.
        """
        out: list[Successor] = []
        self._run(state, ai, out)
        return out

    def expand(self, state: State) -> list[tuple[ActionInstance, Successor]]:
        """Every enabled action instance's outcomes in ``state``: the explorer's hot loop.

        An action whose guard failed is remembered with the cells it read
        and their values (its *footprint*); actions are deterministic functions
        of the cells they read, so in a later state with the same values there
        it fails again and is skipped without running.
        """
        out: list[tuple[ActionInstance, Successor]] = []
        self._expanded += 1
        n = self._expanded
        # The determinism audit (see _audit): every state of the first expansions, then a sample.
        audit = n <= AUDIT_FIRST or not n % AUDIT_EVERY
        skipped: list[int] = []
        view = self.view
        cur = view._cells
        events = view.events
        picks = view._picks
        counts = view._counts
        prefix = view._prefix
        reads = view._reads
        flags = view._flags
        footprints = self._footprints
        for ai in self.action_instances:
            fp = footprints[ai.index]
            if fp is not None and fp[0](state) == fp[1]:
                if audit:
                    skipped.append(ai.index)
                continue
            cur[:] = state
            reads.clear()
            if picks:
                picks.clear()
                counts.clear()
                view._chosen.clear()
            if prefix:
                prefix.clear()
            if events:
                events.clear()
            if flags:
                flags.clear()
            fired = True
            try:
                ai.action.fn(view, *ai.call)
            except Disabled:
                if not picks:
                    if reads:
                        getter = itemgetter(*reads)
                        footprints[ai.index] = (getter, getter(state))
                    continue
                fired = False
            except OwnershipError:
                raise
            except Exception as exc:  # noqa: BLE001 - spec code is user code
                raise self._runtime_error(f"action {ai.label}", exc, ai.action.file) from None
            if not picks:
                out.append((ai, Successor(tuple(cur), (), tuple(events), tuple(flags) if flags else ())))
                continue
            # The run above took the first option at every choice: keep it and run the
            # alternatives, in the order successors_of would (the search order stays the same).
            found: list[Successor] = []
            if fired:
                found.append(Successor(tuple(cur), tuple(view._chosen), tuple(events), tuple(flags) if flags else ()))
            alternatives = [
                tuple(picks[:pos]) + (alt,) for pos in range(len(picks)) for alt in range(counts[pos] - 1, 0, -1)
            ]
            self._run(state, ai, found, alternatives)
            out.extend((ai, sc) for sc in found)
        if audit:
            self._audit(state, out, skipped)
        return out

    def _audit(self, state: State, out: list[tuple[ActionInstance, Successor]], skipped: list[int]) -> None:
        """Run every action instance again in ``state`` and compare with what :meth:`expand` found.

        Engines assume an action is a function of the cells it reads: run
        twice it gives the same successors (OWN066 otherwise: random numbers,
        the clock, a module global that changes), and an action skipped by
        the footprint cache is really disabled (OWN067 otherwise: a read that
        bypasses the variables, a cached helper).
        """
        first: dict[int, list[tuple[State, tuple[Any, ...]]]] = {}
        for ai, sc in out:
            first.setdefault(ai.index, []).append((sc.state, sc.picks))
        with self.mode(recording=False):
            for ai in self.action_instances:
                again: list[Successor] = []
                self._run(state, ai, again)
                got = [(sc.state, sc.picks) for sc in again]
                before = first.get(ai.index, [])
                if got == before:
                    continue
                if ai.index in skipped:
                    raise OwnershipError(
                        Code.SPEC_IMPURE,
                        f"action {ai.label} was skipped because the cells its guard read had not changed since it "
                        "was disabled, but it is enabled here: its guard depends on something other than the state "
                        "variables it reads (a module global, a cached helper, s.cur); read every input through "
                        "the state variables",
                        ai.action.file, ai.action.line,
                    )
                raise OwnershipError(
                    Code.SPEC_NONDETERMINISTIC,
                    f"action {ai.label} is not a deterministic function of the state: run twice in the same state "
                    f"it gave different successors ({self._difference(before, got)}); actions must not use random "
                    "numbers, the clock, or module-level data that changes",
                    ai.action.file, ai.action.line,
                )

    def _difference(self, a: list[tuple[State, tuple[Any, ...]]], b: list[tuple[State, tuple[Any, ...]]]) -> str:
        """The first difference between two successor lists, in words."""
        if len(a) != len(b):
            return f"{len(a)} outcomes the first time, {len(b)} the second"
        labels = list(self.cells(self.init_state))
        for (sa, pa), (sb, pb) in zip(a, b, strict=True):
            for i, (x, y) in enumerate(zip(sa, sb, strict=True)):
                if x != y:
                    return f"{labels[i]} became {x!r} the first time and {y!r} the second"
            if pa != pb:
                return f"choices {list(pa)} the first time and {list(pb)} the second"
        return "different outcomes"

    def successors_capped(self, state: State, ai: ActionInstance, limit: int) -> list[Successor] | None:
        """:meth:`successors_of`, or ``None`` once more than ``limit`` runs would be needed (wide choices)."""
        out: list[Successor] = []
        try:
            self._run(state, ai, out, None, limit)
        except _TooMany:
            self.view._prefix.clear()
            return None
        return out

    def _run(self, state: State, ai: ActionInstance, out: list[Successor], pending: list[tuple[int, ...]] | None = None,
             limit: int | None = None) -> None:
        view = self.view
        cur = view._cells
        fn = ai.action.fn
        args = ai.call
        picks = view._picks
        counts = view._counts
        prefix_list = view._prefix
        chosen = view._chosen
        if pending is None:
            pending = [()]
        runs = 0
        while pending:
            runs += 1
            if limit is not None and runs > limit:
                raise _TooMany
            prefix = pending.pop()
            cur[:] = state
            view.events.clear()
            view._flags.clear()
            picks.clear()
            counts.clear()
            chosen.clear()
            prefix_list[:] = prefix
            fired = True
            try:
                fn(view, *args)
            except Disabled:
                fired = False
            except OwnershipError:
                raise
            except Exception as exc:  # noqa: BLE001 - spec code is user code
                raise self._runtime_error(f"action {ai.label}", exc, ai.action.file) from None
            if picks:
                for pos in range(len(prefix), len(picks)):
                    for alt in range(counts[pos] - 1, 0, -1):
                        pending.append(tuple(picks[:pos]) + (alt,))
            if fired:
                out.append(Successor(tuple(cur), tuple(chosen), tuple(view.events), tuple(view._flags)))
        prefix_list.clear()

    def run_with_picks(self, state: State, ai: ActionInstance, picks: Sequence[Any]) -> Successor | None:
        """Re-run ``ai`` making exactly the recorded choices ``picks`` (chosen values).

        Returns ``None`` if the action is disabled or a recorded value is not
        among the options at that point.
        """
        succ = self._run_once(state, ai, "_forced", tuple(picks))
        if succ is None or len(succ.picks) != len(picks):
            return None
        return succ

    def run_with_chooser(self, state: State, ai: ActionInstance, chooser: Callable[[Sequence[Any]], Any]) -> Successor | None:
        """Run ``ai`` once, letting ``chooser(options)`` make every ``s.choose``; ``None`` if disabled."""
        return self._run_once(state, ai, "_chooser", chooser)

    def _run_once(self, state: State, ai: ActionInstance, hook: str, value: Any) -> Successor | None:
        """One run of ``ai`` with the view's choice ``hook`` (``_forced`` or ``_chooser``) set to ``value``."""
        view = self.view
        view._cells[:] = state
        view.events.clear()
        view._flags.clear()
        view._picks.clear()
        view._counts.clear()
        view._chosen.clear()
        view._prefix.clear()
        object.__setattr__(view, hook, value)
        try:
            ai.action.fn(view, *ai.call)
        except Disabled:
            return None
        except OwnershipError:
            raise
        except Exception as exc:  # noqa: BLE001 - spec code is user code
            raise self._runtime_error(f"action {ai.label}", exc, ai.action.file) from None
        finally:
            object.__setattr__(view, hook, None)
        return Successor(tuple(view._cells), tuple(view._chosen), tuple(view.events), tuple(view._flags))

    def first_outcome(self, state: State, ai: ActionInstance) -> Successor | None:
        """One outcome of ``ai`` in ``state`` (``None`` exactly when it is disabled).

        Tries choices depth-first and stops at the first that fires, so it
        stays cheap on large pools where :meth:`successors_of` would enumerate
        every combination of pages.
        """
        fp = self._footprints[ai.index]
        if fp is not None and fp[0](state) == fp[1]:
            return None
        view = self.view
        pending: list[tuple[int, ...]] = [()]
        while pending:
            prefix = pending.pop()
            view._cells[:] = state
            view.events.clear()
            view._flags.clear()
            view._picks.clear()
            view._counts.clear()
            view._chosen.clear()
            view._prefix[:] = prefix
            view._reads.clear()
            try:
                ai.action.fn(view, *ai.call)
            except Disabled:
                picks, counts = view._picks, view._counts
                if not picks and not prefix:
                    reads = view._reads
                    if reads:
                        getter = itemgetter(*reads)
                        self._footprints[ai.index] = (getter, getter(state))
                    view._prefix.clear()
                    return None
                # Alternatives after the last pick first: depth-first, nearest the failure.
                for pos in range(len(prefix), len(picks)):
                    for alt in range(counts[pos] - 1, 0, -1):
                        pending.append(tuple(picks[:pos]) + (alt,))
                continue
            except OwnershipError:
                raise
            except Exception as exc:  # noqa: BLE001 - spec code is user code
                raise self._runtime_error(f"action {ai.label}", exc, ai.action.file) from None
            view._prefix.clear()
            return Successor(tuple(view._cells), tuple(view._chosen), tuple(view.events), tuple(view._flags))
        view._prefix.clear()
        return None

    @contextlib.contextmanager
    def mode(self, *, recording: bool | None = None, choice_reduction: Iterable[str] | None = None) -> Iterator[None]:
        """Within the block, the view records events or not, and reduces choices in the given domains.

        ``recording=False`` skips events (a search's hot loop: events are
        rebuilt when a trace is replayed).  ``choice_reduction`` lets
        ``s.choose(..., domain=D)`` try one of each class of identical
        elements of D, which is only sound while a search reduces states by
        the symmetry of those domains (choosing between two elements whose
        cells are identical leads to states that differ by swapping them,
        which the search merges anyway).  ``None`` leaves a mode as it is.
        Both modes are restored on leaving the block, also on an exception,
        so nested engines (a search inside a check) leave each other's
        modes alone.
        """
        view = self.view
        was_recording, was_reduce = view.recording, view._reduce
        if recording is not None:
            object.__setattr__(view, "recording", recording)
        if choice_reduction is not None:
            object.__setattr__(view, "_reduce", frozenset(choice_reduction))
        try:
            yield
        finally:
            object.__setattr__(view, "recording", was_recording)
            object.__setattr__(view, "_reduce", was_reduce)

    def distinct_elements(self, domain: str, options: Sequence[Any], cur: Sequence[Any]) -> list[Any]:
        """``options`` with all but the first of each group of identical elements removed."""
        rows = self.element_cells[domain]
        seen: set[tuple[Any, ...]] = set()
        out: list[Any] = []
        for e in options:
            sig = tuple([cur[i] for i in rows[ix(e)]])
            if sig not in seen:
                seen.add(sig)
                out.append(e)
        return out

    def violated(self, state: State) -> str | None:
        """Name of the first invariant ``state`` violates, or ``None``."""
        view = self.view
        view._cells[:] = state
        for inv in self.invariants:
            try:
                ok = inv.fn(view)
            except OwnershipError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise self._runtime_error(f"invariant {inv.name}", exc, inv.file) from None
            if not invariant_value(inv, ok):
                self.check_unchanged(state)
                return inv.name
        self.check_unchanged(state)
        return None

    def check_unchanged(self, state: State) -> None:
        """OWN067 if evaluating invariants (or the terminal predicate) on ``state`` wrote the view's cells.

        An invariant that writes changes what the invariants after it see (a
        counter reset to 0 makes every bound on it hold): it could hide a
        violation.  One comparison per evaluated state; the culprit is only
        searched for when something was written.
        """
        if tuple(self.view._cells) == state:
            return
        view = self.view
        labels = list(self.cells(state))
        culprits: list[tuple[str, str | None, int | None, Callable[..., Any]]] = [
            (f"invariant {inv.name}", inv.file, inv.line, inv.fn) for inv in self.invariants
        ]
        done = self.spec.done
        if done is not None:
            code = getattr(done, "__code__", None)
            culprits.append(("the @spec.terminal predicate", code.co_filename if code else None,
                             code.co_firstlineno if code else None, done))
        for what, file, line, fn in culprits:
            view._cells[:] = state
            try:
                fn(view)
            except Exception:  # noqa: BLE001 - only looking for the writer
                pass
            after = tuple(view._cells)
            if after != state:
                i = next(k for k, (a, b) in enumerate(zip(state, after, strict=True)) if a != b)
                view._cells[:] = state
                raise OwnershipError(
                    Code.SPEC_IMPURE,
                    f"{what} writes the state ({labels[i]} from {state[i]!r} to {after[i]!r}): invariants and "
                    "the terminal predicate must only read it, or a later invariant sees a state that is not "
                    "the one reached",
                    file,
                    line,
                )
        view._cells[:] = state
        raise OwnershipError(Code.SPEC_IMPURE, "evaluating the invariants wrote the state: they must only read it",
                             self.spec.file, self.spec.line)

    def step_violated(self, succ: Successor, checked: Sequence[str] | None = None) -> str | None:
        """First invariant, in declaration order, that the step to ``succ`` violates, or ``None``.

        A step violates ``X`` when its state does or when one of its events
        was marked ``violates=X``; only the ``checked`` invariants count
        (all of them by default).
        """
        names = list(self.spec.invariants) if checked is None else [n for n in self.spec.invariants if n in checked]
        for name in names:
            if name in succ.violations or not self.holds(succ.state, name):
                return name
        return None

    def holds(self, state: State, invariant: str) -> bool:
        """Whether ``state`` satisfies the named invariant."""
        view = self.view
        view._cells[:] = state
        inv = self.spec.invariants[invariant]
        try:
            ok = inv.fn(view)
        except OwnershipError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self._runtime_error(f"invariant {inv.name}", exc, inv.file) from None
        self.check_unchanged(state)
        return invariant_value(inv, ok)

    def is_terminal(self, state: State) -> bool:
        """Whether the spec calls ``state`` finished (no request pending)."""
        if self.spec.done is None:
            return False
        self.view._cells[:] = state
        done = bool(self.spec.done(self.view))
        self.check_unchanged(state)
        return done

    # -- representation -------------------------------------------------------
    def to_json(self, state: State) -> dict[str, Any]:
        """Named, readable form of a state: tables become dicts keyed by element name."""
        out: dict[str, Any] = {}
        for v in self.spec.vars.values():
            lay = self.layouts[v.name]
            flat = state[lay.offset : lay.offset + lay.length]
            out[v.name] = self._nest(v.type, [self.names[d.name] for d in v.index], list(flat))
        return out

    def _nest(self, vtype: Any, axes: list[Sequence[str]], flat: list[Any]) -> Any:
        if not axes:
            return vtype.to_json(flat[0], self.names)
        head, rest = axes[0], axes[1:]
        stride = len(flat) // max(len(head), 1)
        return {name: self._nest(vtype, rest, flat[i * stride : (i + 1) * stride]) for i, name in enumerate(head)}

    def from_json(self, data: Mapping[str, Any]) -> State:
        """Inverse of :meth:`to_json`; raises ``ValueError`` naming the bad field."""
        values: list[Any] = []
        for v in self.spec.vars.values():
            if v.name not in data:
                raise ValueError(f"state has no field {v.name!r}")
            values.extend(self._flatten(v.name, v.type, [self.names[d.name] for d in v.index], data[v.name]))
        return tuple(values)

    def _flatten(self, where: str, vtype: Any, axes: list[Sequence[str]], data: Any) -> list[Any]:
        if not axes:
            try:
                return [vtype.from_json(data, self.names)]
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        if not isinstance(data, Mapping) or set(data) != set(axes[0]):
            raise ValueError(f"{where}: expected keys {axes[0]}")
        out: list[Any] = []
        for name in axes[0]:
            out.extend(self._flatten(f"{where}[{name}]", vtype, axes[1:], data[name]))
        return out

    def cells(self, state: State) -> dict[str, str]:
        """Every scalar cell of a state, as ``{"d_state[B]": "PREALLOC"}``."""
        out: dict[str, str] = {}
        for v in self.spec.vars.values():
            lay = self.layouts[v.name]
            axes = [self.names[d.name] for d in v.index]
            keys = list(itertools.product(*axes)) if axes else [()]
            for k, key in enumerate(keys):
                label = v.name + (f"[{', '.join(key)}]" if key else "")
                out[label] = v.type.show(state[lay.offset + k], self.names)
        return out

    def diff(self, before: State, after: State) -> list[tuple[str, str, str]]:
        """Changed cells between two states: ``(cell, old, new)``."""
        a = self.cells(before)
        b = self.cells(after)
        return [(k, a[k], b[k]) for k in a if a[k] != b[k]]

    def describe_params(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.param_values.items())
