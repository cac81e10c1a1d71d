"""The compiled breadth-first loop: expand a range of packed states through the memo.

:func:`expand` runs in machine code (Numba, compiled once per machine and
cached).  It processes states in node order, exactly as the Python
search does (:class:`~ownership.engines.search.BreadthFirst`): for each
state, every action instance's outcomes in order, each new state numbered,
stored with its parent and checked against the invariants.  It returns to
Python with a status whenever it needs something only Python can give: a
miss in the memo, a new capacity, a stop.  Each state is processed in two
phases so that a return never leaves it half done: phase A computes the
successors and the invariants of the unseen ones (no side effects), phase B
stores them and counts.

Scalars travel in ``io`` (int64): see the ``IO_*`` indices.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# io slots
IO_CURSOR = 0
"""In: the first state to expand; out: where to resume (the state a status is about)."""
IO_END = 1
"""In: one past the last state to expand in this call."""
IO_NODES = 2
"""In/out: states stored."""
IO_TRANSITIONS = 3
IO_EXPANDED = 4
IO_MAX_STATES = 5
"""In: the state limit, -1 for none."""
IO_DEADLOCK = 6
"""In: 1 to stop at states without successors (the caller decides whether one is terminal)."""
IO_SKIP_DEAD = 7
"""In: a state already found terminal (expand it as a dead end without stopping again)."""
IO_A = 8
IO_B = 9
IO_FINGERPRINTS = 10
"""In: 1 when the table holds 64-bit fingerprints, not node numbers (then only the rows of the
current and next levels are kept, and the links are flushed to disk between calls)."""
IO_ROW_BASE = 11
"""In: the node whose row is ``states[0]`` (0 when every row is kept)."""
IO_LINK_BASE = 12
"""In: the node whose parent is ``parent[0]`` (0 when every link is kept in memory)."""
IO_SIZE = 16

# statuses
DONE = 0
MISS_ACTION = 1
"""``IO_A`` = the action instance whose tree has no leaf for the state at ``IO_CURSOR``."""
MISS_INVARIANT = 2
"""``IO_A`` = the scratch row of the successor, ``IO_B`` = the invariant with no leaf for it."""
VIOLATION = 3
"""``IO_A`` = the new state violating invariant number ``IO_B``."""
FLAGGED = 4
"""``IO_A`` = the outcome of the state at ``IO_CURSOR`` whose event flags a checked invariant."""
DEAD_END = 5
"""The state at ``IO_CURSOR`` has no successor."""
STATE_LIMIT = 6
GROW_SCRATCH = 7
GROW_STORE = 8
"""``IO_A`` = the states that must fit (stored ones plus this state's successors)."""

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xC2B2AE3D27D4EB4F)
_SEED = np.uint64(0x243F6A8885A308D3)


@njit(cache=True, inline="always")
def _walk(root, row, cw, cs, cm, node_cell, node_a, node_b, child, h_node, h_code, h_child):  # type: ignore[no-untyped-def]
    """The leaf ``row`` leads to from ``root``, or -1 (a miss)."""
    node = root
    hmask = h_node.shape[0] - 1
    while node >= 0:
        c = node_cell[node]
        if c < 0:
            return node
        code = (row[cw[c]] >> cs[c]) & cm[c]
        span = node_b[node]
        if span > 0:
            node = child[node_a[node] + np.int64(code)]
        else:
            k = np.int64(code)
            h = (np.uint64(node) * _GOLD) ^ (np.uint64(k) * _MIX)
            i = np.int64(h >> np.uint64(1)) & hmask
            nxt = -1
            while h_node[i] >= 0:
                if h_node[i] == node and h_code[i] == k:
                    nxt = h_child[i]
                    break
                i = (i + 1) & hmask
            node = nxt
    return -1


@njit(cache=True, inline="always")
def _hash(row, W):  # type: ignore[no-untyped-def]
    h = _SEED
    for k in range(W):
        h ^= row[k]
        h *= _GOLD
        h ^= h >> np.uint64(31)
    h ^= h >> np.uint64(29)
    h *= _MIX
    h ^= h >> np.uint64(32)
    return h


@njit(cache=True, inline="always")
def _probe(states, table, row, W):  # type: ignore[no-untyped-def]
    """The slot of ``row`` in ``table``: the one holding its node, or the empty one where it would go."""
    mask = table.shape[0] - 1
    i = np.int64(_hash(row, W) >> np.uint64(1)) & mask
    while True:
        nd = table[i]
        if nd < 0:
            return i
        same = True
        for k in range(W):
            if states[nd, k] != row[k]:
                same = False
                break
        if same:
            return i
        i = (i + 1) & mask


@njit(cache=True, inline="always")
def _fingerprint(row, W):  # type: ignore[no-untyped-def]
    h = _hash(row, W)
    return h if h != np.uint64(0) else np.uint64(1)  # 0 marks an empty slot


@njit(cache=True, inline="always")
def _probe_fp(fps, fp):  # type: ignore[no-untyped-def]
    """The slot of fingerprint ``fp`` in ``fps`` (any size: the index is a remainder): its own or an empty one."""
    size = np.uint64(fps.shape[0])
    i = np.int64((fp * _MIX) % size)
    n = fps.shape[0]
    while True:
        f = fps[i]
        if f == np.uint64(0) or f == fp:
            return i
        i += 1
        if i == n:
            i = 0


