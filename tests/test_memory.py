"""The memory budget: sizes as users write them, the search's stop at the budget or at a MemoryError, the figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ownership import inputs
from ownership.cli import app
from ownership.core.memory import Meter, default_budget, format_size
from ownership.core.progress import Progress
from ownership.core.result import Stats, StopReason, Verdict
from ownership.engines.explore import ExploreOptions, explore
from ownership.engines.search import BreadthFirst, Limits, Stop, Visitor
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.loader import load_spec
from ownership.session import Settings

ROOT = Path(__file__).resolve().parent.parent

# Pages owned by requests, and a read counter per request: 4^pages x 3^requests states without symmetry.
PAGES = '''
from typing import Annotated
from ownership import Element, Optional, Spec, require, safe

spec = Spec("pages", summary="pages owned by requests", expect=safe())
spec.param("requests", 2, min=1)
spec.param("pages", 4, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABCDEF")
Page = spec.domain("Page", "pages", symmetric=True, names=lambda i: f"p{i}")
ReqId = Annotated[Element, Req]
PageId = Annotated[Element, Page]
spec.var("owner", Optional(Req), per=Page, init=None)
spec.var("reads", int, per=Req, init=0)


@spec.action
def alloc(s, r: ReqId, p: PageId):
    require(s.owner[p] == None)  # noqa: E711
    s.owner[p] = r


@spec.action
def retire(s, r: ReqId, p: PageId):
    require(s.owner[p] == r)
    s.owner[p] = None


@spec.action
def read(s, r: ReqId, p: PageId):
    require(s.owner[p] == r)
    s.reads[r] = (s.reads[r] + 1) % 3


@spec.invariant
def owned_by_a_request(s):
    return all(s.owner[p] == None or s.owner[p] in s.all(Req) for p in s.all(Page))  # noqa: E711
'''


@pytest.fixture
def pages_spec(tmp_path: Path) -> Path:
    path = tmp_path / "pages.py"
    path.write_text(PAGES)
    return path


def _instance(path: Path, **params: int) -> Instance:
    return Instance(load_spec(path), params)


# -- sizes ---------------------------------------------------------------------


@pytest.mark.parametrize(("text", "size"), [
    ("500M", 500 * 2**20), ("4G", 4 * 2**30), ("2.5GiB", int(2.5 * 2**30)), ("1048576", 1048576),
    ("64k", 64 * 1024), ("1.5GB", 1_500_000_000), ("512b", 512), (" 10 MiB ", 10 * 2**20), ("1_000", 1000),
    ("none", None), ("None", None),
])
def test_sizes_are_read_as_users_write_them(text: str, size: int | None) -> None:
    assert inputs.parse_size("--max-memory", text) == size


@pytest.mark.parametrize("text", ["", "x", "4X", "-5M", "GiB", "5ib", "1.5", "0", "0M", "4 GiBs"])
def test_a_bad_size_is_own015_naming_the_flag(text: str) -> None:
    with pytest.raises(OwnershipError) as err:
        inputs.parse_size("--max-memory", text)
    assert err.value.code is Code.BAD_NUMBER
    assert "--max-memory" in str(err.value)


def test_a_bad_size_on_the_command_line_is_one_error_line_and_exit_2(pages_spec: Path) -> None:
    res = CliRunner().invoke(app, ["check", str(pages_spec), "--max-memory", "4X"])
    assert res.exit_code == 2
    assert "error[OWN015]: --max-memory '4X': not a size" in res.output
    assert "Traceback" not in res.output


def test_the_budget_of_a_setting_is_the_default_share_unless_given() -> None:
    default = default_budget()
    assert default is None or default > 0
    assert inputs.memory_budget(None) == default
    assert inputs.memory_budget("none") is None
    assert inputs.memory_budget("2G") == 2 * 2**30
    assert inputs.memory_budget(12345) == 12345
    with pytest.raises(OwnershipError):
        inputs.memory_budget(0)
    assert ExploreOptions.from_settings(Settings(max_memory="1G")).max_memory == 2**30
    assert ExploreOptions.from_settings(Settings(max_memory="none")).max_memory is None


def test_the_reproduce_line_spells_a_given_budget_only() -> None:
    assert "--max-memory" not in Settings().reproduce_flags()
    assert Settings(max_memory="4G").reproduce_flags()[-2:] == ["--max-memory", "4G"]
    # The budget decides where a search stops, not what it finds: no folder of its own.
    assert Settings(max_memory="4G").search_flags({}, {}) == []


def test_the_meter_reads_resident_memory_that_grows() -> None:
    with Meter() as meter:
        before = meter()
        block = bytearray(64 * 2**20)
        block[:: 4096] = b"x" * len(block[:: 4096])  # touch every page, so it is resident
        after = meter()
    assert before > 0
    assert after - before >= 32 * 2**20
    assert format_size(512) == "512 B" and format_size(3 * 2**20) == "3.0 MiB" and format_size(126 * 2**20) == "126 MiB"


# -- the search's stop -----------------------------------------------------------


def test_a_tiny_budget_stops_explore_as_unknown_with_coverage(pages_spec: Path) -> None:
    inst = _instance(pages_spec, requests=2, pages=4)
    result = explore(inst, ExploreOptions(symmetry=False, max_memory=1))
    assert result.verdict is Verdict.UNKNOWN
    assert result.stop_reason is StopReason.MEMORY_LIMIT
    assert result.coverage().startswith("reached the memory limit: ")
    assert any(n.startswith("inconclusive: every interleaving of up to ") and "reached the memory limit" in n
               for n in result.notes)
    # The budget is read with the clock: after the first check_every expansions, not before.
    assert result.stats.states < 3**4 * 3**2
    assert result.stats.peak_memory is not None and result.stats.peak_memory > 0
    assert result.stats.storage == "exact (dict of states)"


def test_without_a_budget_the_same_search_finishes_and_reports_what_it_cost(pages_spec: Path) -> None:
    inst = _instance(pages_spec, requests=2, pages=4)
    result = explore(inst, ExploreOptions(symmetry=False))
    assert result.verdict is Verdict.PROVED and result.stats.states == 3**4 * 3**2  # (requests + 1)^pages x 3^requests
    stats = result.stats
    assert stats.peak_memory is not None and stats.peak_memory > 10 * 2**20
    assert stats.bytes_per_state is not None and stats.bytes_per_state >= 0
    assert stats.memory_line() is not None and "per stored state" in (stats.memory_line() or "")


class _Exhausting(Visitor):
    """Raises MemoryError at the ``at``-th new state, as an allocation past ``ulimit -v`` does."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_state(self, node: int, state: State, depth: int) -> Stop | None:
        if node == self.at:
            raise MemoryError
        return None


