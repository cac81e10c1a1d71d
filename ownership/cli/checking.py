"""The checking commands: ``check``, ``prove``, ``test`` and ``report``.

Each parses its flags into :class:`~ownership.session.Settings`, runs
:func:`ownership.session.check` and prints the outcome; nothing else.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ownership import inputs, session
from ownership.cli.common import (
    DEFAULT_ENGINE,
    INSTANCE,
    LIMITS,
    OUTPUT,
    SEARCH,
    AllowVacuousOpt,
    DirArg,
    EngineName,
    JsonOpt,
    JunitOpt,
    LibraryOpt,
    MaxDomainOpt,
    MaxMemoryOpt,
    ParamOpt,
    ReportOpt,
    SarifOpt,
    engine_help,
    parse_params,
    report_paths,
    spec_folder,
    steps,
    worse,
)
from ownership.cli.generated import engine_options
from ownership.core.progress import Progress
from ownership.core.verdicts import verdict_words
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
            # Rewritten in place: a line wider than the terminal would wrap and scroll instead.
            width = shutil.get_terminal_size().columns - 1
            line = p.line()
            sys.stderr.write("\r" + (line if len(line) <= width else line[: width - 3] + "...") + "\033[K")
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


def _print_report(outcome: Outcome, record: list[Any] | None, *, derived: bool, allow_vacuous: bool) -> bool:
    """The result report of one spec; ``False`` (and the run recorded) when it stopped before any engine ran."""
    from ownership.render.text import result_report, vacuous_status_lines

    spec, result = outcome.spec, outcome.result
    if outcome.stopped_in_setup:
        for line in result_report(result):
            typer.echo(line)
        _record(record, outcome, allow_vacuous)
        return False
    doc = spec.invariants[result.violated].doc if result.violated in spec.invariants else ""
    ghosts = [v.name for v in spec.vars.values() if v.ghost]
    for line in result_report(result, invariant_doc=doc, ghosts=ghosts,
                              derived=spec.derived_values.values() if derived else ()):
        typer.echo(line)
    if result.vacuous:
        for line in vacuous_status_lines(result, allow_vacuous):
            typer.echo(line)
    return True


def _print_check(outcome: Outcome, record: list[Any] | None, allow_vacuous: bool) -> None:
    """What ``ownership check`` prints for one spec: the report, the other engines, the files, the reproduce line."""
    if not _print_report(outcome, record, derived=True, allow_vacuous=allow_vacuous):
        return
    for other, relation, why in outcome.relations:
        # "agrees" only when both results promise something comparable; a sampled pass never does.
        typer.echo(f"  {relation}: {other.engine} says {verdict_words(other)}: {why}; {other.coverage()}")
    for line in outcome.overruled(allow_vacuous):
        typer.echo(f"  {line}")
    for line in outcome.explanation:
        typer.echo(line)
    if outcome.trace_dir is not None:
        _write_error(outcome)
        typer.echo("")
        typer.echo("  wrote " + ", ".join(str(p) for p in outcome.files))
        typer.echo(f"  replay: ownership replay {outcome.trace_dir / 'trace.json'}")
    typer.echo(f"  reproduce: {outcome.reproduce}")
    _record(record, outcome, allow_vacuous)


def _write_error(outcome: Outcome) -> None:
    if outcome.write_error is not None:
        sys.stderr.write(outcome.write_error.one_line() + " (trace.json and trace.dot were still written)\n")


def _record(record: list[Any] | None, outcome: Outcome, allow_vacuous: bool) -> None:
    """Add the CI reports' record of the run (see ``ownership.render.ci``)."""
    if record is not None:
        from ownership.render.ci.records import spec_run

        # The violation that set the exit status (another engine's, under `all`, when the reference has none).
        record.append(spec_run(outcome.spec, outcome.path, outcome.shown, files=outcome.files,
                               allow_vacuous=allow_vacuous))


