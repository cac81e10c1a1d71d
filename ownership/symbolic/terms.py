"""Z3 terms for spec values: the integer encoding, sorts of cells, and :class:`Sym`.

A spec's actions and invariants are plain Python; under the Z3 engines they
run over :class:`Sym` values whose operators build Z3 terms.  This module
holds those terms and their encoding: integers are two's-complement
bit-vectors of a chosen width (see :data:`WIDTH`), sets of elements are bit
masks, enum members and element references narrow signed bit-vectors.
``bool()`` of a ``Sym`` forks the running path: see :mod:`ownership.symbolic.paths`.

This layer sits below the vocabulary and the engines and imports neither;
it imports z3, so only the Z3 engines and the vocabulary's encodings load it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import z3

from ownership.lang.symbolic_rules import INDEX_HINT
from ownership.lang.types import BoolType, Enum, Ref, RefSet, ValueType

if TYPE_CHECKING:
    from ownership.symbolic.paths import PathExplorer

WIDTH = 64
"""The widest integer encoding, and the one used whenever a parameter is free.

Integers are two's-complement bit-vectors: the whole encoding is then
bit-vector logic, which Z3 bit-blasts to SAT, far faster than mixing linear
arithmetic with the bit-vectors that hold sets of requests.  Specs with fixed
parameters start narrower (see :func:`~ownership.symbolic.encoding.initial_width`): a 64-bit adder or
comparator is eight times the clauses of an 8-bit one, and the SAT problem
shrinks accordingly.  Python integers do not overflow, so narrow integers are
only sound together with overflow *detection*: every +, - and * on symbolic
values records the condition under which it would leave the encoding's
range, the engines treat reaching such a step as one more property to check,
and a spec that reaches one is encoded again at twice the width."""

MAX_WIDTH = 256
"""Beyond this width an overflowing execution makes the Z3 engines answer UNKNOWN."""


def coverage_note(width: int) -> str:
    """What the integer encoding covers, for a result's notes."""
    return (f"integers are {width}-bit bit-vectors; every step of every execution checked was also checked "
            "not to overflow them")


COVERAGE_NOTE = "integers are 64-bit: executions whose arithmetic would overflow them are not covered"
"""The note of engines that exclude overflowing executions instead of detecting them."""


class WidthError(Exception):
    """An integer constant or value does not fit the encoding's width: encode again, wider."""


def fits(value: int, bits: int) -> bool:
    """``value`` is representable as a ``bits``-bit two's-complement integer."""
    return -(1 << (bits - 1)) <= value < (1 << (bits - 1))


def ival(n: int, width: int = WIDTH) -> z3.BitVecRef:
    """An integer constant of the encoding's integer sort (``WidthError`` if it does not fit)."""
    if not fits(n, width):
        raise WidthError(f"constant {n} does not fit {width} bits")
    return z3.BitVecVal(n, width)


def b2i(b: z3.BoolRef, width: int = WIDTH) -> z3.BitVecRef:
    """1 if ``b`` else 0, as an encoding integer."""
    return z3.If(b, z3.BitVecVal(1, width), z3.BitVecVal(0, width))


def int_of(value: z3.ExprRef) -> int:
    """A model value of the integer sort as a Python int."""
    if isinstance(value, z3.BitVecNumRef):
        return value.as_signed_long()
    return value.as_long()  # type: ignore[attr-defined,no-any-return]


def floor_div(a: z3.BitVecRef, b: Any) -> z3.BitVecRef:
    """Python's ``a // b`` (rounds towards -inf; bvsdiv alone truncates towards 0)."""
    if isinstance(b, int) and b > 0 and b & (b - 1) == 0:
        # Floor division by 2**n is an arithmetic shift: wires instead of a divider circuit.
        return a >> (b.bit_length() - 1)  # z3py: >> on bit-vectors is the arithmetic shift
    return (a - a % b) / b  # z3py: % on bit-vectors is bvsmod (sign of the divisor)


class SymbolicError(Exception):
    """Spec code did something that cannot be executed symbolically."""


def sort_of(vtype: ValueType, sizes: dict[str, int], width: int = WIDTH) -> z3.SortRef:
    """Z3 sort of a cell: Bool, a bit-vector for sets of elements, ``width`` bits for integers."""
    if isinstance(vtype, BoolType):
        return z3.BoolSort()
    if isinstance(vtype, RefSet):
        return z3.BitVecSort(max(1, sizes[vtype.domain]))
    if isinstance(vtype, Enum):
        return z3.BitVecSort(_signed_bits(len(vtype.members)))
    if isinstance(vtype, Ref):
        return z3.BitVecSort(_signed_bits(sizes[vtype.domain]))
    return z3.BitVecSort(width)


