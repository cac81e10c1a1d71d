"""The memo: what each action instance and invariant did, as decision trees over packed cells.

Every action instance and every invariant has a root.  An inner node names
a cell; its children are keyed by the cell's code.  A leaf holds an action's
outcomes (the writes of each, as word masks, its picks and whether it
flags a checked invariant) or an invariant's value.  A path from the root
is the sequence of cells a run of the Python semantics read, in the order
it first read them, with their values: a run is a deterministic function
of what it read, so in any state that leads to a leaf the Python run would
do exactly what the leaf says (:class:`~ownership.lang.successors.Recording`).
A missing child is a miss: the kernel hands the state back, the Python
semantics runs on it and its recording is added here.

The trees live in flat numpy arrays the compiled loop reads:

* ``node_cell``: the cell an inner node reads, ``-1`` for a leaf;
* ``node_a``: an inner node's first dense child slot; a leaf's first
  outcome (actions) or value, 1 or 0 (invariants);
* ``node_b``: an inner node's number of dense child slots (0: its children
  are in the hash of (node, code)); a leaf's number of outcomes;
* ``child``: dense child slots (``-1``: not seen yet);
* ``h_node``/``h_code``/``h_child``: the open-addressing hash of the
  children of nodes over wide cells (ints, large sets);
* ``out_ai``/``out_w0``/``out_wn``/``out_flag``: per outcome its action
  instance, its writes (a range of ``w_word``/``w_clear``/``w_set``) and
  whether it flags a checked invariant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ownership.errors import Code, OwnershipError
from ownership.kernel.codec import Codec

_GOLD = 0x9E3779B97F4A7C15
_MIX = 0xC2B2AE3D27D4EB4F
_U64 = 0xFFFF_FFFF_FFFF_FFFF


def child_hash(node: int, code: int) -> int:
    """The hash slot seed of (node, code); the compiled walk computes the same."""
    return ((node * _GOLD) & _U64 ^ (code * _MIX) & _U64) >> 1


def _grow(a: np.ndarray, need: int, fill: int | None = None) -> np.ndarray:
    """``a`` with room for at least ``need`` entries (doubling), new entries set to ``fill``."""
    if need <= len(a):
        return a
    n = max(need, 2 * len(a), 16)
    out = np.empty(n, dtype=a.dtype)
    out[: len(a)] = a
    if fill is not None:
        out[len(a):] = fill
    return out


class Memo:
    """Decision trees for ``roots`` action instances and invariants (see the module docstring)."""

    def __init__(self, roots: int, codec: Codec) -> None:
        self.codec = codec
        self.roots = np.full(roots, -1, dtype=np.int32)
        self.nodes = 0
        self.node_cell = np.empty(1024, dtype=np.int32)
        self.node_a = np.empty(1024, dtype=np.int64)
        self.node_b = np.empty(1024, dtype=np.int32)
        self.slots = 0
        self.child = np.full(4096, -1, dtype=np.int32)
        self.hashed = 0
        self.h_node = np.full(1024, -1, dtype=np.int32)
        self.h_code = np.zeros(1024, dtype=np.int64)
        self.h_child = np.full(1024, -1, dtype=np.int32)
        self.outs = 0
        self.out_ai = np.empty(256, dtype=np.int32)
        self.out_w0 = np.empty(256, dtype=np.int32)
        self.out_wn = np.empty(256, dtype=np.int32)
        self.out_flag = np.zeros(256, dtype=np.int8)
        self.out_picks: list[tuple[Any, ...]] = []
        self.out_violations: list[tuple[str, ...]] = []
        self.writes = 0
        self.w_word = np.empty(256, dtype=np.int32)
        self.w_clear = np.empty(256, dtype=np.uint64)
        self.w_set = np.empty(256, dtype=np.uint64)
        self.misses = 0
        """Python runs recorded (the kernel's calls back into the Python semantics)."""

    # -- nodes ------------------------------------------------------------------
    def _node(self, cell: int, a: int, b: int) -> int:
        n = self.nodes
        if n >= len(self.node_cell):
            self.node_cell = _grow(self.node_cell, n + 1)
            self.node_a = _grow(self.node_a, n + 1)
            self.node_b = _grow(self.node_b, n + 1)
        self.node_cell[n] = cell
        self.node_a[n] = a
        self.node_b[n] = b
        self.nodes = n + 1
        return n

    def _inner(self, cell: int) -> int:
        if self.codec.dense[cell]:
            span = 1 << self.codec.widths[cell]
            base = self.slots
            self.child = _grow(self.child, base + span, -1)
            self.slots = base + span
            return self._node(cell, base, span)
        return self._node(cell, 0, 0)

    def _get(self, node: int, code: int) -> int:
        if self.node_b[node] > 0:
            return int(self.child[self.node_a[node] + code])
        mask = len(self.h_node) - 1
        i = child_hash(node, code) & mask
        while self.h_node[i] >= 0:
            if self.h_node[i] == node and self.h_code[i] == code:
                return int(self.h_child[i])
            i = (i + 1) & mask
        return -1

    def _set(self, node: int, code: int, target: int) -> None:
        if self.node_b[node] > 0:
            self.child[self.node_a[node] + code] = target
            return
        if 2 * (self.hashed + 1) > len(self.h_node):
            self._rehash(2 * len(self.h_node))
        mask = len(self.h_node) - 1
        i = child_hash(node, code) & mask
        while self.h_node[i] >= 0:
            i = (i + 1) & mask
        self.h_node[i] = node
        self.h_code[i] = code
        self.h_child[i] = target
        self.hashed += 1

    def _rehash(self, size: int) -> None:
        old = [(int(n), int(c), int(t)) for n, c, t in zip(self.h_node, self.h_code, self.h_child, strict=True) if n >= 0]
        self.h_node = np.full(size, -1, dtype=np.int32)
        self.h_code = np.zeros(size, dtype=np.int64)
        self.h_child = np.full(size, -1, dtype=np.int32)
        self.hashed = 0
        for n, c, t in old:
            self._set(n, c, t)

    # -- insertion --------------------------------------------------------------
    def _insert(self, root: int, reads: Sequence[tuple[int, int]], leaf: int, what: str) -> None:
        """Hang ``leaf`` under ``root`` along ``reads`` ((cell, code) pairs), creating the missing nodes."""
        parent, code = -1, 0
        node = int(self.roots[root])
        for k, (cell, c) in enumerate(reads):
            if node < 0:
                node = self._inner(cell)
                self._attach(root, parent, code, node)
            elif self.node_cell[node] != cell:
                raise _nondeterministic(what, int(self.node_cell[node]), cell, k)
            parent, code = node, c
            node = self._get(node, c)
        if node >= 0:
            raise _nondeterministic(what, int(self.node_cell[node]), -1, len(reads))
        self._attach(root, parent, code, leaf)

    def _attach(self, root: int, parent: int, code: int, node: int) -> None:
        if parent < 0:
            self.roots[root] = node
        else:
            self._set(parent, code, node)

    def add_action(self, root: int, ai: int, state: Sequence[Any], reads: Sequence[int],
                   outcomes: Sequence[tuple[Sequence[tuple[int, Any]], tuple[Any, ...], tuple[str, ...], bool]],
                   what: str) -> None:
        """Record one Python run of action instance ``ai`` (see :class:`~ownership.lang.successors.Recording`).

        ``outcomes`` are (writes, picks, violations, flags a checked invariant).
        """
        codec = self.codec
        keyed = [(c, codec.code(c, state[c])) for c in reads]
        writes = [[codec.write(c, v) for c, v in w] for w, _p, _v, _f in outcomes]  # may raise TooWide first
        first = self.outs
        for (_w, picks, violations, flag), packed in zip(outcomes, writes, strict=True):
            o = self.outs
            self.out_ai = _grow(self.out_ai, o + 1)
            self.out_w0 = _grow(self.out_w0, o + 1)
            self.out_wn = _grow(self.out_wn, o + 1)
            self.out_flag = _grow(self.out_flag, o + 1, 0)
            self.out_ai[o] = ai
            self.out_w0[o] = self.writes
            self.out_wn[o] = len(packed)
            self.out_flag[o] = 1 if flag else 0
            self.out_picks.append(picks)
            self.out_violations.append(violations)
            self.outs = o + 1
            for word, clear, bits in packed:
                w = self.writes
                self.w_word = _grow(self.w_word, w + 1)
                self.w_clear = _grow(self.w_clear, w + 1)
                self.w_set = _grow(self.w_set, w + 1)
                self.w_word[w] = word
                self.w_clear[w] = clear
                self.w_set[w] = bits
                self.writes = w + 1
        leaf = self._node(-1, first, len(outcomes))
        self._insert(root, keyed, leaf, what)
        self.misses += 1

    def add_invariant(self, root: int, state: Sequence[Any], reads: Sequence[int], holds: bool, what: str) -> None:
        """Record one Python evaluation of an invariant: its value where ``reads`` have ``state``'s values."""
        keyed = [(c, self.codec.code(c, state[c])) for c in reads]
        leaf = self._node(-1, 1 if holds else 0, 0)
        self._insert(root, keyed, leaf, what)
        self.misses += 1

    @property
    def nbytes(self) -> int:
        """Bytes the memo's arrays take."""
        arrays = (self.node_cell, self.node_a, self.node_b, self.child, self.h_node, self.h_code, self.h_child,
                  self.out_ai, self.out_w0, self.out_wn, self.out_flag, self.w_word, self.w_clear, self.w_set)
        return sum(a.nbytes for a in arrays)


def _nondeterministic(what: str, expected: int, got: int, position: int) -> OwnershipError:
    if got < 0:
        detail = f"stopped reading after {position} cells where an earlier run with the same values read cell {expected}"
    elif expected < 0:
        detail = f"read cell {got} after {position} cells where an earlier run with the same values had stopped"
    else:
        detail = f"read cell {got} as its read number {position + 1} where an earlier run with the same values read cell {expected}"
    return OwnershipError(
        Code.SPEC_NONDETERMINISTIC,
        f"{what} is not a function of the state it reads: it {detail}; it must depend only on the state "
        "(no clocks, random numbers or values kept between runs)",
    )
