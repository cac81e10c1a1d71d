"""``ownership preflight``: the deploy gate's command line (the work is :mod:`ownership.preflight`'s)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ownership import inputs
from ownership.errors import Code, OwnershipError


def preflight(
    prefill: Annotated[Path | None, typer.Option(help="The prefill node's startup log, or its GET /server_info JSON.")] = None,
    decode: Annotated[Path | None, typer.Option(help="The decode node's startup log, or its GET /server_info JSON.")] = None,
    node: Annotated[Path | None, typer.Option(help="A single node's startup log or server-info JSON (no disaggregation).")] = None,
    engine: Annotated[str, typer.Option(help="sglang, vllm, or auto (from the files).")] = "auto",
    version: Annotated[str | None, typer.Option(help="The engine release, e.g. 0.5.20 (required when the files do not say; SGLang's log does not).")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="Wall-clock limit per analysis (reached: UNKNOWN, exit 3).")] = 300.0,
    check_remedy: Annotated[bool, typer.Option("--check-remedy/--no-check-remedy", help="Re-run the analysis at the lowered --context-length the remedy names.")] = True,
    json_out: Annotated[Path | None, typer.Option("--json", parser=inputs.output_file("--json"), help="Also write the verdict as JSON (format ownership-preflight).")] = None,
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
    if json_out is not None:
        inputs.check_output_file(json_out, "--json")
    nodes = [read_node(p) for p in ((node,) if node is not None else (prefill, decode)) if p is not None]
    for n in nodes:
        if engine != "auto" and n.engine != engine:
            raise OwnershipError(Code.PREFLIGHT_CONTRADICTORY, f"--engine {engine}, but this is a {n.engine} log", n.file)
    dep = deployment(nodes[0], nodes[1] if len(nodes) > 1 else None, version)
    result = evaluate(dep, max_seconds=max_seconds, check_remedy=check_remedy)
    for line in text(result):
        typer.echo(line)
    if json_out is not None:
        with inputs.writing(json_out, "--json"):
            json_out.write_text(json.dumps(document(result), indent=1) + "\n")
    raise typer.Exit(int(result.status.value))
