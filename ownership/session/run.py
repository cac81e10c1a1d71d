"""One check of one spec, in stages: load, instantiate, run, judge, write outputs.

:func:`check` returns an :class:`Outcome`, the whole answer: the front ends
(the command line, the pytest plugin, ``ownership.testing``) only print it
or assert on it.  The wall-clock limit (``--max-seconds``) and Ctrl-C/SIGTERM
hold for every stage through :func:`ownership.core.limits.limited`; a stop
that arrives outside an engine's own handler still ends in an UNKNOWN
result that says where the run stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ownership import inputs
from ownership.core.expectation import Judgement, judge
from ownership.core.limits import limited, stop_reason_of
from ownership.core.progress import ProgressFn
from ownership.core.result import CheckResult, Stats, StopReason, Verdict
from ownership.core.trace import Trace, TraceKind
from ownership.engines import registry
from ownership.errors import Code, ExitCode, OwnershipError
from ownership.lang.model import Spec
from ownership.session.settings import Settings


@dataclass(frozen=True)
class Limits:
    """How a front end names the limits that guard a check, for the messages that tell the user to raise one.

    The guards themselves are the same for every front end (the instance-size
    check, OWN017, and the wall-clock limit, both in :func:`check`); only the
    name of the knob that raises each differs.
    """

    max_domain: str = "--max-domain"
    max_seconds: str = "--max-seconds"


COMMAND_LINE = Limits()
"""The command line's flags."""
PYTHON_API = Limits(max_domain="max_domain", max_seconds="max_seconds")
"""``ownership.testing``'s keyword arguments."""


def check_size(spec: Spec, params: Mapping[str, int], max_domain: int, limits: Limits = COMMAND_LINE) -> None:
    """OWN017 for an instance too large to build (a domain of more than ``max_domain`` elements), naming ``limits``' knob."""
    inputs.check_count(limits.max_domain, max_domain, 1)
    inputs.check_instance_size(spec, params, max_domain, limits.max_domain)


@dataclass(frozen=True)
class Outcome:
    """Everything one check of one spec produced."""

    spec: Spec
    path: Path
    settings: Settings
    params: dict[str, int]
    """The instance's parameter values (the spec's defaults with ``--param`` applied)."""
    results: tuple[CheckResult, ...]
    """The reference engine's result first, then the others of ``all``."""
    relations: tuple[tuple[CheckResult, str, str], ...] = ()
    """How each other result relates to the first: (result, relation, why); see :func:`ownership.engines.relate`."""
    judgement: Judgement | None = None
    """The first result judged against the spec's ``expect=`` (``None``: the spec declares none)."""
    explanation: tuple[str, ...] = ()
    """The ``--explain`` lines under a counterexample."""
    trace_dir: Path | None = None
    """The folder the counterexample was written to (``None``: none written)."""
    files: tuple[Path, ...] = ()
    write_error: OwnershipError | None = None
    """A renderer that failed: the text files were still written."""
    reproduce: str | None = None
    """The command that reruns this check (``None``: it stopped before the instance existed)."""

    @property
    def result(self) -> CheckResult:
        """The reference result: the verdict, trace and exit status reported."""
        return self.results[0]

    @property
    def exit_code(self) -> ExitCode:
        """The status of the whole check (every engine of ``all``); see :meth:`exit_code_allowing`."""
        return self.exit_code_allowing(False)

    def exit_code_allowing(self, allow_vacuous: bool) -> ExitCode:
        """The status of every engine's result together, not the reference's alone.

        A violation found by any engine is 1, whatever the reference says (a
        run the reference could not compare, such as an inconclusive one,
        must not hide it); otherwise an inconclusive engine makes a passing
        reference 3.  Otherwise the reference's own status stands, vacuity
        included (``allow_vacuous``).  Engines that contradict each other
        never get here: :func:`check` raises OWN040.
        """
        own = self.result.exit_code_allowing(allow_vacuous)
        if any(r.verdict is Verdict.VIOLATED for r in self.results):
            return ExitCode.VIOLATION
        if own is ExitCode.OK and any(r.verdict is Verdict.UNKNOWN for r in self.results[1:]):
            return ExitCode.INCONCLUSIVE
        return own

    def overruled(self, allow_vacuous: bool = False) -> tuple[str, ...]:
        """Why the exit status is not the reference's: the other engines' results that decide it."""
        own = self.result.exit_code_allowing(allow_vacuous)
        status = self.exit_code_allowing(allow_vacuous)
        if status is own:
            return ()
        if status is ExitCode.VIOLATION:
            why = [f"{r.engine} finds {r.violated} violated" for r in self.results[1:] if r.verdict is Verdict.VIOLATED]
        else:
            why = [f"{r.engine} is inconclusive ({r.stop_reason.value})" for r in self.results[1:]
                   if r.verdict is Verdict.UNKNOWN]
        return (f"exit {int(status)}, not {self.result.engine}'s {int(own)}: {'; '.join(why)}",)

    @property
    def shown(self) -> CheckResult:
        """The result whose counterexample is written: the reference's, else the first other engine's violation."""
        return shown_result(self.results)

    def reproduce_at(self, spec_path: str) -> str:
        """The command that reruns this check, naming the spec as ``spec_path`` (a test's relative path)."""
        return reproduce_line(spec_path, self.spec, self.params, self.settings, self.results)

    @property
    def stopped_in_setup(self) -> bool:
        """The limit or a signal stopped the check while the instance was being built."""
        return self.reproduce is None


