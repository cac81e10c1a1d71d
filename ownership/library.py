"""Where the library of specs is: the one place every reader of the shipped specs asks.

The repository keeps the library at its top, ``specs/``; an installed
distribution (wheel or sdist) carries the same files inside the package, as
``ownership/specs/`` (``setup.py`` maps the one onto the other).  Preflight,
``ownership test --library`` and ``ownership list --library`` read it through
:func:`library_dir`, so they work from any directory, installed or not.

The specs import each other by their plain module names (``import
sglang_disagg_v0_5_19 as v19``); :func:`ownership.lang.loader.load_spec`
resolves those names within the folder of the spec it loads, wherever that
folder is.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# As the frames of running code name their files (absolute, links not resolved).
_CHECKER_PREFIX = os.path.dirname(os.path.abspath(__file__)) + os.sep
_INSTALLED_LIBRARY_PREFIX = _CHECKER_PREFIX + "specs" + os.sep


def _candidates() -> tuple[Path, Path | None]:
    """The installed location, and the checkout's ``specs/`` when the package runs from a source tree."""
    installed = _PACKAGE / "specs"
    root = _PACKAGE.parent
    # Only a checkout of this project counts: beside an installed package, a
    # folder named specs/ in site-packages would belong to someone else.
    checkout = root / "specs" if (root / "pyproject.toml").is_file() and (root / "ownership").is_dir() else None
    return installed, checkout


def library_dir() -> Path:
    """The folder holding the library's spec files (``*.py``), as an absolute path.

    The installed ``ownership/specs/`` when it exists, else the ``specs/`` of
    the source tree the package runs from (``PYTHONPATH=.`` or an editable
    install).  When neither exists (a broken install) the installed location
    is returned all the same, so the error that follows names where the
    library should have been.
    """
    installed, checkout = _candidates()
    if installed.is_dir() or checkout is None or not checkout.is_dir():
        return installed
    return checkout


def library_spec(file_name: str) -> Path:
    """The path of one library spec, by its file name (``"sglang_disagg_v0_5_19.py"``)."""
    return library_dir() / file_name


def is_checker_code(filename: str) -> bool:
    """Whether ``filename`` is the checker's own code rather than spec code.

    Error locations and guard explanations name the innermost frame that is
    not the checker's: the spec line.  Installed, the library's specs live
    inside the package (``ownership/specs/``), yet they are spec code like
    any other, so the test is not a plain prefix of the package folder.
    """
    path = os.path.abspath(filename)
    return path.startswith(_CHECKER_PREFIX) and not path.startswith(_INSTALLED_LIBRARY_PREFIX)
