"""``ownership preflight``: the deploy gate's command line (the work is :mod:`ownership.preflight`'s)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Annotated, TextIO

import typer

from ownership import inputs
from ownership.core.progress import Progress
from ownership.errors import Code, OwnershipError


class PhaseLines:
    """Progress on stderr for a preflight run: the phase it is in and, during an analysis, the explorer's counts.

    The same rules as ``check``'s progress: nothing in the first second (a run
    that ends sooner prints nothing), then on a terminal one line rewritten in
    place and cleared at the end, elsewhere (a CI log) a line per phase and per
    report.  Never on stdout, which may be carrying ``--json -``.
    """

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.perf_counter()
        self.name = ""
        self.printed = False

    def phase(self, name: str) -> None:
        """Announce ``name``; the explorer's reports that follow are shown under it."""
        self.name = name
        self._show(f"  ... {name}, starting after {self._elapsed():.0f}s")

    def __call__(self, p: Progress) -> None:
        self._show(f"  ... {self.name}: {p.line().removeprefix('  ... ')}")

    def done(self) -> None:
        """Clear the terminal's progress line so the report starts on a clean line."""
        if self.tty and self.printed:
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _elapsed(self) -> float:
        return time.perf_counter() - self.start

    def _show(self, line: str) -> None:
        if not self.enabled or self._elapsed() < 1.0:
            return
        if self.tty:  # one line, cut to the terminal's width: a wrapped line would not be rewritten in place
            width = shutil.get_terminal_size().columns - 1
            self.stream.write("\r" + line[:width] + "\033[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.printed = True


def preflight(
    prefill: Annotated[Path | None, typer.Option(help="The prefill node's startup log, or its GET /server_info JSON.")] = None,
    decode: Annotated[Path | None, typer.Option(help="The decode node's startup log, or its GET /server_info JSON.")] = None,
    node: Annotated[Path | None, typer.Option(help="A single node's startup log or server-info JSON (no disaggregation).")] = None,
    engine: Annotated[str, typer.Option(help="sglang, vllm, or auto (from the files).")] = "auto",
    version: Annotated[str | None, typer.Option(help="The engine release, e.g. 0.5.20 (required when the files do not say; SGLang's log does not).")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="Wall-clock limit per analysis (reached: UNKNOWN, exit 3).")] = 300.0,
    check_remedy: Annotated[bool, typer.Option("--check-remedy/--no-check-remedy", help="Re-run the analysis at the lowered --context-length the remedy names.")] = True,
    json_out: Annotated[Path | None, typer.Option("--json", parser=inputs.output_file("--json", stdout=True), help="Also write the verdict as JSON (format ownership-preflight); - for stdout (the report then goes to stderr).")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress on stderr for runs longer than a second.")] = True,
) -> None:
    """Check a deployment before it ships: SAFE (exit 0), UNSAFE (1), NOT COVERED (5), bad input (6)."""
    from ownership.preflight import deployment, evaluate, read_node
    from ownership.preflight.render import document, text

    if node is not None and (prefill is not None or decode is not None):
        raise OwnershipError(Code.BAD_OPTION, "--node is for a single node; give --prefill and --decode otherwise")
    if node is None and (prefill is None or decode is None):
        raise OwnershipError(Code.BAD_OPTION, "give --prefill FILE and --decode FILE (or --node FILE for one node)")
    if engine not in ("auto", "sglang", "vllm"):
        raise OwnershipError(Code.BAD_OPTION, f"--engine {engine!r}: use sglang, vllm or auto")
    inputs.check_seconds("--max-seconds", max_seconds)
    to_stdout = json_out is inputs.STDOUT
    lines = PhaseLines(progress)
    try:
        lines.phase("reading the logs")
        nodes = [read_node(p) for p in ((node,) if node is not None else (prefill, decode)) if p is not None]
        for n in nodes:
            if engine != "auto" and n.engine != engine:
                raise OwnershipError(Code.PREFLIGHT_CONTRADICTORY, f"--engine {engine}, but this is a {n.engine} log", n.file)
        dep = deployment(nodes[0], nodes[1] if len(nodes) > 1 else None, version)
        result = evaluate(dep, max_seconds=max_seconds, check_remedy=check_remedy, progress=lines)
    finally:
        lines.done()
    for line in text(result):
        typer.echo(line, err=to_stdout)  # with --json -, stdout carries the JSON alone
    doc = json.dumps(document(result), indent=1) + "\n"
    if to_stdout:
        typer.echo(doc, nl=False)
    elif json_out is not None:
        with inputs.writing(json_out, "--json"):
            json_out.write_text(doc)
    raise typer.Exit(int(result.status.value))
