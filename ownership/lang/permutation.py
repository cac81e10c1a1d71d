"""A renaming of the elements of an instance's domains, applied to states.

A :class:`Permutation` maps, per domain, element index -> element index
(``p["Req"][old] == new``).  Applied to a state it renames element ``old``
``new`` everywhere: the cells of a variable indexed by the domain move from
row ``old`` to row ``new``, a ``Ref`` cell naming ``old`` names ``new``, and
bit ``old`` of a ``RefSet`` mask becomes bit ``new``.  Symmetry reduction,
the sampled symmetry check and the log validator's renaming all use this one
definition.

It knows an instance only through :class:`StateShape` (plain tuples), so it
pickles cheaply; the index maps :meth:`Permutation.apply` runs on are built
on the first call and rebuilt after unpickling, never shipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ownership.lang.fields import strides
from ownership.lang.types import Ref, RefSet

if TYPE_CHECKING:
    from ownership.lang.instance import Instance, State

MASK_TABLE_BITS = 10
"""Largest domain whose set masks are renamed by one table lookup (2**10 entries); larger ones bit by bit."""


@dataclass(frozen=True)
class VarShape:
    """Where one variable sits in the state tuple, what indexes it and which domain its values name."""

    name: str
    offset: int
    shape: tuple[int, ...]
    index: tuple[str, ...]
    value_domain: str | None
    """The domain a ``Ref``/``RefSet`` value names, else ``None``."""
    is_set: bool


@dataclass(frozen=True)
class StateShape:
    """What a permutation needs of an instance: the state width, the domains and every variable's place."""

    width: int
    domains: tuple[str, ...]
    sizes: tuple[int, ...]
    element_names: tuple[tuple[str, ...], ...]
    variables: tuple[VarShape, ...]

    @classmethod
    def of(cls, inst: Instance) -> StateShape:
        """The shape of ``inst``'s states."""
        spec = inst.spec
        variables = []
        for var in spec.vars.values():
            lay = inst.layouts[var.name]
            vtype = var.type
            named = vtype.refers_to() if isinstance(vtype, (Ref, RefSet)) else None
            variables.append(VarShape(var.name, lay.offset, lay.shape, tuple(d.name for d in var.index),
                                      named, isinstance(vtype, RefSet)))
        domains = tuple(spec.domains)
        return cls(inst.width, domains, tuple(inst.sizes[d] for d in domains),
                   tuple(tuple(inst.names[d]) for d in domains), tuple(variables))

    def size(self, domain: str) -> int:
        """Number of elements of ``domain``."""
        try:
            return self.sizes[self.domains.index(domain)]
        except ValueError:
            raise KeyError(f"no domain {domain!r} (known: {', '.join(self.domains)})") from None


class _MaskRenamer:
    """``table[mask]`` for a domain too large for a precomputed table: renames the bits one by one."""

    __slots__ = ("perm",)

    def __init__(self, perm: tuple[int, ...]) -> None:
        self.perm = perm

    def __getitem__(self, mask: int) -> int:
        out = 0
        for old, new in enumerate(self.perm):
            if mask >> old & 1:
                out |= 1 << new
        return out


