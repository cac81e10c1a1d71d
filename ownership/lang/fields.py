"""How state variables live in the flat state tuple, and the ``s.var[...]`` objects spec code indexes.

:class:`Layout` places each variable in the tuple; :class:`Field1`/:class:`FieldN`
(and their ``Ref`` variants, which hand out :class:`~ownership.lang.elements.Element`
objects) read and write its cells and log every read position for the
explorer's guard footprints; :func:`value_checker` is the type check every
write goes through.  These classes are the explorer's hot path: slotted
classes whose every access is one index computation on the shared cell list.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.errors import Code, OwnershipError
from ownership.lang.elements import (
    FILE_KINDS,
    TRUSTED,
    Element,
    Elements,
    checker_caller,
    element_set,
    spec_frame_location,
    symmetry_error,
    type_error,
)
from ownership.lang.types import Ref, RefSet


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
    Over a symmetric domain ``keys`` holds its elements, and spec code may
    neither index with an int nor iterate positionally (OWN060): a position
    is an index by another name.
    """

    __slots__ = ("_cells", "off", "n", "reads", "dom", "var", "put", "writes", "keys", "sym")

    def __init__(self, cur: list[Any], off: int, n: int, reads: list[int], dom: str = "", var: str = "",
                 put: Callable[[Any], Any] | None = None, writes: list[int] | None = None,
                 keys: Sequence[Any] | None = None) -> None:
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
        self.keys: Sequence[Any] = keys if keys is not None else range(n)
        self.sym = keys.__class__ is Elements

    def _key(self, i: Any) -> int:
        return _index_of(self.var, self.dom, self.n, i)

    def _at(self, i: Any) -> int:
        """The cell of index ``i``; an int over a symmetric domain only from the checker's own code."""
        if i.__class__ is int:
            if not 0 <= i < self.n:
                raise IndexError(f"index {i} out of range 0..{self.n - 1}")
            if self.sym and not checker_caller(2):
                raise _int_index(self.var, self.dom, i)
            return self.off + i
        if i.__class__ is Element and i._Element__domain == self.dom:
            return self.off + i._Element__i  # type: ignore[no-any-return]
        return self.off + self._key(i)

    def __getitem__(self, i: Any) -> Any:
        if i.__class__ is Element and i._Element__domain == self.dom:
            pos = self.off + i._Element__i
        elif i.__class__ is int and not self.sym and 0 <= i < self.n:
            pos = self.off + i
        else:
            pos = self._at(i)
        self.reads.append(pos)
        return self._cells[pos]

    def __setitem__(self, i: Any, value: Any) -> None:
        if i.__class__ is Element and i._Element__domain == self.dom:
            pos = self.off + i._Element__i
        elif i.__class__ is int and not self.sym and 0 <= i < self.n:
            pos = self.off + i
        else:
            pos = self._at(i)
        self._cells[pos] = self.put(value)
        self.writes.append(pos)

    def _row(self) -> list[Any]:
        self.reads.extend(range(self.off, self.off + self.n))
        return self._cells[self.off : self.off + self.n]

    def __iter__(self) -> Iterator[Any]:
        if self.sym and FILE_KINDS[sys._getframe(1).f_code.co_filename] != TRUSTED and not checker_caller(1):
            raise _positional(self.var, self.dom)
        return iter(self._row())

    def __len__(self) -> int:
        return self.n

    def values(self) -> list[Any]:
        """Every cell's value (for ``sum``, ``any``, ``all``): no index comes with them."""
        return self._row()

    def items(self) -> list[tuple[Any, Any]]:
        """``(index, value)`` pairs: an element of a symmetric domain, an int of any other, with its cell."""
        return list(zip(self.keys, self.values(), strict=True))


class Field1Ref(Field1):
    """A :class:`Field1` whose cells name elements of a symmetric domain: reads give :class:`Element` objects."""

    __slots__ = ("elems",)

    def __init__(self, cur: list[Any], off: int, n: int, reads: list[int], dom: str, var: str,
                 put: Callable[[Any], Any], elems: Sequence[Element], writes: list[int] | None = None,
                 keys: Sequence[Any] | None = None) -> None:
        super().__init__(cur, off, n, reads, dom, var, put, writes, keys)
        self.elems = elems

    def __getitem__(self, i: Any) -> Any:
        if i.__class__ is Element and i._Element__domain == self.dom:
            pos = self.off + i._Element__i
        elif i.__class__ is int and not self.sym and 0 <= i < self.n:
            pos = self.off + i
        else:
            pos = self._at(i)
        self.reads.append(pos)
        v = self._cells[pos]
        return v if v is None else self.elems[v]

    def _row(self) -> list[Any]:
        elems = self.elems
        return [v if v is None else elems[v] for v in Field1._row(self)]


