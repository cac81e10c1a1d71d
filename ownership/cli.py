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

from ownership import inputs
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


def _parse_params(items: list[str] | None, free: list[str] | None = None) -> dict[str, int]:
    return inputs.parse_params(items, free or ())


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
    max_domain: int = inputs.DEFAULT_MAX_DOMAIN
    walks: int | None = None

    def search_flags(self, params: dict[str, int], defaults: dict[str, int]) -> list[str]:
        """The flags that change what this run searches: they name its counterexample folder.

        The reproduce line's flags without ``--engine`` (the engine has a folder
        level of its own) and ``--explain`` (it reads the result, it does not
        change it), after the parameters that differ from the spec's defaults.
        """
        flags = [f"{k}={v}" for k, v in params.items() if defaults.get(k) != v]
        rest = self.reproduce_flags()
        i = 0
        while i < len(rest):
            if rest[i] == "--engine":
                i += 2
                continue
            if rest[i] != "--explain":
                flags.append(rest[i])
            i += 1
        return flags

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
        from ownership.engines.z3run import BmcOptions

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
    inputs.check_instance_size(spec, settings.params, settings.max_domain)
    if settings.engine not in ENGINE_NAMES:
        raise OwnershipError(Code.BAD_OPTION, f"unknown engine {settings.engine!r} (available: {', '.join(ENGINE_NAMES)})")
    engines = ["explore", "bmc", "hypothesis"] if settings.engine == "all" else [settings.engine]
    options = {engine: settings.engine_options(engine) for engine in engines}  # every option refused before any engine runs
    try:
        # --max-seconds is wall-clock for the whole check of this spec: building the
        # instance (a huge parameter) counts, and so does every engine after it.
        with limited(_left(settings.max_seconds, started)):
            inst = Instance(spec, settings.params)
    except KeyboardInterrupt as exc:
        return _setup_stopped(spec, spec_path, settings, exc, started, quiet=quiet, record=record)
    # Where a counterexample would go, checked before the engine runs (a long check must not end in an unwritable folder).
    out_dir = settings.out
    if out_dir is None:
        out_dir = _default_out(spec.name, settings.engine, settings.search_flags(inst.param_values, spec.default_params()))
        if not quiet:
            try:
                inputs.check_output_dir(out_dir, "--out (default)")
            except OwnershipError as exc:
                raise OwnershipError(exc.code, f"{exc.message}; pass --out DIR to write elsewhere", exc.file) from None
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
        from ownership.render.files import write_counterexample

        formats = settings.formats if settings.render else ()
        try:
            with inputs.writing(out_dir, "--out"):
                written = write_counterexample(result.trace, out_dir, formats=formats)
        except OwnershipError as exc:
            if exc.code is Code.OUTPUT_PATH:
                raise
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
    typer.Option("--junit", parser=inputs.output_file("--junit"), help="Also write a JUnit XML report: a test case per spec and invariant, the trace as failure text."),
]
SarifOpt = Annotated[
    Path | None,
    typer.Option("--sarif", parser=inputs.output_file("--sarif"), help="Also write a SARIF 2.1.0 log: each violation at the spec line of the action that breaks it."),
]
MaxDomainOpt = Annotated[
    int,
    typer.Option(help="Refuse instances with a domain or value set of more than this many elements "
                      "(a typo such as -p pages=1000000000 would otherwise hang while the tables are built)."),
]
JsonOpt = Annotated[
    Path | None,
    typer.Option("--json", parser=inputs.output_file("--json"), help="Also write machine-readable results: verdict, stop reason, coverage, statistics, files."),
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
    out: Annotated[Path | None, typer.Option(parser=inputs.output_dir("--out"), help="Directory for trace.json/.dot/.svg "
                                                 "(default counterexamples/<spec>/ for a run without search options, else "
                                                 "counterexamples/<spec>/<engine>/[<options>]/; see docs/cli.md).")] = None,
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
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
) -> None:
    """Check specs; print the verdict, what was covered, and any counterexample."""
    formats = tuple(f.strip() for f in fmt.split(",") if f.strip())
    for f in formats:
        if f not in ("svg", "png"):
            raise OwnershipError(Code.BAD_OPTION, f"--format {f!r}: use svg, png or svg,png")
    _check_limits(max_depth, max_states, max_seconds, solver_timeout, max_domain)
    inputs.check_count("--seed", seed, 0)
    inputs.check_count("--max-examples", max_examples, 1)
    inputs.check_count("--steps", steps, 1)
    for flag, name in (("--minimize", minimize), ("--maximize", maximize)):
        if name is not None and free and name not in free:
            raise OwnershipError(Code.BAD_OPTION, f"{flag} {name}: not a --free parameter (free: {', '.join(free)})")
    settings = _CheckSettings(
        engine, _parse_params(param, free), max_depth, max_states, max_seconds, symmetry, deadlock,
        tuple(invariant) if invariant else None, out, formats, render, progress,
        solver_timeout, tuple(free or ()), tuple(where or ()), minimize, maximize, explain=explain,
        seed=seed, max_examples=max_examples, steps=steps, derandomize=derandomize, max_domain=max_domain, walks=walks,
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


def _check_limits(
    max_depth: int | None, max_states: int | None, max_seconds: float | None, solver_timeout: float | None, max_domain: int
) -> None:
    """The search limits every checking command shares, refused out of range with OWN015."""
    inputs.check_count("--max-depth", max_depth, 0)
    inputs.check_count("--max-states", max_states, 1)
    inputs.check_seconds("--max-seconds", max_seconds)
    inputs.check_seconds("--solver-timeout", solver_timeout)
    inputs.check_count("--max-domain", max_domain, 1)


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
    out: Annotated[Path, typer.Option("--out", "-o", parser=inputs.output_file("--out"), help="The HTML file to write.")] = Path("report.html"),
    engine: Annotated[list[str] | None, typer.Option("--engine", help="Engine to run (repeatable): explore (default), bmc.")] = None,
    param: ParamOpt = None,
    max_depth: Annotated[int | None, typer.Option(help="Stop after this many steps from the initial state.")] = None,
    max_states: Annotated[int | None, typer.Option(help="explore: stop after this many distinct states (also bounds the diagnosis).")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="explore: stop after this many seconds.")] = None,
    symmetry: Annotated[bool, typer.Option("--symmetry/--no-symmetry")] = True,
    solver_timeout: Annotated[float | None, typer.Option(help="bmc: seconds per solver call.")] = None,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
) -> None:
    """Write a self-contained HTML design-review report: verdicts, pictures, steps, spec source, diagnosis."""
    from ownership.render.html import build_section, render_report

    _check_limits(max_depth, max_states, max_seconds, solver_timeout, max_domain)
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
                           symmetry, False, None, None, ("svg",), False, True, solver_timeout, max_domain=max_domain)
            for e in engines
        ]
        runs = []
        for s in settings:
            code, result = _run_check(spec_path, s, quiet=True)
            worst = _worse(worst, code)
            runs.append((result, s.reproduce_flags()))
        sections.append(build_section(spec_path, runs, params, max_states=max_states, symmetry=symmetry))
        typer.echo(f"{spec_path}: " + ", ".join(
            f"{r.engine} {r.verdict.name}" + (f" ({r.qualifier()})" if r.vacuous else "") for r, _ in runs))
    command = "ownership report " + " ".join(str(p) for p in specs)
    html = render_report(sections, command=command)
    with inputs.writing(out, "--out"):
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html, encoding="utf-8")
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


