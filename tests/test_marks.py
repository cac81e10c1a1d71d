"""Page marks: vocabulary variables the pictures draw on a pool's pages, stored in the trace schema."""

from __future__ import annotations

import pytest

from ownership import Ownership, Spec
from ownership.core.replay import trace_schema
from ownership.core.schema import PageMark, TraceSchema
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance


def marked_spec() -> Spec:
    spec = Spec("marked")
    spec.param("pages", 2)
    Req = spec.domain("Req", 2, symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", "pages", prefix="K")
    spec.var("cached", bool, per=pool.Page, init=False)
    pool.mark("cached", "keeper", "cached")
    own.invariants("no_double_ownership")

    @spec.action
    def take(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        pool.alloc(s, r, 1)

    return spec


def test_marks_reach_the_trace_schema_and_survive_json() -> None:
    schema = trace_schema(Instance(marked_spec()))
    assert schema.pools is not None and schema.pools[0].marks == (PageMark("cached", "keeper", "cached"),)
    again = TraceSchema.from_json(schema.to_json())
    assert again == schema


def test_a_pool_without_marks_writes_no_marks_key() -> None:
    spec = Spec("plain")
    Req = spec.domain("Req", 1, names="A")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", 1)
    own.invariants("no_double_ownership")

    @spec.action
    def take(s, r: Req) -> None:  # type: ignore[no-untyped-def]
        pool.alloc(s, r, 1)

    out = trace_schema(Instance(spec)).to_json()
    assert "marks" not in out["pools"][0]


def test_unknown_role_and_unknown_variable_are_refused_at_the_calling_line() -> None:
    spec = Spec("bad")
    Req = spec.domain("Req", 1, names="A")
    pool = Ownership(spec, requests=Req).pool("kv", 1)
    spec.var("x", bool, per=pool.Page, init=False)
    with pytest.raises(OwnershipError) as bad_role:
        pool.mark("x", "sparkle", "x")
    assert bad_role.value.code is Code.SPEC_INVALID and bad_role.value.file == __file__
    with pytest.raises(OwnershipError) as missing:
        pool.mark("nope", "flag", "x")
    assert "not a declared variable" in missing.value.message


def test_a_hand_edited_schema_with_a_bad_mark_is_refused() -> None:
    data = trace_schema(Instance(marked_spec())).to_json()
    data["pools"][0]["marks"][0]["role"] = "sparkle"
    with pytest.raises(ValueError, match="role"):
        TraceSchema.from_json(data)
