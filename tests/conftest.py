"""Shared fixtures: paths to the library specs and a loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownership.spec.instance import Instance
from ownership.spec.loader import load_spec

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
CORPUS = Path(__file__).resolve().parent / "corpus"


def instance(name: str, **params: int) -> Instance:
    """An instance of a library spec (``specs/NAME.py``) or corpus spec."""
    path = SPECS / f"{name}.py"
    if not path.exists():
        path = CORPUS / f"{name}.py"
    return Instance(load_spec(path), params)


@pytest.fixture
def root() -> Path:
    return ROOT