@engine_options("check")
def check(
    specs: Annotated[list[Path], typer.Argument(metavar="SPEC", help="Spec files (Python modules defining `spec`).",
                                                show_default=False)],
    engine: Annotated[EngineName, typer.Option(
        metavar="ENGINE", rich_help_panel=SEARCH, help=engine_help())] = DEFAULT_ENGINE,
    param: ParamOpt = None,
    invariant: Annotated[list[str] | None, typer.Option(
        "--invariant", "-i", metavar="NAME", rich_help_panel=SEARCH, help="Check only this invariant.")] = None,
    explain: Annotated[bool, typer.Option(
        "--explain", metavar="", rich_help_panel=SEARCH,
        help="Under a counterexample, what every path to it has in common.")] = False,
    symmetry: Annotated[bool, typer.Option(
        "--symmetry/--no-symmetry", metavar="", rich_help_panel=INSTANCE,
        help="Merge states equal up to renaming symmetric elements.")] = True,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
    max_depth: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=LIMITS, help="Stop after N steps (BOUNDED_OK).")] = None,
    max_states: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=LIMITS, help="Stop after N states (UNKNOWN, exit 3).")] = None,
    max_seconds: Annotated[float | None, typer.Option(
        metavar="SECONDS", rich_help_panel=LIMITS, help="Time limit per spec (UNKNOWN, exit 3).")] = None,
    max_memory: MaxMemoryOpt = None,
    out: Annotated[Path | None, typer.Option(
        parser=inputs.output_dir("--out"), metavar="DIR", rich_help_panel=OUTPUT,
        help="Folder for the counterexample (default: under counterexamples/).")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", metavar="svg|png|svg,png", rich_help_panel=OUTPUT, help="Picture format.")] = "svg",
    render: Annotated[bool, typer.Option(
        "--render/--no-render", metavar="", rich_help_panel=OUTPUT,
        help="Draw the picture (the JSON and DOT files are always written).")] = True,
    progress: Annotated[bool, typer.Option(
        "--progress/--no-progress", metavar="", rich_help_panel=OUTPUT,
        help="Progress lines on stderr for long runs.")] = True,
    junit: JunitOpt = None,
    sarif: SarifOpt = None,
    json_out: JsonOpt = None,
    report: ReportOpt = None,
    allow_vacuous: AllowVacuousOpt = False,
    options: dict[str, Any] | None = None,
) -> None:
    """Check specs; print the verdict, what was covered, and any counterexample."""
    formats = tuple(f.strip() for f in fmt.split(",") if f.strip())
    for f in formats:
        if f not in ("svg", "png"):
            raise OwnershipError(Code.BAD_OPTION, f"--format {f!r}: use svg, png or svg,png")
    options = options or {}
    _check_limits(max_depth, max_states, max_seconds, max_domain)
    free = options.get("free", ())
    inputs.check_optimised(free, options.get("minimize"), options.get("maximize"))
    settings = Settings(
        engine=engine.value, params=parse_params(param, list(free)), max_depth=max_depth, max_states=max_states,
        max_seconds=max_seconds, max_memory=max_memory, symmetry=symmetry,
        invariants=tuple(invariant) if invariant else None, out=out, formats=formats, render=render, progress=progress,
        explain=explain, max_domain=max_domain, options=options,
    )
    reports = report_paths(report, junit=junit, sarif=sarif, json=json_out)
    raise typer.Exit(int(_check_all(specs, settings, "check", reports, _print_check, allow_vacuous)))


def _check_all(specs: list[Path], settings: Settings, command: Any, reports: dict[str, Path], show: Any,
               allow_vacuous: bool) -> ExitCode:
    """Check each spec in turn, print it with ``show``, write the CI reports; the worst exit code."""
    from ownership.render.ci.writing import reporting

    worst = ExitCode.OK
    runs: list[Any] = []
    with reporting(runs, command=command, reports=reports):
        for i, spec_path in enumerate(specs):
            if i:
                typer.echo("")
            outcome = _session_check(spec_path, settings, progress=settings.progress)
            show(outcome, runs, allow_vacuous)
            # Every engine of `all` counts: a violation or an inconclusive run is never hidden behind the reference's 0.
            worst = worse(worst, outcome.exit_code_allowing(allow_vacuous))
            if outcome.result.stop_reason.name == "INTERRUPTED":
                break  # Ctrl-C or SIGTERM: stop here, with what was covered so far
    return worst


def _check_limits(max_depth: int | None, max_states: int | None, max_seconds: float | None, max_domain: int) -> None:
    """The search limits every checking command shares, refused out of range with OWN015."""
    inputs.check_search_limits(max_depth, max_states, max_seconds)
    inputs.check_count("--max-domain", max_domain, 1)


