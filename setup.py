"""Where the files go, the one thing ``pyproject.toml`` cannot say: the spec library is installed inside the package.

``specs/`` stays at the top of the repository (that is where spec files,
the docs and the tests name it); installed, it is ``ownership/specs/``,
which :func:`ownership.library.library_dir` finds.  Everything else about
the distribution is in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["ownership*"]), "ownership.specs"],
    package_dir={"ownership.specs": "specs"},
)
