"""Loading specs: derived specs share their base's module; annotations a type checker accepts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ownership import Spec
from ownership.errors import OwnershipError
from ownership.lang.loader import load_spec

SPECS = Path(__file__).resolve().parent.parent / "specs"


def _specs_named(name: str) -> set[int]:
    return {id(m.spec) for m in list(sys.modules.values())
            if isinstance(getattr(m, "spec", None), Spec) and m.spec.name == name}


def test_a_derived_spec_reuses_the_loaded_base_spec() -> None:
    load_spec(SPECS / "sglang_disagg_v0_5_21.py")  # an earlier load, as in a run over a folder
    base = load_spec(SPECS / "sglang_disagg_v0_5_19.py")
    load_spec(SPECS / "sglang_disagg_v0_5_21.py")
    # One Spec object for the base file, not one per route by which it was reached.
    assert _specs_named("sglang_disagg_v0_5_19") == {id(base)}


def test_annotated_domain_arguments(tmp_path: Path) -> None:
    (tmp_path / "typed.py").write_text(
        "from typing import Annotated\n"
        "from ownership import Element, Ownership, Spec, safe\n"
        "spec = Spec('typed', expect=safe())\n"
        "spec.param('requests', 2)\n"
        "Req = spec.domain('Req', 'requests', symmetric=True)\n"
        "ReqId = Annotated[Element, Req]\n"
        "own = Ownership(spec, requests=Req)\n"
        "pool = own.pool('pool', 2)\n"
        "@spec.action\n"
        "def take(s, r: ReqId):\n"
        "    pool.alloc(s, r, 1)\n"
        "@spec.action\n"
        "def give(s, r: 'ReqId'):\n"
        "    pool.free(s, r, pool.pages_of(s, r))\n"
        "own.invariants('no_double_ownership')\n"
    )
    spec = load_spec(tmp_path / "typed.py")
    assert [d.name for d in spec.actions["take"].arg_domains] == ["Req"]
    assert [d.name for d in spec.actions["give"].arg_domains] == ["Req"]


def test_an_annotation_without_a_domain_is_refused(tmp_path: Path) -> None:
    (tmp_path / "untyped.py").write_text(
        "from typing import Annotated\n"
        "from ownership import Spec, safe\n"
        "spec = Spec('untyped', expect=safe())\n"
        "spec.var('x', int, init=0)\n"
        "@spec.action\n"
        "def step(s, n: Annotated[int, 'not a domain']):\n"
        "    s.x = 1\n"
        "@spec.invariant\n"
        "def ok(s):\n"
        "    return True\n"
    )
    with pytest.raises(OwnershipError, match="must be annotated with a domain"):
        load_spec(tmp_path / "untyped.py")


def test_a_package_next_to_the_spec_is_importable(tmp_path: Path) -> None:
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("LIMIT = 2\n")
    (tmp_path / "uses_helpers.py").write_text(
        "from helpers import LIMIT\n"
        "from ownership import Spec, require, safe\n"
        "spec = Spec('uses_helpers', expect=safe())\n"
        "spec.var('x', int, init=0)\n"
        "@spec.action\n"
        "def step(s):\n"
        "    require(s.x < LIMIT)\n"
        "    s.x = s.x + 1\n"
        "@spec.invariant\n"
        "def bounded(s):\n"
        "    return s.x <= LIMIT\n"
    )
    assert load_spec(tmp_path / "uses_helpers.py").name == "uses_helpers"
