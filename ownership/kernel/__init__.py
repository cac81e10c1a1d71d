"""The compiled search kernel: packed states, a memoised successor function and flat storage.

The kernel runs the explorer's breadth-first search over bit-packed states in
compiled code (Numba).  It never interprets a spec itself: every action and
invariant is first run through the concrete Python semantics
(:mod:`ownership.lang`), and the kernel memoises what a run read and wrote,
so the Python semantics stays the one reference.  It imports nothing from
the command line, the session layer or the renderers.
"""

KERNELS = ("auto", "compiled", "python")
"""The values of ``--kernel``: ``auto`` starts on the Python search and moves to the compiled kernel
when a search grows past a few tens of thousands of states."""

STORAGES = ("exact", "fingerprint")
"""The values of ``--storage``: every state kept, or 64-bit fingerprints (compiled kernel only)."""
