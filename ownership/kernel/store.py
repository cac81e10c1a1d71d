"""Where the compiled search keeps its states: exact rows in memory, or 64-bit fingerprints.

Both stores hand the compiled loop the same arrays (:func:`ownership.kernel.loop.expand`):
packed rows, each node's parent and the memo outcome that reached it (its
*links*), and a table that finds a state.

* :class:`ExactStore` keeps every packed row, every link and a table of node
  numbers (4 bytes a slot, at most half full): a state is found by comparing
  rows, so nothing is ever lost.
* :class:`FingerprintStore` keeps a table of 64-bit fingerprints (at most
  four fifths full), the rows of the level being expanded and the next one
  only, and writes the links to a file as it goes: about 10-15 bytes of
  memory per state.  Two states with the same fingerprint count as one, so
  the verdict states TLC's estimate of the chance that this happened.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from ownership.kernel import loop


def _rows(capacity: int, words: int) -> np.ndarray:
    return np.zeros((capacity, words), dtype=np.uint64)


def _spilled_rows(capacity: int, words: int, folder: str | None) -> np.ndarray:
    """Rows in a file mapped into memory: the operating system pages them out when memory is short."""
    fd, path = tempfile.mkstemp(prefix="ownership-frontier-", suffix=".bin", dir=folder)
    os.close(fd)
    try:
        rows = np.memmap(path, dtype=np.uint64, mode="w+", shape=(capacity, words))
    finally:
        os.unlink(path)  # the mapping keeps the data; the name goes now, so nothing is left behind
    return rows


class ExactStore:
    """Every state's packed row and links, and a table of node numbers (see the module docstring)."""

    fingerprints = False
    row_base = 0
    link_base = 0

    def __init__(self, words: int, capacity: int = 1 << 12) -> None:
        self.states = _rows(capacity, words)
        self.parent = np.full(capacity, -1, dtype=np.int32)
        self.via = np.full(capacity, -1, dtype=np.int32)
        self.table = np.full(2 * capacity, -1, dtype=np.int32)
        self.fps = np.zeros(1, dtype=np.uint64)

    def add_initial(self, row: np.ndarray) -> None:
        """Store the initial state as node 0."""
        self.states[0] = row
        self.table[loop._probe(self.states, self.table, self.states[0], self.states.shape[1])] = 0

    def row(self, node: int) -> np.ndarray:
        """The packed row of a stored node."""
        return self.states[node]

    def links(self, node: int) -> tuple[int, int]:
        """(parent, memo outcome) of a node other than the initial one."""
        return int(self.parent[node]), int(self.via[node])

    def grow(self, need: int, n: int) -> None:
        """Room for ``need`` states (``n`` stored now)."""
        cap = len(self.parent)
        while cap < need:
            cap *= 2
        if cap != len(self.parent):
            states = _rows(cap, self.states.shape[1])
            states[:n] = self.states[:n]
            parent = np.full(cap, -1, dtype=np.int32)
            parent[:n] = self.parent[:n]
            via = np.full(cap, -1, dtype=np.int32)
            via[:n] = self.via[:n]
            self.states, self.parent, self.via = states, parent, via
        size = len(self.table)
        while size < 2 * need:
            size *= 2
        if size != len(self.table):
            self.table = np.full(size, -1, dtype=np.int32)
            loop.rehash(self.states, n, self.table)

    def after_call(self, n: int) -> None:
        """Nothing to flush: every link stays in memory."""

    def next_level(self, lo: int, hi: int) -> None:
        """Nothing to drop: every row stays (the table compares rows)."""

    def nbytes(self, n: int) -> int:
        """Bytes the stored states take: rows, links and the table at its real size."""
        return n * (self.states.shape[1] * 8 + 8) + self.table.nbytes

    def describe(self, n: int, transitions: int) -> str:
        return "exact (packed states in a hash table)"

    def close(self) -> None:
        """Nothing to remove."""