class Permutation:
    """A permutation of the elements of some domains of one instance (the others stay fixed).

    ``Permutation(shape, {"Req": (1, 0)})`` swaps requests A and B.  Identity
    entries are dropped, so equal renamings compare and hash equal however
    they were written.  Composition reads like functions:
    ``p.compose(q).apply(s) == p.apply(q.apply(s))`` (``q`` first).
    """

    __slots__ = ("shape", "maps", "_hash", "_compiled")

    def __init__(self, shape: StateShape, maps: Mapping[str, Sequence[int]] | None = None) -> None:
        self.shape = shape
        entries: list[tuple[str, tuple[int, ...]]] = []
        given = dict(maps or {})
        for d, n in zip(shape.domains, shape.sizes, strict=True):
            if d not in given:
                continue
            perm = tuple(int(x) for x in given.pop(d))
            if sorted(perm) != list(range(n)):
                raise ValueError(f"{list(perm)} is not a permutation of the {n} elements of {d}")
            if perm != tuple(range(n)):
                entries.append((d, perm))
        if given:
            raise KeyError(f"no domain {', '.join(map(repr, given))} (known: {', '.join(shape.domains)})")
        self.maps: tuple[tuple[str, tuple[int, ...]], ...] = tuple(entries)
        """The non-identity entries, in the spec's domain order: (domain, old index -> new index)."""
        self._hash = hash(self.maps)
        self._compiled: tuple[Any, list[tuple[int, Any]]] | None = None

    @classmethod
    def of(cls, inst: Instance, maps: Mapping[str, Sequence[int]] | None = None) -> Permutation:
        """A permutation of ``inst``'s domains (see the class docstring for ``maps``)."""
        return cls(StateShape.of(inst), maps)

    @classmethod
    def identity(cls, shape: StateShape | Instance) -> Permutation:
        """The permutation that renames nothing."""
        return cls(shape if isinstance(shape, StateShape) else StateShape.of(shape))

    def __getitem__(self, domain: str) -> tuple[int, ...]:
        """The map old index -> new index of ``domain`` (the identity if it is not permuted)."""
        for d, perm in self.maps:
            if d == domain:
                return perm
        return tuple(range(self.shape.size(domain)))

    @property
    def is_identity(self) -> bool:
        """True if no element is renamed."""
        return not self.maps

    def inverse(self) -> Permutation:
        """The permutation undoing this one: ``p.inverse().apply(p.apply(s)) == s``."""
        maps = {}
        for d, perm in self.maps:
            inv = [0] * len(perm)
            for old, new in enumerate(perm):
                inv[new] = old
            maps[d] = inv
        return Permutation(self.shape, maps)

    def compose(self, other: Permutation) -> Permutation:
        """``self`` after ``other``: ``p.compose(q).apply(s) == p.apply(q.apply(s))``."""
        self._same_shape(other)
        domains = {d for d, _ in self.maps} | {d for d, _ in other.maps}
        maps = {}
        for d in domains:
            mine, theirs = self[d], other[d]
            maps[d] = [mine[theirs[i]] for i in range(len(mine))]
        return Permutation(self.shape, maps)

    def apply(self, state: State) -> State:
        """``state`` with every element renamed: rows moved, references and set bits renamed."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = self._compile()
        gather, fixes = compiled
        if gather is None:
            return state
        if not fixes:
            return gather(state)  # type: ignore[no-any-return]
        out = list(gather(state))
        for pos, table in fixes:
            out[pos] = table[out[pos]]
        return tuple(out)

    __call__ = apply

    def _compile(self) -> tuple[Any, list[tuple[int, Any]]]:
        """The index maps of :meth:`apply`: which old cell each new cell is read from, and the value renamings."""
        if not self.maps:
            return None, []
        shape = self.shape
        perms = dict(self.maps)
        tables: dict[str, Any] = {}
        for d, perm in self.maps:
            n = len(perm)
            tables[d] = ({None: None} | dict(enumerate(perm)), _mask_table(perm) if n <= MASK_TABLE_BITS
                         else _MaskRenamer(perm))
        source = list(range(shape.width))
        fixes: list[tuple[int, Any]] = []
        touched = False
        for var in shape.variables:
            table = tables[var.value_domain][1 if var.is_set else 0] if var.value_domain in tables else None
            moved = any(d in perms for d in var.index)
            if not moved and table is None:
                continue
            touched = True
            # New position of every cell, in row-major order (the order of the old positions):
            # built one axis at a time, so a table costs one pass per axis.
            targets = [var.offset]
            for d, n, st in zip(var.index, var.shape, strides(var.shape), strict=True):
                m = perms.get(d) or range(n)
                targets = [t + m[x] * st for t in targets for x in range(n)]
            for k, new in enumerate(targets):
                source[new] = var.offset + k
            if table is not None:
                fixes.extend((new, table) for new in targets)
        if not touched:
            return None, []  # the permuted domains index no variable and name no value
        if shape.width == 1:
            only = source[0]
            return (lambda st: (st[only],)), fixes
        return itemgetter(*source), fixes

    def _same_shape(self, other: Permutation) -> None:
        if other.shape is not self.shape and other.shape != self.shape:
            raise ValueError("permutations of different instances cannot be combined")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Permutation):
            return NotImplemented
        return self.maps == other.maps and (other.shape is self.shape or other.shape == self.shape)

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        # The compiled maps hold an itemgetter and per-cell tables: rebuilt on first use, never pickled.
        return (Permutation, (self.shape, dict(self.maps)))

    def __repr__(self) -> str:
        if not self.maps:
            return "Permutation(identity)"
        shape = self.shape
        parts = []
        for d, perm in self.maps:
            names = shape.element_names[shape.domains.index(d)]
            moved = ", ".join(f"{names[old]}->{names[new]}" for old, new in enumerate(perm) if old != new)
            parts.append(f"{d}: {moved}")
        return f"Permutation({'; '.join(parts)})"


def _mask_table(perm: tuple[int, ...]) -> tuple[int, ...]:
    """Every mask of ``len(perm)`` bits, renamed: built by doubling, one entry per mask."""
    table = [0]
    for new in perm:  # bit ``old`` of the mask goes to bit ``new``, in order of ``old``
        bit = 1 << new
        table += [m | bit for m in table]
    return tuple(table)
