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

    def _keys(self, key: Any) -> tuple[Any, ...]:
        keys = key if isinstance(key, tuple) else (key,)
        if len(keys) != len(self.shape):
            raise IndexError(f"index with {len(self.shape)} elements")
        out = []
        for k in keys:
            if isinstance(k, Sym) and getattr(k.ex, "concretize", None) is not None:
                k = k.__index__()  # the parametric explorer forks on each feasible value
            out.append(k)
        return tuple(out)

    def _pos(self, key: Any) -> int:
        """The cell of a concrete index (a symbolic one is refused: see :meth:`candidates`)."""
        pos = self.off
        for k, n, st in zip(self._keys(key), self.shape, self.strides, strict=True):
            if isinstance(k, Sym):
                k.__index__()
            if not 0 <= k < n:
                raise IndexError(f"index {k} out of range 0..{n - 1}")
            pos += k * st
        return pos

    def candidates(self, key: Any) -> list[tuple[z3.BoolRef | None, int]]:
        """``(condition, cell)`` for each cell ``key`` may name; the condition is ``None`` for a concrete index.

        A symbolic index (a value held in state, a page of a returned page
        set) ranges over the domain: one candidate per element, each with
        the condition that the index equals it.  The view checks first that
        the index cannot be out of range on this path (OWN006 otherwise).
        """
        keys = self._keys(key)
        if not any(isinstance(k, Sym) for k in keys):
            return [(None, self._pos(keys))]
        out: list[tuple[list[z3.BoolRef], int]] = [([], self.off)]
        for k, n, st in zip(keys, self.shape, self.strides, strict=True):
            if not isinstance(k, Sym):
                if not 0 <= k < n:
                    raise IndexError(f"index {k} out of range 0..{n - 1}")
                out = [(c, pos + k * st) for c, pos in out]
                continue
            e = k.e
            if not isinstance(e, z3.BitVecRef):
                raise SymbolicError(f"a symbolic value ({e}) that is not a number is used as an index")
            leaves = _numeral_leaves(e)
            if leaves is not None and all(0 <= v < n for v in leaves):
                values = sorted(leaves)  # an If chain over elements (a page of a page set): in range by construction
            else:
                values = list(range(n))
            bits = max(e.size(), n.bit_length() + 2)
            if bits > e.size():
                e = z3.SignExt(bits - e.size(), e)
            if leaves is None or values != sorted(leaves):
                self.view.check_index(z3.And(e >= 0, e < n), f"index {k.e} may be out of range 0..{n - 1}")
            out = [([*c, e == i], pos + i * st) for c, pos in out for i in values]
        return [(z3.And(c) if len(c) > 1 else c[0], pos) for c, pos in out]

    def __getitem__(self, key: Any) -> Any:
        cands = self.candidates(key)
        if cands[0][0] is None:
            return self.view.read_cell(cands[0][1])
        # An If-chain over the cells the index may name (the last is the default: the index is in range).
        cond_last, last = cands[-1]
        term = self.view.cell_term(last)
        for cond, pos in reversed(cands[:-1]):
            term = z3.If(cond, self.view.cell_term(pos), term)
        return Sym(term, self.view.explorer)

    def __setitem__(self, key: Any, value: Any) -> None:
        cands = self.candidates(key)
        if cands[0][0] is None:
            self.view.write_cell(cands[0][1], value)
            return
        for cond, pos in cands:  # every cell the index may name: the new value where it does, the old elsewhere
            self.view.write_cell(pos, Sym(z3.If(cond, self.view.value_term(value, pos), self.view.cell_term(pos)),
                                          self.view.explorer))

    def __iter__(self) -> Iterator[Any]:
        if len(self.shape) != 1:
            raise SymbolicError("iterate only over variables indexed by one domain")
        for i in range(self.shape[0]):
            yield self.view.read_cell(self.off + i)

    def __len__(self) -> int:
        return self.shape[0]