class Field1Set(Field1):
    """A :class:`Field1` of ``SetOf(D)`` for a symmetric D: spec code reads a frozenset of elements.

    The cell stays a bitmask (the vocabulary manages those with bit
    operations); spec code never sees the mask, whose bits are indices.
    """

    __slots__ = ("elems",)

    def __init__(self, cur: list[Any], off: int, n: int, reads: list[int], dom: str, var: str,
                 put: Callable[[Any], Any], elems: Sequence[Element], writes: list[int] | None = None,
                 keys: Sequence[Any] | None = None) -> None:
        super().__init__(cur, off, n, reads, dom, var, put, writes, keys)
        self.elems = elems

    def __getitem__(self, i: Any) -> Any:
        if i.__class__ is Element and i._Element__domain == self.dom:
            pos = self.off + i._Element__i
        elif i.__class__ is int and not self.sym and 0 <= i < self.n:
            pos = self.off + i
        else:
            pos = self._at(i)
        self.reads.append(pos)
        mask = self._cells[pos]
        if FILE_KINDS[sys._getframe(1).f_code.co_filename] == TRUSTED or checker_caller(1):
            return mask
        return element_set(mask, self.elems)

    def _row(self) -> list[Any]:
        row = Field1._row(self)
        return row if checker_caller(2) else [element_set(m, self.elems) for m in row]


class FieldN:
    """``s.var[i, j]`` for a variable indexed by several domains.

    It has no positional iteration (there is no one order of its cells):
    ``.items()`` gives ``((i, j), value)`` pairs, ``.values()`` the values.
    """

    __slots__ = ("_cells", "off", "shape", "strides", "reads", "doms", "var", "put", "writes", "keys", "syms")

    def __init__(self, cur: list[Any], off: int, shape: tuple[int, ...], reads: list[int],
                 doms: tuple[str, ...] = (), var: str = "", put: Callable[[Any], Any] | None = None,
                 writes: list[int] | None = None, keys: Sequence[Sequence[Any]] | None = None) -> None:
        self._cells = cur
        self.off = off
        self.shape = shape
        self.reads = reads
        self.writes = writes if writes is not None else []
        self.strides = strides(shape)
        self.doms = doms or ("",) * len(shape)
        self.var = var
        self.put = put or _identity
        self.keys: tuple[Sequence[Any], ...] = tuple(keys) if keys is not None else tuple(range(n) for n in shape)
        self.syms = tuple(k.__class__ is Elements for k in self.keys)

    def _pos(self, key: tuple[Any, ...]) -> int:
        if not isinstance(key, tuple) or len(key) != len(self.shape):
            raise IndexError(f"index with {len(self.shape)} elements, e.g. s.var[a, b]")
        pos = self.off
        for k, n, st, dom, sym in zip(key, self.shape, self.strides, self.doms, self.syms, strict=True):
            if k.__class__ is Element and k._Element__domain == dom:
                pos += k._Element__i * st
            elif k.__class__ is int:
                if not 0 <= k < n:
                    raise IndexError(f"index {k} out of range 0..{n - 1}")
                if sym and not checker_caller(2):
                    raise _int_index(self.var, dom, k)
                pos += k * st
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

    def __iter__(self) -> Iterator[Any]:
        # Without this, Python would iterate by calling [0], [1], ...: the first int index is
        # not a tuple, and the loop (a sum over the table) would silently see no cell at all.
        raise _multi_iterated(self.var, self.doms, self.syms)

    def __len__(self) -> int:
        raise _multi_iterated(self.var, self.doms, self.syms)

    def __contains__(self, item: object) -> bool:
        raise _multi_iterated(self.var, self.doms, self.syms)

    def _wrap(self, value: Any) -> Any:
        return value

    def values(self) -> list[Any]:
        """Every cell's value, in no promised order (for ``sum``, ``any``, ``all``)."""
        n = 1
        for d in self.shape:
            n *= d
        self.reads.extend(range(self.off, self.off + n))
        return [self._wrap(v) for v in self._cells[self.off : self.off + n]]

    def items(self) -> list[tuple[tuple[Any, ...], Any]]:
        """``((i, j, ...), value)`` for every cell: elements of symmetric domains, ints of others."""
        return list(zip(itertools.product(*self.keys), self.values(), strict=True))


class _FieldNElements(FieldN):
    """A :class:`FieldN` whose cells stand for elements of a symmetric domain (``elems``, by index)."""

    __slots__ = ("elems",)

    def __init__(self, cur: list[Any], off: int, shape: tuple[int, ...], reads: list[int], doms: tuple[str, ...],
                 var: str, put: Callable[[Any], Any], elems: Sequence[Element], writes: list[int] | None = None,
                 keys: Sequence[Sequence[Any]] | None = None) -> None:
        super().__init__(cur, off, shape, reads, doms, var, put, writes, keys)
        self.elems = elems


