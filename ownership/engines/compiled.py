"""The explorer on the compiled kernel: when it applies, and its run as the explorer's result.

The kernel (:mod:`ownership.kernel`) searches the same states in the same
order as the Python search, so its counts, first violation and path are the
same; what differs is the speed and the storage.  It does not reduce by
symmetry (a run with symmetry reduction stays on the Python path), and a
spec whose values do not pack exactly (:class:`~ownership.kernel.codec.Unrepresentable`)
falls back to the Python path with a note saying why.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from ownership.core.progress import ProgressFn
from ownership.core.result import CheckResult
from ownership.engines.coverage import ActionTally
from ownership.engines.search import Outcome, Stop
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance

if TYPE_CHECKING:
    from ownership.engines.explore import ExploreOptions

from ownership.kernel import KERNELS, STORAGES

AUTO_SWITCH = 20_000
"""With ``--kernel auto``, a search that passes this many states starts again on the compiled kernel
(below it the Python search is done before the kernel would have started: importing and loading
the compiled code takes about a second)."""


def _available() -> bool:
    return importlib.util.find_spec("numba") is not None


def _reduces(inst: Instance, symmetry: bool) -> bool:
    """Whether a search of ``inst`` would reduce by symmetry (the kernel does not)."""
    if not symmetry:
        return False
    from ownership.engines.symmetry import plan_symmetry

    plan = plan_symmetry(inst)
    return bool(plan.permuted or plan.sorted)


def choose_kernel(requested: str, symmetry: bool, inst: Instance, max_states: int | None,
                  storage: str = "exact") -> str:
    """``compiled``, ``python`` or ``auto`` (start on Python, switch past :data:`AUTO_SWITCH`) for this run.

    ``--kernel compiled`` on a run the kernel cannot do is refused (a usage error);
    ``auto`` quietly takes the Python path (the result's notes say why).
    """
    if requested not in KERNELS:
        raise OwnershipError(Code.BAD_OPTION, f"--kernel {requested}: choose one of {', '.join(KERNELS)}")
    if storage not in STORAGES:
        raise OwnershipError(Code.BAD_OPTION, f"--storage {storage}: choose one of {', '.join(STORAGES)}")
    if storage == "fingerprint":
        # Fingerprints are the compiled kernel's: asking for them asks for it.
        if requested == "python":
            raise OwnershipError(Code.BAD_OPTION, "--storage fingerprint needs the compiled kernel, not --kernel python")
        requested = "compiled"
    if requested == "python":
        return "python"
    why = _why_not(inst, symmetry)
    if requested == "compiled":
        if why is not None:
            raise OwnershipError(Code.BAD_OPTION, f"--kernel compiled: {why}")
        return "compiled"
    if why is not None or (max_states is not None and max_states <= AUTO_SWITCH):
        return "python"
    return "auto"


def _why_not(inst: Instance, symmetry: bool) -> str | None:
    if not _available():
        return "numba is not installed (pip install numba)"
    if _reduces(inst, symmetry):
        return "the compiled kernel does not reduce by symmetry: add --no-symmetry, or use the Python search"
    return None


def python_note(inst: Instance, symmetry: bool, reduced: bool) -> str:
    """Why a run took the Python path, for the result's notes."""
    if reduced:
        return "searched on the Python path (the compiled kernel does not reduce by symmetry)"
    why = _why_not(inst, symmetry)
    if why is not None:
        return f"searched on the Python path ({why})"
    return "searched on the Python path (a small search: the compiled kernel starts past 20,000 states)"


def _on_python(inst: Instance, options: ExploreOptions, progress: ProgressFn | None, why: str) -> CheckResult:
    """The search on the Python path because the kernel cannot run it; a usage error if ``--kernel compiled`` asked."""
    if options.kernel == "compiled":
        raise OwnershipError(Code.BAD_OPTION, f"--kernel compiled: {why}; use --kernel python")
    from dataclasses import replace

    from ownership.engines.explore import explore

    result = explore(inst, replace(options, kernel="python"), progress)
    return replace(result, notes=(*result.notes, f"searched on the Python path ({why})"))


def explore_compiled(inst: Instance, options: ExploreOptions, names: tuple[str, ...], notes: list[str],
                     progress: ProgressFn | None, elapsed: float = 0.0) -> CheckResult:
    """The explorer's result for a search on the compiled kernel (Python path if a value does not pack)."""
    from ownership.engines.explore import _result
    from ownership.kernel.codec import Unrepresentable

    try:
        from ownership.kernel.driver import KernelLimits, search
    except (ImportError, OSError, MemoryError) as exc:  # numba/LLVM cannot load, e.g. under a low ulimit -v
        return _on_python(inst, options, progress, f"the compiled kernel cannot load: {type(exc).__name__}")
    limits = KernelLimits(max_depth=options.max_depth, max_states=options.max_states,
                          max_seconds=None if options.max_seconds is None else max(0.0, options.max_seconds - elapsed),
                          progress_every=options.progress_every, fingerprints=options.storage == "fingerprint",
                          max_memory=options.max_memory)
    try:
        run = search(inst, names, options.deadlock, limits, progress)
    except Unrepresentable as exc:
        return _on_python(inst, options, progress, f"a value does not pack: {exc}")
    tally = ActionTally(inst)
    tally.fired = run.fired
    tally.enabled = run.enabled
    outcome = Outcome(Stop(run.reason, run.node, run.depth, run.detail), run.level, run.states, run.transitions,
                      run.expanded, run.seconds + elapsed, run.complete, peak_memory=run.peak_memory,
                      start_memory=run.start_memory, storage=run.storage)
    words = "1 word" if run.words == 1 else f"{run.words} words"
    notes = [*notes, (f"compiled kernel: states packed in {words} ({run.bits} bits), {run.bytes_per_state:.0f} bytes "
                      f"per stored state; {run.misses:,} Python runs memoised ({run.memo_bytes / 1e6:.1f} MB)"),
             *run.notes]
    if elapsed:
        notes.append(f"the Python search passed {AUTO_SWITCH:,} states in {elapsed:.1f}s and the compiled kernel "
                     "searched again from the start")

    def path_to(node: int) -> list[tuple[int, tuple[object, ...]]]:
        return run.steps or []

    return _result(inst, options, path_to, tally, False, outcome, names, notes, steps=run.steps)
