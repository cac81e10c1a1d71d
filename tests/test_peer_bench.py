"""bench/peer_bench.py: what it reads from each tool, the table, and that a count mismatch stops it.

The runs here use a stand-in interpreter (a shell script printing ownership's output), so the
whole harness, /usr/bin/time included, runs in well under a second; the slow test runs the
real explorer on the smallest peer model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import ROOT

BENCH = ROOT / "bench"

OWNERSHIP_OUT = """PROVED  sglang_disagg_fix_model (explore)
  all reachable states of this instance checked (21,777 distinct states, 63,700 transitions, depth
  16, 1.81s); invariants no_foreign_read hold for every interleaving
"""
# the coverage line wrapped between the count and its words
OWNERSHIP_WRAPPED = "PROVED  pages_big (explore)\n  all reachable states of this instance checked (1,769,472\n  distinct states, ...)\n"
TLC_OUT = """Model checking completed. No error has been found.
63701 states generated, 21777 distinct states found, 0 states left on queue.
"""
SPIN_OUT = """State-vector 28 byte, depth reached 213, errors: 0
      243 states, stored
     1216 states, matched
"""


@pytest.fixture
def pb(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/peer_bench.py, imported as the script imports its sibling peer_parse."""
    monkeypatch.syspath_prepend(str(BENCH))
    import peer_bench

    return peer_bench


def test_counts_are_read_from_each_tool(pb: ModuleType) -> None:
    parse = sys.modules["peer_parse"]
    assert parse.parse_ownership(OWNERSHIP_OUT) == 21_777
    assert parse.parse_ownership(OWNERSHIP_WRAPPED) == 1_769_472
    assert parse.parse_tlc(TLC_OUT) == 21_777
    assert parse.parse_spin(SPIN_OUT) == 243


@pytest.mark.parametrize(
    ("kind", "out", "why"),
    [
        ("ownership", OWNERSHIP_OUT.replace("PROVED", "UNKNOWN"), "PROVED"),
        ("tlc", TLC_OUT.replace("No error has been found.", "Error: Invariant Inv is violated."), "No error"),
        ("tlc", TLC_OUT.replace("0 states left", "12 states left"), "distinct states found"),
        ("spin", SPIN_OUT.replace("errors: 0", "errors: 1"), "errors: 0"),
        ("spin", SPIN_OUT + "error: max search depth too small\n", "depth limit"),
    ],
)
def test_an_incomplete_or_failing_run_is_refused(pb: ModuleType, kind: str, out: str, why: str) -> None:
    parse = sys.modules["peer_parse"]
    with pytest.raises(parse.BenchError, match=why):
        parse.PARSERS[kind](out)


def test_time_figures_follow_a_nonzero_status_line(pb: ModuleType) -> None:
    parse = sys.modules["peer_parse"]
    t = parse.parse_time("Command exited with non-zero status 3\n1.50 1.20 0.10 57956\n")
    assert (t.wall, t.cpu, t.rss_kib) == (1.5, pytest.approx(1.3), 57956)


def test_summary_ratios_and_bytes_per_state(pb: ModuleType) -> None:
    parse = sys.modules["peer_parse"]

    def run(tool: str, kind: str, rnd: int, cpu: float, rss: int) -> object:
        return parse.Run("m", tool, kind, rnd, 1000, parse.Timing(cpu, cpu, 0.0, rss), "cmd")

    runs = [run("own", "ownership", 1, 8.0, 100), run("TLC -workers 1", "tlc", 1, 4.0, 900),
            run("TLC -workers 2", "tlc", 1, 1.0, 900), run("SPIN", "spin", 1, 2.0, 50),
            run("own", "ownership", 2, 6.0, 200), run("TLC -workers 1", "tlc", 2, 3.0, 900),
            run("TLC -workers 2", "tlc", 2, 1.0, 900), run("SPIN", "spin", 2, 2.0, 50)]
    rows = {r.tool: r for r in parse.summarize(runs)}
    own = rows["own"]
    assert (own.cpu_min, own.cpu_max, own.rss_kib, own.rounds) == (6.0, 8.0, 200, 2)
    assert own.vs_tlc == pytest.approx(2.0)  # against the first TLC tool (1 worker), minimum CPU
    assert own.vs_spin == pytest.approx(3.0)
    assert own.bytes_per_state == pytest.approx(200 * 1024 / 1000)
    assert rows["SPIN"].vs_tlc is None
    table = parse.markdown(list(rows.values()), {"m": "model m"})
    assert "| model m | 1,000 | own | 6.0 - 8.0 |" in table
    assert "| 2.00 | 3.00 |" in table


