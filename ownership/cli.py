"""The ``ownership`` command line.

Exit codes (every command): 0 no violation within the stated bounds, 1 a
violation (or, for ``replay``, a trace that does not replay), 2 usage or spec
error, 3 inconclusive, 4 internal error.  Errors are one line:
``error[OWN0xx]: file:line: message``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - older typer depends on click itself
    from click import exceptions as click_exc  # type: ignore[no-redef]

from ownership.errors import Code, ExitCode, OwnershipError


class _Group(TyperGroup):
    """Turns every usage error and user error into one line and a distinct exit code."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click_exc.NoSuchOption as exc:
            possible = getattr(exc, "possibilities", None)
            hint = f" (did you mean {', '.join(possible)}?)" if possible else ""
            _die(OwnershipError(Code.BAD_OPTION, f"unknown option {exc.option_name}{hint}; see --help"))
        except click_exc.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `ownership`: show the help
                sys.stderr.write(exc.format_message() + "\n")
                sys.exit(int(ExitCode.USAGE))
            _die(OwnershipError(Code.BAD_OPTION, f"{exc.format_message()}; see --help"))
        except typer.Abort:
            sys.stderr.write("interrupted\n")
            sys.exit(130)
        except OwnershipError as exc:
            _die(exc)
        except Exception as exc:  # noqa: BLE001 - a bug in ownership itself: say so, keep the details
            import traceback

            traceback.print_exc()
            sys.stderr.write(f"internal error: {type(exc).__name__}: {exc} (this is a bug in ownership)\n")
            sys.exit(int(ExitCode.INTERNAL))
        sys.exit(rv if isinstance(rv, int) else 0)


def _die(exc: OwnershipError) -> None:
    sys.stderr.write(exc.one_line() + "\n")
    sys.exit(int(exc.exit_code))


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    help="Model checker for KV-cache page ownership protocols. Exit codes: 0 safe within the stated bounds, "
    "1 violation, 2 usage/spec error, 3 inconclusive.",
    pretty_exceptions_enable=False,
)


def main() -> None:
    """Console-script entry point."""
    app()


