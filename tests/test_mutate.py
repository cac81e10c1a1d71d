"""``ownership mutate``: mutant generation, classification, accepted survivors and the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ownership.analysis.mutants import generate_mutants
from ownership.analysis.mutate import MutateOptions, mutate
from ownership.cli import app
from ownership.errors import Code, OwnershipError

HERE = Path(__file__).resolve().parent / "mutate"
SPECS = Path(__file__).resolve().parent.parent / "specs"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "examples"
FAST = MutateOptions(max_seconds_per_mutant=10.0)


def outcomes(path: Path, options: MutateOptions = FAST) -> dict[str, str]:
    return {r.mutant.id: r.outcome for r in mutate(path, options).results}


def test_mutants_of_a_small_spec_exactly() -> None:
    ids = [m.id for m in generate_mutants(HERE / "tiny.py")]
    assert ids == [
        "take+2 delete-require: require(s.phase[r] == Phase.IDLE) => pass",
        "take+2 flip-compare: require(s.phase[r] == Phase.IDLE) => require(s.phase[r] != Phase.IDLE)",
        "take+3 drop-call: pool.write(s, r, pool.alloc(s, r, 1)) => pass",
        "give_back+2 delete-require: require(s.phase[r] == Phase.HELD) => pass",
        "give_back+2 flip-compare: require(s.phase[r] == Phase.HELD) => require(s.phase[r] != Phase.HELD)",
        "give_back+3 drop-call: pool.read(s, r, pool.pages_of(s, r)) => pass",
        "give_back+4 drop-call: pool.free(s, r) => pass",
        "idle+1 flip-compare: return all(s.phase[r] != Phase.HELD for r in s.all(Req)) => "
        "return all(s.phase[r] == Phase.HELD for r in s.all(Req))",
    ]
    # Stable: the same ids on every run, and every mutant keeps the file's line count.
    assert [m.id for m in generate_mutants(HERE / "tiny.py")] == ids
    text = (HERE / "tiny.py").read_text()
    assert all(m.source.count("\n") == text.count("\n") for m in generate_mutants(HERE / "tiny.py"))


def test_every_operator() -> None:
    kinds = {m.kind for m in generate_mutants(SPECS / "sglang_disagg_v0_5_21.py")}
    kinds |= {m.kind for m in generate_mutants(HERE / "endless.py")}
    assert kinds == {"delete-require", "flip-compare", "swap-boolop", "negate-if", "drop-call", "const+1", "const-1"}
    # and/or flips every keyword of the chain, parenthesised so precedence cannot change
    swap = next(m for m in generate_mutants(SPECS / "sglang_disagg_v0_5_21.py") if m.kind == "swap-boolop")
    assert swap.old == "require(s.p_queue[r] == PrefillQ.IDLE and s.d_queue[r] == DecodeQ.IDLE)"
    assert swap.new == "require((s.p_queue[r] == PrefillQ.IDLE or s.d_queue[r] == DecodeQ.IDLE))"


def test_killed_survived_equivalent() -> None:
    got = outcomes(HERE / "tiny.py")
    assert got["give_back+4 drop-call: pool.free(s, r) => pass"] == "killed"  # pages_returned_when_idle
    assert got["give_back+3 drop-call: pool.read(s, r, pool.pages_of(s, r)) => pass"] == "equivalent"
    assert got["take+2 delete-require: require(s.phase[r] == Phase.IDLE) => pass"] == "survived"
    assert got["take+3 drop-call: pool.write(s, r, pool.alloc(s, r, 1)) => pass"] == "survived"
    # a guard that can never hold: the action never fires, which the original does
    assert got["take+2 flip-compare: require(s.phase[r] == Phase.IDLE) => require(s.phase[r] != Phase.IDLE)"] == "killed"
    # a guard that blocks the request half-way: work pending and nothing enabled
    assert got["give_back+2 flip-compare: require(s.phase[r] == Phase.HELD) => require(s.phase[r] != Phase.HELD)"] == "killed"
    report = mutate(HERE / "tiny.py", FAST)
    assert (report.count("killed"), report.count("survived"), report.count("equivalent")) == (4, 3, 1)
    assert report.score == pytest.approx(4 / 7)
    assert not report.ok


@pytest.mark.slow
def test_a_mutant_that_never_returns_times_out() -> None:
    got = outcomes(HERE / "endless.py", MutateOptions(max_seconds_per_mutant=0.5))
    assert got["bump+3 flip-compare: while n != 0: => while n == 0:"] == "timeout"


def test_derived_spec_mutates_only_its_own_code_and_accepts_a_survivor() -> None:
    report = mutate(HERE / "tiny_derived.py", FAST)
    assert {r.mutant.function for r in report.results} == {"give_back", "held_means_one_page"}
    accepted = [r for r in report.results if r.outcome == "accepted"]
    assert [r.mutant.id for r in accepted] == ["give_back+2 delete-require: require(s.phase[r] == Phase.HELD) => pass"]
    assert accepted[0].reason == "freeing a request that holds nothing is a no-op"
    assert report.ok and report.score == 1.0 and report.raw_score == pytest.approx(5 / 6)


def test_an_acceptance_that_matches_nothing_is_an_error(tmp_path: Path) -> None:
    for name in ("tiny.py", "tiny_derived.py"):
        (tmp_path / name).write_text((HERE / name).read_text())
    stale = tmp_path / "tiny_derived.py"
    stale.write_text(stale.read_text().replace("Phase.HELD) => pass", "Phase.DONE) => pass"))
    with pytest.raises(OwnershipError) as info:
        mutate(stale, FAST)
    assert info.value.code is Code.MUTATE_STALE_ACCEPT


def test_the_original_must_have_its_expected_verdict(tmp_path: Path) -> None:
    bad = tmp_path / "tiny.py"
    bad.write_text((HERE / "tiny.py").read_text().replace("    pool.free(s, r)\n", "    pass\n"))
    with pytest.raises(OwnershipError) as info:
        mutate(bad, FAST)
    assert info.value.code is Code.MUTATE_BASELINE


def test_a_spec_that_demonstrates_a_bug_is_refused_with_what_to_run_instead() -> None:
    buggy = DOCS / "paged_alloc.py"
    with pytest.raises(OwnershipError) as info:
        mutate(buggy, FAST)
    assert info.value.code is Code.MUTATE_EXPECTS_VIOLATION and info.value.line == 12
    res = CliRunner().invoke(app, ["mutate", str(buggy)])
    assert res.exit_code == 2 and "SURVIVED" not in res.output
    assert res.stderr.startswith("error[OWN097]: ") and "is expected to violate no_foreign_read" in res.stderr
    assert "run it on the fixed spec" in res.stderr and "--explain" in res.stderr


def test_the_spec_guides_fix_answers_for_each_mutant() -> None:
    """docs/spec-guide.md section 9: one mutant killed, the two survivors accepted with reasons."""
    report = mutate(DOCS / "paged_alloc_fixed.py", FAST)
    assert sorted(r.outcome for r in report.results) == ["accepted", "accepted", "killed"]
    assert report.ok and report.score == 1.0 and report.raw_score == pytest.approx(1 / 3)
    res = CliRunner().invoke(app, ["mutate", str(DOCS / "paged_alloc_fixed.py")])
    assert res.exit_code == 0 and "every non-equivalent mutant is killed or accepted: exit 0" in res.stdout


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["mutate", str(HERE / "tiny.py"), "--json", str(tmp_path / "m.json")])
    assert res.exit_code == 1, res.output
    assert "SURVIVED  take+2 delete-require" in res.stdout
    assert "-    require(s.phase[r] == Phase.IDLE)\n" in res.stdout and "+    pass\n" in res.stdout
    assert (
        "tiny: 8 mutants: 4 killed, 3 survived, 1 equivalent, 0 timed out, 0 invalid, 0 accepted; "
        "non-equivalent mutation score 57.1%\n"
    ) in res.stdout
    # Under the score: what it means and what to do about the survivors.
    after = " ".join(res.stdout.split("non-equivalent mutation score 57.1%")[1].split())
    assert after.startswith("the score is the share of small faults in tiny.py's own code that its invariants")
    assert "3 SURVIVED: the spec calls each of those faulty versions safe" in after
    assert "spec.accept_mutant(ID, reason=...)" in after and after.endswith("exit 1 while a survivor or time-out remains (a CI gate)")
    data = json.loads((tmp_path / "m.json").read_text())
    assert data["counts"] == {"killed": 4, "survived": 3, "equivalent": 1, "timeout": 0, "invalid": 0,
                              "accepted": 0, "generated": 8}
    assert data["ok"] is False and [m["outcome"] for m in data["mutants"]].count("survived") == 3

    res = runner.invoke(app, ["mutate", str(HERE / "tiny_derived.py")])
    assert res.exit_code == 0, res.output
    assert "accepted  give_back+2" in res.stdout

    for args in (["--engine", "nope"], ["--max-seconds-per-mutant", "0"], ["-p", "nope=1"]):
        res = runner.invoke(app, ["mutate", str(HERE / "tiny.py"), *args])
        assert res.exit_code == 2, (args, res.output)
    res = runner.invoke(app, ["mutate", str(tmp_path / "missing.py")])
    assert res.exit_code == 2 and "OWN002" in res.output


@pytest.mark.quality
def test_library_fork_fix_kills_every_mutant() -> None:
    report = mutate(SPECS / "vllm_fork_double_free_fixed.py", FAST)
    assert report.ok and report.score == 1.0
    assert (len(report.results), report.count("killed"), report.count("accepted")) == (17, 16, 1)


@pytest.mark.quality
def test_library_single_node_catches_a_200_for_a_rejected_prompt() -> None:
    # The incident's bug class: the rejected placeholder goes on to decode and streams 200.
    got = outcomes(SPECS / "sglang_single_node.py")
    assert got["process_batch_result_prefill+3 negate-if: if s.to_finish[r]: => if not (s.to_finish[r]):"] == "killed"
    report = mutate(SPECS / "sglang_single_node.py", FAST)
    assert report.ok and report.score == 1.0


# fixed spec -> (mutants, killed, equivalent, accepted): every non-equivalent mutant is killed or accepted.
NEW_FIXES = {
    "mooncake_get_outlives_lease_fixed": (8, 6, 2, 0),
    "sglang_epd_send_deregister_fixed": (46, 40, 6, 0),
    "vllm_nixl_abort_timeout_fixed": (40, 37, 2, 1),
    "vllm_nixl_multi_handle_failure_fixed": (7, 6, 1, 0),
    "vllm_request_id_reuse_stale_send_fixed": (4, 2, 2, 0),
    "vllm_prefix_hash_collision_fixed": (4, 4, 0, 0),
    "vllm_prefix_lora_scope_fixed": (3, 2, 0, 1),
    "sglang_swa_insert_evicted_window_fixed": (3, 3, 0, 0),
    "sglang_swa_recover_locked_full_fixed": (5, 4, 0, 1),
}


@pytest.mark.quality
def test_library_transfer_handle_and_cache_fixes_kill_every_mutant() -> None:
    # Lost progress (a read, a send or a timer that never ends) is caught through the terminal
    # predicates and the fixes' own invariants, not only the safety properties.
    got = {}
    for name in NEW_FIXES:
        report = mutate(SPECS / f"{name}.py", FAST)
        assert report.ok and report.score == 1.0, name
        got[name] = (len(report.results), report.count("killed"), report.count("equivalent"), report.count("accepted"))
    assert got == NEW_FIXES


def test_an_acceptance_of_a_killed_mutant_is_flagged(tmp_path: Path) -> None:
    for name in ("tiny.py", "tiny_derived.py"):
        (tmp_path / name).write_text((HERE / name).read_text())
    spec = tmp_path / "tiny_derived.py"
    spec.write_text(spec.read_text() + '\nspec.accept_mutant("give_back drop-call: pool.free(s, r) => pass", reason="x")\n')
    report = mutate(spec, FAST)
    r = next(r for r in report.results if r.mutant.kind == "drop-call")
    assert r.outcome == "killed" and "remove the acceptance" in r.detail


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["bmc", "hypothesis"])
def test_other_engines_classify_the_same(engine: str) -> None:
    report = mutate(HERE / "tiny.py", MutateOptions(engine=engine, max_seconds_per_mutant=20.0))
    assert {r.mutant.id: r.outcome for r in report.results} == outcomes(HERE / "tiny.py")