def test_variants_and_commands(pb: ModuleType) -> None:
    assert pb.parse_variant('compiled=--kernel compiled -p "x=1"') == ("compiled", ("--kernel", "compiled", "-p", "x=1"))
    assert pb.parse_variant("plain=") == ("plain", ())
    with pytest.raises(pb.BenchError):
        pb.parse_variant("--kernel compiled")
    args = pb.parser().parse_args(["--variant", "a=--kernel python", "--variant", "b=--kernel compiled",
                                   "--variant-checkout", "b=/elsewhere", "--ownership-args=--no-progress",
                                   "--tlc-workers", "2,1", "--python", "/py"])
    tools = pb.make_tools(args)
    assert [t.name for t in tools] == ["a", "b", "TLC -workers 1", "TLC -workers 2", "SPIN pan (-DSAFETY)"]
    assert tools[1].args == ("--no-progress", "--kernel", "compiled") and tools[1].checkout == Path("/elsewhere")
    fix_r3 = pb.MODELS["fix-r3"]
    argv = pb.command(tools[0], fix_r3, pb.Peers(tlc_jar="t.jar"), Path("w"))
    assert argv[:4] == ["/py", "-m", "ownership", "check"] and argv[5:] == ["--no-symmetry", "-p", "requests=3",
                                                                            "--no-progress", "--kernel", "python"]
    assert pb.tools_for(fix_r3, tools) == tools[:4]  # no SPIN version of the fix model
    with pytest.raises(pb.BenchError):
        pb.make_tools(pb.parser().parse_args(["--variant", "a=", "--variant", "a=-x"]))


def _fake_python(tmp_path: Path, states: str) -> Path:
    """An 'interpreter' that answers `-m ownership check ...` like a PROVED explorer run with ``states``."""
    fake = tmp_path / "fakepython"
    fake.write_text(
        "#!/bin/sh\n"
        f"printf 'PROVED  fake (explore)\\n  all reachable states of this instance checked ({states}\\n"
        "  distinct states, 1 transitions); PYTHONPATH=%s\\n' \"$PYTHONPATH\"\n"
    )
    fake.chmod(0o755)
    return fake


needs_time = pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="GNU time is not installed")


@needs_time
def test_a_count_mismatch_stops_the_benchmark(pb: ModuleType, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    fake = _fake_python(tmp_path, "21,776")
    rc = pb.main(["--models", "fix", "--tools", "ownership", "--python", str(fake)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "COUNT MISMATCH on fix" in err and "21,776" in err and "21,777" in err


@needs_time
def test_a_run_writes_the_table_and_json(pb: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = _fake_python(tmp_path, "21,777")
    out_json = tmp_path / "runs.json"
    rc = pb.main(["--models", "fix", "--tools", "ownership", "--python", str(fake), "--rounds", "2",
                  "--checkout", str(tmp_path), "--variant", "x=", "--variant", "y=--flag", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "| fix model, default size (requests=2) | 21,777 | x |" in out
    assert f"PYTHONPATH={tmp_path} {fake} -m ownership check" in out
    data = json.loads(out_json.read_text())
    assert [(r["tool"], r["round"]) for r in data["runs"]] == [("x", 1), ("y", 1), ("x", 2), ("y", 2)]
    assert all(r["states"] == 21_777 and r["timing"]["rss_kib"] > 0 for r in data["runs"])
    assert [r["rounds"] for r in data["rows"]] == [2, 2]
    assert data["argv"][:2] == ["--models", "fix"]  # the arguments given, not the test runner's


@pytest.mark.slow
@needs_time
def test_the_explorer_matches_the_reference_count(pb: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """The real explorer, from this checkout, on the fix model at its default size (about 3 s)."""
    rc = pb.main(["--models", "fix", "--tools", "ownership"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "| fix model, default size (requests=2) | 21,777 | ownership |" in out
