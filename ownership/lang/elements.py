"""Opaque elements of symmetric domains (Murphi's scalarsets).

A domain declared ``symmetric=True`` promises that the spec treats its
elements alike, which is what lets the explorer (and the symbolic engines)
merge states that differ by a permutation of them.  A spec that adds 1 to a
page to find "the next slot", sorts requests, or compares a request with the
literal ``1`` breaks that promise, and the reduced search then misses states:
a false PROVED.

So concrete views hand spec code an :class:`Element` for every value of a
symmetric domain (action arguments, ``s.all(D)``, reads of ``Optional(D)`` /
``D`` cells).  An element supports exactly what permutations preserve:
``==``/``!=`` (with elements of its own domain and ``None``), hashing (the same
hash for every element of a domain, so set and dict order cannot reveal the
index) and use as an index into the tables of its domain.  Everything else
(arithmetic, ordering, ``int()``, truth value, bit operations, comparison with
an int, ``%d``/format specs) raises a located ``error[OWN060]``.

States stay flat tuples of plain ints: writes store the index, traces and
JSON keep ints.  The vocabulary is trusted code and unwraps with :func:`ix`.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from ownership.errors import Code, OwnershipError
from ownership.library import is_checker_code

_LANG = os.path.dirname(os.path.abspath(__file__))
_PLUMBING = frozenset(os.path.join(_LANG, f) for f in ("elements.py", "fields.py", "instance.py"))
"""The modules between spec code and an element: a caller is judged by the first frame outside them."""


def spec_frame_location(skip: int = 2) -> tuple[str | None, int | None]:
    """File and line of the innermost caller outside the ``ownership`` package (the spec code)."""
    frame: Any = sys._getframe(skip)
    first = frame
    while frame is not None:
        name = frame.f_code.co_filename
        if not is_checker_code(name) and not name.startswith("<"):
            return name, frame.f_lineno
        frame = frame.f_back
    return (first.f_code.co_filename, first.f_lineno) if first is not None else (None, None)


def _kind_of_file(filename: str) -> int:
    """0: the view and field plumbing, 1: the rest of the checker, 2: spec code."""
    if os.path.abspath(filename) in _PLUMBING:
        return 0
    return 1 if is_checker_code(filename) else 2


class _FileKinds(dict[str, int]):
    """A memo of :func:`_kind_of_file` (asked on every read of a symmetric set): a pure function's cache."""

    def __missing__(self, filename: str) -> int:
        kind = self[filename] = _kind_of_file(filename)
        return kind


_KINDS = _FileKinds()
TRUSTED = 1
"""``FILE_KINDS[filename]`` of the checker's own code (the hot paths test the direct caller inline)."""
FILE_KINDS = _KINDS


def checker_caller(depth: int = 1) -> bool:
    """Whether the frame ``depth`` levels above the caller (1: the caller's caller) is the checker's own code.

    The vocabulary and the renderers are trusted to see indices and names;
    spec code is not.  Frames of this module and of the view and field code
    (``lang/``) are skipped so the answer is about whoever called into them.
    """
    frame: Any = sys._getframe(depth + 1)
    kinds = _KINDS
    while frame is not None:
        kind = kinds[frame.f_code.co_filename]
        if kind:
            return kind == 1
        frame = frame.f_back
    return False


def symmetry_error(domain: str, what: str, *, names: bool = False, hint: str | None = None) -> OwnershipError:
    """The OWN060 error for ``what`` done to an element of symmetric ``domain``, located at the spec line."""
    file, line = spec_frame_location(3)
    if hint is None:
        hint = (
            "the names of elements are for display only: pass the element itself (to s.emit, a label, "
            "another variable) and compare elements with `==`"
            if names else
            "arithmetic/ordering on them breaks symmetry reduction: declare the domain ordered "
            "(`own.pool(..., ordered=True)` / `spec.domain(..., ordered=True)`) if the protocol really uses slot order"
        )
    return OwnershipError(
        Code.SYMMETRY_BROKEN,
        f"{what}: elements of symmetric domain {domain} are interchangeable; {hint}",
        file,
        line,
    )