def _default_out(spec_name: str, engine: str, flags: list[str] | None = None) -> Path:
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
        return base if engine == "explore" else base / engine
    return base / engine / inputs.run_slug(flags)


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
        for a in spec.actions.values():
            if a.may_be_dead is not None:
                typer.echo(f"  may be dead: {a.name}: {a.may_be_dead}")
        for w in spec.warnings:
            from ownership.render.text import warning_line

            typer.echo(f"  {warning_line(w)}")
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
    out: Annotated[Path | None, typer.Option(parser=inputs.output_dir("--out"), help="Directory for the spec side of a failing run (trace.json, picture).")] = None,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
) -> None:
    """Model-based test: drive an implementation and SPEC in lock step; fail at the first step they disagree."""
    from ownership.render.text import headline
    from ownership.spec.loader import load_spec
    from ownership.testing.mbt import MBTOptions, load_adapter, run_mbt

    inputs.check_count("--max-examples", max_examples, 1)
    inputs.check_count("--steps", steps, 1)
    inputs.check_count("--seed", seed, 0)
    inputs.check_count("--max-domain", max_domain, 1)
    params = _parse_params(param)
    cls = load_adapter(adapter)
    spec = load_spec(spec_path)
    inputs.check_instance_size(spec, params, max_domain)
    result = run_mbt(
        cls, MBTOptions(max_examples=max_examples, steps=steps, seed=seed, derandomize=derandomize),
        spec=spec, params=params,
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
        with inputs.writing(out_dir, "--out"):
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
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
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
    inputs.check_count("--max-domain", max_domain, 1)
    try:
        inputs.check_instance_size(spec, trace.params, max_domain)
        inst = Instance(spec, trace.params)
    except OwnershipError as exc:
        if exc.code is Code.INSTANCE_TOO_LARGE:
            raise OwnershipError(exc.code, f"the trace's parameters: {exc.message}", str(trace_file)) from None
        raise OwnershipError(Code.TRACE_CORRUPT, f"trace parameters do not fit the spec: {exc.message}", str(trace_file)) from None
    try:
        outcome = do_replay(inst, trace)
    except OwnershipError as exc:
        if exc.code is Code.TRACE_MISMATCH and exc.file is None:
            exc.file = str(trace_file)
        raise
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
    out: Annotated[Path | None, typer.Option("--out", "-o", parser=inputs.output_file("--out"), help="Output file (default: next to the trace).")] = None,
) -> None:
    """Redraw a saved trace as SVG, PNG or DOT."""
    from ownership.core.trace import Trace
    from ownership.render.dot import trace_to_dot
    from ownership.render.graphviz_bin import render as run_dot

    if fmt not in ("svg", "png", "dot"):
        raise OwnershipError(Code.BAD_OPTION, f"--format {fmt!r}: use svg, png or dot")
    named = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot"}.get(out.suffix.lower()) if out is not None else None
    if out is not None and named is not None and named != fmt:
        raise OwnershipError(
            Code.BAD_OPTION, f"--out {out} names a {out.suffix} file but --format is {fmt}: "
            f"pass --format {named} or another file name"
        )
    trace = Trace.load(trace_file)
    try:
        source = trace_to_dot(trace)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # Trace.load checks the shape; the states themselves are only read here.
        raise OwnershipError(
            Code.TRACE_CORRUPT, f"trace cannot be drawn ({type(exc).__name__}: {exc}); was it edited by hand?", str(trace_file)
        ) from None
    target = out or trace_file.with_suffix(f".{fmt}")
    if out is None:
        inputs.check_output_file(target, "--out (default)")
    data = source.encode() if fmt == "dot" else run_dot(source, fmt)
    with inputs.writing(target, "--out"):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    typer.echo(f"wrote {target}")


