"""The checking commands: ``check``, ``prove``, ``test`` and ``report``.

Each parses its flags into :class:`~ownership.session.Settings`, runs
:func:`ownership.session.check` and prints the outcome; nothing else.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ownership import inputs, session
from ownership.cli.common import (
    DirArg,
    JsonOpt,
    JunitOpt,
    LibraryOpt,
    MaxDomainOpt,
    ParamOpt,
    SarifOpt,
    parse_params,
    spec_folder,
    steps,
    worse,
)
from ownership.core.progress import Progress
from ownership.errors import Code, ExitCode, OwnershipError
from ownership.session import Outcome, Settings


class _Progress:
    """Progress lines on stderr (:meth:`Progress.line`) for runs longer than about a second."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.printed = False

    def __call__(self, p: Progress) -> None:
        if not self.enabled or p.seconds < 1.0:
            return
        if self.tty:
            sys.stderr.write("\r" + p.line() + "\033[K")
        else:
            sys.stderr.write(p.line() + "\n")
        sys.stderr.flush()
        self.printed = True

    def done(self) -> None:
        if self.enabled and self.tty and self.printed:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _session_check(spec_path: Path, settings: Settings, *, outputs: bool = True, progress: bool = False) -> Outcome:
    """The session's check of one spec, with progress lines and the size warnings on stderr."""
    printer = _Progress(progress)
    try:
        return session.check(spec_path, settings, outputs=outputs, progress=printer, warn=_warn if outputs else None)
    finally:
        printer.done()


def _warn(line: str) -> None:
    sys.stderr.write(line + "\n")


def _print_report(outcome: Outcome, record: list[Any] | None, *, derived: bool) -> bool:
    """The result report of one spec; ``False`` (and the run recorded) when it stopped before any engine ran."""
    from ownership.render.text import result_report

    spec, result = outcome.spec, outcome.result
    if outcome.stopped_in_setup:
        for line in result_report(result):
            typer.echo(line)
        _record(record, outcome)
        return False
    doc = spec.invariants[result.violated].doc if result.violated in spec.invariants else ""
    ghosts = [v.name for v in spec.vars.values() if v.ghost]
    for line in result_report(result, invariant_doc=doc, ghosts=ghosts,
                              derived=spec.derived_values.values() if derived else ()):
        typer.echo(line)
    return True


def _print_check(outcome: Outcome, record: list[Any] | None) -> None:
    """What ``ownership check`` prints for one spec: the report, the other engines, the files, the reproduce line."""
    if not _print_report(outcome, record, derived=True):
        return
    for other, relation, why in outcome.relations:
        # "agrees" only when both results promise something comparable; a sampled pass never does.
        said = "NO VIOLATION FOUND (sampled)" if other.sampled and other.verdict.name == "BOUNDED_OK" else other.verdict.name
        typer.echo(f"  {relation}: {other.engine} says {said}: {why}; {other.coverage()}")
    for line in outcome.explanation:
        typer.echo(line)
    if outcome.trace_dir is not None:
        _write_error(outcome)
        typer.echo("")
        typer.echo("  wrote " + ", ".join(str(p) for p in outcome.files))
        typer.echo(f"  replay: ownership replay {outcome.trace_dir / 'trace.json'}")
    typer.echo(f"  reproduce: {outcome.reproduce}")
    _record(record, outcome)


def _write_error(outcome: Outcome) -> None:
    if outcome.write_error is not None:
        sys.stderr.write(outcome.write_error.one_line() + " (trace.json and trace.dot were still written)\n")


def _record(record: list[Any] | None, outcome: Outcome) -> None:
    """Add the CI reports' record of the run (see ``ownership.render.ci``)."""
    if record is not None:
        from ownership.render.ci.records import spec_run

        record.append(spec_run(outcome.spec, outcome.path, outcome.result, files=outcome.files))


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
    inputs.check_optimised(tuple(free or ()), minimize, maximize)
    settings = Settings(
        engine=engine, params=parse_params(param, free), max_depth=max_depth, max_states=max_states,
        max_seconds=max_seconds, symmetry=symmetry, deadlock=deadlock, invariants=tuple(invariant) if invariant else None,
        out=out, formats=formats, render=render, progress=progress, solver_timeout=solver_timeout,
        free=tuple(free or ()), where=tuple(where or ()), minimize=minimize, maximize=maximize, explain=explain,
        seed=seed, max_examples=max_examples, steps=steps, derandomize=derandomize, max_domain=max_domain, walks=walks,
    )
    raise typer.Exit(int(_check_all(specs, settings, "check", junit, sarif, json_out, _print_check)))


def _check_all(specs: list[Path], settings: Settings, command: Any, junit: Path | None, sarif: Path | None,
               json_out: Path | None, show: Any) -> ExitCode:
    """Check each spec in turn, print it with ``show``, write the CI reports; the worst exit code."""
    from ownership.render.ci.writing import reporting

    worst = ExitCode.OK
    runs: list[Any] = []
    with reporting(runs, command=command, junit=junit, sarif=sarif, json_path=json_out):
        for i, spec_path in enumerate(specs):
            if i:
                typer.echo("")
            outcome = _session_check(spec_path, settings, progress=settings.progress)
            show(outcome, runs)
            worst = worse(worst, outcome.exit_code)
            if outcome.result.stop_reason.name == "INTERRUPTED":
                break  # Ctrl-C or SIGTERM: stop here, with what was covered so far
    return worst