def type_error(message: str) -> OwnershipError:
    """An OWN063 (wrong domain) error located at the spec line."""
    file, line = spec_frame_location(3)
    return OwnershipError(Code.WRONG_DOMAIN, message, file, line)


class Element:
    """One element of a symmetric domain; see the module docstring.

    One object exists per element per :class:`~ownership.lang.instance.Instance`,
    so wrapping an index is a list lookup and equality is identity.  The slots
    are name-mangled so that spec code reaches neither the index nor the name:
    ``r._i``, ``r._name`` and ``r._domain`` are properties that answer the
    checker's own code and refuse spec code (OWN060).
    """

    __slots__ = ("_Element__domain", "_Element__i", "_Element__name", "_Element__hash")
    _Element__domain: str
    _Element__i: int
    _Element__name: str
    _Element__hash: int

    def __init__(self, domain: str, index: int, name: str) -> None:
        object.__setattr__(self, "_Element__domain", domain)
        object.__setattr__(self, "_Element__i", index)
        object.__setattr__(self, "_Element__name", name)
        # The same for every element of the domain (so set and dict order depend on insertion
        # order only, never on the index) and the same in every run: crc32, not the salted
        # str hash, so no verdict depends on PYTHONHASHSEED.
        object.__setattr__(self, "_Element__hash", zlib.crc32(domain.encode()))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("domain elements are immutable")

    # -- the private parts, for the checker's own code only -----------------------------
    @property
    def _i(self) -> int:
        if not checker_caller(1):
            raise symmetry_error(self._Element__domain, f"reads the index of {self._Element__name}", hint=_NO_INDEX)
        return self._Element__i

    @property
    def _name(self) -> str:
        if not checker_caller(1):
            raise symmetry_error(self._Element__domain, f"reads the name of {self._Element__name}", names=True)
        return self._Element__name

    @property
    def _domain(self) -> str:
        if not checker_caller(1):
            raise symmetry_error(self._Element__domain, f"reads the private fields of {self._Element__name}", hint=_NO_INDEX)
        return self._Element__domain

    # -- what a permutation preserves -------------------------------------------
    def __eq__(self, other: object) -> bool:
        if other.__class__ is Element:
            if other._Element__domain != self._Element__domain:  # type: ignore[attr-defined]
                raise type_error(
                    f"compares {self._Element__name} (an element of {self._Element__domain}) with {other._Element__name} "  # type: ignore[attr-defined]
                    f"(an element of {other._Element__domain}): values of different domains are never equal"  # type: ignore[attr-defined]
                )
            return self._Element__i == other._Element__i  # type: ignore[attr-defined]
        if other is None:
            return False
        raise symmetry_error(self._Element__domain, f"compares {self._Element__name} with {other!r}")

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._Element__hash  # type: ignore[no-any-return]

    # -- display: the checker's rendering only ----------------------------------------
    def __repr__(self) -> str:
        if not checker_caller(1):
            raise symmetry_error(self._Element__domain, f"turns {self._Element__name} into a string", names=True)
        return self._Element__name  # type: ignore[no-any-return]

    def __str__(self) -> str:
        if not checker_caller(1):
            raise symmetry_error(self._Element__domain, f"turns {self._Element__name} into a string", names=True)
        return self._Element__name  # type: ignore[no-any-return]

    def __format__(self, spec: str) -> str:
        if spec or not checker_caller(1):
            raise symmetry_error(self._Element__domain, f"formats {self._Element__name}", names=True)
        return self._Element__name  # type: ignore[no-any-return]

    def __reduce__(self) -> NoReturn:
        raise symmetry_error(self._Element__domain, f"pickles {self._Element__name}")

    def __getstate__(self) -> NoReturn:
        # object.__getstate__ would hand out the slots: the index and the name.
        raise symmetry_error(self._Element__domain, f"takes the state of {self._Element__name}")

    # -- what it does not ---------------------------------------------------------
    def _refuse(self, what: str) -> NoReturn:
        raise symmetry_error(self._Element__domain, f"{what} {self._Element__name}")

    def __lt__(self, other: object) -> bool:
        self._refuse("orders")

    __le__ = __gt__ = __ge__ = __lt__

    def __bool__(self) -> bool:
        raise symmetry_error(
            self._Element__domain, f"uses {self._Element__name} as a truth value (write `x is not None` to test an optional reference)"
        )

    def __int__(self) -> int:
        self._refuse("converts to int")

    def __index__(self) -> int:
        self._refuse("uses as a number (an int index, `%d`, `range`, a bit shift)")

    def __float__(self) -> float:
        self._refuse("converts to float")

    def __complex__(self) -> complex:
        self._refuse("converts to complex")

    def __round__(self, ndigits: int | None = None) -> int:
        self._refuse("rounds")

    def _arith(self, other: object) -> NoReturn:
        raise symmetry_error(self._Element__domain, f"does arithmetic on {self._Element__name}")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _arith
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _arith
    __pow__ = __rpow__ = __divmod__ = __rdivmod__ = _arith
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _arith
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _arith

    def __neg__(self) -> NoReturn:
        self._refuse("negates")

    __pos__ = __abs__ = __invert__ = __neg__