def _signed_bits(n: int) -> int:
    """Bits for the values -1..n-1 in two's complement (narrow cells make smaller SAT problems)."""
    return max(2, n.bit_length() + 1)


def _align(a: Any, b: Any) -> tuple[Any, Any]:
    """Sign-extend the narrower of two bit-vector operands."""
    if isinstance(a, z3.BitVecRef) and isinstance(b, z3.BitVecRef) and a.size() != b.size():
        if a.size() < b.size():
            return z3.SignExt(b.size() - a.size(), a), b
        return a, z3.SignExt(a.size() - b.size(), b)
    return a, b


def to_z3(value: Any, sort: z3.SortRef) -> z3.ExprRef:
    """A Python value or ``Sym`` as a term of ``sort`` (``None`` is -1)."""
    if isinstance(value, Sym):
        e = value.e
        if e.sort() == sort:
            return e
        if z3.is_bool(e) and isinstance(sort, z3.BitVecSortRef):
            e = b2i(e, sort.size())
        if sort == z3.BoolSort() and isinstance(e, z3.BitVecRef):
            return e != 0
        if isinstance(e, z3.BitVecRef) and isinstance(sort, z3.BitVecSortRef) and e.size() != sort.size():
            if e.size() > sort.size():
                return z3.Extract(sort.size() - 1, 0, e)
            return z3.SignExt(sort.size() - e.size(), e)
        return e
    if isinstance(value, z3.ExprRef):
        return value
    if value is None:
        return z3.BitVecVal(-1, sort.size()) if isinstance(sort, z3.BitVecSortRef) else ival(-1)
    if sort == z3.BoolSort():
        return z3.BoolVal(bool(value))
    if isinstance(value, (set, frozenset)):
        value = set_mask(value)
        if isinstance(value, z3.ExprRef):
            return value  # a mask over symbolic indices: the width of the terms it was built from
    if isinstance(sort, z3.BitVecSortRef):
        n, bits = int(value), sort.size()
        if not (fits(n, bits) or 0 <= n < 1 << bits):  # masks of element sets are unsigned
            raise WidthError(f"value {n} does not fit {bits} bits")
        return z3.BitVecVal(n, bits)
    return ival(int(value))


def _term(x: Any, like: z3.ExprRef | None = None) -> Any:
    """Operand for a z3 operator: unwrap ``Sym``, map ``None`` to -1, bools in Int context to 0/1."""
    if isinstance(x, Sym):
        e = x.e
        if like is not None and z3.is_bool(e) and not z3.is_bool(like):
            return b2i(e, like.size() if isinstance(like, z3.BitVecRef) else WIDTH)
        return e
    if x is None:
        return -1
    if isinstance(x, bool) and like is not None and not z3.is_bool(like):
        return int(x)
    if isinstance(x, (set, frozenset)):
        return set_mask(x)
    return x


def set_mask(elements: Any) -> Any:
    """A set of element indices (ints, or terms of one) as the bitmask a ``SetOf`` cell holds.

    Spec code writes sets of elements of a symmetric domain (``s.w[p] | {r}``,
    ``frozenset()``); concretely they are masks, and so they are here.
    """
    mask: Any = 0
    for e in elements:
        bit = e.e if isinstance(e, Sym) else e
        mask = mask | (1 << bit) if isinstance(bit, int) else mask | (z3.BitVecVal(1, bit.size()) << bit)
    return mask


def _arith(e: z3.ExprRef, width: int) -> z3.ExprRef:
    return b2i(e, width) if z3.is_bool(e) else e


