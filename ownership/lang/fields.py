"""How state variables live in the flat state tuple, and the ``s.var[...]`` objects spec code indexes.

:class:`Layout` places each variable in the tuple; :class:`Field1`/:class:`FieldN`
(and their ``Ref`` variants, which hand out :class:`~ownership.lang.elements.Element`
objects) read and write its cells and log every read position for the
explorer's guard footprints; :func:`value_checker` is the type check every
write goes through.  These classes are the explorer's hot path: slotted
classes whose every access is one index computation on the shared cell list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.errors import Code, OwnershipError
from ownership.lang.elements import Element, spec_frame_location, type_error
from ownership.lang.types import BoolType, Enum, IntType, Ref, RefSet


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

    __slots__ = ("_cells", "off", "n", "reads", "dom", "var", "put", "writes")

    def __init__(self, cur: list[Any], off: int, n: int, reads: list[int], dom: str = "", var: str = "",
                 put: Callable[[Any], Any] | None = None, writes: list[int] | None = None) -> None:
        self._cells = cur
        self.off = off
        self.n = n
        self.reads = reads
        self.dom = dom
        self.var = var
        self.put = put or _identity
        self.writes = writes if writes is not None else []
        """Every written position, in order (the compiled kernel memoises what a run wrote, even a
        value equal to the old one)."""

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
            pos = self.off + i
        elif i.__class__ is Element and i._domain == self.dom:
            pos = self.off + i._i
        else:
            pos = self.off + self._key(i)
        self._cells[pos] = self.put(value)
        self.writes.append(pos)

    def __iter__(self) -> Iterator[Any]:
        self.reads.extend(range(self.off, self.off + self.n))
        return iter(self._cells[self.off : self.off + self.n])

    def __len__(self) -> int:
        return self.n


class Field1Ref(Field1):
    """A :class:`Field1` whose cells name elements of a symmetric domain: reads give :class:`Element` objects."""

    __slots__ = ("elems",)

    def __init__(self, cur: list[Any], off: int, n: int, reads: list[int], dom: str, var: str,
                 put: Callable[[Any], Any], elems: Sequence[Element], writes: list[int] | None = None) -> None:
        super().__init__(cur, off, n, reads, dom, var, put, writes)
        self.elems = elems

    def __getitem__(self, i: Any) -> Any:
        v = Field1.__getitem__(self, i)
        return v if v is None else self.elems[v]

    def __iter__(self) -> Iterator[Any]:
        elems = self.elems
        return iter([v if v is None else elems[v] for v in Field1.__iter__(self)])


class FieldN:
    """``s.var[i, j]`` for a variable indexed by several domains."""

    __slots__ = ("_cells", "off", "shape", "strides", "reads", "doms", "var", "put", "writes")

    def __init__(self, cur: list[Any], off: int, shape: tuple[int, ...], reads: list[int],
                 doms: tuple[str, ...] = (), var: str = "", put: Callable[[Any], Any] | None = None,
                 writes: list[int] | None = None) -> None:
        self._cells = cur
        self.off = off
        self.shape = shape
        self.reads = reads
        self.writes = writes if writes is not None else []
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
        pos = self._pos(key)
        self._cells[pos] = self.put(value)
        self.writes.append(pos)


class FieldNRef(FieldN):
    """A :class:`FieldN` whose cells name elements of a symmetric domain."""

    __slots__ = ("elems",)

    def __init__(self, cur: list[Any], off: int, shape: tuple[int, ...], reads: list[int], doms: tuple[str, ...],
                 var: str, put: Callable[[Any], Any], elems: Sequence[Element], writes: list[int] | None = None) -> None:
        super().__init__(cur, off, shape, reads, doms, var, put, writes)
        self.elems = elems

    def __getitem__(self, key: tuple[Any, ...]) -> Any:
        v = FieldN.__getitem__(self, key)
        return v if v is None else self.elems[v]


def _identity(value: Any) -> Any:
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