class Elements:
    """``s.all(D)`` of a symmetric domain: iterate it, take its ``len``, test ``in``; never index it.

    A position in the list of elements is an index by another name
    (``s.all(Req)[0]`` is "the first request"), so ``[k]`` and ``.index(e)``
    are refused (OWN060) for spec code.  The checker's own code may index it.
    """

    __slots__ = ("_Elements__items", "_Elements__domain")
    _Elements__items: tuple[Element, ...]
    _Elements__domain: str

    def __init__(self, domain: str, items: tuple[Element, ...]) -> None:
        self._Elements__items = items
        self._Elements__domain = domain

    def __iter__(self) -> Iterator[Element]:
        return iter(self._Elements__items)

    def __len__(self) -> int:
        return len(self._Elements__items)

    def __contains__(self, item: object) -> bool:
        return item in self._Elements__items

    def __getitem__(self, k: Any) -> Any:
        if _KINDS[sys._getframe(1).f_code.co_filename] != 1 and not checker_caller(1):
            raise symmetry_error(self._Elements__domain, f"takes the element at position {k!r} of s.all({self._Elements__domain})",
                                 hint=_NO_POSITION)
        return self._Elements__items[k]

    def index(self, item: Any) -> int:
        """The position of ``item``: the checker's own code only (a position is an index)."""
        if not checker_caller(1):
            raise symmetry_error(self._Elements__domain, f"asks the position of an element in s.all({self._Elements__domain})",
                                 hint=_NO_POSITION)
        return self._Elements__items.index(item)

    def __reduce__(self) -> NoReturn:
        raise symmetry_error(self._Elements__domain, f"pickles s.all({self._Elements__domain})")

    def __repr__(self) -> str:
        return f"s.all({self._Elements__domain})"


_NO_INDEX = ("an element's index is the checker's: compare elements with `==` and index tables with the "
             "element itself")
_NO_POSITION = (
    "a position among interchangeable elements names one of them: loop over the elements "
    "(`for r in s.all(D)`) or let the checker pick one (`r = s.choose(list(s.all(D)), domain=D)`)"
)


def _set_op(name: str) -> Any:
    """``frozenset``'s operator ``name`` for :class:`ElementSet`: refuses an int operand, keeps the class."""
    base = getattr(frozenset, name)
    verb = "orders" if name in ("__lt__", "__le__", "__gt__", "__ge__") else "combines"

    def op(self: ElementSet, other: Any) -> Any:
        self._no_int(other, verb)
        out = base(self, other)
        return ElementSet(out, self._ElementSet__domain) if out.__class__ is frozenset else out

    op.__name__ = name
    return op