class Sym:
    """A symbolic value in spec code.  ``bool(sym)`` forks the running path."""

    __slots__ = ("e", "ex")
    __hash__ = None  # type: ignore[assignment]  # dict/set membership would hide a fork

    def __init__(self, e: z3.ExprRef, ex: PathExplorer) -> None:
        self.e = e
        self.ex = ex

    def _wrap(self, e: z3.ExprRef) -> Sym:
        return Sym(e, self.ex)

    def __bool__(self) -> bool:
        e = self.e
        if not z3.is_bool(e):
            e = e != (0 if not isinstance(e, z3.BitVecRef) else z3.BitVecVal(0, e.size()))
        return self.ex.branch(e)

    def __contains__(self, element: Any) -> bool:
        """``r in s.holders[p]``: bit ``r`` of a ``SetOf`` cell's mask (a fork where it is undecided)."""
        e = self.e
        if not isinstance(e, z3.BitVecRef):
            raise TypeError("`in` needs a set of elements (a SetOf cell)")
        bit = _term(element, e)
        mask, bit = _align(e, bit) if isinstance(bit, z3.BitVecRef) else (e, bit)
        one = z3.BitVecVal(1, mask.size())
        return self.ex.branch(z3.LShR(mask, bit) & one == one)

    def is_truth_value(self) -> bool:
        """Whether this stands for a bool (guards and invariants must give one)."""
        return z3.is_bool(self.e)

    def __index__(self) -> int:
        concretize = getattr(self.ex, "concretize", None)
        if concretize is not None:  # the parametric explorer forks on each feasible value
            return int(concretize(self.e))
        raise SymbolicError(f"a symbolic value ({self.e}) is used as a Python index or count; {INDEX_HINT}")

    __int__ = __index__

    def __repr__(self) -> str:
        return f"Sym({self.e})"

    def _bin(self, other: Any, op: Callable[[Any, Any], Any], swap: bool = False,
             guard: Callable[[Any, Any], list[z3.BoolRef]] | None = None, masks: bool = False) -> Sym:
        width = self.ex.width
        a = _arith(self.e, width)
        b = _term(other, a)
        if isinstance(b, z3.ExprRef):
            a, b = _align(a, b)
        elif isinstance(b, int) and isinstance(a, z3.BitVecRef) and not masks:
            # z3 would silently wrap a constant that does not fit the operand's width.  (Not
            # for ``&``: a set of elements is a non-negative n-bit mask, so ``h & c`` keeps
            # only c's low n bits in Python too, as with ``h & ~(1 << r)``.)
            if not (fits(b, a.size()) or (a.size() != width and 0 <= b < 1 << a.size())):
                raise WidthError(f"constant {b} does not fit {a.size()} bits")
        x, y = (b, a) if swap else (a, b)
        if guard is not None and isinstance(x, z3.BitVecRef) and x.size() == width:
            y_term = y if isinstance(y, z3.ExprRef) else z3.BitVecVal(int(y), width)
            for g in guard(x, y_term):
                self.ex.no_overflow(g)
        return self._wrap(op(x, y))

    # comparisons (signed: None is -1)
    def __eq__(self, other: object) -> Sym:  # type: ignore[override]
        if other is None and self._is_integer():
            # None is -1 only in the cells of optional references (narrower sorts): an integer
            # is never None, -1 included.
            return self._wrap(z3.BoolVal(False))
        if z3.is_bool(self.e):
            return self._wrap(_eq(self.e, _term(other, self.e)))
        return self._bin(other, lambda a, b: a == b)

    def __ne__(self, other: object) -> Sym:  # type: ignore[override]
        eq = self.__eq__(other)
        return self._wrap(z3.Not(eq.e))

    def __lt__(self, other: Any) -> Sym:
        return self._bin(other, lambda a, b: a < b)

    def __le__(self, other: Any) -> Sym:
        return self._bin(other, lambda a, b: a <= b)

    def __gt__(self, other: Any) -> Sym:
        return self._bin(other, lambda a, b: a > b)

    def __ge__(self, other: Any) -> Sym:
        return self._bin(other, lambda a, b: a >= b)

    # arithmetic
    def __add__(self, o: Any) -> Sym:
        return self._bin(o, lambda a, b: a + b, guard=_add_ok)

    __radd__ = __add__

    def __sub__(self, o: Any) -> Sym:
        if isinstance(o, (set, frozenset)):
            # A set of elements taken out of a SetOf cell's mask: set difference, not arithmetic.
            return self._bin(o, lambda a, b: a & ~b)
        return self._bin(o, lambda a, b: a - b, guard=_sub_ok)

    def __rsub__(self, o: Any) -> Sym:
        return self._bin(o, lambda a, b: a - b, swap=True, guard=_sub_ok)

    def __mul__(self, o: Any) -> Sym:
        return self._bin(o, lambda a, b: a * b, guard=_mul_ok)

    __rmul__ = __mul__

    def __floordiv__(self, o: Any) -> Sym:
        return self._bin(o, floor_div)

    def __rfloordiv__(self, o: Any) -> Sym:
        return self._bin(o, lambda a, b: floor_div(a if isinstance(a, z3.ExprRef) else z3.BitVecVal(a, b.size()), b), swap=True)

    def __mod__(self, o: Any) -> Sym:
        # Python's % takes the divisor's sign, as bvsmod (z3py's % on bit-vectors) does.
        return self._bin(o, lambda a, b: a % b)

    def __neg__(self) -> Sym:
        width = self.ex.width
        e = _arith(self.e, width)
        if isinstance(e, z3.BitVecRef) and e.size() == width:
            self.ex.no_overflow(e != z3.BitVecVal(-(1 << (width - 1)), width))
        return self._wrap(-e)

    # bit operations (sets of elements are bit-vectors)
    def __and__(self, o: Any) -> Sym:
        return self._bin(o, lambda a, b: a & b, masks=isinstance(self.e, z3.BitVecRef) and self.e.size() < self.ex.width)

    __rand__ = __and__

    def __or__(self, o: Any) -> Sym:
        return self._bin(o, lambda a, b: a | b)

    __ror__ = __or__

    def __xor__(self, o: Any) -> Sym:
        return self._bin(o, lambda a, b: a ^ b)

    def __invert__(self) -> Sym:
        # On a truth value Python's ~ is the integer's: ~True == -2, not False.
        return self._wrap(~_arith(self.e, self.ex.width))

    def __rshift__(self, o: Any) -> Sym:
        if self._is_integer():
            # Python's >> on an integer is arithmetic (floor division by 2**n): -9 >> 1 == -5.
            return self._bin(o, lambda a, b: a >> b)  # z3py: >> on bit-vectors is the arithmetic shift
        return self._wrap(z3.LShR(self.e, _term(o, self.e)))  # a set of elements: an unsigned mask

    def __lshift__(self, o: Any) -> Sym:
        if self._is_integer():
            # Python's integers never drop bits: a shift that does is an overflow point.
            return self._bin(o, lambda a, b: a << b, guard=_shl_ok)
        return self._wrap(self.e << _term(o, self.e))

    def _is_integer(self) -> bool:
        """Whether this is an integer of the encoding's width (not a narrower set, enum or element)."""
        return isinstance(self.e, z3.BitVecRef) and self.e.size() == self.ex.width


