"""Symbolic execution of spec code: the same Python functions, run over Z3 terms.

A spec's actions and invariants are plain Python.  Here they run on a
:class:`SymView` whose cells are Z3 terms wrapped in :class:`Sym`.  Operators
on ``Sym`` build terms; a Python ``if`` (``bool()`` of a ``Sym``) *forks*:
the function is re-run from the start once per sequence of branch decisions
(as concolic executors do), each run yielding one path with its path
condition, the cells it wrote, and the choices it made.  ``require`` is just
an ``if`` whose false branch ends the path as disabled.

The ownership vocabulary (``alloc``, ``read``, ``transfer``, ...) checks
``s.symbolic`` and encodes each operation directly (fresh choice variables
and ``If`` terms) instead of forking page by page: see
:mod:`ownership.vocab.symbolic`.

Only engines import this module: it imports z3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from ownership.errors import Code, OwnershipError, location_in
from ownership.spec.declarations import Domain, Params, Values
from ownership.spec.fields import strides
from ownership.spec.guard import Disabled, is_truth_value
from ownership.spec.instance import Instance, ViewBase
from ownership.spec.invariants import known_invariant, not_bool_error
from ownership.spec.types import BoolType, Enum, Ref, RefSet, ValueType

MAX_PATHS = 4096
"""Paths one action may fork into before the engine gives up on the spec."""

WIDTH = 64
"""The widest integer encoding, and the one used whenever a parameter is free.

Integers are two's-complement bit-vectors: the whole encoding is then
bit-vector logic, which Z3 bit-blasts to SAT, far faster than mixing linear
arithmetic with the bit-vectors that hold sets of requests.  Specs with fixed
parameters start narrower (see :func:`initial_width`): a 64-bit adder or
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
    return x


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

    def is_truth_value(self) -> bool:
        """Whether this stands for a bool (guards and invariants must give one)."""
        return z3.is_bool(self.e)

    def __index__(self) -> int:
        concretize = getattr(self.ex, "concretize", None)
        if concretize is not None:  # the parametric explorer forks on each feasible value
            return int(concretize(self.e))
        raise SymbolicError(
            f"a symbolic value ({self.e}) is used as an index or count; index with domain elements "
            "or use the ownership vocabulary"
        )

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
        return self._wrap(~self.e)

    def __rshift__(self, o: Any) -> Sym:
        return self._wrap(z3.LShR(self.e, _term(o, self.e)))

    def __lshift__(self, o: Any) -> Sym:
        return self._wrap(self.e << _term(o, self.e))


def _add_ok(a: z3.BitVecRef, b: z3.BitVecRef) -> list[z3.BoolRef]:
    return [z3.BVAddNoOverflow(a, b, True), z3.BVAddNoUnderflow(a, b)]


def _sub_ok(a: z3.BitVecRef, b: z3.BitVecRef) -> list[z3.BoolRef]:
    return [z3.BVSubNoOverflow(a, b), z3.BVSubNoUnderflow(a, b, True)]


def _mul_ok(a: z3.BitVecRef, b: z3.BitVecRef) -> list[z3.BoolRef]:
    return [z3.BVMulNoOverflow(a, b, True), z3.BVMulNoUnderflow(a, b)]


def _eq(a: z3.ExprRef, b: Any) -> z3.BoolRef:
    if z3.is_bool(a) and isinstance(b, int) and not isinstance(b, bool):
        return a == (b != 0)
    return a == b  # type: ignore[no-any-return]


@dataclass
class Path:
    """One path through an action or invariant."""

    pc: list[z3.BoolRef]
    writes: dict[int, Any]
    aux: list[z3.ExprRef]
    constraints: list[z3.BoolRef]
    picks: list[Any]
    result: Any
    enabled: bool
    overflows: list[z3.BoolRef] = field(default_factory=list)
    """Conditions under which this path computes an integer outside the encoding's range."""
    flags: list[tuple[str, z3.BoolRef]] = field(default_factory=list)
    """``(invariant, condition)``: the path emits an event violating the invariant when the condition holds."""


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


