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

import sys
from typing import Any, NoReturn

from ownership.errors import Code, OwnershipError
from ownership.library import is_checker_code


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


def symmetry_error(domain: str, what: str) -> OwnershipError:
    """The OWN060 error for ``what`` done to an element of symmetric ``domain``, located at the spec line."""
    file, line = spec_frame_location(3)
    return OwnershipError(
        Code.SYMMETRY_BROKEN,
        f"{what}: elements of symmetric domain {domain} are interchangeable; arithmetic/ordering on them "
        f"breaks symmetry reduction: declare the domain ordered (`own.pool(..., ordered=True)` / "
        f"`spec.domain(..., ordered=True)`) if the protocol really uses slot order",
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
    so wrapping an index is a list lookup and equality is identity.
    """

    __slots__ = ("_domain", "_i", "_name")

    _domain: str
    _i: int
    _name: str

    def __init__(self, domain: str, index: int, name: str) -> None:
        object.__setattr__(self, "_domain", domain)
        object.__setattr__(self, "_i", index)
        object.__setattr__(self, "_name", name)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("domain elements are immutable")

    # -- what a permutation preserves -------------------------------------------
    def __eq__(self, other: object) -> bool:
        if other.__class__ is Element:
            if other._domain != self._domain:  # type: ignore[attr-defined]
                raise type_error(
                    f"compares {self._name} (an element of {self._domain}) with {other._name} "  # type: ignore[attr-defined]
                    f"(an element of {other._domain}): values of different domains are never equal"  # type: ignore[attr-defined]
                )
            return self._i == other._i  # type: ignore[attr-defined]
        if other is None:
            return False
        raise symmetry_error(self._domain, f"compares {self._name} with {other!r}")

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        # Equal for every element of the domain: iteration order of a set or
        # dict of elements depends on insertion order only, never on the index.
        return hash(self._domain)

    def __repr__(self) -> str:
        return self._name

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if spec:
            raise symmetry_error(self._domain, f"formats {self._name} with {spec!r}")
        return self._name

    def __reduce__(self) -> NoReturn:
        raise symmetry_error(self._domain, f"pickles {self._name}")

    # -- what it does not ---------------------------------------------------------
    def _refuse(self, what: str) -> NoReturn:
        raise symmetry_error(self._domain, f"{what} {self._name}")

    def __lt__(self, other: object) -> bool:
        self._refuse("orders")

    __le__ = __gt__ = __ge__ = __lt__

    def __bool__(self) -> bool:
        raise symmetry_error(
            self._domain, f"uses {self._name} as a truth value (write `x is not None` to test an optional reference)"
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
        raise symmetry_error(self._domain, f"does arithmetic on {self._name}")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _arith
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _arith
    __pow__ = __rpow__ = __divmod__ = __rdivmod__ = _arith
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _arith
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _arith

    def __neg__(self) -> NoReturn:
        self._refuse("negates")

    __pos__ = __abs__ = __invert__ = __neg__


def plain(value: Any) -> Any:
    """``value`` with every element replaced by its index, inside lists, tuples, sets and dicts too.

    For the boundary with code outside the spec: a model-based test compares
    what the spec expects with what an implementation reports, and the
    implementation names pages and requests by number.
    """
    cls = value.__class__
    if cls is Element:
        return value._i
    if cls in (list, tuple, set, frozenset):
        return cls(plain(v) for v in value)
    if cls is dict:
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def ix(value: Any) -> Any:
    """The index behind an element (anything else unchanged): for the trusted vocabulary only."""
    return value._i if value.__class__ is Element else value


Member = Element | int
"""A value of a domain as spec code holds it: an :class:`Element` of a symmetric domain, an int of any other.

The vocabulary's operations take a request (or sequence, node) as a
``Member``, so a spec whose arguments are ``Annotated[Element, Req]`` type-checks.
"""
