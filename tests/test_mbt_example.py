"""Model-based testing: the example allocator passes; each seeded defect is caught and shrunk."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from ownership.cli import app
from ownership.core.result import Verdict
from ownership.errors import OwnershipError
from ownership.testing import Adapter, MBTOptions, assert_conforms, run_mbt

EXAMPLE = ROOT / "examples" / "paged_allocator"
OPTIONS = MBTOptions(max_examples=150, steps=20, seed=0)


@pytest.fixture(scope="module")
def adapters() -> Iterator[Any]:
    sys.path.insert(0, str(EXAMPLE))
    try:
        import adapter

        yield adapter
    finally:
        sys.path.remove(str(EXAMPLE))


@pytest.mark.slow
def test_the_correct_allocator_conforms(adapters: Any) -> None:
    r = assert_conforms(adapters.PagedAllocatorAdapter, max_examples=60, steps=20, seed=0)
    assert r.verdict is Verdict.BOUNDED_OK
    assert r.action_counts is not None and all(n > 0 for n in r.action_counts.values()), r.action_counts


@pytest.mark.parametrize(
    ("defect", "step", "key"),
    [
        ("FreeIgnoresRefcount", "finish", "num_free"),
        ("AllocKeepsFree", "allocate", "num_free"),
        ("DoubleFreeOnFinish", "finish", "ref_cnt"),
    ],
)
def test_each_seeded_defect_is_caught_with_a_shrunk_trace(adapters: Any, defect: str, step: str, key: str) -> None:
    r = run_mbt(getattr(adapters, defect), OPTIONS)
    assert r.verdict is Verdict.VIOLATED and r.violated == "conformance"
    headline = r.notes[0]
    assert f"{step}(" in headline and f"{key} is" in headline, headline
    # Shrunk: the table ends at the failing step and is short.
    assert r.reproduction is not None
    rows = [ln for ln in r.reproduction.splitlines() if ln[:5].strip().isdigit()]
    assert 1 <= len(rows) <= 3, r.reproduction
    assert step in rows[-1] and "spec says" in rows[-1]


@pytest.mark.slow
def test_shared_prefix_defect_needs_sharing_first(adapters: Any) -> None:
    r = run_mbt(adapters.FreeIgnoresRefcount, OPTIONS)
    assert r.reproduction is not None and "share_prefix" in r.reproduction


@pytest.mark.slow
def test_a_probed_forbidden_call_must_be_refused(adapters: Any) -> None:
    class ProbeFinish(adapters.PagedAllocatorAdapter):  # type: ignore[name-defined,misc]
        probe_disabled = frozenset({"finish"})  # finishing a request that is not running

        def finish(self, r: int) -> None:
            try:
                self.impl.finish(r)
            except KeyError as exc:
                raise adapters.OutOfPages("not running") from exc  # stands for the engine's own refusal

    r = run_mbt(ProbeFinish, OPTIONS)
    assert r.verdict is Verdict.BOUNDED_OK

    class AcceptsAnything(adapters.PagedAllocatorAdapter):  # type: ignore[name-defined,misc]
        probe_disabled = frozenset({"finish"})

        def finish(self, r: int) -> None:
            self.impl.page_table.pop(r, None)

    r = run_mbt(AcceptsAnything, OPTIONS)
    assert r.verdict is Verdict.VIOLATED and "forbids it here, the implementation accepted it" in r.notes[0]


def test_adapter_missing_an_action_is_a_clear_error(adapters: Any) -> None:
    class Partial(Adapter):
        spec = str(EXAMPLE / "allocator_spec.py")

        def allocate(self, r: int, n: int) -> None: ...

    with pytest.raises(OwnershipError, match="no method for spec action"):
        run_mbt(Partial, OPTIONS)


@pytest.mark.slow
def test_cli_mbt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLE)
    runner = CliRunner()
    ok = runner.invoke(app, ["mbt", "allocator_spec.py", "--adapter", "adapter.py:PagedAllocatorAdapter", "--max-examples", "30", "--seed", "0"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(
        app, ["mbt", "allocator_spec.py", "--adapter", "adapter.py:AllocKeepsFree", "--seed", "0", "--out", str(tmp_path)]
    )
    assert bad.exit_code == 1, bad.output
    assert "num_free is" in bad.output and "reproduce: ownership mbt" in bad.output
    missing = runner.invoke(app, ["mbt", "allocator_spec.py", "--adapter", "adapter.py:Nope"])
    assert missing.exit_code == 2 and "OWN050" in missing.output
