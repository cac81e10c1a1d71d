"""Shared fixtures: paths to the library specs and a loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownership.core.trace import Trace
from ownership.engines.explore import explore
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


@pytest.fixture(scope="module")
def trace() -> Trace:
    """The v0.5.21 counterexample at default size (what the renderers draw)."""
    result = explore(instance("sglang_disagg_v0_5_21"))
    assert result.trace is not None
    return result.trace
