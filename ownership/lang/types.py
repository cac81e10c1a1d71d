"""Value types of state variables.

Concretely every value is a plain Python ``int``, ``bool`` or ``None`` so that
states are flat tuples that hash and copy fast.  The type of a variable says
how to print a value, how to write it to JSON, and (for references to
symmetric domains) how a permutation of that domain maps it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ownership.lang.declarations import Domain


class ValueType:
    """Base class of the value types a state variable can have."""

    def show(self, value: Any, names: dict[str, Sequence[str]]) -> str:
        """Human-readable form of ``value``; ``names`` maps domain to element names."""
        return str(value)

    def to_json(self, value: Any, names: dict[str, Sequence[str]]) -> Any:
        """JSON form of ``value`` (what trace files hold)."""
        return value

    def from_json(self, data: Any, names: dict[str, Sequence[str]]) -> Any:
        """Inverse of :meth:`to_json`; raises ``ValueError`` on bad data."""
        return data

    def refers_to(self) -> str | None:
        """Name of the domain whose elements this type's values denote, if any."""
        return None


@dataclass(frozen=True)
class BoolType(ValueType):
    """``True``/``False``."""

    def show(self, value: Any, names: dict[str, Sequence[str]]) -> str:
        return "yes" if value else "no"

    def from_json(self, data: Any, names: dict[str, Sequence[str]]) -> Any:
        if not isinstance(data, bool):
            raise ValueError(f"expected true/false, got {data!r}")
        return data


@dataclass(frozen=True)
class IntType(ValueType):
    """An integer (token counts, page counts, reference counts)."""

    def from_json(self, data: Any, names: dict[str, Sequence[str]]) -> Any:
        if isinstance(data, bool) or not isinstance(data, int):
            raise ValueError(f"expected an integer, got {data!r}")
        return data


class Enum(ValueType):
    """A named finite set of values, e.g. a queue a request sits in.

    ``Phase = Enum("Phase", "IDLE QUEUED RUNNING DONE")`` gives ``Phase.IDLE == 0``
    and so on: members are plain int attributes so comparisons in specs stay fast.
    """

    name: str
    members: tuple[str, ...]

    def __init__(self, name: str, members: str | Sequence[str]) -> None:
        items = tuple(members.split()) if isinstance(members, str) else tuple(members)
        if not items or len(set(items)) != len(items):
            raise ValueError(f"Enum {name}: members must be distinct and non-empty")
        self.name = name
        self.members = items
        for i, m in enumerate(items):
            if not m.isidentifier() or m in ("name", "members", "show", "to_json", "from_json", "refers_to"):
                raise ValueError(f"Enum {name}: member {m!r} must be an identifier not shadowing a method")
            setattr(self, m, i)

    def __repr__(self) -> str:
        return f"Enum({self.name!r}, {' '.join(self.members)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Enum) and (self.name, self.members) == (other.name, other.members)

    def __hash__(self) -> int:
        return hash((self.name, self.members))

    def __getattr__(self, item: str) -> int:
        # Only reached for names that are not members: say which exist.
        raise AttributeError(f"{self.__dict__.get('name', 'Enum')} has no member {item}")

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.members)))

    def __len__(self) -> int:
        return len(self.members)

    def show(self, value: Any, names: dict[str, Sequence[str]]) -> str:
        return self.members[value] if isinstance(value, int) and 0 <= value < len(self.members) else repr(value)

    def to_json(self, value: Any, names: dict[str, Sequence[str]]) -> Any:
        return self.show(value, names)

    def from_json(self, data: Any, names: dict[str, Sequence[str]]) -> Any:
        if data not in self.members:
            raise ValueError(f"{data!r} is not a {self.name} (one of {', '.join(self.members)})")
        return self.members.index(data)


@dataclass(frozen=True)
class Ref(ValueType):
    """An element of a domain (a request, a page), or ``None`` if optional."""

    domain: str
    optional: bool = False

    def show(self, value: Any, names: dict[str, Sequence[str]]) -> str:
        if value is None:
            return "-"
        return names[self.domain][value]

    def to_json(self, value: Any, names: dict[str, Sequence[str]]) -> Any:
        return None if value is None else names[self.domain][value]

    def from_json(self, data: Any, names: dict[str, Sequence[str]]) -> Any:
        if data is None and self.optional:
            return None
        try:
            return list(names[self.domain]).index(data)
        except ValueError:
            raise ValueError(f"{data!r} is not an element of {self.domain}") from None

    def refers_to(self) -> str | None:
        return self.domain


@dataclass(frozen=True)
class RefSet(ValueType):
    """A set of domain elements, stored as a bitmask (bit i = element i)."""

    domain: str

    def show(self, value: Any, names: dict[str, Sequence[str]]) -> str:
        items = [names[self.domain][i] for i in range(len(names[self.domain])) if value >> i & 1]
        return "{" + ",".join(items) + "}"

    def to_json(self, value: Any, names: dict[str, Sequence[str]]) -> Any:
        return [names[self.domain][i] for i in range(len(names[self.domain])) if value >> i & 1]

    def from_json(self, data: Any, names: dict[str, Sequence[str]]) -> Any:
        if not isinstance(data, list):
            raise ValueError(f"expected a list of {self.domain} elements, got {data!r}")
        mask = 0
        for item in data:
            mask |= 1 << Ref(self.domain).from_json(item, names)
        return mask

    def refers_to(self) -> str | None:
        return self.domain


Bool = BoolType()
"""The boolean value type."""

Int = IntType()
"""The integer value type."""


def type_of(declared: Any) -> ValueType:
    """Normalise what a spec passes as a type (``bool``, ``int``, a domain, ...)."""
    from ownership.lang.declarations import Domain

    if isinstance(declared, ValueType):
        return declared
    if declared is bool:
        return Bool
    if declared is int:
        return Int
    if isinstance(declared, Domain):
        return Ref(declared.name)
    raise TypeError(f"not a value type: {declared!r} (use bool, int, an Enum, a domain, Optional(domain) or SetOf(domain))")


def Optional(domain: Domain) -> Ref:  # noqa: N802 - reads like typing.Optional
    """A reference to an element of ``domain`` or ``None``."""
    return Ref(domain.name, optional=True)


def SetOf(domain: Domain) -> RefSet:  # noqa: N802 - reads like a type
    """A set of elements of ``domain``."""
    return RefSet(domain.name)