@app.command("test")
def test_specs(
    directory: Annotated[Path, typer.Argument(help="Folder of spec files.")] = Path("specs"),
    param: ParamOpt = None,
    max_seconds: Annotated[float | None, typer.Option(help="Per-spec time limit (a spec that hits it fails).")] = None,
    symmetry: Annotated[bool, typer.Option("--symmetry/--no-symmetry")] = True,
    out: Annotated[Path | None, typer.Option(parser=inputs.output_dir("--out"), help="Write each counterexample (trace.json/.dot/.svg) to OUT/<spec>/; default: none written.")] = None,
    junit: JunitOpt = None,
    sarif: SarifOpt = None,
    json_out: JsonOpt = None,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
) -> None:
    """Check every spec against its declared expected verdict; exit 0 only if all match."""
    from ownership.core.expectation import judge
    from ownership.render.ci import error_run, reporting, skipped_run, spec_run
    from ownership.spec.loader import spec_files

    inputs.check_seconds("--max-seconds", max_seconds)
    inputs.check_count("--max-domain", max_domain, 1)
    params = _parse_params(param)
    failures = passed = errors = 0
    worst = ExitCode.OK
    files = spec_files(directory)
    if not files:
        raise OwnershipError(Code.BAD_OPTION, "no spec files here", str(directory))
    runs: list[Any] = []
    with reporting(runs, command="test", junit=junit, sarif=sarif, json_path=json_out):
        for path in files:
            from ownership.spec.loader import load_spec

            try:  # a spec that does not load or run is listed with its error; the others still run
                spec = load_spec(path)
                started = time.perf_counter()
                if spec.expect is None:
                    typer.echo(f"SKIP  {spec.name}: declares no expected verdict")
                    runs.append(skipped_run(spec, path, "declares no expected verdict"))
                    continue
                # --param applies to every spec: one that lacks the parameter is an error, not a run at its defaults.
                missing = [k for k in params if k not in spec.params]
                if missing:
                    raise OwnershipError(
                        Code.UNKNOWN_PARAM,
                        f"spec {spec.name} has no parameter {missing[0]!r} (known: {', '.join(spec.params) or 'none'}); "
                        "ownership test applies --param to every spec in the folder",
                        spec.file, spec.line,
                    )
                settings = _CheckSettings(
                    "explore", params, None, None, max_seconds, symmetry, False, None, None, ("svg",), False, False,
                    max_domain=max_domain,
                )
                _, result = _run_check(path, settings, quiet=True)
            except OwnershipError as exc:
                typer.echo(f"ERROR  {path}: {exc.one_line()}")
                runs.append(error_run(path, exc, mode="test"))
                errors += 1
                worst = _worse(worst, exc.exit_code)
                continue
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
            from ownership.render.text import warning_line

            for w in result.vacuity():
                typer.echo(f"      {warning_line(w)}")
            written = _write_test_trace(result.trace, out / spec.name) if out is not None and result.trace is not None else []
            if written:
                typer.echo("      wrote " + ", ".join(str(p) for p in written))
            runs.append(spec_run(spec, path, result, mode="test", files=written))
            failures += not ok
            passed += ok
    skipped = len(files) - passed - failures - errors
    typer.echo(
        f"specs: {passed} passed, {failures} failed"
        + (f", {errors} error" + ("s" if errors > 1 else "") if errors else "")
        + (f", {skipped} skipped" if skipped else "")
    )
    raise typer.Exit(int(_worse(worst, ExitCode.VIOLATION if failures else ExitCode.OK)))


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
    out: Annotated[Path, typer.Option("--out", "-o", parser=inputs.output_file("--out"), help="Output file: .graphml, .gexf or .dot.")],
    param: ParamOpt = None,
    max_states: Annotated[int, typer.Option(help="Refuse graphs with more states than this.")] = 200_000,
    symmetry: Annotated[bool, typer.Option("--symmetry/--no-symmetry")] = True,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
) -> None:
    """Export the reachable state graph (networkx) for other tools."""
    from ownership.engines.graph import GraphOptions, state_graph, violating_nodes
    from ownership.spec.instance import Instance
    from ownership.spec.loader import load_spec

    suffix = out.suffix.lower()
    if suffix not in (".graphml", ".gexf", ".dot", ".gv"):
        raise OwnershipError(Code.BAD_OPTION, f"--out {out}: use a .graphml, .gexf or .dot file")
    inputs.check_count("--max-states", max_states, 1)
    inputs.check_count("--max-domain", max_domain, 1)
    params = _parse_params(param)
    spec = load_spec(spec_path)
    inputs.check_instance_size(spec, params, max_domain)
    inst = Instance(spec, params)
    g = state_graph(inst, GraphOptions(max_states=max_states, symmetry=symmetry))
    with inputs.writing(out, "--out"):
        _write_graph(g, out, suffix)
    bad = violating_nodes(g)
    typer.echo(
        f"wrote {out}: {g.number_of_nodes():,} states, {g.number_of_edges():,} transitions, "
        f"{len(bad):,} violating states"
    )


