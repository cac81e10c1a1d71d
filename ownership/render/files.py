"""Write a counterexample's files: the trace, its ITF export, the DOT and the pictures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ownership.core.itf import write_itf
from ownership.core.trace import Trace
from ownership.errors import Code, OwnershipError
from ownership.render.dot import trace_to_dot
from ownership.render.graphviz_bin import FORMATS, render


def write_counterexample(trace: Trace, out_dir: Path, formats: Sequence[str] = ("svg",)) -> list[Path]:
    """Write ``trace.json``, ``trace.itf.json``, ``trace.dot`` and ``trace.<fmt>`` into ``out_dir``.

    ``out_dir`` is created if needed.  The text files are written before any
    picture, so a missing or failing renderer (OWN031/OWN030) still leaves
    the trace and its DOT behind.  Returns the paths written, in that order.
    """
    for fmt in formats:
        if fmt not in FORMATS:
            raise OwnershipError(Code.BAD_OPTION, f"cannot render to {fmt!r}: supported formats are {', '.join(FORMATS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [trace.save(out / "trace.json"), write_itf(trace, out / "trace.itf.json")]
    dot = trace_to_dot(trace)
    dot_path = out / "trace.dot"
    dot_path.write_text(dot, encoding="utf-8")
    written.append(dot_path)
    for fmt in dict.fromkeys(formats):  # each format once, in the order asked
        path = out / f"trace.{fmt}"
        path.write_bytes(render(dot, fmt))
        written.append(path)
    return written
