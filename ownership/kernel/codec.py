"""Bit-packed states: each cell of the flat state tuple as a small unsigned code in a 64-bit word.

The layout comes from the declared types (:mod:`ownership.lang.types`):

* a ``bool`` takes 1 bit;
* an enum member or a reference to an element (optional or not) takes the
  bits of ``size + 1`` codes: ``None`` is 0, element ``k`` is ``k + 1``;
* a set of elements is its bit mask (domains of up to 62 elements);
* an ``int`` is zig-zag coded (0, -1, 1, -2, ... as 0, 1, 2, 3, ...) in a
  width that starts at what the initial state needs and doubles whenever a
  value does not fit (:class:`TooWide`: the search starts again, wider).

A cell never straddles two words, so reading one is a shift and a mask.
Values the layout cannot hold exactly (a ``bool`` in an ``int`` cell, a
value of the wrong kind) raise :class:`Unrepresentable`: the explorer then
runs the spec on the Python path, which holds any value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ownership.lang.types import BoolType, Enum, IntType, Ref, RefSet

if TYPE_CHECKING:
    from ownership.lang.instance import Instance, State

BOOL, SMALL, MASK, INT = 0, 1, 2, 3
"""Cell kinds: a bool, a small code (an enum member or an element, ``None`` as 0), an element set, an int."""

MAX_INT_BITS = 62
"""The widest int cell; a value beyond it is :class:`Unrepresentable`."""


class Unrepresentable(Exception):  # noqa: N818 - a signal: use the Python path
    """A value the packed layout cannot hold exactly (the explorer uses the Python path)."""


class TooWide(Exception):  # noqa: N818 - a signal: widen the cell and start again
    """An int cell's value needs more bits than its width: ``cell`` needs at least ``bits``."""

    def __init__(self, cell: int, bits: int) -> None:
        super().__init__(f"cell {cell} needs {bits} bits")
        self.cell = cell
        self.bits = bits


def _bits(n: int) -> int:
    """Bits of the codes 0..n-1 (at least 1)."""
    return max(1, (n - 1).bit_length())


def zigzag(v: int) -> int:
    """0, -1, 1, -2, ... as 0, 1, 2, 3, ...: small magnitudes get small codes whatever their sign."""
    return 2 * v if v >= 0 else -2 * v - 1


def unzigzag(c: int) -> int:
    """The inverse of :func:`zigzag`."""
    return c >> 1 if not c & 1 else -((c + 1) >> 1)