def test_a_memory_error_in_the_search_ends_it_with_coverage_and_drops_the_stored_states(pages_spec: Path) -> None:
    search = BreadthFirst(_instance(pages_spec), symmetry=False)
    outcome = search.run(_Exhausting(300))
    assert outcome.stop.reason is StopReason.MEMORY_LIMIT
    assert outcome.states == 301 and not outcome.complete
    assert outcome.stop.depth == outcome.level + 1
    assert len(search.seen) == 0  # freed before the result is built


def test_a_memory_error_propagates_from_a_search_that_is_all_or_nothing(pages_spec: Path) -> None:
    with pytest.raises(MemoryError):
        BreadthFirst(_instance(pages_spec), symmetry=False, catch_stops=False).run(_Exhausting(300))


def test_limits_carry_the_budget_for_every_search_driver(pages_spec: Path) -> None:
    outcome = BreadthFirst(_instance(pages_spec), symmetry=False, limits=Limits(max_memory=1)).run(Visitor())
    assert outcome.stop.reason is StopReason.MEMORY_LIMIT and outcome.expanded == Limits().check_every


# -- progress and the reports ------------------------------------------------------


def test_progress_reports_memory_the_frontier_and_what_is_left_of_the_level(pages_spec: Path) -> None:
    reports: list[Progress] = []
    search = BreadthFirst(_instance(pages_spec, requests=2, pages=5), symmetry=False,
                          limits=Limits(progress_every=0.0, check_every=64), progress=reports.append)
    search.run(Visitor())
    assert reports
    for p in reports:
        assert p.memory is not None and p.memory > 0
        assert p.level_states is not None and p.level_left is not None and 0 <= p.level_left < p.level_states
        # The frontier is the rest of this level and what is queued for the next: never less than the rest.
        assert p.frontier >= p.level_left
        assert p.states <= len(search.tree)
    last = reports[-1]
    line = last.line()
    assert "\n" not in line
    assert f"depth {last.depth} ({last.level_left:,} of {last.level_states:,} left" in line
    assert "/state)" in line and "MiB" in line