def _write_graph(g: Any, out: Path, suffix: str) -> None:
    """``ownership graph``'s file, in the format its suffix names."""
    import networkx as nx

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
    out: Annotated[Path | None, typer.Option(parser=inputs.output_dir("--out"), help="Directory for a counterexample (default counterexamples/<spec>/prove/).")] = None,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
    max_seconds: Annotated[float | None, typer.Option(help="Wall-clock limit per spec, every phase included (reached -> exit 3).")] = None,
) -> None:
    """Prove the invariants for executions of any length (k-induction, the reachable set or Spacer, checked by Z3); exit 0 only if PROVED."""
    from ownership.engines.prove import prove as run_prove
    from ownership.engines.z3run import BmcOptions
    from ownership.render.files import write_counterexample
    from ownership.render.text import result_report
    from ownership.spec.instance import Instance
    from ownership.spec.loader import load_spec

    inputs.check_count("--max-k", max_k, 0)
    inputs.check_seconds("--spacer-timeout", spacer_timeout)
    inputs.check_seconds("--solver-timeout", solver_timeout)
    inputs.check_count("--max-domain", max_domain, 1)
    params = _parse_params(param, free)
    worst = ExitCode.OK
    for i, spec_path in enumerate(specs):
        if i:
            typer.echo("")
        from ownership.core.limits import limited

        started = time.monotonic()
        spec = load_spec(spec_path)
        inputs.check_instance_size(spec, params, max_domain)
        settings = _CheckSettings("prove", params, None, None, max_seconds, True, False,
                                  tuple(invariant) if invariant else None, out, (), False, False)
        try:
            with limited(_left(max_seconds, started)):
                inst = Instance(spec, params)
        except KeyboardInterrupt as exc:
            code, _ = _setup_stopped(spec, spec_path, settings, exc, started, quiet=False, record=None)
            worst = _worse(worst, code)
            continue
        # The claim's flags name the folder, as for check: only a plain prove writes counterexamples/<spec>/prove/.
        claim = [f"{k}={v}" for k, v in inst.param_values.items() if spec.default_params().get(k) != v]
        claim += [f"--{flag}={v}" for flag, vs in (("free", free), ("where", where), ("invariant", invariant)) for v in vs or ()]
        out_dir = out if out is not None else _default_out(spec.name, "prove", claim)
        if out is None:
            inputs.check_output_dir(out_dir, "--out (default)")
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
            name = "cti" if result.trace.extra.get("cti") else "trace"
            with inputs.writing(out_dir, "--out"):
                written = write_counterexample(result.trace, out_dir / name if name == "cti" else out_dir)
            typer.echo("  wrote " + ", ".join(str(p) for p in written))
        worst = _worse(worst, result.exit_code)
    raise typer.Exit(int(worst))