def _add_ok(a: z3.BitVecRef, b: z3.BitVecRef) -> list[z3.BoolRef]:
    return [z3.BVAddNoOverflow(a, b, True), z3.BVAddNoUnderflow(a, b)]


def _sub_ok(a: z3.BitVecRef, b: z3.BitVecRef) -> list[z3.BoolRef]:
    return [z3.BVSubNoOverflow(a, b), z3.BVSubNoUnderflow(a, b, True)]


def _mul_ok(a: z3.BitVecRef, b: z3.BitVecRef) -> list[z3.BoolRef]:
    return [z3.BVMulNoOverflow(a, b, True), z3.BVMulNoUnderflow(a, b)]


def _shl_ok(a: z3.BitVecRef, b: z3.BitVecRef) -> list[z3.BoolRef]:
    # Shifting back recovers ``a`` exactly when no bit (nor the sign) was lost, also for b >= width.
    return [(a << b) >> b == a]


def _eq(a: z3.ExprRef, b: Any) -> z3.BoolRef:
    if z3.is_bool(a) and isinstance(b, int) and not isinstance(b, bool):
        # A truth value equals 0 or 1 only, as in Python (True == 2 is False).
        return a == (b == 1) if b in (0, 1) else z3.BoolVal(False)
    return a == b  # type: ignore[no-any-return]



def conjunction(terms: Sequence[z3.BoolRef]) -> z3.BoolRef:
    """``z3.And(*terms)`` for a non-empty list of Boolean terms of one context, built in C.

    ``z3.And`` checks and coerces every argument in Python; overflow points
    take the whole path condition each, so on long paths (sums over pages)
    that checking was most of the time spent encoding a spec.
    """
    if len(terms) == 1:
        return terms[0]
    ctx = terms[0].ctx
    args = (z3.Ast * len(terms))(*[t.as_ast() for t in terms])
    return z3.BoolRef(z3.Z3_mk_and(ctx.ref(), len(terms), args), ctx)


