"""Find a Graphviz renderer and run it.

Pictures are drawn by a ``dot``-compatible program fed DOT on stdin.  The
lookup order is:

1. ``$OWNERSHIP_DOT``, when set: an explicit program (a path or a name on
   ``PATH``, optionally followed by arguments); a value that names nothing is
   an error rather than a silent fallback, so a misconfiguration is noticed;
2. ``dot`` on ``PATH`` (a system Graphviz);
3. ``graphviz-pure`` (the pip-installable Rust port with the same command
   line), first next to the running interpreter (the virtual environment's
   ``bin``/``Scripts`` directory, which need not be on ``PATH``), then on
   ``PATH``.

The ``graphviz`` Python package would not shorten this: its ``pipe`` always
runs a program named ``dot`` (with ``-Kdot``, from a fixed list of layout
engines), so it can run neither ``graphviz-pure`` nor ``$OWNERSHIP_DOT``, and
it has no timeout; the lookup above would stay, and the one
:func:`subprocess.run` it would replace is all this module adds.  The DOT text
itself is three nodes with HTML-like labels (``render/dot*.py``), which a
``graphviz.Digraph`` would only wrap.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from ownership.errors import Code, OwnershipError

ENV_VAR = "OWNERSHIP_DOT"
"""Environment variable naming an explicit renderer."""

FORMATS = ("svg", "png")
"""Output formats :func:`render` accepts."""

TIMEOUT_S = 60
"""Seconds a renderer may run before it is killed."""

_INSTALL_HINT = "pip install graphviz-pure (or install Graphviz so that `dot` is on PATH, or set OWNERSHIP_DOT)"
_PURE = "graphviz-pure"


def _exe_names(stem: str) -> list[str]:
    # Windows console scripts carry an extension; elsewhere the bare name is the file.
    return [f"{stem}.exe", stem] if os.name == "nt" else [stem]


def _from_env(value: str) -> list[str]:
    """The command named by ``$OWNERSHIP_DOT``; raises OWN031 if it names nothing."""
    if Path(value).is_file():
        # A path with spaces in it must not be split into arguments.
        return [value]
    try:
        parts = shlex.split(value, posix=os.name != "nt")
    except ValueError as exc:
        raise OwnershipError(Code.NO_RENDERER, f"{ENV_VAR}={value!r} does not parse ({exc}); set it to a dot program") from None
    found = shutil.which(parts[0]) if parts else None
    if found is None:
        raise OwnershipError(
            Code.NO_RENDERER,
            f"{ENV_VAR}={value!r} is not an executable program; point it at dot or graphviz-pure, or unset it",
        )
    return [found, *parts[1:]]


def _next_to_interpreter() -> str | None:
    """``graphviz-pure`` installed into the running environment, even if not on PATH."""
    dirs: list[Path] = [Path(sys.executable).parent]
    scripts = sysconfig.get_path("scripts")
    if scripts:
        dirs.append(Path(scripts))
    for d in dirs:
        for name in _exe_names(_PURE):
            candidate = d / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def find_renderer() -> list[str] | None:
    """The command (program and fixed arguments) that renders DOT, or ``None``.

    Raises :class:`OwnershipError` (OWN031) when ``$OWNERSHIP_DOT`` is set but
    names no program.
    """
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return _from_env(env)
    dot = shutil.which("dot")
    if dot is not None:
        return [dot]
    pure = _next_to_interpreter() or shutil.which(_PURE)
    if pure is not None:
        return [pure]
    return None


def renderer_name() -> str:
    """A short description of the renderer :func:`render` would use, for display."""
    try:
        cmd = find_renderer()
    except OwnershipError as exc:
        return f"none ({exc.message})"
    if cmd is None:
        return f"none ({_INSTALL_HINT})"
    prog = Path(cmd[0])
    stem = prog.stem if prog.suffix.lower() == ".exe" else prog.name
    return f"{stem} ({' '.join(cmd)})"


def render(dot_source: str, fmt: str) -> bytes:
    """Render DOT text to ``fmt`` (``"svg"`` or ``"png"``) and return the bytes.

    Raises :class:`OwnershipError`: OWN031 when no renderer is installed,
    OWN030 when the renderer fails, times out or produces nothing, and OWN013
    for an unsupported format.
    """
    if fmt not in FORMATS:
        raise OwnershipError(Code.BAD_OPTION, f"cannot render to {fmt!r}: supported formats are {', '.join(FORMATS)}")
    cmd = find_renderer()
    if cmd is None:
        raise OwnershipError(Code.NO_RENDERER, f"no Graphviz renderer found: {_INSTALL_HINT}")
    try:
        proc = subprocess.run(  # noqa: S603 - the program is the user's configured renderer
            [*cmd, f"-T{fmt}"],
            input=dot_source.encode("utf-8"),
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise OwnershipError(
            Code.RENDER_FAILED, f"{cmd[0]} took longer than {TIMEOUT_S} s; try the .dot file with another renderer"
        ) from None
    except OSError as exc:
        raise OwnershipError(
            Code.RENDER_FAILED, f"cannot run {cmd[0]}: {exc.strerror or exc}; reinstall it ({_INSTALL_HINT})"
        ) from None
    if proc.returncode != 0 or not proc.stdout:
        # Graphviz spreads one error over several lines (message, excerpt, node).
        err = " ".join(proc.stderr.decode("utf-8", "replace").split())
        why = err[:300] if err else f"exit status {proc.returncode}, no output"
        raise OwnershipError(
            Code.RENDER_FAILED,
            f"{Path(cmd[0]).name} -T{fmt} failed: {why}; the .dot file is still written, try another renderer via {ENV_VAR}",
        )
    return proc.stdout
