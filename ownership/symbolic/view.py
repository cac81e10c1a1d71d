"""The ``s`` that spec code receives under the Z3 engines: cells read and written as terms.

:class:`CellView` is shared by the symbolic view and the parametric
explorer's view; :class:`SymView` adds what the vocabulary's encodings use
(fresh terms, assumptions, overflow points, flags without forking).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import z3

from ownership.lang.declarations import Domain, Params
from ownership.lang.fields import strides
from ownership.lang.guard import Disabled
from ownership.lang.instance import Instance, ViewBase
from ownership.lang.invariants import known_invariant
from ownership.symbolic.terms import Sym, SymbolicError, conjunction

if TYPE_CHECKING:
    from ownership.symbolic.encoding import SymbolicSpec

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