def shown_result(results: Sequence[CheckResult]) -> CheckResult:
    """The reference's result when it has a trace, else the first other violation with one, else the reference's.

    A run that exits 1 because another engine of ``all`` found a violation the
    reference could not compare must still leave that counterexample.
    """
    if results[0].trace is not None:
        return results[0]
    return next((r for r in results[1:] if r.verdict is Verdict.VIOLATED and r.trace is not None), results[0])


def load(path: Path) -> Spec:
    """The spec a file defines (OWN0xx errors for a file that does not load)."""
    from ownership.lang.loader import load_spec

    return load_spec(path)


def check(
    path: Path | None,
    settings: Settings,
    *,
    spec: Spec | None = None,
    outputs: bool = True,
    progress: ProgressFn | None = None,
    warn: Callable[[str], None] | None = None,
    limits: Limits = COMMAND_LINE,
) -> Outcome:
    """Check one spec (``spec``, else the one ``path`` defines) as ``settings`` say.

    ``outputs`` writes a counterexample (to ``settings.out`` or the default
    folder, which is checked before any engine runs) and the ``--explain``
    diagnosis; without it only ``settings.out``, when given, is written.
    ``warn`` gets the warnings about a large instance.  Engines that
    disagree raise OWN040.  ``limits`` names the front end's knobs in the
    messages of the guards every front end shares: the instance-size check
    (OWN017) and the wall-clock limit ``settings.max_seconds``.
    """
    from ownership.lang.instance import Instance

    started = time.monotonic()
    the_spec = spec if spec is not None else load(_given(path))
    spec_path = path if path is not None else Path(the_spec.file or the_spec.name)
    check_size(the_spec, settings.params, settings.max_domain, limits)
    inputs.check_seconds(limits.max_seconds, settings.max_seconds)
    plan = registry.resolve(settings)  # every option refused before any engine runs
    try:
        # --max-seconds is wall-clock for the whole check of this spec: building the
        # instance (a huge parameter) counts, and so does every engine after it.
        with limited(left(settings.max_seconds, started)):
            inst = Instance(the_spec, settings.params)
    except KeyboardInterrupt as exc:
        stopped = stopped_result(the_spec, settings.engine, settings, exc, started,
                                 "while building the instance (enumerating its actions and initial state): "
                                 "no state was checked")
        return Outcome(the_spec, spec_path, settings, dict(settings.params), (stopped,))
    params = dict(inst.param_values)
    # Where a counterexample would go, checked before the engine runs (a long check must not end in an unwritable folder).
    out_dir = settings.out
    if out_dir is None and outputs:
        own = registry.ENGINES.get(settings.engine)
        flags = settings.search_flags(params, the_spec.default_params(), own.claim_flags if own is not None else None)
        out_dir = default_out(the_spec.name, settings.engine, flags)
        try:
            inputs.check_output_dir(out_dir, "--out (default)")
        except OwnershipError as exc:
            raise OwnershipError(exc.code, f"{exc.message}; pass --out DIR to write elsewhere", exc.file) from None
    if warn is not None:
        for line in size_warnings(inst):
            warn(line)
    results = _run(plan, inst, settings, started, progress)
    if len(results) > 1:
        from ownership.engines import compare

        disagreement = compare(results)
        if disagreement:
            raise OwnershipError(Code.ENGINE_DISAGREEMENT, f"engines disagree on {the_spec.name}: {disagreement}",
                                 str(spec_path))
    return _finish(the_spec, spec_path, settings, params, tuple(results), out_dir, outputs)


