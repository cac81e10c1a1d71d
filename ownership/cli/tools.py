"""The other commands: ``list``, ``mbt``, ``replay``, ``render``, ``graph`` and ``mutate``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ownership import inputs, session
from ownership.cli.common import INSTANCE, DirArg, LibraryOpt, MaxDomainOpt, ParamOpt, parse_params, spec_folder
from ownership.errors import Code, ExitCode, OwnershipError


def list_specs(
    directory: DirArg = None,
    library: LibraryOpt = False,
) -> None:
    """List specs with their summary, source, parameters, invariants and expected verdict."""
    from ownership.lang.loader import load_spec, spec_files

    for path in spec_files(spec_folder(directory, library)):
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


def mbt(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="The spec the implementation must follow.")],
    adapter: Annotated[str, typer.Option(metavar="MODULE:CLASS", help="The adapter: module:Class or path/to/file.py:Class.")],
    param: ParamOpt = None,
    max_examples: Annotated[int, typer.Option(help="Number of random examples.")] = 100,
    steps: Annotated[int, typer.Option(help="Steps per example.")] = 30,
    seed: Annotated[int | None, typer.Option(help="Random seed (a run without one prints the seed it drew).")] = None,
    derandomize: Annotated[bool, typer.Option("--derandomize", help="Same examples on every run (CI mode).")] = False,
    out: Annotated[Path | None, typer.Option(parser=inputs.output_dir("--out"), metavar="DIR", help="Folder for the spec side of a failing run (trace.json, picture).")] = None,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
    max_seconds: Annotated[float | None, typer.Option(
        metavar="SECONDS", help="Wall-clock limit (reached: UNKNOWN, exit 3).")] = None,
) -> None:
    """Model-based test: drive an implementation and SPEC in lock step; fail at the first step they disagree."""
    from ownership.core.verdicts import headline
    from ownership.lang.loader import load_spec
    from ownership.session.run import COMMAND_LINE
    from ownership.testing.adapter import load_adapter
    from ownership.testing.mbt import MBTOptions, run_mbt

    inputs.check_count("--max-examples", max_examples, 1)
    inputs.check_count("--steps", steps, 1)
    inputs.check_count("--seed", seed, 0)
    inputs.check_count("--max-domain", max_domain, 1)
    inputs.check_seconds("--max-seconds", max_seconds)
    params = parse_params(param)
    cls = load_adapter(adapter)
    spec = load_spec(spec_path)
    # The instance-size check (OWN017) and the time limit are run_mbt's, as for every front end.
    result = run_mbt(
        cls, MBTOptions(max_examples=max_examples, steps=steps, seed=seed, derandomize=derandomize,
                        max_seconds=max_seconds, max_domain=max_domain),
        spec=spec, params=params, limits=COMMAND_LINE,
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
    flags += [f"--max-seconds {max_seconds}"] if max_seconds is not None else []
    typer.echo(f"  reproduce: ownership mbt {spec_path} {' '.join(flags)}")
    raise typer.Exit(int(result.exit_code))


def replay(
    trace_file: Annotated[Path, typer.Argument(metavar="TRACE", help="A trace.json written by `ownership check`.")],
    spec_path: Annotated[Path | None, typer.Option("--spec", metavar="SPEC", help="Spec file (default: the path recorded in the trace).")] = None,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
) -> None:
    """Re-execute a saved trace on its spec and confirm its violation (exit 0), or say where it diverges (exit 1)."""
    from ownership.core.replay import replay as do_replay
    from ownership.core.trace import Trace
    from ownership.lang.instance import Instance
    from ownership.lang.loader import load_spec

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


def render(
    trace_file: Annotated[Path, typer.Argument(metavar="TRACE", help="A trace.json written by `ownership check`.")],
    fmt: Annotated[str, typer.Option("--format", "-f", metavar="svg|png|dot", help="Picture format.")] = "svg",
    out: Annotated[Path | None, typer.Option("--out", "-o", parser=inputs.output_file("--out"), metavar="FILE", help="Output file (default: next to the trace).")] = None,
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


def graph(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Spec file.")],
    out: Annotated[Path, typer.Option("--out", "-o", parser=inputs.output_file("--out"), metavar="FILE", help="Output file: .graphml, .gexf or .dot.")],
    param: ParamOpt = None,
    max_states: Annotated[int, typer.Option(help="Refuse graphs with more states than this.")] = 200_000,
    symmetry: Annotated[bool, typer.Option("--symmetry/--no-symmetry", rich_help_panel=INSTANCE,
                                           help="Merge states equal up to renaming symmetric elements.")] = True,
    max_domain: MaxDomainOpt = inputs.DEFAULT_MAX_DOMAIN,
) -> None:
    """Export the reachable state graph (networkx) for other tools."""
    params = parse_params(param)
    g = session.export_graph(spec_path, out, params, max_states=max_states, symmetry=symmetry, max_domain=max_domain)
    typer.echo(g.summary())


def mutate(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="Spec file whose own code is mutated.")],
    engine: Annotated[str, typer.Option("--engine", "-e", metavar="ENGINE",
                                        help="Engine that checks each mutant: explore, bmc or hypothesis.")] = "explore",
    max_seconds_per_mutant: Annotated[float, typer.Option(
        "--max-seconds-per-mutant", min=0.001, help="Time limit per mutant (engine run and graph comparison).")] = 30.0,
    json_out: Annotated[Path | None, typer.Option("--json", metavar="FILE", help="Also write every mutant, its outcome and diff as JSON.")] = None,
    param: ParamOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List killed and equivalent mutants too.")] = False,
) -> None:
    """Mutation-test a safe spec: does it notice small faults in its own actions, helpers and invariants?

    Exit 0 when every mutant is killed, equivalent or accepted, 1 when one survives; a spec expecting a violation is refused.
    """
    import json

    from ownership.analysis.mutate import MUTATE_ENGINES, MutateOptions
    from ownership.analysis.mutate import mutate as run_mutate
    from ownership.analysis.mutation_report import report_lines

    if engine not in MUTATE_ENGINES:
        raise OwnershipError(Code.BAD_OPTION, f"--engine {engine!r}: mutate runs explore, bmc or hypothesis")
    options = MutateOptions(engine=engine, max_seconds_per_mutant=max_seconds_per_mutant,
                            params=tuple(sorted(parse_params(param).items())))
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


def validate(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC", help="The spec the run must be a behaviour of (it declares spec.log_ids and spec.logs).")],
    log_path: Annotated[Path, typer.Argument(metavar="LOG", help="The event log of the run (JSON lines, docs/event-log.md).")],
    max_gap: Annotated[int, typer.Option(help="Unlogged internal steps allowed between two logged events.")] = 2,
    max_configs: Annotated[int, typer.Option(help="Configurations (spec state + id bindings) kept per line; dropping some makes a rejection inconclusive.")] = 10_000,
    unlogged: Annotated[list[str] | None, typer.Option("--unlogged", metavar="KIND", help="An event kind this log does not record (repeatable): its actions may run between logged events.")] = None,
    param: ParamOpt = None,
    json_out: Annotated[Path | None, typer.Option("--json", parser=inputs.output_file("--json"), metavar="FILE", help="Also write the result as JSON (docs/validate.md).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="For a rejection, also print the spec states before it, every candidate per state and the raw event.")] = False,
) -> None:
    """Check a recorded event log against SPEC: VALIDATED (exit 0), or REJECTED at the first line no behaviour explains (exit 1)."""
    from ownership.session.validate import validate as run_validate
    from ownership.validate.report import json_report, text_report
    from ownership.validate.search import ValidateOptions

    inputs.check_count("--max-gap", max_gap, 0)
    inputs.check_count("--max-configs", max_configs, 1)
    from ownership.lang.logmap import LOG_KINDS

    for kind in unlogged or ():
        if kind not in LOG_KINDS:
            raise OwnershipError(Code.BAD_OPTION, f"--unlogged {kind}: not an event kind (known: {', '.join(LOG_KINDS)})")
    params = parse_params(param)
    started = time.monotonic()

    def progress(line: int, configs: int) -> None:
        sys.stderr.write(f"  ... event {line:,}, {configs:,} configurations, {time.monotonic() - started:.0f}s\n")

    result = run_validate(spec_path, log_path, ValidateOptions(max_gap=max_gap, max_configs=max_configs,
                                                                  unlogged=tuple(unlogged or ())), params,
                          progress)
    for line in text_report(result, verbose=verbose):
        typer.echo(line)
    if json_out is not None:
        import json

        with inputs.writing(json_out, "--json"):
            json_out.write_text(json.dumps(json_report(result, max_gap), indent=1) + "\n", encoding="utf-8")
    raise typer.Exit(result.exit_code)