class _Levels(Visitor):
    """Records each level's size as the search starts it."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def on_level(self, depth: int, states: int) -> Stop | None:
        self.sizes.append(states)
        return None


def test_the_frontier_is_every_state_stored_and_not_yet_expanded(pages_spec: Path) -> None:
    reports: list[Progress] = []
    levels = _Levels()
    BreadthFirst(_instance(pages_spec, requests=2, pages=5), symmetry=False,
                 limits=Limits(progress_every=0.0, check_every=32), progress=reports.append).run(levels)
    assert len({p.depth for p in reports}) > 2
    for p in reports:
        assert p.level_states == levels.sizes[p.depth] and p.level_left is not None
        expanded = sum(levels.sizes[:p.depth]) + p.level_states - p.level_left
        assert p.states == expanded + p.frontier


def test_a_report_without_the_new_fields_reads_as_before() -> None:
    line = Progress(2.0, states=100, transitions=300, depth=3, frontier=40).line()
    assert line == "  ... 100 states, 300 transitions, depth 3, frontier 40, 50 states/s, 2s"


def test_old_stats_constructors_still_work_and_print_no_memory_line() -> None:
    s = Stats(10, 20, 3, 0.5)
    assert s.peak_memory is None and s.bytes_per_state is None and s.storage is None
    assert s.memory_line() is None
    assert s.to_json()["peak_memory_bytes"] is None


def test_check_prints_and_writes_the_memory_figures(pages_spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    junit = tmp_path / "r.xml"
    res = CliRunner().invoke(app, ["check", str(pages_spec), "--no-symmetry", "--max-memory", "1", "--json", str(out),
                                   "--junit", str(junit)])
    assert res.exit_code == 3, res.output
    assert "reached the memory limit" in res.output
    assert "  (peak memory " in res.output and "per stored state, storage exact (dict of states))" in res.output
    assert "reproduce: ownership check" in res.output and "--max-memory 1" in res.output
    stats = json.loads(out.read_text())["specs"][0]["stats"]
    assert stats["peak_memory_bytes"] > 0 and stats["storage"] == "exact (dict of states)"
    assert stats["bytes_per_state"] is not None
    assert 'name="memory" value="peak memory ' in junit.read_text()


# -- a real address-space limit ---------------------------------------------------------


def _run_limited(spec: Path, limit: int, *flags: str) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "ownership", "check", str(spec), "--no-progress", "--no-render", *flags],
        capture_output=True, text=True, env=env, preexec_fn=cap, timeout=300, check=False, cwd=spec.parent,
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_under_a_low_address_space_limit_the_check_ends_unknown_with_coverage(pages_spec: Path) -> None:
    """``ulimit -v`` below the default budget: the search meets a MemoryError first, and ends as UNKNOWN all the same."""
    started = time.monotonic()
    # Pages not symmetric, requests symmetric: the search reduces by symmetry, so it stays on the Python path.
    spec = pages_spec.with_name("pages_plain.py")
    spec.write_text(PAGES.replace('"pages", symmetric=True', '"pages", symmetric=False'))
    res = _run_limited(spec, 100 * 2**20, "-p", "requests=2", "-p", "pages=10")
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    assert res.returncode == 3, (res.stdout, res.stderr)
    assert "UNKNOWN  pages (explore)" in res.stdout
    assert "reached the memory limit: " in res.stdout
    assert "(inconclusive: every interleaving of up to " in res.stdout
    assert "the compiled kernel cannot load" not in res.stdout
    assert time.monotonic() - started < 60  # about 3 s: a search fills 100 MB of address space quickly


def test_a_kernel_that_cannot_load_falls_back_to_the_python_search(
        pages_spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a low ``ulimit -v`` numba's LLVM cannot map its library: the check goes on in Python, within its budget."""
    from ownership.engines import compiled

    monkeypatch.setitem(sys.modules, "ownership.kernel.driver", None)  # importing it now raises ImportError
    inst = _instance(pages_spec)
    result = compiled.explore_compiled(inst, ExploreOptions(symmetry=False), ("owned_by_a_request",), [], None)
    assert result.verdict is Verdict.PROVED and result.stats.states == 3**4 * 3**2
    assert "searched on the Python path (the compiled kernel cannot load: ModuleNotFoundError)" in result.notes
    with pytest.raises(OwnershipError) as err:
        compiled.explore_compiled(inst, ExploreOptions(symmetry=False, kernel="compiled"), ("owned_by_a_request",),
                                  [], None)
    assert err.value.code is Code.BAD_OPTION and "cannot load" in str(err.value)
