"""The distribution this package ships in: its name on the package index and its version.

The import package and the command are ``ownership``; the distribution is
:data:`DIST_NAME`, because the index's ``ownership`` is an unrelated project.
``pyproject.toml`` reads the version from ``ownership.__version__``, so a
source tree and its installed metadata agree unless the tree changed since.
"""

from __future__ import annotations

from pathlib import Path

DIST_NAME = "kv-ownership"
"""What ``pip install`` and the package index call this project."""


def installed_version() -> str | None:
    """The version in the installed distribution's metadata, or ``None`` when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(DIST_NAME)
    except metadata.PackageNotFoundError:
        return None


def version() -> str:
    """The version of the running code (``ownership.__version__``)."""
    from ownership import __version__

    return __version__


def version_line() -> str:
    """What ``ownership --version`` prints: ``kv-ownership 0.1.0``, and where it runs from when not installed.

    The running code's own version is the answer; the metadata only says
    whether that code is the installed distribution (``PYTHONPATH=.`` on a
    source tree runs code that pip never installed).
    """
    running = version()
    installed = installed_version()
    if installed == running:
        return f"{DIST_NAME} {running}"
    here = Path(__file__).resolve().parent.parent
    if installed is None:
        return f"{DIST_NAME} {running} (not installed; running from {here})"
    return f"{DIST_NAME} {running} (running from {here}; the installed distribution is {installed})"