def report(
    specs: Annotated[list[Path], typer.Argument(metavar="SPEC", help="Spec files.", show_default=False)],
    out: Annotated[Path, typer.Option(
        "--out", "-o", parser=inputs.output_file("--out"), metavar="FILE", rich_help_panel=OUTPUT,
        help="The HTML file to write.")] = Path("report.html"),
    engine: Annotated[list[str] | None, typer.Option(
        "--engine", metavar="explore|bmc", rich_help_panel=SEARCH,
        help="Engine to run (repeatable; default explore).")] = None,
    param: ParamOpt = None,
    symmetry: Annotated[bool, typer.Option(
        "--symmetry/--no-symmetry", rich_help_panel=INSTANCE,
        help="Merge states equal up to renaming symmetric elements.")] = True,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
    max_depth: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=LIMITS, help="Stop after N steps.")] = None,
    max_states: Annotated[int | None, typer.Option(
        metavar="N", rich_help_panel=LIMITS, help="explore: stop after N states (bounds the diagnosis too).")] = None,
    max_seconds: Annotated[float | None, typer.Option(
        metavar="SECONDS", rich_help_panel=LIMITS, help="explore: wall-clock limit.")] = None,
    max_memory: MaxMemoryOpt = None,
    solver_timeout: Annotated[float | None, typer.Option(
        metavar="SECONDS", rich_help_panel=LIMITS, help="bmc: limit per solver call.")] = None,
    allow_vacuous: AllowVacuousOpt = False,
) -> None:
    """Write a self-contained HTML design-review report: verdicts, pictures, steps, spec source, diagnosis."""
    from ownership.render.html import render_report
    from ownership.session.report import build_section

    _check_limits(max_depth, max_states, max_seconds, max_domain)
    inputs.check_seconds("--solver-timeout", solver_timeout)
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
                         max_domain=max_domain, max_memory=max_memory,
                         options={"solver_timeout": solver_timeout} if e == "bmc" else {})
            outcome = _session_check(spec_path, s, outputs=False)
            worst = worse(worst, outcome.result.exit_code_allowing(allow_vacuous))
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
    symmetry: Annotated[bool, typer.Option(
        "--symmetry/--no-symmetry", rich_help_panel=INSTANCE,
        help="Merge states equal up to renaming symmetric elements.")] = True,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
    max_seconds: Annotated[float | None, typer.Option(
        metavar="SECONDS", rich_help_panel=LIMITS, help="Per-spec time limit (a spec that hits it fails).")] = None,
    max_memory: MaxMemoryOpt = None,
    out: Annotated[Path | None, typer.Option(
        parser=inputs.output_dir("--out"), metavar="DIR", rich_help_panel=OUTPUT,
        help="Write each counterexample to a folder per spec in DIR (default: none).")] = None,
    junit: JunitOpt = None,
    sarif: SarifOpt = None,
    json_out: JsonOpt = None,
    report: ReportOpt = None,
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
    with reporting(runs, command="test", reports=report_paths(report, junit=junit, sarif=sarif, json=json_out)):
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
                settings = Settings(params=params, max_seconds=max_seconds, max_memory=max_memory, symmetry=symmetry,
                                    progress=False,
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
            stats = f"{result.stats.states:,} states, depth {result.stats.depth}"
            stats += f", {steps(len(result.trace))}" if result.trace is not None else ""
            stats += f", {took:.2f}s"
            # "got a vacuous safe verdict (action x never fired)" has its parenthesis already.
            detail = f"{verdict.got}; {stats}" if verdict.got.endswith(")") else f"{verdict.got} ({stats})"
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


@engine_options("prove")
def prove(
    specs: Annotated[list[Path], typer.Argument(metavar="SPEC", help="Spec files.", show_default=False)],
    param: ParamOpt = None,
    invariant: Annotated[list[str] | None, typer.Option(
        "--invariant", "-i", metavar="NAME", rich_help_panel=SEARCH,
        help="Prove only this invariant (helpers still assumed).")] = None,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
    max_seconds: Annotated[float | None, typer.Option(
        metavar="SECONDS", rich_help_panel=LIMITS, help="Wall-clock limit per spec (reached: exit 3).")] = None,
    out: Annotated[Path | None, typer.Option(
        parser=inputs.output_dir("--out"), metavar="DIR", rich_help_panel=OUTPUT,
        help="Folder for a counterexample (default: under counterexamples/).")] = None,
    junit: JunitOpt = None,
    sarif: SarifOpt = None,
    json_out: JsonOpt = None,
    report: ReportOpt = None,
    allow_vacuous: AllowVacuousOpt = False,
    options: dict[str, Any] | None = None,
) -> None:
    """Prove the invariants for executions of any length (k-induction, the reachable set or Spacer, checked by Z3); exit 0 only if PROVED."""
    inputs.check_count("--max-domain", max_domain, 1)
    options = options or {}
    settings = Settings(
        engine="prove", params=parse_params(param, list(options.get("free", ()))), max_seconds=max_seconds,
        invariants=tuple(invariant) if invariant else None, out=out, max_domain=max_domain, options=options,
    )
    reports = report_paths(report, junit=junit, sarif=sarif, json=json_out)
    raise typer.Exit(int(_check_all(specs, settings, "prove", reports, _print_prove, allow_vacuous)))


def _print_prove(outcome: Outcome, record: list[Any] | None, allow_vacuous: bool) -> None:
    """What ``ownership prove`` prints for one spec: the report and the files written."""
    if not _print_report(outcome, record, derived=False, allow_vacuous=allow_vacuous):
        return
    if outcome.trace_dir is not None:
        _write_error(outcome)
        typer.echo("  wrote " + ", ".join(str(p) for p in outcome.files))
    _record(record, outcome, allow_vacuous)