def _given(path: Path | None) -> Path:
    if path is None:
        raise OwnershipError(Code.BAD_OPTION, "no spec: pass a spec file or a Spec")
    return path


def _run(plan: Sequence[tuple[registry.Engine, Any]], inst: Any, settings: Settings, started: float,
         progress: ProgressFn | None) -> list[CheckResult]:
    """Run each engine in turn under the one wall-clock limit; a Ctrl-C or SIGTERM ends the run."""
    results: list[CheckResult] = []
    for k, (engine, options) in enumerate(plan):
        try:
            with limited(left(settings.max_seconds, started)):
                results.append(registry.run_engine(engine.name, inst, options, progress))
        except KeyboardInterrupt as exc:
            # A stop that arrived outside the engine's own handler (just before it started, or
            # as it returned): keep a result that arrived, else say that nothing was reported.
            if len(results) < k + 1:
                results.append(stopped_result(inst.spec, engine.name, settings, exc, started,
                                              f"while {engine.name} was starting or returning", inst.param_values))
        if results[-1].stop_reason is StopReason.INTERRUPTED:
            break  # Ctrl-C or SIGTERM: the user wants the answer so far, not the next engine
    return results


def _finish(spec: Spec, path: Path, settings: Settings, params: dict[str, int], results: tuple[CheckResult, ...],
            out_dir: Path | None, outputs: bool) -> Outcome:
    """Judge, relate, explain and write: the stages after the engines."""
    from ownership.engines import relate

    result = results[0]
    relations = tuple((other, *relate(result, other)) for other in results[1:])
    reproduce = reproduce_line(str(path), spec, params, settings, results)
    shown = shown_result(results)
    explanation = explain(spec, shown, settings) if outputs and settings.explain and shown.trace is not None else ()
    trace_dir: Path | None = None
    files: tuple[Path, ...] = ()
    error = None
    if shown.trace is not None and out_dir is not None:
        # A counterexample to induction is not a trace from the initial state: it goes beside, in cti/.
        trace_dir = out_dir / "cti" if shown.trace.kind is TraceKind.CTI else out_dir
        files, error = write_trace(shown.trace, trace_dir, settings.formats if settings.render else ())
    return Outcome(spec, path, settings, params, results, relations,
                   judge(spec.expect, result) if spec.expect is not None else None,
                   explanation, trace_dir, files, error, reproduce)


def reproduce_line(spec_path: str, spec: Spec, params: Mapping[str, int], settings: Settings,
                   results: Sequence[CheckResult]) -> str:
    """The one command that reruns a check: its parameters, its flags, and the seed a random engine drew."""
    from ownership.render.text import reproduce_command

    drawn = next((r.options.get("seed") for r in results if r.sampled), None)
    return reproduce_command(spec_path, params, spec.default_params(), settings.reproduce_flags(drawn))


def write_trace(trace: Trace, folder: Path, formats: Sequence[str]) -> tuple[tuple[Path, ...], OwnershipError | None]:
    """A counterexample's files; a failing renderer still leaves the text files, and its error is returned."""
    from ownership.render.files import write_counterexample

    try:
        with inputs.writing(folder, "--out"):
            return tuple(write_counterexample(trace, folder, formats=formats)), None
    except OwnershipError as exc:
        if exc.code is Code.OUTPUT_PATH:
            raise
        kept = (folder / "trace.json", folder / "trace.itf.json", folder / "trace.dot")
        return tuple(p for p in kept if p.exists()), exc