class PathExplorer:
    """Runs a function once per branch-decision sequence (see the module docstring)."""

    def __init__(self, width: int = WIDTH) -> None:
        self.width = width
        self.prefix: tuple[int, ...] = ()
        self.trail: list[tuple[int, int]] = []
        self.pc: list[z3.BoolRef] = []
        self.overflows: list[z3.BoolRef] = []

    def no_overflow(self, ok: z3.BoolRef) -> None:
        """Arithmetic stays in range on this path only if ``ok``: record when it does not.

        The path itself continues under ``ok`` (an overflowing execution is not
        one the encoding can represent); the engines check separately that no
        reachable state can take the path with ``ok`` false.
        """
        ok = z3.simplify(ok)
        if z3.is_true(ok):
            return
        self.overflows.append(conjunction([*self.pc, z3.Not(ok)]))
        self.pc.append(ok)

    def branch(self, cond: z3.BoolRef) -> bool:
        cond = z3.simplify(cond)
        if z3.is_true(cond):
            return True
        if z3.is_false(cond):
            return False
        return self.decide(2, cond) == 0

    def decide(self, count: int, cond: z3.BoolRef | None = None) -> int:
        pos = len(self.trail)
        taken = self.prefix[pos] if pos < len(self.prefix) else 0
        self.trail.append((taken, count))
        if cond is not None:
            self.pc.append(cond if taken == 0 else z3.Not(cond))
        return taken

    def run(self, fn: Callable[[], Any], on_start: Callable[[], None]) -> Iterator[tuple[bool, Any]]:
        """Yield ``(enabled, result)`` once per path; path state is read from this object."""
        pending: list[tuple[int, ...]] = [()]
        count = 0
        while pending:
            self.prefix = pending.pop()
            self.trail = []
            self.pc = []
            self.overflows = []
            on_start()
            enabled = True
            result = None
            try:
                result = fn()
            except Disabled:
                enabled = False
            for pos in range(len(self.prefix), len(self.trail)):
                taken, n = self.trail[pos]
                for alt in range(n - 1, taken, -1):
                    pending.append(tuple(t for t, _ in self.trail[:pos]) + (alt,))
            count += 1
            if count > MAX_PATHS:
                raise SymbolicError(f"more than {MAX_PATHS} paths: the spec branches on too many symbolic values")
            yield enabled, result


class SymParams(Params):
    """Parameters where the free ones are symbolic integers."""


