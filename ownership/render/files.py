"""A counterexample's files, one registry row per format: the trace, its ITF export, the DOT and the pictures.

A :class:`TraceFormat` names a file written into the counterexample folder
and the function that writes it.  The text formats are always written (they
are cheap and a picture is drawn from the DOT); a picture format is written
when asked for (``--format svg,png``).  Adding a format is a writer and a row
of :data:`TRACE_FORMATS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ownership.core.trace import Trace
from ownership.errors import Code, OwnershipError
from ownership.render.dot import trace_to_dot
from ownership.render.graphviz_bin import render
from ownership.render.itf import write_itf


@dataclass
class Drawn:
    """A trace being written, with its DOT made once for every format that needs it."""

    trace: Trace
    _dot: str | None = field(default=None, repr=False)

    @property
    def dot(self) -> str:
        if self._dot is None:
            self._dot = trace_to_dot(self.trace)
        return self._dot


@dataclass(frozen=True)
class TraceFormat:
    """One file of a counterexample folder (see the module docstring)."""

    name: str
    file: str
    write: Callable[[Drawn, Path], object]
    picture: bool = False
    """Drawn only when asked for (a renderer runs); the others are always written."""


def _picture(fmt: str) -> Callable[[Drawn, Path], object]:
    return lambda drawn, path: path.write_bytes(render(drawn.dot, fmt))


TRACE_FORMATS: tuple[TraceFormat, ...] = (
    TraceFormat("json", "trace.json", lambda drawn, path: drawn.trace.save(path)),
    TraceFormat("itf", "trace.itf.json", lambda drawn, path: write_itf(drawn.trace, path)),
    TraceFormat("dot", "trace.dot", lambda drawn, path: path.write_text(drawn.dot, encoding="utf-8")),
    TraceFormat("svg", "trace.svg", _picture("svg"), picture=True),
    TraceFormat("png", "trace.png", _picture("png"), picture=True),
)
"""Every file a counterexample folder can hold, in the order they are written."""

PICTURES: tuple[str, ...] = tuple(f.name for f in TRACE_FORMATS if f.picture)


def write_counterexample(trace: Trace, out_dir: Path, formats: Sequence[str] = ("svg",)) -> list[Path]:
    """Write every text format and the pictures in ``formats`` into ``out_dir`` (created if needed).

    The text files are written before any picture, so a missing or failing
    renderer (OWN031/OWN030) still leaves the trace and its DOT behind.
    Returns the paths written, in that order.
    """
    for fmt in formats:
        if fmt not in PICTURES:
            raise OwnershipError(Code.BAD_OPTION, f"cannot render to {fmt!r}: supported formats are {', '.join(PICTURES)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    drawn = Drawn(trace)
    asked = set(formats)
    written: list[Path] = []
    for f in TRACE_FORMATS:
        if f.picture and f.name not in asked:
            continue
        path = out / f.file
        f.write(drawn, path)
        written.append(path)
    return written