class FingerprintStore:
    """Fingerprints in memory, rows of two levels, links on disk (see the module docstring)."""

    fingerprints = True

    def __init__(self, words: int, capacity: int = 1 << 12, folder: str | None = None,
                 spill_bytes: int | None = None) -> None:
        self.states = _rows(capacity, words)
        self.row_base = 0
        self.folder = folder
        self.spill_bytes = spill_bytes
        """Rows of the two levels beyond this many bytes go to a file mapped into memory (``None``: never)."""
        self.spilled = False
        self.parent = np.full(capacity, -1, dtype=np.int32)
        self.via = np.full(capacity, -1, dtype=np.int32)
        self.link_base = 1  # node 0 has no links
        self.table = np.full(1, -1, dtype=np.int32)
        self.fps = np.zeros(5 * capacity // 4 + 1, dtype=np.uint64)
        fd, self.path = tempfile.mkstemp(prefix="ownership-links-", suffix=".bin", dir=folder)
        self.file = os.fdopen(fd, "wb")
        self._links: Any = None

    def add_initial(self, row: np.ndarray) -> None:
        self.states[0] = row
        fp = np.uint64(loop._fingerprint(row, self.states.shape[1]))  # typed: an int64 would mix into floats
        self.fps[loop._probe_fp(self.fps, fp)] = fp

    def row(self, node: int) -> np.ndarray:
        return self.states[node - self.row_base]

    def links(self, node: int) -> tuple[int, int]:
        if node >= self.link_base:
            k = node - self.link_base
            return int(self.parent[k]), int(self.via[k])
        if self._links is None:
            self.file.flush()
            self._links = np.memmap(self.path, dtype=np.int32, mode="r").reshape(-1, 2)
        parent, via = self._links[node - 1]
        return int(parent), int(via)

    def after_call(self, n: int) -> None:
        """Write the links of the nodes stored since the last call to the file."""
        k = n - self.link_base
        if k > 0:
            pairs = np.empty((k, 2), dtype=np.int32)
            pairs[:, 0] = self.parent[:k]
            pairs[:, 1] = self.via[:k]
            pairs.tofile(self.file)
            self.link_base = n
            self._links = None

    def next_level(self, lo: int, hi: int) -> None:
        """Drop the rows of the level just expanded (nodes before ``lo``); ``hi`` is one past the last stored."""
        keep = self.states[lo - self.row_base: hi - self.row_base].copy()
        self.states[: len(keep)] = keep
        self.row_base = lo

    def grow(self, need: int, n: int) -> None:
        rows = need - self.row_base
        if rows > len(self.states):
            cap = len(self.states)
            while cap < rows:
                cap *= 2
            words = self.states.shape[1]
            if self.spill_bytes is not None and cap * words * 8 > self.spill_bytes:
                states = _spilled_rows(cap, words, self.folder)
                self.spilled = True
            else:
                states = _rows(cap, words)
            states[: n - self.row_base] = self.states[: n - self.row_base]
            self.states = states
        links = need - self.link_base
        if links > len(self.parent):
            cap = len(self.parent)
            while cap < links:
                cap *= 2
            parent = np.full(cap, -1, dtype=np.int32)
            via = np.full(cap, -1, dtype=np.int32)
            k = n - self.link_base
            parent[:k] = self.parent[:k]
            via[:k] = self.via[:k]
            self.parent, self.via = parent, via
        if 5 * need > 4 * len(self.fps):
            # Half again as large, so the table stays between 53% and 80% full.
            fps = np.zeros(max(len(self.fps) * 3 // 2, 5 * need // 4 + 1), dtype=np.uint64)
            loop.rehash_fp(self.fps, fps)
            self.fps = fps

    def nbytes(self, n: int) -> int:
        """Memory per stored state: the fingerprint table (rows of two levels and unflushed links are transient)."""
        return self.fps.nbytes

    def frontier_bytes(self) -> int:
        """The rows and link buffers held now."""
        return self.states.nbytes + self.parent.nbytes + self.via.nbytes

    def describe(self, n: int, transitions: int) -> str:
        spilled = "; the frontier was spilled to disk" if self.spilled else ""
        return (f"64-bit fingerprints: probability of a collision (TLC's optimistic estimate "
                f"n*(m-n)/2^64 over {n:,} states and {transitions:,} transitions) {collision_estimate(n, transitions):.1e}"
                f"{spilled}")

    def close(self) -> None:
        """Remove the links file."""
        self._links = None
        self.file.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def collision_estimate(states: int, transitions: int) -> float:
    """TLC's optimistic estimate of the probability that two distinct states shared a fingerprint.

    Every transition that reached an already stored state (``transitions - states``
    of them, counting the initial state as generated) could have matched a
    different state with probability ``states / 2**64``.
    """
    return states * max(0, transitions + 1 - states) / 2.0 ** 64