class FieldNRef(_FieldNElements):
    """A :class:`FieldN` whose cells name elements of a symmetric domain."""

    __slots__ = ()

    def __getitem__(self, key: tuple[Any, ...]) -> Any:
        pos = self._pos(key)
        self.reads.append(pos)
        v = self._cells[pos]
        return v if v is None else self.elems[v]

    def _wrap(self, value: Any) -> Any:
        return value if value is None else self.elems[value]


class FieldNSet(_FieldNElements):
    """A :class:`FieldN` of ``SetOf(D)`` for a symmetric D (see :class:`Field1Set`)."""

    __slots__ = ()

    def __getitem__(self, key: tuple[Any, ...]) -> Any:
        pos = self._pos(key)
        self.reads.append(pos)
        mask = self._cells[pos]
        return mask if checker_caller(1) else element_set(mask, self.elems)

    def _wrap(self, value: Any) -> Any:
        return value if checker_caller(3) else element_set(value, self.elems)


def make_field(cur: list[Any], lay: Layout, reads: list[int], writes: list[int], var: Any,
               put: Callable[[Any], Any], elements: Mapping[str, Sequence[Element]],
               all_of: Mapping[str, Sequence[Any]]) -> Any:
    """The ``s.var`` object of an indexed variable: plain cells, element references, or element sets."""
    vtype = var.type
    named = vtype.refers_to() if isinstance(vtype, (Ref, RefSet)) else None
    elems = elements.get(named) if named is not None else None
    doms = tuple(d.name for d in var.index)
    keys = [all_of[d] for d in doms]
    if len(lay.shape) == 1:
        key1 = keys[0] if keys[0].__class__ is Elements else None
        if elems is not None and isinstance(vtype, RefSet):
            return Field1Set(cur, lay.offset, lay.shape[0], reads, doms[0], lay.name, put, elems, writes, key1)
        if elems is not None:
            return Field1Ref(cur, lay.offset, lay.shape[0], reads, doms[0], lay.name, put, elems, writes, key1)
        return Field1(cur, lay.offset, lay.shape[0], reads, doms[0], lay.name, put, writes, key1)
    if elems is not None and isinstance(vtype, RefSet):
        return FieldNSet(cur, lay.offset, lay.shape, reads, doms, lay.name, put, elems, writes, keys)
    if elems is not None:
        return FieldNRef(cur, lay.offset, lay.shape, reads, doms, lay.name, put, elems, writes, keys)
    return FieldN(cur, lay.offset, lay.shape, reads, doms, lay.name, put, writes, keys)


def _int_index(var: str, dom: str, i: int) -> OwnershipError:
    return symmetry_error(dom, f"indexes {var} (declared per {dom}) with the int {i}", hint=(
        "an int names one of them: index with an element (an action argument, a loop over s.all(D), "
        "s.choose(list(s.all(D)), domain=D)), or declare the domain ordered (`spec.domain(..., ordered=True)`) "
        "if the protocol really uses slot order"))


def _positional(var: str, dom: str) -> OwnershipError:
    return symmetry_error(dom, f"iterates {var} (declared per {dom}) by position", hint=(
        "a position is an index by another name: iterate `s.var.items()` for (element, value) pairs, "
        "`s.var.values()` for the values, or `for r in s.all(D): s.var[r]`"))


def _multi_iterated(var: str, doms: tuple[str, ...], syms: tuple[bool, ...]) -> OwnershipError:
    per = ", ".join(doms)
    what = (f"iterates {var}, a table indexed by ({per}): a table over several domains has no single "
            f"order of cells; index it as s.{var}[a, b], or iterate s.{var}.items() for ((a, b), value) "
            f"pairs or s.{var}.values()")
    if any(syms):
        return symmetry_error(doms[syms.index(True)], what, hint="iterating it by position would hand out indices")
    file, line = spec_frame_location(3)
    return OwnershipError(Code.WRONG_DOMAIN, what, file, line)


def _identity(value: Any) -> Any:
    return value


def _index_of(var: str, dom: str, n: int, key: Any) -> int:
    """The slow path of indexing: an element of another domain, a bool, or not an index at all."""
    if key.__class__ is Element:
        raise type_error(
            f"indexes {var} (declared per {dom}) with {key._Element__name}, an element of {key._Element__domain}"
        )
    if isinstance(key, int) and not isinstance(key, bool):
        if not 0 <= key < n:
            raise IndexError(f"index {key} out of range 0..{n - 1}")
        return int(key)
    raise type_error(f"indexes {var} (declared per {dom}) with {key!r}, which is not an element of {dom}")