def _check_limits(
    max_depth: int | None, max_states: int | None, max_seconds: float | None, solver_timeout: float | None, max_domain: int
) -> None:
    """The search limits every checking command shares, refused out of range with OWN015."""
    inputs.check_search_limits(max_depth, max_states, max_seconds)
    inputs.check_seconds("--solver-timeout", solver_timeout)
    inputs.check_count("--max-domain", max_domain, 1)


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
    from ownership.render.html import render_report
    from ownership.session.report import build_section

    _check_limits(max_depth, max_states, max_seconds, solver_timeout, max_domain)
    engines = list(dict.fromkeys(engine or ["explore"]))
    for e in engines:
        if e not in ("explore", "bmc"):
            raise OwnershipError(Code.BAD_OPTION, f"--engine {e!r}: the report runs explore and/or bmc")
    params = parse_params(param)
    sections = []
    worst = ExitCode.OK
    for spec_path in specs:
        runs = []
        for e in engines:
            s = Settings(engine=e, params=params, max_depth=max_depth, max_states=max_states if e == "explore" else None,
                         max_seconds=max_seconds if e == "explore" else None, symmetry=symmetry, render=False,
                         solver_timeout=solver_timeout, max_domain=max_domain)
            outcome = _session_check(spec_path, s, outputs=False)
            worst = worse(worst, outcome.exit_code)
            runs.append((outcome.result, s.reproduce_flags()))
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


def test_specs(
    directory: DirArg = None,
    library: LibraryOpt = False,
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
    from ownership.lang.loader import spec_files
    from ownership.render.ci.records import error_run, skipped_run, spec_run
    from ownership.render.ci.writing import reporting

    inputs.check_seconds("--max-seconds", max_seconds)
    inputs.check_count("--max-domain", max_domain, 1)
    params = parse_params(param)
    failures = passed = errors = 0
    worst = ExitCode.OK
    directory = spec_folder(directory, library)
    files = spec_files(directory)
    if not files:
        raise OwnershipError(Code.BAD_OPTION, "no spec files here", str(directory))
    runs: list[Any] = []
    with reporting(runs, command="test", junit=junit, sarif=sarif, json_path=json_out):
        for path in files:
            try:  # a spec that does not load or run is listed with its error; the others still run
                spec = session.load(path)
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
                settings = Settings(params=params, max_seconds=max_seconds, symmetry=symmetry, progress=False,
                                    out=out / spec.name if out is not None else None, max_domain=max_domain)
                outcome = session.check(path, settings, spec=spec, outputs=False)
            except OwnershipError as exc:
                typer.echo(f"ERROR  {path}: {exc.one_line()}")
                runs.append(error_run(path, exc, mode="test"))
                errors += 1
                worst = worse(worst, exc.exit_code)
                continue
            result, verdict = outcome.result, outcome.judgement
            assert verdict is not None  # the spec declares an expectation
            ok = verdict.ok
            took = time.perf_counter() - started
            status = "PASS" if ok else "FAIL"
            detail = f"{verdict.got} ({result.stats.states:,} states, depth {result.stats.depth}"
            detail += f", {steps(len(result.trace))}" if result.trace is not None else ""
            detail += f", {took:.2f}s)"
            if verdict.reason:
                detail += f"; {verdict.reason}"
            typer.echo(f"{status}  {spec.name}: expected {verdict.expected}, got {detail}")
            from ownership.render.text import warning_line

            for w in result.vacuity():
                typer.echo(f"      {warning_line(w)}")
            _write_error(outcome)
            if outcome.files:
                typer.echo("      wrote " + ", ".join(str(p) for p in outcome.files))
            runs.append(spec_run(spec, path, result, mode="test", files=outcome.files))
            failures += not ok
            passed += ok
    skipped = len(files) - passed - failures - errors
    typer.echo(
        f"specs: {passed} passed, {failures} failed"
        + (f", {errors} error" + ("s" if errors > 1 else "") if errors else "")
        + (f", {skipped} skipped" if skipped else "")
    )
    raise typer.Exit(int(worse(worst, ExitCode.VIOLATION if failures else ExitCode.OK)))


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
    junit: JunitOpt = None,
    sarif: SarifOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Prove the invariants for executions of any length (k-induction, the reachable set or Spacer, checked by Z3); exit 0 only if PROVED."""
    inputs.check_count("--max-k", max_k, 0)
    inputs.check_seconds("--spacer-timeout", spacer_timeout)
    inputs.check_seconds("--solver-timeout", solver_timeout)
    inputs.check_count("--max-domain", max_domain, 1)
    settings = Settings(
        engine="prove", params=parse_params(param, free), max_seconds=max_seconds,
        invariants=tuple(invariant) if invariant else None, out=out, solver_timeout=solver_timeout,
        free=tuple(free or ()), where=tuple(where or ()), max_k=max_k, spacer=spacer, spacer_timeout=spacer_timeout,
        reach_states=reach_states, max_domain=max_domain,
    )
    raise typer.Exit(int(_check_all(specs, settings, "prove", junit, sarif, json_out, _print_prove)))


def _print_prove(outcome: Outcome, record: list[Any] | None) -> None:
    """What ``ownership prove`` prints for one spec: the report and the files written."""
    if not _print_report(outcome, record, derived=False):
        return
    if outcome.trace_dir is not None:
        _write_error(outcome)
        typer.echo("  wrote " + ", ".join(str(p) for p in outcome.files))
    _record(record, outcome)