def explain(spec: Spec, result: CheckResult, settings: Settings) -> tuple[str, ...]:
    """``--explain``: the diagnosis of the violated invariant, under the counterexample."""
    from ownership.analysis.explain.diagnosis import DiagnoseOptions
    from ownership.analysis.explain.necessary import diagnose_result
    from ownership.render.text import explain_report

    if result.violated not in spec.invariants:
        return (f"\n  Explanation: not available for {result.violated} (only invariant violations are diagnosed)",)
    options = DiagnoseOptions(symmetry=settings.symmetry, **({"max_states": settings.max_states} if settings.max_states else {}))
    lines = tuple(explain_report(diagnose_result(spec, result, options)))
    if settings.option("ray") is not None or (settings.option("workers") is not None and settings.option("workers") > 1):
        # The diagnosis needs every node of the bounded graph, with its edges: it is not sharded.
        lines += ("  (the diagnosis searched its bounded state graph in one process: --workers and --ray shard "
                  "the explorer's search only)",)
    return lines


def left(max_seconds: float | None, started: float) -> float | None:
    """Seconds left of the wall-clock limit (at least a millisecond: an engine still says what it covered)."""
    if max_seconds is None:
        return None
    return max(max_seconds - (time.monotonic() - started), 0.001)


def stopped_result(spec: Spec, engine: str, settings: Settings, exc: BaseException, started: float, where: str,
                   params: Any = None) -> CheckResult:
    """An UNKNOWN result for a check stopped outside an engine (which reports its own coverage)."""
    reason = stop_reason_of(exc)
    known = registry.ENGINES.get(engine)
    return CheckResult(
        spec=spec.name, engine=engine, verdict=Verdict.UNKNOWN, stop_reason=reason,
        stats=Stats(0, 0, 0, time.monotonic() - started), params=dict(settings.params if params is None else params),
        invariants=tuple(settings.invariants or spec.invariants),
        notes=(f"inconclusive: the run {reason.value} {where}",),
        coverage_kind=known.decides if known is not None else None,
    )


def default_out(spec_name: str, engine: str, flags: Sequence[str] | None = None) -> Path:
    """Where a counterexample goes without ``--out``.

    The committed traces under ``counterexamples/<spec>/`` are those of the
    plain ``ownership check SPEC`` (explorer, default parameters, no option
    that changes the search).  Every other run writes beside them, in a
    folder of its own: ``<engine>/`` for another engine with its defaults,
    ``<engine>/<flags>/`` for any run with search options (``-p``, ``-i``,
    ``--max-depth``, ``--free``, ...), so trying something never overwrites a
    committed trace unless ``--out`` names it.
    """
    base = Path("counterexamples") / spec_name
    if not flags:
        return base if engine == registry.DEFAULT else base / engine
    return base / engine / inputs.run_slug(flags)


SIZE_WARNING_CELLS = 512
"""A state with more cells than this is wide: every state costs time and memory to hash, compare and store."""
SIZE_WARNING_DOMAIN = 64
"""A domain with more values than this multiplies the branching of every action that ranges over it."""
SIZE_WARNING_INSTANCES = 1024
"""More action instances (actions x argument values) than this: every state tries each of them."""


def size_warnings(inst: Any) -> list[str]:
    """Warnings printed before a large instance is searched, with the sizes that make it large."""
    sizes = dict(getattr(inst, "sizes", {}))
    biggest = ", ".join(f"{name}={n:,}" for name, n in sorted(sizes.items(), key=lambda kv: -kv[1])[:3])
    hint = "expect a slow search or one that runs out of memory: try smaller parameters, or bound it with --max-seconds"
    out = []
    cells = len(inst.init_state)
    if cells > SIZE_WARNING_CELLS:
        out.append(f"warning: wide state: {cells:,} cells per state (largest domains {biggest}); {hint}")
    large = [f"{name} has {n:,} values" for name, n in sizes.items() if n > SIZE_WARNING_DOMAIN]
    if large:
        out.append(f"warning: large domain: {', '.join(large)}; {hint}")
    n = len(inst.action_instances)
    if n > SIZE_WARNING_INSTANCES:
        out.append(f"warning: {n:,} action instances (actions x argument values) are tried in every state; {hint}")
    return out
