"""What the commands share: the options several take, parameter parsing, exit-code ranking."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from ownership import inputs
from ownership.core.result import CoverageKind
from ownership.engines.registry import ALL, DEFAULT, ENGINE_NAMES, ENGINES
from ownership.engines.schema import INSTANCE, LIMITS, OUTPUT, PROOF, RANDOM, REPORTS, SEARCH
from ownership.errors import Code, ExitCode, OwnershipError


def parse_params(items: list[str] | None, free: list[str] | None = None) -> dict[str, int]:
    return inputs.parse_params(items, free or ())



EngineName = enum.Enum("EngineName", {name: name for name in ENGINE_NAMES}, type=str)  # type: ignore[misc]
"""``--engine``'s choices, built from the engine registry so ``--help`` lists exactly what runs."""
DEFAULT_ENGINE = EngineName(DEFAULT)

_KIND_WORDS = {
    CoverageKind.EXHAUSTIVE: "every reachable state",
    CoverageKind.BOUNDED: "Z3, up to a depth",
    CoverageKind.PROOF: "Z3, any length",
    CoverageKind.SAMPLED: "random interleavings",
}


def engine_help() -> str:
    """``--engine``'s help: every registered engine with what it decides, then ``all``."""
    each = [f"{name} ({_KIND_WORDS.get(engine.decides, engine.decides.value)})" for name, engine in ENGINES.items()]
    return f"{', '.join(each)}, or {ALL.name} ({', '.join(ALL.engines)}, compared)."


__all__ = ["INSTANCE", "LIMITS", "OUTPUT", "PROOF", "RANDOM", "REPORTS", "SEARCH"]

ParamOpt = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", metavar="NAME=VALUE", rich_help_panel=INSTANCE,
                 help="Set a spec parameter (repeatable)."),
]
JunitOpt = Annotated[
    Path | None,
    typer.Option("--junit", parser=inputs.output_file("--junit"), metavar="FILE", rich_help_panel=REPORTS,
                 help="Also write a JUnit XML report."),
]
SarifOpt = Annotated[
    Path | None,
    typer.Option("--sarif", parser=inputs.output_file("--sarif"), metavar="FILE", rich_help_panel=REPORTS,
                 help="Also write a SARIF 2.1.0 log."),
]
ReportOpt = Annotated[
    list[str] | None,
    typer.Option("--report", metavar="FMT=FILE", rich_help_panel=REPORTS,
                 help="Also write FMT (junit, sarif, json) to FILE."),
]


def report_paths(items: list[str] | None, **flags: Path | None) -> dict[str, Path]:
    """The CI reports asked for, by format name: ``--report FMT=FILE`` items and the per-format flags (``junit=...``).

    An unknown format or a malformed item is OWN013 naming the formats; a path is checked as the flags' are (OWN014).
    """
    from ownership.render.ci.writing import REPORT_FORMATS

    out = {name: path for name, path in flags.items() if path is not None}
    for item in items or ():
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not text.strip():
            raise OwnershipError(Code.BAD_OPTION, f"--report {item!r}: write FORMAT=FILE, e.g. --report junit=out.xml")
        if name not in REPORT_FORMATS:
            raise OwnershipError(Code.BAD_OPTION, f"--report {item!r}: unknown format {name!r} (formats: "
                                 f"{', '.join(REPORT_FORMATS)})")
        out[name] = inputs.output_file(f"--report {name}")(text.strip())
    return out


MaxDomainOpt = Annotated[
    int,
    typer.Option(metavar="N", rich_help_panel=INSTANCE,
                 help="Refuse a domain of more than N elements (a typo such as pages=1000000000 would hang)."),
]
JsonOpt = Annotated[
    Path | None,
    typer.Option("--json", parser=inputs.output_file("--json"), metavar="FILE", rich_help_panel=REPORTS,
                 help="Also write the results as JSON."),
]
AllowVacuousOpt = Annotated[
    bool,
    typer.Option("--allow-vacuous", metavar="", rich_help_panel=REPORTS,
                 help="Exit 0, not 3, for a vacuous safe verdict (an action never fired)."),
]
MaxMemoryOpt = Annotated[
    str | None,
    typer.Option("--max-memory", parser=inputs.memory_size("--max-memory"), metavar="SIZE", rich_help_panel=LIMITS,
                 help="Stop the search at this much memory, e.g. 500M, 4G, 2.5GiB, bytes or none "
                      "(UNKNOWN, exit 3; default: 80% of the least of RAM, the cgroup limit and ulimit -v)."),
]
LibraryOpt = Annotated[
    bool,
    typer.Option("--library", help="Read the spec library installed with ownership, not a folder."),
]
DirArg = Annotated[Path | None, typer.Argument(metavar="DIR", help="Folder of spec files (default: specs).")]


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