def _parse_params(items: list[str] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise OwnershipError(Code.BAD_PARAM, f"--param expects NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = int(value.replace("_", ""))
        except ValueError:
            raise OwnershipError(Code.BAD_PARAM, f"--param {name}: {value!r} is not an integer") from None
    return out


class _Progress:
    """Progress lines on stderr for runs longer than about a second."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.printed = False

    def __call__(self, p: Any) -> None:
        if not self.enabled or p.seconds < 1.0:
            return
        if hasattr(p, "examples"):  # the random engine
            line = f"  ... {p.examples:,} examples, {p.steps:,} steps, {p.states:,} distinct states, {p.seconds:.0f}s"
        elif not p.states:  # solver engines report depth and time only
            line = f"  ... unrolled {p.depth} steps, {p.seconds:.0f}s"
        else:
            rate = p.states / p.seconds if p.seconds else 0.0
            line = (
                f"  ... {p.states:,} states, {p.transitions:,} transitions, depth {p.depth}, "
                f"frontier {p.frontier:,}, {rate:,.0f} states/s, {p.seconds:.0f}s"
            )
        if self.tty:
            sys.stderr.write("\r" + line + "\033[K")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        self.printed = True

    def done(self) -> None:
        if self.enabled and self.tty and self.printed:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


@dataclass(frozen=True)
class _CheckSettings:
    engine: str
    params: dict[str, int]
    max_depth: int | None
    max_states: int | None
    max_seconds: float | None
    symmetry: bool
    deadlock: bool
    invariants: tuple[str, ...] | None
    out: Path | None
    formats: tuple[str, ...]
    render: bool
    progress: bool
    solver_timeout: float | None = None
    free: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    minimize: str | None = None
    maximize: str | None = None
    explain: bool = False
    seed: int | None = None
    max_examples: int | None = None
    steps: int | None = None
    derandomize: bool = False
    walks: int | None = None

    def reproduce_flags(self, result: Any = None) -> list[str]:
        flags: list[str] = []
        if self.engine != "explore":
            flags += ["--engine", self.engine]
        if not self.symmetry:
            flags.append("--no-symmetry")
        if self.deadlock:
            flags.append("--deadlock")
        for name, value in (("--max-depth", self.max_depth), ("--max-states", self.max_states), ("--max-seconds", self.max_seconds)):
            if value is not None:
                flags += [name, str(value)]
        for inv in self.invariants or ():
            flags += ["--invariant", inv]
        if self.solver_timeout is not None:
            flags += ["--solver-timeout", str(self.solver_timeout)]
        for name in self.free:
            flags += ["--free", name]
        for cond in self.where:
            flags += ["--where", cond]
        if self.minimize:
            flags += ["--minimize", self.minimize]
        if self.maximize:
            flags += ["--maximize", self.maximize]
        if self.explain:
            flags.append("--explain")
        if self.max_examples is not None:
            flags += ["--max-examples", str(self.max_examples)]
        if self.steps is not None:
            flags += ["--steps", str(self.steps)]
        if self.walks is not None:
            flags += ["--walks", str(self.walks)]
        if self.derandomize:
            flags.append("--derandomize")
        else:
            # The random engine's seed (the one it drew, when none was given) reproduces its run.
            seed = self.seed
            if seed is None and result is not None and result.engine == "hypothesis":
                seed = result.options.get("seed")
            if seed is not None:
                flags += ["--seed", str(seed)]
        return flags

    def engine_options(self, engine: str) -> Any:
        """The options object of one engine (options an engine cannot honour are refused)."""
        if self.where and not self.free:
            raise OwnershipError(Code.BAD_OPTION, "--where constrains free parameters: add --free")
        if self.deadlock and (engine != "explore" or self.free):
            raise OwnershipError(Code.BAD_OPTION, "--deadlock is supported by the explorer without --free only")
        random_only = (self.seed is not None or self.max_examples is not None or self.steps is not None
                       or self.derandomize or self.walks is not None)
        if engine == "hypothesis":
            if self.free or self.max_states is not None or self.max_depth is not None:
                raise OwnershipError(
                    Code.BAD_OPTION, "the hypothesis engine takes --max-examples, --steps, --seed, --derandomize "
                    "and --max-seconds (not --free, --max-states or --max-depth)"
                )
            from ownership.engines.stateful import HypothesisOptions

            defaults = HypothesisOptions()
            return HypothesisOptions(
                max_examples=self.max_examples if self.max_examples is not None else defaults.max_examples,
                steps=self.steps if self.steps is not None else defaults.steps,
                seed=self.seed,
                derandomize=self.derandomize,
                invariants=self.invariants,
                walks=self.walks,
            )
        if random_only and self.engine != "all":
            raise OwnershipError(Code.BAD_OPTION, "--seed/--max-examples/--steps/--derandomize are options of --engine hypothesis")
        if engine == "bmc" and self.max_states is not None:
            raise OwnershipError(Code.BAD_OPTION, "--max-states is an explorer limit; bmc takes --max-depth, --solver-timeout and --max-seconds")
        if engine == "explore" and (self.free or self.minimize or self.maximize):
            from ownership.engines.paramexplore import ParamOptions

            if not self.free:
                raise OwnershipError(Code.BAD_OPTION, "--minimize/--maximize need --free for that parameter")
            return ParamOptions(
                free=self.free, where=self.where, minimize=self.minimize, maximize=self.maximize,
                max_depth=self.max_depth, max_states=self.max_states, max_seconds=self.max_seconds,
                symmetry=self.symmetry, invariants=self.invariants,
            )
        if engine == "explore":
            from ownership.engines.explore import ExploreOptions

            return ExploreOptions(
                max_depth=self.max_depth,
                max_states=self.max_states,
                max_seconds=self.max_seconds,
                symmetry=self.symmetry,
                deadlock=self.deadlock,
                invariants=self.invariants,
            )
        from ownership.engines.bmc import BmcOptions

        return BmcOptions(
            max_depth=self.max_depth if self.max_depth is not None else 30,
            solver_timeout=self.solver_timeout,
            free=self.free,
            where=self.where,
            minimize=self.minimize,
            maximize=self.maximize,
            invariants=self.invariants,
            symmetry=self.symmetry,
        )


def _run_check(
    spec_path: Path, settings: _CheckSettings, *, quiet: bool = False, record: list[Any] | None = None
) -> tuple[ExitCode, Any]:
    """Load, check, print and (for a violation) save one spec; returns its exit code.

    ``record`` collects the CI reports' record of the run (see ``ownership.render.ci``).
    """
    from ownership.core.limits import limited
    from ownership.core.result import StopReason
    from ownership.engines import ENGINE_NAMES, compare, relate, run_engine
    from ownership.render.text import reproduce_command, result_report
    from ownership.spec.instance import Instance
    from ownership.spec.loader import load_spec

    started = time.monotonic()
    spec = load_spec(spec_path)
    if settings.engine not in ENGINE_NAMES:
        raise OwnershipError(Code.BAD_OPTION, f"unknown engine {settings.engine!r} (available: {', '.join(ENGINE_NAMES)})")
    engines = ["explore", "bmc", "hypothesis"] if settings.engine == "all" else [settings.engine]
    options = {engine: settings.engine_options(engine) for engine in engines}
    try:
        # --max-seconds is wall-clock for the whole check of this spec: building the
        # instance (a huge parameter) counts, and so does every engine after it.
        with limited(_left(settings.max_seconds, started)):
            inst = Instance(spec, settings.params)
    except KeyboardInterrupt as exc:
        return _setup_stopped(spec, spec_path, settings, exc, started, quiet=quiet, record=record)
    if not quiet:
        for line in _size_warnings(inst):
            sys.stderr.write(line + "\n")
    results = []
    for engine in engines:
        progress = _Progress(settings.progress and not quiet)
        try:
            with limited(_left(settings.max_seconds, started)):
                results.append(run_engine(engine, inst, options[engine], progress=progress))
        except KeyboardInterrupt as exc:
            # A stop that arrived outside the engine's own handler (just before it started, or
            # as it returned): keep a result that arrived, else say that nothing was reported.
            if len(results) < engines.index(engine) + 1:
                results.append(_stopped_result(spec, engine, settings, exc, started,
                                               f"while {engine} was starting or returning", inst.param_values))
        finally:
            progress.done()
        if results[-1].stop_reason is StopReason.INTERRUPTED:
            break  # Ctrl-C or SIGTERM: the user wants the answer so far, not the next engine
    if len(results) > 1:
        disagreement = compare(results)
        if disagreement:
            raise OwnershipError(Code.ENGINE_DISAGREEMENT, f"engines disagree on {spec.name}: {disagreement}", str(spec_path))
    result = results[0]
    if quiet:
        return result.exit_code, result
    doc = spec.invariants[result.violated].doc if result.violated in spec.invariants else ""
    ghosts = [v.name for v in spec.vars.values() if v.ghost]
    for line in result_report(result, invariant_doc=doc, ghosts=ghosts, derived=spec.derived_values.values()):
        typer.echo(line)
    for other in results[1:]:
        # "agrees" only when both results promise something comparable; a sampled pass never does.
        relation, why = relate(result, other)
        said = "NO VIOLATION FOUND (sampled)" if other.sampled and other.verdict.name == "BOUNDED_OK" else other.verdict.name
        typer.echo(f"  {relation}: {other.engine} says {said}: {why}; {other.coverage()}")
    if settings.explain and result.trace is not None:
        _explain(spec, result, settings)
    written: list[Path] = []
    if result.trace is not None:
        out_dir = settings.out if settings.out is not None else _default_out(spec.name, result.engine)
        from ownership.render.files import write_counterexample

        formats = settings.formats if settings.render else ()
        try:
            written = write_counterexample(result.trace, out_dir, formats=formats)
        except OwnershipError as exc:
            sys.stderr.write(exc.one_line() + " (trace.json and trace.dot were still written)\n")
            written = [p for p in (out_dir / "trace.json", out_dir / "trace.dot") if p.exists()]
        typer.echo("")
        typer.echo("  wrote " + ", ".join(str(p) for p in written))
        typer.echo(f"  replay: ownership replay {out_dir / 'trace.json'}")
    typer.echo(
        "  reproduce: "
        + reproduce_command(str(spec_path), inst.param_values, spec.default_params(), settings.reproduce_flags(next((r for r in results if r.engine == "hypothesis"), result)))
    )
    if record is not None:
        from ownership.render.ci import spec_run

        record.append(spec_run(spec, spec_path, result, files=written))
    return result.exit_code, result


ParamOpt = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", help="Set a spec parameter: NAME=VALUE (repeatable)."),
]
JunitOpt = Annotated[
    Path | None,
    typer.Option("--junit", help="Also write a JUnit XML report: a test case per spec and invariant, the trace as failure text."),
]
SarifOpt = Annotated[
    Path | None,
    typer.Option("--sarif", help="Also write a SARIF 2.1.0 log: each violation at the spec line of the action that breaks it."),
]
JsonOpt = Annotated[
    Path | None,
    typer.Option("--json", help="Also write machine-readable results: verdict, stop reason, coverage, statistics, files."),
]


@app.command()
def check(
    specs: Annotated[list[Path], typer.Argument(help="Spec files (Python modules defining `spec`).")],
    engine: Annotated[str, typer.Option(help="explore (exhaustive breadth-first), bmc (Z3 bounded model checking), hypothesis (random interleavings, shrunk), or all (every engine, compared).")] = "explore",
    param: ParamOpt = None,
    seed: Annotated[int | None, typer.Option(help="hypothesis: random seed (a run without one prints the seed it drew).")] = None,
    max_examples: Annotated[int | None, typer.Option(help="hypothesis: number of random examples (default 200).")] = None,
    steps: Annotated[int | None, typer.Option(help="hypothesis: steps per example (default 50).")] = None,
    derandomize: Annotated[bool, typer.Option("--derandomize", help="hypothesis: same examples on every run (CI mode).")] = False,
    walks: Annotated[int | None, typer.Option(help="hypothesis: swarm random walks before Hypothesis' examples (default 5 per example; 0: none).", min=0)] = None,
    max_depth: Annotated[int | None, typer.Option(help="Stop after this many steps from the initial state.")] = None,
    max_states: Annotated[int | None, typer.Option(help="Stop after this many distinct states.")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="Wall-clock limit per spec, every phase and engine included (reached: UNKNOWN, exit 3).")] = None,
    symmetry: Annotated[bool, typer.Option("--symmetry/--no-symmetry", help="Merge states equal up to permuting symmetric domains.")] = True,
    deadlock: Annotated[bool, typer.Option("--deadlock", help="Also report states where requests are pending and nothing can run.")] = False,
    invariant: Annotated[list[str] | None, typer.Option("--invariant", "-i", help="Check only this invariant (repeatable).")] = None,
    out: Annotated[Path | None, typer.Option(help="Directory for trace.json/.dot/.svg (default counterexamples/<spec>/, "
                                                 "or counterexamples/<spec>/<engine>/ for engines other than explore).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="Picture format besides the DOT file: svg, png or svg,png.")] = "svg",
    render: Annotated[bool, typer.Option("--render/--no-render", help="Draw the picture (trace.json and trace.dot are always written).")] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress lines on stderr for long runs.")] = True,
    solver_timeout: Annotated[float | None, typer.Option(help="bmc: seconds per solver call (unknown -> exit 3).")] = None,
    free: Annotated[list[str] | None, typer.Option("--free", help="Leave this parameter symbolic: check every value at once (repeatable).")] = None,
    where: Annotated[list[str] | None, typer.Option("--where", help="Constraint on free parameters, e.g. 'prompt_tokens <= context_len'.")] = None,
    minimize: Annotated[str | None, typer.Option(help="Report the smallest value of this free parameter that violates.")] = None,
    maximize: Annotated[str | None, typer.Option(help="Report the largest value of this free parameter that violates.")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Under a counterexample, say what every path to the violation has in common (state graph, bounded by --max-states).")] = False,
    junit: JunitOpt = None,
    sarif: SarifOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Check specs; print the verdict, what was covered, and any counterexample."""
    formats = tuple(f.strip() for f in fmt.split(",") if f.strip())
    for f in formats:
        if f not in ("svg", "png"):
            raise OwnershipError(Code.BAD_OPTION, f"--format {f!r}: use svg, png or svg,png")
    for name, value in (("--max-depth", max_depth), ("--max-states", max_states), ("--max-seconds", max_seconds)):
        if value is not None and value < 0:
            raise OwnershipError(Code.BAD_OPTION, f"{name} must be non-negative")
    settings = _CheckSettings(
        engine, _parse_params(param), max_depth, max_states, max_seconds, symmetry, deadlock,
        tuple(invariant) if invariant else None, out, formats, render, progress,
        solver_timeout, tuple(free or ()), tuple(where or ()), minimize, maximize, explain=explain,
        seed=seed, max_examples=max_examples, steps=steps, derandomize=derandomize, walks=walks,
    )
    from ownership.render.ci import reporting

    worst = ExitCode.OK
    runs: list[Any] = []
    with reporting(runs, command="check", junit=junit, sarif=sarif, json_path=json_out):
        for i, spec_path in enumerate(specs):
            if i:
                typer.echo("")
            code, result = _run_check(spec_path, settings, record=runs)
            worst = _worse(worst, code)
            if result.stop_reason.name == "INTERRUPTED":
                break  # Ctrl-C or SIGTERM: stop here, with what was covered so far
    raise typer.Exit(int(worst))


def _explain(spec: Any, result: Any, settings: _CheckSettings) -> None:
    """``--explain``: the diagnosis of the violated invariant, under the counterexample."""
    from ownership.engines.diagnose import DiagnoseOptions, diagnose_result
    from ownership.render.text import explain_report

    if result.violated not in spec.invariants:
        typer.echo(f"\n  Explanation: not available for {result.violated} (only invariant violations are diagnosed)")
        return
    options = DiagnoseOptions(symmetry=settings.symmetry, **({"max_states": settings.max_states} if settings.max_states else {}))
    for line in explain_report(diagnose_result(spec, result, options)):
        typer.echo(line)


@app.command()
def report(
    specs: Annotated[list[Path], typer.Argument(help="Spec files.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path("report.html"),
    engine: Annotated[list[str] | None, typer.Option("--engine", help="Engine to run (repeatable): explore (default), bmc.")] = None,
    param: ParamOpt = None,
    max_depth: Annotated[int | None, typer.Option(help="Stop after this many steps from the initial state.")] = None,
    max_states: Annotated[int | None, typer.Option(help="explore: stop after this many distinct states (also bounds the diagnosis).")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="explore: stop after this many seconds.")] = None,
    symmetry: Annotated[bool, typer.Option("--symmetry/--no-symmetry")] = True,
    solver_timeout: Annotated[float | None, typer.Option(help="bmc: seconds per solver call.")] = None,
) -> None:
    """Write a self-contained HTML design-review report: verdicts, pictures, steps, spec source, diagnosis."""
    from ownership.render.html import build_section, render_report

    engines = list(dict.fromkeys(engine or ["explore"]))
    for e in engines:
        if e not in ("explore", "bmc"):
            raise OwnershipError(Code.BAD_OPTION, f"--engine {e!r}: the report runs explore and/or bmc")
    params = _parse_params(param)
    sections = []
    worst = ExitCode.OK
    for spec_path in specs:
        settings = [
            _CheckSettings(e, params, max_depth, max_states if e == "explore" else None, max_seconds if e == "explore" else None,
                           symmetry, False, None, None, ("svg",), False, True, solver_timeout)
            for e in engines
        ]
        runs = []
        for s in settings:
            code, result = _run_check(spec_path, s, quiet=True)
            worst = _worse(worst, code)
            runs.append((result, s.reproduce_flags()))
        sections.append(build_section(spec_path, runs, params, max_states=max_states, symmetry=symmetry))
        typer.echo(f"{spec_path}: " + ", ".join(f"{r.engine} {r.verdict.name}" for r, _ in runs))
    command = "ownership report " + " ".join(str(p) for p in specs)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(sections, command=command), encoding="utf-8")
    typer.echo(f"wrote {out}")
    raise typer.Exit(int(worst))


def _left(max_seconds: float | None, started: float) -> float | None:
    """Seconds left of the wall-clock limit (at least a millisecond: an engine still says what it covered)."""
    if max_seconds is None:
        return None
    return max(max_seconds - (time.monotonic() - started), 0.001)


def _setup_stopped(
    spec: Any, spec_path: Path, settings: _CheckSettings, exc: BaseException, started: float, *,
    quiet: bool, record: list[Any] | None,
) -> tuple[ExitCode, Any]:
    """Report a check stopped (time limit, Ctrl-C, SIGTERM) while the instance was being built: UNKNOWN."""
    from ownership.render.text import result_report

    result = _stopped_result(spec, settings.engine, settings, exc, started,
                             "while building the instance (enumerating its actions and initial state): no state was checked")
    if not quiet:
        for line in result_report(result):
            typer.echo(line)
    if record is not None:
        from ownership.render.ci import spec_run

        record.append(spec_run(spec, spec_path, result))
    return result.exit_code, result


def _stopped_result(spec: Any, engine: str, settings: _CheckSettings, exc: BaseException, started: float, where: str,
                    params: Any = None) -> Any:
    """An UNKNOWN result for a check stopped outside an engine (which reports its own coverage)."""
    from ownership.core.limits import stop_reason_of
    from ownership.core.result import CheckResult, Stats, Verdict

    reason = stop_reason_of(exc)
    return CheckResult(
        spec=spec.name, engine=engine, verdict=Verdict.UNKNOWN, stop_reason=reason,
        stats=Stats(0, 0, 0, time.monotonic() - started), params=dict(settings.params if params is None else params),
        invariants=tuple(settings.invariants or spec.invariants),
        notes=(f"inconclusive: the run {reason.value} {where}",),
    )


SIZE_WARNING_CELLS = 512
"""A state with more cells than this is wide: every state costs time and memory to hash, compare and store."""
SIZE_WARNING_DOMAIN = 64
"""A domain with more values than this multiplies the branching of every action that ranges over it."""
SIZE_WARNING_INSTANCES = 1024
"""More action instances (actions x argument values) than this: every state tries each of them."""


def _size_warnings(inst: Any) -> list[str]:
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


def _default_out(spec_name: str, engine: str) -> Path:
    """Where a counterexample goes without ``--out``.

    The explorer's traces are the ones kept under version control next to
    the specs; other engines write beside them, in a folder of their own, so
    that trying an engine never overwrites the explorer's committed trace.
    """
    base = Path("counterexamples") / spec_name
    return base if engine == "explore" else base / engine


def _worse(a: ExitCode, b: ExitCode) -> ExitCode:
    rank = {ExitCode.OK: 0, ExitCode.INCONCLUSIVE: 1, ExitCode.VIOLATION: 2, ExitCode.USAGE: 3, ExitCode.INTERNAL: 4}
    return a if rank[a] >= rank[b] else b


@app.command("list")
def list_specs(
    directory: Annotated[Path, typer.Argument(help="Folder of spec files.")] = Path("specs"),
) -> None:
    """List specs with their summary, source, parameters, invariants and expected verdict."""
    from ownership.spec.loader import load_spec, spec_files

    for path in spec_files(directory):
        spec = load_spec(path)
        typer.echo(f"{spec.name}  ({path})")
        if spec.summary:
            typer.echo(f"  {spec.summary}")
        if spec.models is not None:
            typer.echo(f"  models:     {spec.models.describe()}")
            if spec.models.links:
                typer.echo(f"  sources:    {', '.join(spec.models.links)}")
        typer.echo(f"  expect:     {spec.expect.describe() if spec.expect else '(not declared)'}")
        typer.echo("  params:     " + ", ".join(f"{p.name}={p.default}" for p in spec.params.values()))
        typer.echo("  invariants: " + ", ".join(
            n + (" (helper)" if i.helper else "") for n, i in spec.invariants.items()))
        typer.echo(f"  actions:    {', '.join(spec.actions)}")
        typer.echo("")


@app.command()
def mbt(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="The spec the implementation must follow.")],
    adapter: Annotated[str, typer.Option(help="The adapter: module:Class or path/to/file.py:Class.")],
    param: ParamOpt = None,
    max_examples: Annotated[int, typer.Option(help="Number of random examples.")] = 100,
    steps: Annotated[int, typer.Option(help="Steps per example.")] = 30,
    seed: Annotated[int | None, typer.Option(help="Random seed (a run without one prints the seed it drew).")] = None,
    derandomize: Annotated[bool, typer.Option("--derandomize", help="Same examples on every run (CI mode).")] = False,
    out: Annotated[Path | None, typer.Option(help="Directory for the spec side of a failing run (trace.json, picture).")] = None,
) -> None:
    """Model-based test: drive an implementation and SPEC in lock step; fail at the first step they disagree."""
    from ownership.render.text import headline
    from ownership.spec.loader import load_spec
    from ownership.testing.mbt import MBTOptions, load_adapter, run_mbt

    if max_examples < 1 or steps < 1:
        raise OwnershipError(Code.BAD_OPTION, "--max-examples and --steps must be at least 1")
    cls = load_adapter(adapter)
    spec = load_spec(spec_path)
    result = run_mbt(
        cls, MBTOptions(max_examples=max_examples, steps=steps, seed=seed, derandomize=derandomize),
        spec=spec, params=_parse_params(param),
    )
    typer.echo(headline(result))
    typer.echo(f"  {result.coverage()}")
    for note in result.notes:
        typer.echo(f"  ({note})")
    if result.reproduction:
        typer.echo("")
        for line in result.reproduction.splitlines():
            typer.echo(line)
    if result.trace is not None and len(result.trace):
        from ownership.render.files import write_counterexample

        out_dir = out if out is not None else Path("counterexamples") / f"{spec.name}-mbt"
        written = write_counterexample(result.trace, out_dir, formats=())
        typer.echo(f"\n  spec side of the failing run: {', '.join(str(p) for p in written)}")
    flags = [f"--adapter {adapter}", f"--max-examples {max_examples}", f"--steps {steps}"]
    flags.append("--derandomize" if derandomize else f"--seed {result.options.get('seed')}")
    typer.echo(f"  reproduce: ownership mbt {spec_path} {' '.join(flags)}")
    raise typer.Exit(int(result.exit_code))


