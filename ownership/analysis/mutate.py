"""Mutation testing of a spec: do its invariants notice when its code is wrong?

A spec is only as good as the bugs it can catch.  Mutation testing makes small
faults in the spec file's own code (delete one ``require``, flip one
comparison, swap ``and``/``or``, negate an ``if``, drop one vocabulary call,
move an integer constant in a guard by one) and checks each *mutant* with an
engine.  A mutant whose expected verdict no longer holds is **killed**; one
that still passes **survived**: the spec would not notice that fault in the
real code either.  A survivor whose reachable state graph (without symmetry
reduction) is identical to the original's, same states and same labelled
edges, is **equivalent**: no invariant could ever tell them apart.

The mutants are made in :mod:`~ownership.analysis.mutants`, the state graphs
compared in :mod:`~ownership.analysis.mutant_graph` and the outcome written
in :mod:`~ownership.analysis.mutation_report`; this module runs each mutant
under a time limit and classifies it.

Only code the spec file itself defines is mutated (its actions, helpers,
invariant bodies and terminal predicate; for a derived spec, what the derived
file replaces or adds), so every mutant is a fault in what that file claims.

Mutant ids are stable across runs and edits elsewhere in the file:
``FUNCTION+OFFSET KIND: OLD => NEW``, with OFFSET the line within the function
and OLD/NEW the changed source lines with whitespace collapsed.  A spec accepts
a survivor with ``spec.accept_mutant(ID, reason=...)`` (the id with or without
its ``+OFFSET``).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ownership.analysis.mutant_graph import ReachableGraph, reachable_graph
from ownership.analysis.mutants import Mutant, generate_mutants
from ownership.analysis.mutation_report import MutantResult, MutationReport
from ownership.errors import Code, OwnershipError


@dataclass(frozen=True)
class MutateOptions:
    """Options of a mutation run."""

    engine: str = "explore"
    max_seconds_per_mutant: float = 30.0
    params: tuple[tuple[str, int], ...] = ()
    max_graph_states: int = 200_000
    """Largest reachable graph (without symmetry) compared for equivalence."""


ProgressFn = Callable[[int, int, MutantResult], None]


def _engine_options(engine: str, seconds: float) -> Any:
    """The options each mutant is checked with: the engine's own, from the settings of a limited check."""
    from ownership.engines import registry
    from ownership.session.settings import Settings

    if engine not in MUTATE_ENGINES:
        raise OwnershipError(Code.BAD_OPTION, f"unknown engine {engine!r} for mutate "
                             f"(available: {', '.join(MUTATE_ENGINES)})")
    # explore stops at the time limit, bmc at a per-call solver limit; random runs repeat exactly.
    per_engine: dict[str, dict[str, Any]] = {"explore": {}, "bmc": {"solver_timeout": seconds},
                                             "hypothesis": {"derandomize": True}}
    options = per_engine[engine]
    settings = Settings(engine=engine, max_seconds=seconds if engine == "explore" else None, options=options)
    return registry.get(engine).options(settings)


MUTATE_ENGINES = ("explore", "bmc", "hypothesis")
"""The engines ``ownership mutate`` checks mutants with."""


def _load(path: Path, folder: Path) -> Any:
    """Load ``path`` as a spec with ``folder`` (the original's) importable, for its base spec."""
    from ownership.lang.loader import load_spec

    added = str(folder) not in sys.path
    if added:
        sys.path.insert(0, str(folder))
    try:
        return load_spec(path)
    finally:
        if added:
            sys.path.remove(str(folder))


def _expected(spec: Any, result: Any) -> str | None:
    """The invariant the spec is expected to violate (``None``: safe)."""
    if spec.expect is not None:
        return spec.expect.violates  # type: ignore[no-any-return]
    return result.violated if result.verdict.name == "VIOLATED" else None


def _holds(expected: str | None, result: Any) -> bool:
    if expected is None:
        return result.verdict.name != "VIOLATED"
    return result.verdict.name == "VIOLATED" and result.violated == expected


def _inconclusive(result: Any) -> bool:
    """A limit stopped the run (a mutant where nothing can fire is UNKNOWN too, but decided: see ``_vacuous``)."""
    return result.verdict.name == "UNKNOWN" and not _vacuous(result)


def _vacuous(result: Any) -> bool:
    """No action fires from the initial state: the engine says UNKNOWN (nothing was checked), the mutant is caught."""
    return result.stop_reason.name == "NOTHING_ENABLED"


