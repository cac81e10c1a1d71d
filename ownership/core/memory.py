"""How much memory the process uses, read cheaply and often; the default memory budget.

A long breadth-first search stores every state it finds, so memory, not
time, is what usually ends it.  The search reads the process's resident
memory with a :class:`Meter` every few thousand expansions (an already open
``/proc/self/statm`` re-read on Linux: a few microseconds; the peak from
``getrusage`` elsewhere, which only ever overstates the current use) and
stops at its budget with the coverage reached, instead of dying in a
``MemoryError``.

:func:`default_budget` is the budget a check has when the user names none: a
safe share of what the process may really use, the smallest of physical
memory, the control group's limit and the address-space limit (``ulimit
-v``).  Nothing here keeps state between calls.
"""

from __future__ import annotations

import os
import sys

SHARE = 0.8
"""The default budget's share of the memory the process may use: room for the result, a trace and the interpreter."""

_NO_LIMIT = 1 << 60
"""Limits at or above this (cgroup v1's "unlimited" is 2**63 rounded to pages) mean none."""


def peak_resident() -> int:
    """The process's peak resident memory so far, in bytes (0 where the platform does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux counts kilobytes, macOS bytes.
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


class Meter:
    """Reads the process's resident memory, in bytes; cheap enough to call every few thousand states.

    On Linux it keeps ``/proc/self/statm`` open and re-reads it; elsewhere it
    returns the peak (:func:`peak_resident`), which is never below the
    current use, so a budget checked against it stops early rather than
    late.  Close it (or use it as a context manager) when the search ends.
    """

    __slots__ = ("_fd", "_page")

    def __init__(self) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        try:
            self._fd: int | None = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            self._fd = None

    def __call__(self) -> int:
        """The resident memory now (or the peak so far where the current use cannot be read)."""
        if self._fd is not None:
            try:
                fields = os.pread(self._fd, 128, 0).split()
                return int(fields[1]) * self._page
            except (OSError, IndexError, ValueError):
                pass
        return peak_resident()

    def close(self) -> None:
        """Close the open file, if any (reading again falls back to the peak)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _physical() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _cgroup() -> int | None:
    """The control group's memory limit (cgroup v2, else v1), ``None`` when there is none."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < _NO_LIMIT:
            return int(text)
        return None
    return None


def address_space_limit() -> int | None:
    """The address-space limit (``ulimit -v``, ``RLIMIT_AS``) in bytes, ``None`` when there is none.

    It counts every mapping, not resident memory, so a search usually meets
    it (as a ``MemoryError``) before its share of it as a budget.
    """
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY or soft >= _NO_LIMIT else int(soft)


def available() -> tuple[int, str] | None:
    """The most memory the process may use and what sets it (``physical memory``, ...); ``None``: unknown."""
    found = [(v, name) for v, name in ((_physical(), "physical memory"), (_cgroup(), "the cgroup limit"),
                                       (address_space_limit(), "ulimit -v")) if v is not None]
    return min(found) if found else None


def default_budget() -> int | None:
    """:data:`SHARE` of :func:`available` memory, in bytes; ``None`` when the machine does not say."""
    limit = available()
    return int(limit[0] * SHARE) if limit is not None else None


def format_size(n: float) -> str:
    """``n`` bytes for people: ``512 B``, ``3.4 KiB``, ``126 MiB``, ``2.5 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            if unit == "B":
                return f"{n:.0f} B"
            return f"{n:.1f} {unit}" if abs(n) < 10 else f"{n:.0f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