@app.command()
def replay(
    trace_file: Annotated[Path, typer.Argument(help="A trace.json written by `ownership check`.")],
    spec_path: Annotated[Path | None, typer.Option("--spec", help="Spec file (default: the path recorded in the trace).")] = None,
) -> None:
    """Re-execute a saved trace on its spec and confirm its violation (exit 0), or say where it diverges (exit 1)."""
    from ownership.core.replay import replay as do_replay
    from ownership.core.trace import Trace
    from ownership.spec.instance import Instance
    from ownership.spec.loader import load_spec

    trace = Trace.load(trace_file)
    path = spec_path or _locate_spec(trace.spec_path, trace_file)
    spec = load_spec(path)
    if spec.name != trace.spec:
        raise OwnershipError(
            Code.TRACE_SPEC_MISSING, f"trace is for spec {trace.spec!r} but {path} defines {spec.name!r}", str(trace_file)
        )
    try:
        inst = Instance(spec, trace.params)
    except OwnershipError as exc:
        raise OwnershipError(Code.TRACE_CORRUPT, f"trace parameters do not fit the spec: {exc.message}", str(trace_file)) from None
    outcome = do_replay(inst, trace)
    if outcome.ok:
        typer.echo(f"REPLAYED  {trace_file}: {outcome.message}")
        raise typer.Exit(0)
    typer.echo(f"DIVERGED  {trace_file}: {outcome.message}")
    raise typer.Exit(int(ExitCode.VIOLATION))


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def _locate_spec(recorded: str | None, trace_file: Path) -> Path:
    if not recorded:
        raise OwnershipError(Code.TRACE_SPEC_MISSING, "trace records no spec path; pass --spec", str(trace_file))
    candidates = [Path(recorded)]
    for parent in trace_file.resolve().parents:
        candidates.append(parent / recorded)
    for c in candidates:
        if c.is_file():
            return c
    raise OwnershipError(Code.TRACE_SPEC_MISSING, f"spec {recorded} not found; pass --spec", str(trace_file))