def _numeral_leaves(e: z3.ExprRef, limit: int = 256) -> set[int] | None:
    """The values of an ``If`` tree whose leaves are all numerals, or ``None``."""
    out: set[int] = set()
    todo = [e]
    while todo:
        t = todo.pop()
        if z3.is_bv_value(t):
            out.add(t.as_signed_long())
        elif z3.is_app_of(t, z3.Z3_OP_ITE):
            todo.extend(t.children()[1:])
        else:
            return None
        if len(out) > limit:
            return None
    return out


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
    @property
    def explorer(self) -> Any:
        """The path explorer this view's terms fork on."""
        return self._enc.explorer

    def read_cell(self, pos: int) -> Any:
        if pos in self.writes:
            return self.writes[pos]
        return Sym(self._enc.cells[pos], self._enc.explorer)

    def write_cell(self, pos: int, value: Any) -> None:
        guards = self._enc.explorer.guards
        if guards:  # inside a merged ``if`` branch: the write holds only where the branch is taken
            g = guards[0] if len(guards) == 1 else z3.And(guards)
            value = Sym(z3.If(g, self.value_term(value, pos), self.cell_term(pos)), self._enc.explorer)
        elif isinstance(value, Sym):
            value = Sym(value.e, value.ex)
        self.writes[pos] = value

    def value_term(self, value: Any, pos: int) -> z3.ExprRef:
        """``value`` as a term of cell ``pos``'s sort."""
        return self._enc.value_term(value, pos)

    def check_index(self, ok: z3.BoolRef, message: str) -> None:
        """OWN006 unless ``ok`` (a symbolic index is in range) holds wherever this path can run."""
        ok = z3.simplify(ok)
        if z3.is_true(ok):
            return
        solver = z3.Solver()
        solver.set("timeout", 10_000)
        solver.add(*self._enc.explorer.pc, *self.constraints, *self._enc.cell_types)
        solver.add(z3.Not(ok))
        if solver.check() != z3.unsat:
            raise SymbolicError(f"{message} on some path; guard it (require or if) so that it is in range")

    def terminal(self) -> Any:
        """The terminal predicate as a term (not forced to a bool, so calling it does not fork)."""
        done = self._inst.spec.done
        if done is None:
            return super().terminal()
        return self._enc.merged(done)(self)

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

    def nonnegative(self, value: Any) -> bool:
        """Record an error point where ``value`` (a count, a ``Sym``) is negative; no fork.

        The engines look for a reachable error point as for an overflow, so
        a count that can go negative is never answered PROVED.  Returns True
        when no state decides it and some values of the free parameters make
        it negative on this path: the caller refuses the spec then.
        """
        if not isinstance(value, Sym) and int(value) >= 0:
            return False  # a constant count: nothing to record (a negative one is refused before this)
        term = value.e if isinstance(value, Sym) else z3.BitVecVal(int(value), self.width)
        if z3.is_bool(term):
            return False  # a truth value counts 0 or 1
        zero = z3.BitVecVal(0, term.size())
        guards = self._enc.explorer.guards  # inside a merged ``if``: only where the branch is taken
        negative = term < zero
        if guards:
            negative = z3.And(*guards, negative)
        refuse = _over_parameters_only(term) and self._may_hold(negative)
        self.no_overflow(z3.Not(negative))
        return refuse

    def _may_hold(self, cond: z3.BoolRef) -> bool:
        """Whether ``cond`` can hold on this path within the free parameters' declared ranges."""
        from ownership.symbolic.encoding import parameter_constraints  # the encoding imports this module

        enc = self._enc
        solver = z3.Solver()
        solver.set("timeout", 10_000)
        solver.add(*parameter_constraints(enc.inst, enc.param_terms, ()), *enc.explorer.pc, cond)
        return solver.check() != z3.unsat

    def set_term(self, pos: int, term: z3.ExprRef) -> None:
        self.write_cell(pos, Sym(term, self._enc.explorer))

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


def _over_parameters_only(term: z3.ExprRef) -> bool:
    """Whether ``term`` reads no state cell and no choice: only free parameters (``param!NAME``)."""
    from ownership.symbolic.unroll import free_constants  # the unrolling imports this module

    names = {c.decl().name() for c in free_constants([term])}
    return bool(names) and all(n.startswith("param!") for n in names)
