"""What the commands share: the options several take, parameter parsing, exit-code ranking."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ownership import inputs
from ownership.errors import Code, ExitCode, OwnershipError


def parse_params(items: list[str] | None, free: list[str] | None = None) -> dict[str, int]:
    return inputs.parse_params(items, free or ())



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
LibraryOpt = Annotated[
    bool,
    typer.Option("--library", help="Read the spec library installed with ownership instead of a folder (works from any directory)."),
]
DirArg = Annotated[Path | None, typer.Argument(help="Folder of spec files (default: specs).")]


def spec_folder(directory: Path | None, library: bool) -> Path:
    """The folder ``list`` and ``test`` read: DIR, the installed library with ``--library``, else ``specs``."""
    if library:
        if directory is not None:
            raise OwnershipError(Code.BAD_OPTION, f"--library and the folder {directory} both say which specs to read; pass one")
        from ownership.library import library_dir

        return library_dir()
    return Path("specs") if directory is None else directory


def worse(a: ExitCode, b: ExitCode) -> ExitCode:
    rank = {ExitCode.OK: 0, ExitCode.INCONCLUSIVE: 1, ExitCode.VIOLATION: 2, ExitCode.USAGE: 3, ExitCode.INTERNAL: 4}
    return a if rank[a] >= rank[b] else b



def steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