class Codec:
    """How an instance's states are packed into ``words`` 64-bit words.

    ``int_bits`` overrides the width of int cells (by cell index): the
    search widens a cell after :class:`TooWide`.
    """

    def __init__(self, inst: Instance, int_bits: Mapping[int, int] | None = None) -> None:
        kinds: list[int] = []
        widths: list[int] = []
        sizes: list[int] = []
        for var in inst.spec.vars.values():
            lay = inst.layouts[var.name]
            vtype = var.type
            if isinstance(vtype, BoolType):
                kind, width, size = BOOL, 1, 2
            elif isinstance(vtype, Enum):
                kind, size = SMALL, len(vtype.members) + 1
                width = _bits(size)
            elif isinstance(vtype, Ref):
                kind, size = SMALL, inst.sizes[vtype.domain] + 1
                width = _bits(size)
            elif isinstance(vtype, RefSet):
                n = inst.sizes[vtype.domain]
                if n > MAX_INT_BITS:
                    raise Unrepresentable(f"{var.name} is a set over {n} elements (at most {MAX_INT_BITS} pack)")
                kind, width, size = MASK, max(1, n), 1 << n
            elif isinstance(vtype, IntType):
                kind, width, size = INT, 0, 0
            else:
                raise Unrepresentable(f"{var.name} has a type the packed layout does not know ({vtype!r})")
            for _ in range(lay.length):
                kinds.append(kind)
                widths.append(width)
                sizes.append(size)
        self.kinds = kinds
        self.sizes = sizes
        self.widths = widths
        overrides = dict(int_bits or {})
        for cell, v in enumerate(inst.init_state):
            if kinds[cell] == INT:
                need = self._int_code(cell, v).bit_length() + 2
                widths[cell] = min(MAX_INT_BITS, max(8, need, overrides.get(cell, 0)))
        # Place cells in words, first fit in declaration order (no cell straddles two words).
        word_of: list[int] = []
        shift_of: list[int] = []
        used: list[int] = []
        for w in widths:
            for k, u in enumerate(used):
                if u + w <= 64:
                    word_of.append(k)
                    shift_of.append(u)
                    used[k] = u + w
                    break
            else:
                word_of.append(len(used))
                shift_of.append(0)
                used.append(w)
        self.words = max(1, len(used))
        self.bits = sum(widths)
        self.cell_word = np.array(word_of, dtype=np.int64)
        self.cell_shift = np.array(shift_of, dtype=np.uint64)
        self.cell_mask = np.array([(1 << w) - 1 for w in widths], dtype=np.uint64)
        self.dense = [kinds[c] != INT and widths[c] <= 8 for c in range(len(widths))]
        """Cells whose memo nodes keep a child slot per code (small fixed ranges); ints are hashed."""

    @property
    def int_cells(self) -> dict[int, int]:
        """The width of every int cell (what a wider restart starts from)."""
        return {c: w for c, (k, w) in enumerate(zip(self.kinds, self.widths, strict=True)) if k == INT}

    def _int_code(self, cell: int, value: Any) -> int:
        if value.__class__ is not int:
            raise Unrepresentable(f"cell {cell} holds {value!r}, not an int")
        return zigzag(value)

    def code(self, cell: int, value: Any) -> int:
        """The code of ``value`` in ``cell``; :class:`TooWide` or :class:`Unrepresentable` if it has none."""
        kind = self.kinds[cell]
        if kind == BOOL:
            if value is True:
                return 1
            if value is False:
                return 0
        elif kind == SMALL:
            if value is None:
                return 0
            if value.__class__ is int and 0 <= value < self.sizes[cell] - 1:
                return value + 1
        elif kind == MASK:
            if value.__class__ is int and 0 <= value < self.sizes[cell]:
                return value
        else:
            c = self._int_code(cell, value)
            if c.bit_length() > self.widths[cell]:
                if c.bit_length() > MAX_INT_BITS:
                    raise Unrepresentable(f"cell {cell} holds {value}, beyond {MAX_INT_BITS} bits")
                raise TooWide(cell, c.bit_length())
            return c
        raise Unrepresentable(f"cell {cell} holds {value!r}, which its declared type does not pack")

    def value(self, cell: int, code: int) -> Any:
        """The value a code stands for (the inverse of :meth:`code`)."""
        kind = self.kinds[cell]
        if kind == BOOL:
            return code == 1
        if kind == SMALL:
            return None if code == 0 else code - 1
        if kind == MASK:
            return code
        return unzigzag(code)

    def pack(self, state: State) -> np.ndarray:
        """``state`` as an array of ``words`` unsigned 64-bit words."""
        out = [0] * self.words
        for cell, v in enumerate(state):
            out[int(self.cell_word[cell])] |= self.code(cell, v) << int(self.cell_shift[cell])
        return np.array(out, dtype=np.uint64)

    def unpack(self, words: Sequence[int] | np.ndarray) -> State:
        """The state tuple packed in ``words``."""
        ws = [int(w) for w in words]
        return tuple(
            self.value(cell, (ws[int(self.cell_word[cell])] >> int(self.cell_shift[cell])) & int(self.cell_mask[cell]))
            for cell in range(len(self.kinds))
        )

    def write(self, cell: int, value: Any) -> tuple[int, int, int]:
        """A write of ``value`` into ``cell`` as (word, mask that clears the cell, bits that set it)."""
        shift = int(self.cell_shift[cell])
        mask = int(self.cell_mask[cell]) << shift
        return int(self.cell_word[cell]), ~mask & 0xFFFF_FFFF_FFFF_FFFF, self.code(cell, value) << shift