class SymField:
    """``s.var[i]`` over symbolic cells."""

    __slots__ = ("view", "off", "shape", "strides")

    def __init__(self, view: Any, off: int, shape: tuple[int, ...]) -> None:
        self.view = view
        self.off = off
        self.shape = shape
        self.strides = strides(shape)

    def _pos(self, key: Any) -> int:
        keys = key if isinstance(key, tuple) else (key,)
        if len(keys) != len(self.shape):
            raise IndexError(f"index with {len(self.shape)} elements")
        pos = self.off
        for k, n, st in zip(keys, self.shape, self.strides, strict=True):
            if isinstance(k, Sym):
                k.__index__()
            if not 0 <= k < n:
                raise IndexError(f"index {k} out of range 0..{n - 1}")
            pos += k * st
        return pos

    def __getitem__(self, key: Any) -> Any:
        return self.view.read_cell(self._pos(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        self.view.write_cell(self._pos(key), value)

    def __iter__(self) -> Iterator[Any]:
        if len(self.shape) != 1:
            raise SymbolicError("iterate only over variables indexed by one domain")
        for i in range(self.shape[0]):
            yield self.view.read_cell(self.off + i)

    def __len__(self) -> int:
        return self.shape[0]


def flag_condition(inst: Instance, invariant: str, when: Any) -> z3.BoolRef | None:
    """``when`` of ``s.flag(invariant, when)`` as a Boolean term, or ``None`` if it is plainly false.

    ``when`` is a bool, a :class:`Sym` or a term; a 0/1 bit-vector (a
    condition combined with ``&`` or ``|``) is read as ``Sym.__bool__`` reads
    it.  The invariant must be one of the spec's (OWN004 otherwise).
    """
    if invariant not in inst.spec.invariants:
        known_invariant(inst.spec, invariant)
    cond = when.e if isinstance(when, Sym) else when
    if not isinstance(cond, z3.ExprRef):
        return z3.BoolVal(True) if cond else None
    if not z3.is_bool(cond):
        return cond != z3.BitVecVal(0, cond.size()) if isinstance(cond, z3.BitVecRef) else cond != 0
    return cond  # type: ignore[return-value]


class CellView(ViewBase):
    """A view whose cells are read and written through ``read_cell``/``write_cell``.

    Scalars are attributes; tables are :class:`SymField` objects set by the
    subclass.  Shared by the symbolic view and the parametric explorer's view.
    """

    _scalars: dict[str, int]

    def read_cell(self, pos: int) -> Any:
        raise NotImplementedError

    def write_cell(self, pos: int, value: Any) -> None:
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        scalars = object.__getattribute__(self, "_scalars")
        if name in scalars:
            return self.read_cell(scalars[name])
        raise AttributeError(f"spec has no state variable or view method {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._scalars:
            self.write_cell(self._scalars[name], value)
            return
        raise AttributeError(f"cannot assign {name!r}: not a scalar state variable")


class SymView(CellView):
    """The ``s`` that spec code receives during symbolic execution."""

    symbolic = True

    def __init__(self, enc: SymbolicSpec) -> None:
        object.__setattr__(self, "_enc", enc)
        object.__setattr__(self, "_inst", enc.inst)
        object.__setattr__(self, "params", enc.params)
        object.__setattr__(self, "_scalars", {})
        object.__setattr__(self, "writes", {})
        object.__setattr__(self, "aux", [])
        object.__setattr__(self, "constraints", [])
        object.__setattr__(self, "picks", [])
        object.__setattr__(self, "flags", [])
        for lay in enc.inst.layouts.values():
            if not lay.shape:
                self._scalars[lay.name] = lay.offset
            else:
                object.__setattr__(self, lay.name, SymField(self, lay.offset, lay.shape))

    def reset(self) -> None:
        self.writes.clear()
        self.aux.clear()
        self.constraints.clear()
        self.picks.clear()
        self.flags.clear()

    def flag(self, invariant: str, when: Any = True) -> None:
        """This path violates ``invariant`` where ``when`` holds (a bool, a Sym or a Boolean term); no fork."""
        cond = flag_condition(self._inst, invariant, when)
        if cond is None:
            return
        pc = self._enc.explorer.pc
        self.flags.append((invariant, conjunction([*pc, cond]) if pc else cond))

    # cells
    def read_cell(self, pos: int) -> Any:
        if pos in self.writes:
            return self.writes[pos]
        return Sym(self._enc.cells[pos], self._enc.explorer)

    def write_cell(self, pos: int, value: Any) -> None:
        if isinstance(value, Sym):
            value = Sym(value.e, value.ex)
        self.writes[pos] = value

    def cell_term(self, pos: int) -> z3.ExprRef:
        """The current value of a cell as a term (for vocabulary encodings)."""
        return self._enc.value_term(self.read_cell(pos), pos)

    @property
    def width(self) -> int:
        """Bits of the encoding's integers (for vocabulary encodings)."""
        return self._enc.width

    def no_overflow(self, ok: z3.BoolRef) -> None:
        """Record an overflow point of a vocabulary encoding's own arithmetic."""
        self._enc.explorer.no_overflow(ok)

    def set_term(self, pos: int, term: z3.ExprRef) -> None:
        self.writes[pos] = Sym(term, self._enc.explorer)

    def layout(self, var: str) -> Any:
        return self._enc.inst.layouts[var]

    def choose(self, options: Sequence[Any], label: str = "choice", *, domain: Domain | None = None) -> Any:
        if not options:
            raise Disabled
        idx = self._enc.explorer.decide(len(options))
        value = options[idx]
        self.picks.append(value)
        return value

    # for vocabulary encodings
    def fresh(self, name: str, sort: z3.SortRef) -> z3.ExprRef:
        """A new unconstrained term, renamed per step by the engine."""
        v = z3.Const(f"aux!{len(self.aux)}!{name}", sort)
        self.aux.append(v)
        return v

    def assume(self, constraint: z3.BoolRef) -> None:
        """Constrain this path's fresh terms (not a branch: no fork)."""
        self.constraints.append(constraint)

    def require_term(self, cond: z3.BoolRef) -> None:
        """``require`` on a raw term."""
        if not self._enc.explorer.branch(cond):
            raise Disabled

    def record_pick(self, extractor: Callable[[Callable[[z3.ExprRef], Any]], list[Any]]) -> None:
        """Register how to read this path's choices back from a model (for replay)."""
        self.picks.append(extractor)


@dataclass
class ActionPaths:
    """The paths of one action instance."""

    action: str
    arg_values: tuple[Any, ...]  # ints or z3 terms (Values domains over free parameters)
    paths: list[Path]
    overflows: list[z3.BoolRef] = field(default_factory=list)
    """When some path of the action, enabled or not, leaves the integer range."""


@dataclass
class SymbolicSpec:
    """A spec's actions and invariants as sets of symbolic paths over placeholder cells."""

    inst: Instance
    free: tuple[str, ...]
    symmetry: bool = True
    width: int = WIDTH
    """Bits of every integer cell and intermediate (see :data:`WIDTH` and :func:`initial_width`)."""
    params: Params = field(init=False)
    reduced: set[str] = field(init=False)
    sorts: list[z3.SortRef] = field(init=False)
    cells: list[z3.ExprRef] = field(init=False)
    explorer: PathExplorer = field(init=False)
    actions: list[ActionPaths] = field(init=False)
    invariants: dict[str, list[Path]] = field(init=False)
    param_terms: dict[str, z3.ArithRef] = field(init=False)
    step_templates: dict[bool, z3.BoolRef] = field(init=False, default_factory=dict)
    """The step relation over placeholders, with and without stuttering, built once per encoding
    (see ``Unroller``; prove builds a dozen unrollers)."""

    def __post_init__(self) -> None:
        inst = self.inst
        spec = inst.spec
        for name in self.free:
            if name not in spec.params:
                raise OwnershipError(Code.UNKNOWN_PARAM, f"--free {name}: spec {spec.name} has no such parameter", spec.file, spec.line)
        if self.free and self.width < WIDTH:
            raise ValueError("free parameters are encoded at full width")
        self.param_terms = {n: z3.BitVec(f"param!{n}", self.width) for n in self.free}
        self.explorer = PathExplorer(self.width)
        values: dict[str, Any] = dict(inst.param_values)
        for n, t in self.param_terms.items():
            values[n] = Sym(t, self.explorer)
        self.params = SymParams(values)
        self._check_sizes_fixed()
        self.sorts = []
        self.int_cells: set[int] = set()
        for v in spec.vars.values():
            lay = inst.layouts[v.name]
            if not isinstance(v.type, (BoolType, RefSet, Enum, Ref)):
                self.int_cells.update(range(lay.offset, lay.offset + lay.length))
            self.sorts.extend([sort_of(v.type, inst.sizes, self.width)] * lay.length)
        self.cells = [z3.Const(f"x!{i}", s) for i, s in enumerate(self.sorts)]
        from ownership.engines.symmetry import plan_symmetry

        plan = plan_symmetry(inst)
        self.plan = plan
        self.reduced = set(plan.sorted) if self.symmetry else set()
        self.view = SymView(self)
        self.actions = []
        for act in spec.actions.values():
            ranges: list[list[Any]] = []
            for d in act.arg_domains:
                if isinstance(d, Values):
                    try:
                        vals = list(d.values(self.params))
                    except SymbolicError as exc:
                        raise self._error(f"values {d.name}", exc, act.file) from None
                    ranges.append(_dedupe(vals))
                else:
                    ranges.append(list(range(inst.sizes[d.name])))
            import itertools

            for args in itertools.product(*ranges):
                call = _bind(act.fn, self.view, [Sym(a, self.explorer) if isinstance(a, z3.ExprRef) else a for a in args])
                paths = self._paths(call, f"action {act.name}", act.file)
                # A disabled path's overflow counts too: its guard may sit on a wrapped comparison.
                overflows = [z3.And(o, *p.constraints) for p in paths for o in p.overflows]
                self.actions.append(ActionPaths(act.name, tuple(args), [p for p in paths if p.enabled], overflows))
        self.invariants = {}
        for inv in spec.invariants.values():
            self.invariants[inv.name] = self._paths(_bind(inv.fn, self.view, []), f"invariant {inv.name}", inv.file)
            for p in self.invariants[inv.name]:
                if p.enabled and not is_truth_value(p.result):
                    raise not_bool_error(inv, p.result)
                if p.writes:
                    # As in the concrete semantics (Instance.check_unchanged): an invariant only reads.
                    raise OwnershipError(
                        Code.SPEC_IMPURE,
                        f"invariant {inv.name} writes the state: invariants must only read it, or a later "
                        "invariant sees a state that is not the one reached",
                        inv.file, inv.line,
                    )

    def _check_sizes_fixed(self) -> None:
        """Domain sizes must not depend on free parameters (the unrolling has fixed width)."""
        spec = self.inst.spec
        probe = PathExplorer()
        env: dict[str, Any] = dict(self.inst.param_values)
        env.update({n: Sym(t, probe) for n, t in self.param_terms.items()})
        params = Params(env)
        for d in spec.domains.values():
            try:
                size = d.size if isinstance(d.size, int) else (env[d.size] if isinstance(d.size, str) else d.size(params))
                depends = isinstance(size, Sym) or bool(probe.trail)
            except (SymbolicError, TypeError):
                depends = True
            if depends:
                raise OwnershipError(
                    Code.BAD_OPTION,
                    f"a free parameter sets the size of domain {d.name}, which must be fixed for the Z3 engines; "
                    "fix it with --param, or use the explorer (check --free) which splits sizes into cases",
                    spec.file,
                    spec.line,
                )

    def _error(self, what: str, exc: Exception, file: str | None) -> OwnershipError:
        from ownership.core.limits import stop_in

        stop = stop_in(exc)
        if stop is not None:  # Ctrl-C, SIGTERM or the time limit inside a Z3 call: not a spec error
            raise stop
        return OwnershipError(
            Code.SPEC_RUNTIME,
            f"{what} cannot run symbolically: {type(exc).__name__}: {exc}",
            file,
            location_in(file, exc) if file else None,
        )

    def _paths(self, fn: Callable[[], Any], what: str, file: str | None) -> list[Path]:
        out: list[Path] = []
        view = self.view
        try:
            for enabled, result in self.explorer.run(fn, view.reset):
                out.append(
                    Path(
                        pc=list(self.explorer.pc),
                        writes=dict(view.writes),
                        aux=list(view.aux),
                        constraints=list(view.constraints),
                        picks=list(view.picks),
                        result=result,
                        enabled=enabled,
                        overflows=list(self.explorer.overflows),
                        flags=list(view.flags),
                    )
                )
        except (OwnershipError, WidthError):
            raise
        except Exception as exc:  # noqa: BLE001 - spec code
            raise self._error(what, exc, file) from None
        return out

    # -- formulas ---------------------------------------------------------------
    def invariant_formula(self, name: str) -> z3.BoolRef:
        """The invariant as one formula over the placeholder cells."""
        disj = []
        for p in self.invariants[name]:
            if not p.enabled:
                continue
            r = p.result
            val = to_z3(r, z3.BoolSort()) if isinstance(r, Sym) else z3.BoolVal(bool(r))
            disj.append(z3.And(*p.pc, val) if p.pc else val)
        return z3.simplify(z3.Or(*disj)) if disj else z3.BoolVal(False)

    def flagged_paths(self, names: Sequence[str]) -> list[tuple[int, z3.BoolRef]]:
        """``(path index, condition)`` for each enabled action path that emits an event violating one of ``names``.

        Path indices count the enabled paths of every action in order (the
        numbering of the engines' step selector).  The condition is over the
        placeholder cells and the path's fresh terms.
        """
        out: list[tuple[int, z3.BoolRef]] = []
        j = 0
        for ap in self.actions:
            for p in ap.paths:
                conds = [c for n, c in p.flags if n in names]
                if conds:
                    cond = z3.simplify(z3.And(z3.Or(*conds), *p.pc, *p.constraints))
                    if not z3.is_false(cond):
                        out.append((j, cond))
                j += 1
        return out

    def value_term(self, value: Any, cell: int) -> z3.ExprRef:
        """A cell's value as a term of its sort; ``WidthError`` if an integer does not fit."""
        if cell in self.int_cells and isinstance(value, int) and not fits(value, self.width):
            raise WidthError(f"value {value} does not fit {self.width} bits")
        return to_z3(value, self.sorts[cell])

    def init_terms(self) -> list[z3.ExprRef]:
        """The initial state as terms (``WidthError`` if it does not fit the width)."""
        return [self.value_term(v, i) for i, v in enumerate(self.inst.init_state)]

    def overflow_points(self) -> list[z3.BoolRef]:
        """Each condition under which an action or invariant computes an out-of-range integer.

        Over the placeholder cells and the paths' fresh terms (which the
        engines rename per step, as for the transition relation).
        """
        disj: list[z3.BoolRef] = []
        for ap in self.actions:
            disj.extend(ap.overflows)
        for paths in self.invariants.values():
            for p in paths:
                disj.extend(p.overflows)
        return list({d.get_id(): d for d in disj}.values())

    def type_constraints(self, cells: Sequence[z3.ExprRef]) -> list[z3.BoolRef]:
        """Range constraints every state satisfies (enum members, element references)."""
        from ownership.spec.types import Enum

        out: list[z3.BoolRef] = []
        spec = self.inst.spec
        for v in spec.vars.values():
            lay = self.inst.layouts[v.name]
            for k in range(lay.length):
                c = cells[lay.offset + k]
                if isinstance(v.type, Enum):
                    out.append(z3.And(c >= 0, c < len(v.type.members)))
                elif isinstance(v.type, Ref):
                    lo = -1 if v.type.optional else 0
                    out.append(z3.And(c >= lo, c < self.inst.sizes[v.type.domain]))
        return out


def _bind(fn: Callable[..., Any], view: SymView, args: Sequence[Any]) -> Callable[[], Any]:
    def call() -> Any:
        return fn(view, *args)

    return call


def _dedupe(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    seen: set[Any] = set()
    for v in values:
        if isinstance(v, Sym):
            out.append(v.e)
            continue
        if v not in seen:
            seen.add(v)
            out.append(int(v))
    return out


def parameter_constraints(inst: Instance, terms: dict[str, z3.BitVecRef], where: Sequence[str]) -> list[z3.BoolRef]:
    """Declared ranges of the free parameters (within the 64-bit encoding) and ``--where``."""
    out: list[z3.BoolRef] = []
    cap = 1 << (WIDTH - 2)
    for name, t in terms.items():
        p = inst.spec.params[name]
        if p.max is not None and p.max > cap:
            raise OwnershipError(Code.BAD_OPTION, f"--free {name}: its declared maximum {p.max} is beyond the "
                                 f"solver's range (at most {cap}); fix it with --param", inst.spec.file, inst.spec.line)
        out.append(t >= (p.min if p.min is not None else 0))
        out.append(t <= (p.max if p.max is not None else cap))
    env: dict[str, Any] = dict(inst.param_values)
    env.update(terms)
    env.update({"And": z3.And, "Or": z3.Or, "Not": z3.Not})
    for text in where:
        try:
            expr = eval(text, {"__builtins__": {}}, dict(env))  # noqa: S307 - the user's own constraint over parameters
        except Exception as exc:  # noqa: BLE001
            raise OwnershipError(Code.BAD_OPTION, f"--where {text!r}: {type(exc).__name__}: {exc}") from None
        if not isinstance(expr, z3.BoolRef):
            raise OwnershipError(Code.BAD_OPTION, f"--where {text!r} is not a condition on free parameters")
        out.append(expr)
    return out