@njit(cache=True)
def rehash(states, n, table):  # type: ignore[no-untyped-def]
    """Fill an empty ``table`` with the first ``n`` states."""
    W = states.shape[1]
    for nd in range(n):
        table[_probe(states, table, states[nd], W)] = nd


@njit(cache=True)
def rehash_fp(old, new):  # type: ignore[no-untyped-def]
    """Move every fingerprint of ``old`` into the empty table ``new``."""
    for k in range(old.shape[0]):
        f = old[k]
        if f != np.uint64(0):
            new[_probe_fp(new, f)] = f


@njit(cache=True)
def expand(io, states, parent, via, table, fps, scratch, scratch_out, scratch_bad,  # type: ignore[no-untyped-def]
           roots, n_ai, n_inv, cw, cs, cm, node_cell, node_a, node_b, child, h_node, h_code, h_child,
           out_ai, out_w0, out_wn, out_flag, w_word, w_clear, w_set, act_of, fired, enabled, last):
    """Expand states ``io[IO_CURSOR]`` .. ``io[IO_END] - 1``; returns a status (see the module constants)."""
    W = states.shape[1]
    n = io[IO_NODES]
    transitions = io[IO_TRANSITIONS]
    expanded = io[IO_EXPANDED]
    max_states = io[IO_MAX_STATES]
    deadlock = io[IO_DEADLOCK]
    skip_dead = io[IO_SKIP_DEAD]
    i = io[IO_CURSOR]
    end = io[IO_END]
    fingerprints = io[IO_FINGERPRINTS] != 0
    row_base = io[IO_ROW_BASE]
    link_base = io[IO_LINK_BASE]
    status = DONE
    while i < end:
        row = states[i - row_base]
        # Phase A: every successor, and the invariants of those not stored yet (no side effects).
        sn = 0
        for a in range(n_ai):
            leaf = _walk(roots[a], row, cw, cs, cm, node_cell, node_a, node_b, child, h_node, h_code, h_child)
            if leaf < 0:
                io[IO_A] = a
                status = MISS_ACTION
                break
            first = node_a[leaf]
            for o in range(first, first + node_b[leaf]):
                if sn >= scratch.shape[0]:
                    status = GROW_SCRATCH
                    break
                for k in range(W):
                    scratch[sn, k] = row[k]
                for w in range(out_w0[o], out_w0[o] + out_wn[o]):
                    wd = w_word[w]
                    scratch[sn, wd] = (scratch[sn, wd] & w_clear[w]) | w_set[w]
                scratch_out[sn] = o
                sn += 1
            if status != DONE:
                break
        if status != DONE:
            break
        for k in range(sn):
            scratch_bad[k] = -1
            if fingerprints:
                if fps[_probe_fp(fps, _fingerprint(scratch[k], W))] != np.uint64(0):
                    continue
            elif table[_probe(states, table, scratch[k], W)] >= 0:
                continue
            for j in range(n_inv):
                leaf = _walk(roots[n_ai + j], scratch[k], cw, cs, cm, node_cell, node_a, node_b, child,
                             h_node, h_code, h_child)
                if leaf < 0:
                    io[IO_A] = k
                    io[IO_B] = j
                    status = MISS_INVARIANT
                    break
                if node_a[leaf] == 0:
                    scratch_bad[k] = j
                    break
            if status != DONE:
                break
        if status != DONE:
            break
        full = n + sn - row_base > states.shape[0] or n + sn - link_base > parent.shape[0]
        if fingerprints:
            full = full or 5 * (n + sn) > 4 * fps.shape[0]
        else:
            full = full or 2 * (n + sn) > table.shape[0]
        if full:
            io[IO_A] = n + sn
            status = GROW_STORE
            break
        # Phase B: count, store, stop at a flagged step, a violation or the state limit.
        transitions += sn
        for k in range(sn):
            o = scratch_out[k]
            act = act_of[out_ai[o]]
            fired[act] += 1
            if last[act] != i:
                last[act] = i
                enabled[act] += 1
            if out_flag[o] != 0:
                io[IO_A] = o
                status = FLAGGED
                break
            fp = np.uint64(0)
            if fingerprints:
                fp = _fingerprint(scratch[k], W)
                slot = _probe_fp(fps, fp)
                if fps[slot] != np.uint64(0):
                    continue
            else:
                slot = _probe(states, table, scratch[k], W)
                if table[slot] >= 0:
                    continue
            if max_states >= 0 and n >= max_states:
                status = STATE_LIMIT
                break
            if fingerprints:
                fps[slot] = fp
            else:
                table[slot] = n
            for w in range(W):
                states[n - row_base, w] = scratch[k, w]
            parent[n - link_base] = i
            via[n - link_base] = o
            n += 1
            if scratch_bad[k] >= 0:
                io[IO_A] = n - 1
                io[IO_B] = scratch_bad[k]
                status = VIOLATION
                break
        if status != DONE:
            break
        if sn == 0 and deadlock != 0 and skip_dead != i:
            status = DEAD_END
            break
        expanded += 1
        i += 1
    io[IO_CURSOR] = i
    io[IO_NODES] = n
    io[IO_TRANSITIONS] = transitions
    io[IO_EXPANDED] = expanded
    return status