class ElementSet(frozenset):  # type: ignore[type-arg]
    """What spec code reads from a ``SetOf(D)`` of a symmetric D: a frozenset of elements.

    The cell is a bitmask whose bits are indices, so the set refuses to be
    mixed with ints (OWN060): ``mask & 1``, ``s.w[p] == 2``, ``s.w[p] > 0``,
    ``int(s.w[p])``.  Only ``== 0`` and ``!= 0`` are kept, as the emptiness
    test they were on the mask (the same under every renaming, and what the
    Z3 engines, which see the mask, evaluate alike).  Set algebra with other
    sets gives an ``ElementSet`` again.
    """

    __slots__ = ("_ElementSet__domain",)
    _ElementSet__domain: str

    def __new__(cls, items: Any = (), domain: str = "") -> ElementSet:
        made = frozenset.__new__(cls, items)
        made._ElementSet__domain = domain
        return made

    def _no_int(self, other: object, what: str) -> None:
        if isinstance(other, int) and not isinstance(other, bool):
            raise symmetry_error(self._ElementSet__domain, f"{what} a set of elements with the int {other}", hint=_NO_MASK)

    def __eq__(self, other: object) -> bool:
        if other == 0 and other.__class__ is int:
            return not self  # the empty mask: emptiness is the same under every renaming
        self._no_int(other, "compares")
        return frozenset.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        if other == 0 and other.__class__ is int:
            return bool(self)
        self._no_int(other, "compares")
        return frozenset.__ne__(self, other)

    def __hash__(self) -> int:
        return frozenset.__hash__(self)

    __and__ = _set_op("__and__")
    __rand__ = _set_op("__rand__")
    __or__ = _set_op("__or__")
    __ror__ = _set_op("__ror__")
    __sub__ = _set_op("__sub__")
    __rsub__ = _set_op("__rsub__")
    __xor__ = _set_op("__xor__")
    __rxor__ = _set_op("__rxor__")
    __lt__ = _set_op("__lt__")
    __le__ = _set_op("__le__")
    __gt__ = _set_op("__gt__")
    __ge__ = _set_op("__ge__")

    def _refuse_number(self, *_: Any) -> NoReturn:
        raise symmetry_error(self._ElementSet__domain, "uses a set of elements as a number", hint=_NO_MASK)

    __int__ = __index__ = __lshift__ = __rshift__ = __rlshift__ = __rrshift__ = _refuse_number
    __add__ = __radd__ = __mul__ = __rmul__ = __invert__ = _refuse_number


_NO_MASK = ("a set's bits are indices: use `r in s.w[p]`, `len(s.w[p])`, `not s.w[p]` (empty), "
            "`s.w[p] | {r}`, `s.w[p] - {r}`, `frozenset()`")


def element_set(mask: int, elems: Sequence[Element]) -> ElementSet:
    """The elements whose bits are set in ``mask`` (what spec code reads from a symmetric ``SetOf``)."""
    domain = elems[0]._Element__domain if elems else ""
    return ElementSet([e for k, e in enumerate(elems) if mask >> k & 1], domain)


def plain(value: Any) -> Any:
    """``value`` with every element replaced by its index, inside lists, tuples, sets and dicts too.

    For the boundary with code outside the spec: a model-based test compares
    what the spec expects with what an implementation reports, and the
    implementation names pages and requests by number.
    """
    cls = value.__class__
    if cls is Element:
        return value._Element__i
    if cls in (list, tuple, set, frozenset):
        return cls(plain(v) for v in value)
    if cls is dict:
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def ix(value: Any) -> Any:
    """The index behind an element (anything else unchanged): for the trusted vocabulary only."""
    return value._Element__i if value.__class__ is Element else value


Member = Element | int
"""A value of a domain as spec code holds it: an :class:`Element` of a symmetric domain, an int of any other.

The vocabulary's operations take a request (or sequence, node) as a
``Member``, so a spec whose arguments are ``Annotated[Element, Req]`` type-checks.
"""