@app.command()
def render(
    trace_file: Annotated[Path, typer.Argument(help="A trace.json written by `ownership check`.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="svg, png or dot.")] = "svg",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (default: next to the trace).")] = None,
) -> None:
    """Redraw a saved trace as SVG, PNG or DOT."""
    from ownership.core.trace import Trace
    from ownership.render.dot import trace_to_dot
    from ownership.render.graphviz_bin import render as run_dot

    if fmt not in ("svg", "png", "dot"):
        raise OwnershipError(Code.BAD_OPTION, f"--format {fmt!r}: use svg, png or dot")
    trace = Trace.load(trace_file)
    source = trace_to_dot(trace)
    target = out or trace_file.with_suffix(f".{fmt}")
    data = source.encode() if fmt == "dot" else run_dot(source, fmt)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    typer.echo(f"wrote {target}")


@app.command("test")
def test_specs(
    directory: Annotated[Path, typer.Argument(help="Folder of spec files.")] = Path("specs"),
    param: ParamOpt = None,
    max_seconds: Annotated[float | None, typer.Option(help="Per-spec time limit (a spec that hits it fails).")] = None,
    symmetry: Annotated[bool, typer.Option("--symmetry/--no-symmetry")] = True,
    out: Annotated[Path | None, typer.Option(help="Write each counterexample (trace.json/.dot/.svg) to OUT/<spec>/; default: none written.")] = None,
    junit: JunitOpt = None,
    sarif: SarifOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Check every spec against its declared expected verdict; exit 0 only if all match."""
    from ownership.core.expectation import judge
    from ownership.render.ci import reporting, skipped_run, spec_run
    from ownership.spec.loader import spec_files

    params = _parse_params(param)
    failures = passed = 0
    files = spec_files(directory)
    if not files:
        raise OwnershipError(Code.BAD_OPTION, "no spec files here", str(directory))
    runs: list[Any] = []
    with reporting(runs, command="test", junit=junit, sarif=sarif, json_path=json_out):
        for path in files:
            from ownership.spec.loader import load_spec

            spec = load_spec(path)
            started = time.perf_counter()
            if spec.expect is None:
                typer.echo(f"SKIP  {spec.name}: declares no expected verdict")
                runs.append(skipped_run(spec, path, "declares no expected verdict"))
                continue
            # --param applies to the specs that declare the parameter.
            mine = {k: v for k, v in params.items() if k in spec.params}
            settings = _CheckSettings("explore", mine, None, None, max_seconds, symmetry, False, None, None, ("svg",), False, False)
            _, result = _run_check(path, settings, quiet=True)
            verdict = judge(spec.expect, result)
            ok = verdict.ok
            took = time.perf_counter() - started
            status = "PASS" if ok else "FAIL"
            detail = f"{verdict.got} ({result.stats.states:,} states, depth {result.stats.depth}"
            detail += f", {_steps(len(result.trace))}" if result.trace is not None else ""
            detail += f", {took:.2f}s)"
            if verdict.reason:
                detail += f"; {verdict.reason}"
            typer.echo(f"{status}  {spec.name}: expected {verdict.expected}, got {detail}")
            written = _write_test_trace(result.trace, out / spec.name) if out is not None and result.trace is not None else []
            if written:
                typer.echo("      wrote " + ", ".join(str(p) for p in written))
            runs.append(spec_run(spec, path, result, mode="test", files=written))
            failures += not ok
            passed += ok
    skipped = len(files) - passed - failures
    typer.echo(f"specs: {passed} passed, {failures} failed" + (f", {skipped} skipped" if skipped else ""))
    raise typer.Exit(int(ExitCode.VIOLATION) if failures else 0)


def _write_test_trace(trace: Any, out_dir: Path) -> list[Path]:
    """``ownership test --out``: a counterexample's files; a failing renderer still leaves the text files."""
    from ownership.render.files import write_counterexample

    try:
        return write_counterexample(trace, out_dir, formats=("svg",))
    except OwnershipError as exc:
        sys.stderr.write(exc.one_line() + " (trace.json and trace.dot were still written)\n")
        return [p for p in (out_dir / "trace.json", out_dir / "trace.itf.json", out_dir / "trace.dot") if p.exists()]


@app.command()
def graph(
    spec_path: Annotated[Path, typer.Argument(help="Spec file.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output file: .graphml, .gexf or .dot.")],
    param: ParamOpt = None,
    max_states: Annotated[int, typer.Option(help="Refuse graphs with more states than this.")] = 200_000,
    symmetry: Annotated[bool, typer.Option("--symmetry/--no-symmetry")] = True,
) -> None:
    """Export the reachable state graph (networkx) for other tools."""
    import networkx as nx

    from ownership.engines.graph import GraphOptions, state_graph, violating_nodes
    from ownership.spec.instance import Instance
    from ownership.spec.loader import load_spec

    suffix = out.suffix.lower()
    if suffix not in (".graphml", ".gexf", ".dot", ".gv"):
        raise OwnershipError(Code.BAD_OPTION, f"--out {out}: use a .graphml, .gexf or .dot file")
    inst = Instance(load_spec(spec_path), _parse_params(param))
    g = state_graph(inst, GraphOptions(max_states=max_states, symmetry=symmetry))
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".graphml":
        nx.write_graphml(g, out)
    elif suffix == ".gexf":
        nx.write_gexf(g, out)
    else:
        lines = ["digraph states {"]
        for n, d in g.nodes(data=True):
            color = ', color="red"' if d["violates"] else ""
            lines.append(f'  {n} [label="{n}\\nd={d["depth"]}"{color}];')
        for a, b, d in g.edges(data=True):
            label = d["action"].replace('"', "'")
            lines.append(f'  {a} -> {b} [label="{label}"];')
        lines.append("}")
        out.write_text("\n".join(lines) + "\n")
    bad = violating_nodes(g)
    typer.echo(
        f"wrote {out}: {g.number_of_nodes():,} states, {g.number_of_edges():,} transitions, "
        f"{len(bad):,} violating states"
    )


@app.command()
def prove(
    specs: Annotated[list[Path], typer.Argument(help="Spec files.")],
    param: ParamOpt = None,
    max_k: Annotated[int, typer.Option(help="Largest k for k-induction before Spacer is tried.")] = 2,
    spacer: Annotated[bool, typer.Option("--spacer/--no-spacer", help="Fall back to Z3's Spacer (IC3/PDR) when k-induction does not close.")] = True,
    spacer_timeout: Annotated[float, typer.Option(help="Seconds for Spacer before giving up (exit 3).")] = 600.0,
    reach_states: Annotated[int, typer.Option(
        help="Before Spacer, enumerate up to this many reachable states and have Z3 check them as the "
        "inductive invariant (0: never).", min=0)] = 200_000,
    solver_timeout: Annotated[float | None, typer.Option(help="Seconds per solver call (unknown -> exit 3).")] = None,
    free: Annotated[list[str] | None, typer.Option("--free", help="Prove for every value of this parameter (repeatable).")] = None,
    where: Annotated[list[str] | None, typer.Option("--where", help="Constraint on free parameters.")] = None,
    invariant: Annotated[list[str] | None, typer.Option("--invariant", "-i", help="Prove only this invariant (helpers are still assumed).")] = None,
    out: Annotated[Path | None, typer.Option(help="Directory for a counterexample (default counterexamples/<spec>/prove/).")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="Wall-clock limit per spec, every phase included (reached -> exit 3).")] = None,
) -> None:
    """Prove the invariants for executions of any length (k-induction, the reachable set or Spacer, checked by Z3); exit 0 only if PROVED."""
    from ownership.engines.bmc import BmcOptions
    from ownership.engines.bmc import prove as run_prove
    from ownership.render.files import write_counterexample
    from ownership.render.text import result_report
    from ownership.spec.instance import Instance
    from ownership.spec.loader import load_spec

    worst = ExitCode.OK
    for i, spec_path in enumerate(specs):
        if i:
            typer.echo("")
        from ownership.core.limits import limited

        started = time.monotonic()
        spec = load_spec(spec_path)
        settings = _CheckSettings("prove", _parse_params(param), None, None, max_seconds, True, False,
                                  tuple(invariant) if invariant else None, out, (), False, False)
        try:
            with limited(_left(max_seconds, started)):
                inst = Instance(spec, settings.params)
        except KeyboardInterrupt as exc:
            code, _ = _setup_stopped(spec, spec_path, settings, exc, started, quiet=False, record=None)
            worst = _worse(worst, code)
            continue
        options = BmcOptions(
            max_k=max_k, solver_timeout=solver_timeout, free=tuple(free or ()), where=tuple(where or ()), spacer=spacer,
            spacer_timeout=spacer_timeout, reach_states=reach_states,
            invariants=tuple(invariant) if invariant else None,
        )
        progress = _Progress(True)
        try:
            # Every phase (encoding, widening, k-induction, the reachable set, Spacer) stops
            # at the limit or on Ctrl-C/SIGTERM and reports how far it got.
            with limited(_left(max_seconds, started)):
                result = run_prove(inst, options, progress)
        finally:
            progress.done()
        doc = spec.invariants[result.violated].doc if result.violated in spec.invariants else ""
        for line in result_report(result, invariant_doc=doc, ghosts=[v.name for v in spec.vars.values() if v.ghost]):
            typer.echo(line)
        if result.trace is not None:
            out_dir = out if out is not None else _default_out(spec.name, "prove")
            name = "cti" if result.trace.extra.get("cti") else "trace"
            written = write_counterexample(result.trace, out_dir / name if name == "cti" else out_dir)
            typer.echo("  wrote " + ", ".join(str(p) for p in written))
        worst = _worse(worst, result.exit_code)
    raise typer.Exit(int(worst))