@app.command()
def mutate(
    spec_path: Annotated[Path, typer.Argument(help="Spec file whose own code is mutated.")],
    engine: Annotated[str, typer.Option("--engine", "-e", help="Engine that checks each mutant: explore, bmc or hypothesis.")] = "explore",
    max_seconds_per_mutant: Annotated[float, typer.Option(
        "--max-seconds-per-mutant", min=0.001, help="Time limit per mutant (engine run and graph comparison).")] = 30.0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write every mutant, its outcome and diff as JSON.")] = None,
    param: ParamOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List killed and equivalent mutants too.")] = False,
) -> None:
    """Mutation-test a spec: does it notice small faults in its own actions, helpers and invariants?

    Exit 0 when every non-equivalent mutant is killed or accepted by the spec, 1 when one survives.
    """
    import json

    from ownership.analysis.mutate import MutateOptions, report_lines
    from ownership.analysis.mutate import mutate as run_mutate

    if engine not in ("explore", "bmc", "hypothesis"):
        raise OwnershipError(Code.BAD_OPTION, f"--engine {engine!r}: mutate runs explore, bmc or hypothesis")
    options = MutateOptions(engine=engine, max_seconds_per_mutant=max_seconds_per_mutant,
                            params=tuple(sorted(_parse_params(param).items())))
    started = time.perf_counter()

    def progress(k: int, n: int, r: Any) -> None:
        if time.perf_counter() - started >= 1.0:
            sys.stderr.write(f"  ... mutant {k}/{n}: {r.outcome} ({r.mutant.function}, line {r.mutant.line})\n")
            sys.stderr.flush()

    report = run_mutate(spec_path, options, progress)
    for line in report_lines(report, verbose=verbose):
        typer.echo(line)
    if json_out is not None:
        try:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise OwnershipError(Code.BAD_OPTION, f"--json: cannot write: {exc.strerror or exc}", str(json_out)) from None
    raise typer.Exit(int(ExitCode.OK if report.ok else ExitCode.VIOLATION))