def mutate(path: str | Path, options: MutateOptions = MutateOptions(), progress: ProgressFn | None = None) -> MutationReport:
    """Generate and check every mutant of the spec file ``path`` (see the module docstring)."""
    from ownership.engines.registry import run_engine
    from ownership.lang.instance import Instance

    p = Path(path)
    spec = _load(p, p.resolve().parent)
    params = dict(options.params)
    limit = options.max_seconds_per_mutant
    engine_opts = _engine_options(options.engine, limit)
    base_inst = Instance(spec, params)
    baseline = run_engine(options.engine, base_inst, engine_opts)
    if _inconclusive(baseline):
        raise OwnershipError(
            Code.MUTATE_BASELINE_LIMIT,
            f"spec {spec.name} is not decided within {limit:g}s ({baseline.stop_reason.value}); "
            "raise --max-seconds-per-mutant or choose smaller parameters",
            str(p),
        )
    expected = _expected(spec, baseline)
    if expected is not None and _holds(expected, baseline):
        # A mutant of a bug demonstration "survives" when it still shows the bug: that measures
        # nothing about the invariants, and a score or an exit status 1 would only mislead.
        declared = "is expected to violate" if spec.expect is not None else "violates"
        raise OwnershipError(
            Code.MUTATE_EXPECTS_VIOLATION,
            f"spec {spec.name} {declared} {expected}: it demonstrates a bug, and mutation testing measures the "
            "invariants of a safe spec (does each small fault in its code break one?); run it on the fixed spec "
            "(a derived spec with expect=safe()), or see what the violation depends on with "
            f"`ownership check {p} --explain`",
            str(p), spec.line,
        )
    if not _holds(expected, baseline):
        want = "safe" if expected is None else f"violates {expected}"
        got = baseline.verdict.name + (f" ({baseline.violated})" if baseline.violated else "")
        raise OwnershipError(
            Code.MUTATE_BASELINE, f"spec {spec.name} is expected {want} but the unmutated spec gives {got}", str(p), spec.line
        )
    mutants = generate_mutants(p)
    if not mutants:
        raise OwnershipError(
            Code.MUTATE_NOTHING, f"spec {spec.name}: the file defines no actions, helpers or invariants to mutate", str(p)
        )
    accepted = dict(spec.accepted_mutants)
    known = {m.id for m in mutants} | {m.short_id for m in mutants}
    for ident in accepted:
        if ident not in known:
            raise OwnershipError(
                Code.MUTATE_STALE_ACCEPT,
                f"spec {spec.name}: accept_mutant({ident!r}) matches no mutant of this file "
                "(ids are listed by `ownership mutate`)",
                str(p),
            )
    original_text = p.read_text(encoding="utf-8")
    # Built once, up front and outside every mutant's time limit: an interrupted build would
    # leave the instance's caches half updated for the comparisons that follow.
    original_graph: list[ReachableGraph | str] = [
        reachable_graph(Instance(spec, params), time.perf_counter() + max(limit, 60.0), options.max_graph_states)
    ]
    results: list[MutantResult] = []
    tmp = Path(tempfile.mkdtemp(prefix="ownership-mutate-"))
    try:
        for k, m in enumerate(mutants, 1):
            r = _run_mutant(m, k, p, tmp, spec, params, options, engine_opts, expected, base_inst, original_graph)
            reason = accepted.get(m.id) or accepted.get(m.short_id)
            if reason is not None and r.outcome in ("survived", "timeout"):
                r = MutantResult(m, "accepted", r.detail, r.seconds, reason)
            elif reason is not None:
                # The spec now tells this mutant apart: the acceptance is out of date.
                r = MutantResult(m, r.outcome, r.detail + "; accepted in the spec but no longer survives: "
                                 "remove the acceptance", r.seconds)
            results.append(r)
            if progress is not None:
                progress(k, len(mutants), r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return MutationReport(spec.name, str(p), options.engine, dict(base_inst.param_values), tuple(results), original_text)


class _OutOfTime(BaseException):  # noqa: N818 - a control-flow signal; BaseException so spec code cannot catch it
    """The per-mutant wall-clock limit passed (a mutant may loop forever inside an action)."""


@contextlib.contextmanager
def _hard_limit(seconds: float) -> Iterator[None]:
    """Interrupt the code inside after ``seconds`` (main thread on POSIX; elsewhere a no-op)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:  # pragma: no cover - Windows or a worker thread: the engines' own limits only
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _run_mutant(
    m: Mutant, k: int, p: Path, tmp: Path, spec: Any, params: dict[str, int], options: MutateOptions,
    engine_opts: Any, expected: str | None, base_inst: Any, original_graph: list[ReachableGraph | str],
) -> MutantResult:
    start = time.perf_counter()
    where = tmp / f"m{k}"
    where.mkdir()
    file = where / p.name  # same file name: the spec's module and base imports look the same
    file.write_text(m.source, encoding="utf-8")
    modules = set(sys.modules)
    try:
        # A little over the engine's own limit, which reports what it covered when it can.
        with _hard_limit(options.max_seconds_per_mutant * 1.5 + 1.0):
            return _classify(m, file, p, spec, params, options, engine_opts, expected, base_inst, original_graph, start)
    except _OutOfTime:
        return MutantResult(m, "timeout", f"over {options.max_seconds_per_mutant:g}s (a loop that never ends?)",
                            time.perf_counter() - start)
    finally:
        for name in set(sys.modules) - modules:
            if name.startswith("ownership_spec_"):
                del sys.modules[name]


def _classify(
    m: Mutant, file: Path, p: Path, spec: Any, params: dict[str, int], options: MutateOptions, engine_opts: Any,
    expected: str | None, base_inst: Any, original_graph: list[ReachableGraph | str], start: float,
) -> MutantResult:
    from ownership.engines.registry import run_engine
    from ownership.lang.instance import Instance

    def done(outcome: str, detail: str) -> MutantResult:
        return MutantResult(m, outcome, detail, time.perf_counter() - start)

    try:
        mspec = _load(file, p.resolve().parent)
        inst = Instance(mspec, params)
        result = run_engine(options.engine, inst, engine_opts)
    except OwnershipError as exc:
        return done("invalid", exc.one_line().replace(str(file), p.name))
    except Exception as exc:  # noqa: BLE001 - mutated user code may raise anything
        return done("invalid", f"{type(exc).__name__}: {exc}")
    if _inconclusive(result):
        return done("timeout", f"{result.engine}: {result.stop_reason.value}")
    if _vacuous(result):
        return done("killed", f"{result.engine} {result.stop_reason.value}: no step of the original can run")
    if not _holds(expected, result):
        if result.verdict.name == "VIOLATED":
            steps = len(result.trace) if result.trace is not None else 0
            return done("killed", f"violates {result.violated} in {steps} step{'' if steps == 1 else 's'}")
        return done("killed", f"{result.verdict.name}, expected a violation of {expected}")
    deadline = start + options.max_seconds_per_mutant
    ours = original_graph[0]
    if isinstance(ours, str):
        return done("survived", f"{result.verdict.name}; equivalence not decided: {ours}")
    try:
        theirs = reachable_graph(inst, deadline, options.max_graph_states)
    except Exception as exc:  # noqa: BLE001 - a mutant failing only outside its engine's reach
        return done("invalid", f"{type(exc).__name__}: {exc}")
    if isinstance(theirs, str):
        return done("survived", f"{result.verdict.name}; equivalence not decided: {theirs}")
    if theirs == ours:
        return done("equivalent", f"same reachable graph: {len(ours.states):,} states, {len(ours.edges):,} edges")
    if theirs.states == ours.states and theirs.moves() == ours.moves():
        # Only steps that change nothing differ: every invariant and every trace, with its
        # do-nothing steps removed, is the same (safety properties are blind to stuttering).
        return done("equivalent", f"same {len(ours.states):,} states and state-changing edges; "
                    "only do-nothing steps differ")
    # What `ownership check --deadlock` and the per-action coverage report would show.
    if theirs.deadlocks and not ours.deadlocks:
        return done("killed", f"deadlock: {theirs.deadlocks:,} reachable states with work pending and nothing enabled")
    if theirs.stuck and not ours.stuck:
        return done("killed", f"stuck: from {theirs.stuck:,} reachable states no terminal state can be reached")
    dead = sorted(ours.fired - theirs.fired)
    if dead:
        return done("killed", f"vacuous: action {', '.join(dead)} never fires (it does in the original)")
    return done("survived", f"{result.verdict.name}; reachable graph differs "
                f"({len(theirs.states):,} vs {len(ours.states):,} states, "
                f"{len(theirs.edges):,} vs {len(ours.edges):,} edges)")
