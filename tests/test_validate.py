"""``ownership validate``: recorded event logs checked against specs (trace validation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from ownership.cli import app
from ownership.errors import OwnershipError
from ownership.lang.model import Spec
from ownership.session.validate import validate
from ownership.validate.search import ValidateOptions

VLLM = ROOT / "specs" / "vllm_block_pool.py"
HEADER = {"schema": "ownership.events/1", "engine": "vllm", "engine_version": "0.33.0",
          "nodes": {"gpu": {"pages": 5, "page_size": 4, "reserved": [0]}}, "source": "test"}

# Two requests share a cached prefix block; the frees put blocks back in the order vLLM's
# free queue keeps (unhashed at the front, hashed at the back), which the last alloc follows.
CLEAN: list[dict[str, Any]] = [
    {"event": "alloc", "req": "r1", "node": "gpu", "pages": [1, 2]},
    {"event": "write", "req": "r1", "node": "gpu", "pages": [1, 2], "content": ["a", "ab"]},
    {"event": "cache", "req": "r1", "node": "gpu", "pages": [1, 2], "content": ["a", "ab"]},
    {"event": "share", "req": "r2", "node": "gpu", "pages": [1], "content": ["a"]},
    {"event": "alloc", "req": "r2", "node": "gpu", "pages": [3]},
    {"event": "write", "req": "r2", "node": "gpu", "pages": [3], "content": ["ac"]},
    {"event": "read", "req": "r2", "node": "gpu", "pages": [1, 3], "content": ["a", "ac"]},
    {"event": "free", "req": "r1", "node": "gpu", "pages": [2, 1]},
    {"event": "finish", "req": "r1"},
    {"event": "free", "req": "r2", "node": "gpu", "pages": [3, 1]},
    {"event": "finish", "req": "r2"},
    {"event": "alloc", "req": "r3", "node": "gpu", "pages": [3, 4]},
]


def write_log(path: Path, events: list[dict[str, Any]], header: dict[str, Any] | None = None) -> Path:
    """A log file: the header, then the events numbered from 1."""
    lines = [json.dumps(header or HEADER)]
    lines += [json.dumps({"seq": i, **e}) for i, e in enumerate(events, start=1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def altered(index: int, **fields: Any) -> list[dict[str, Any]]:
    """CLEAN with event ``index`` (0-based) changed."""
    out = [dict(e) for e in CLEAN]
    out[index].update(fields)
    return out


def without(kind: str) -> list[dict[str, Any]]:
    return [e for e in CLEAN if e["event"] != kind]


# -- validated, rejected --------------------------------------------------------------------
def test_a_clean_log_is_validated(tmp_path: Path) -> None:
    r = validate(VLLM, write_log(tmp_path / "clean.jsonl", CLEAN))
    assert r.verdict == "VALIDATED" and r.exit_code == 0
    assert r.events == len(CLEAN) and r.rejection is None
    assert r.params == {"num_gpu_blocks": 5, "hashes": 4, "max_refs": 1024}  # sized from the header
    assert r.kept_final >= 1


def test_an_alloc_out_of_free_queue_order_is_rejected_at_its_line(tmp_path: Path) -> None:
    """vLLM pops the head of its free queue: after the frees that is block 3, not block 4."""
    r = validate(VLLM, write_log(tmp_path / "bad.jsonl", altered(11, pages=[4, 3])))
    assert r.verdict == "REJECTED" and r.exit_code == 1
    j = r.rejection
    assert j is not None and j.line == 13 and j.seq == 12 and j.step == "page 4"
    assert [(c.action, c.reason) for c in j.candidates] == [
        ("get_new_blocks(1)", "effect disagrees with the log: it changes ref_cnt at B3, the log says B4")]
    assert j.states[0]["state"]["free_pos"]["B3"] == 0  # B3 heads the queue in the state shown


def test_a_free_of_a_block_nobody_holds_names_the_failing_guard(tmp_path: Path) -> None:
    r = validate(VLLM, write_log(tmp_path / "bad.jsonl", altered(9, pages=[3, 2])))
    j = r.rejection
    assert r.verdict == "REJECTED" and j is not None and j.line == 11 and j.step == "page 2"
    (c,) = j.candidates
    assert c.action == "free_blocks(B2)"
    assert c.reason.startswith("guard false: require(s.ref_cnt[block] > 0)") and "vllm_block_pool.py:" in c.reason
    assert j.states[0]["state"]["ref_cnt"]["B2"] == 0


def test_a_hit_on_content_nobody_cached_is_rejected(tmp_path: Path) -> None:
    r = validate(VLLM, write_log(tmp_path / "bad.jsonl", altered(3, content=["zz"])))
    j = r.rejection
    assert j is not None and j.line == 5
    assert all(c.action.startswith("touch_cached_block") and "guard false" in c.reason for c in j.candidates)


def test_a_write_to_a_free_block_fails_the_rules_where(tmp_path: Path) -> None:
    events = [*CLEAN, {"event": "write", "req": "r3", "node": "gpu", "pages": [2], "content": ["x"]}]
    j = validate(VLLM, write_log(tmp_path / "bad.jsonl", events)).rejection
    assert j is not None and j.line == len(events) + 1
    assert "where=" in j.candidates[0].reason and "is false after the step" in j.candidates[0].reason


CONTRACT = ROOT / "examples" / "validate" / "event_contract.py"


def test_the_contract_spec_validates_the_clean_log_and_rejects_a_read_of_unwritten_content(tmp_path: Path) -> None:
    """The block pool has no contents, so only the contract spec sees that r2 reads a page nobody wrote."""
    assert validate(CONTRACT, write_log(tmp_path / "clean.jsonl", CLEAN)).verdict == "VALIDATED"
    unwritten = [e for e in CLEAN if not (e["event"] == "write" and e["req"] == "r2")]
    log = write_log(tmp_path / "unwritten.jsonl", unwritten)
    assert validate(VLLM, log).verdict == "VALIDATED"
    j = validate(CONTRACT, log).rejection
    assert j is not None and j.line == 7 and j.step == "page 3"
    assert [c.action for c in j.candidates] == ["read(R1, P3, k2)"]
    assert "guard false: require(s.content[p] == k)  # no_foreign_read" in j.candidates[0].reason
    assert j.states[0]["requests"] == {"r1": "R0", "r2": "R1"} and j.states[0]["content"] == {"a": "k0", "ab": "k1"}


# -- unlogged steps, partial logs -----------------------------------------------------------------
def test_unlogged_internal_steps_are_bridged_within_the_gap(tmp_path: Path) -> None:
    """A log that does not record cache events: cache_full_blocks runs unlogged, and the share needs it."""
    log = write_log(tmp_path / "nocache.jsonl", without("cache"))
    none = validate(VLLM, log, ValidateOptions(max_gap=0, unlogged=("cache",)))
    assert none.verdict == "REJECTED" and none.rejection is not None
    assert none.rejection.event["event"] == "share"
    one = validate(VLLM, log, ValidateOptions(max_gap=1, unlogged=("cache",)))
    assert one.verdict == "VALIDATED" and one.internal == ("cache_full_blocks",)
    assert validate(VLLM, log, ValidateOptions(max_gap=1)).verdict == "REJECTED"  # not declared unlogged


def test_a_partial_log_without_contents_is_validated(tmp_path: Path) -> None:
    """Only alloc/free/finish recorded, block hashes never observed: the last alloc takes blocks 3 and 4,
    which vLLM's queue does only if blocks 1 and 2 went back as cached blocks (to the back)."""
    events = [CLEAN[0], {"event": "free", "req": "r1", "node": "gpu", "pages": [2, 1]}, {"event": "finish", "req": "r1"},
              {"event": "alloc", "req": "r2", "node": "gpu", "pages": [3, 4]}]
    log = write_log(tmp_path / "partial.jsonl", events)
    r = validate(VLLM, log, ValidateOptions(max_gap=2, unlogged=("cache", "share", "write", "read")))
    assert r.verdict == "VALIDATED", r.rejection
    tight = validate(VLLM, log, ValidateOptions(max_gap=1, unlogged=("cache",)))  # one gap of one step: B1 or B2
    assert tight.verdict == "REJECTED" and tight.rejection is not None and tight.rejection.line == 5
    assert validate(VLLM, log).rejection is not None  # a complete log of the same events: nothing was cached


def test_the_configuration_bound_makes_a_rejection_inconclusive(tmp_path: Path) -> None:
    """Caching is unlogged: one internal step per gap caches one block, so the hit on both needs two gaps."""
    log = write_log(tmp_path / "nocache.jsonl", [
        CLEAN[0], CLEAN[1], {"event": "share", "req": "r2", "node": "gpu", "pages": [1, 2], "content": ["a", "ab"]}])
    exact = validate(VLLM, log, ValidateOptions(max_gap=1, unlogged=("cache",)))
    assert exact.verdict == "VALIDATED"
    bounded = validate(VLLM, log, ValidateOptions(max_gap=1, max_configs=1, unlogged=("cache",)))  # keeps only "nothing cached"
    assert bounded.verdict == "UNKNOWN" and bounded.exit_code == 3 and bounded.truncated_at == 3
    assert bounded.rejection is not None and bounded.rejection.line == 4


# -- request ids bound to elements ---------------------------------------------------------------
TINY = '''
from typing import Annotated
from ownership import Element, Spec, require, safe

spec = Spec("log_pool", summary="requests hold pages", expect=safe())
spec.param("requests", 2, "requests", min=1, max=8)
spec.param("pages", 3, "pages", min=1, max=64)
Req = spec.domain("Req", "requests", symmetric=True, names="ABCDEFGH")
Page = spec.domain("Page", "pages", symmetric=True, names=lambda i: f"P{i + 1}")
R = Annotated[Element, Req]
P = Annotated[Element, Page]
spec.var("held", bool, per=(Req, Page), init=False)
spec.var("free", bool, per=Page, init=True)


@spec.action
def alloc(s, r: R, p: P):
    require(s.free[p])
    s.free[p] = False
    s.held[r, p] = True


@spec.action
def release(s, r: R, p: P):
    require(s.held[r, p])
    s.held[r, p] = False
    s.free[p] = True


@spec.invariant
def one_place(s) -> bool:
    return all(s.free[p] != any(s.held[r, p] for r in s.all(Req)) for p in s.all(Page))


spec.log_ids(pages=Page, req=Req, params=lambda node: {"pages": node.usable})
spec.logs("alloc", "alloc", per_page=True, args={"r": "req", "p": "page"})
spec.logs("free", "release", per_page=True, args={"r": "req", "p": "page"})
spec.logs("finish", where=lambda s, e: not any(s.held[e.req, p] for p in s.all(Page)))
'''
TINY_HEADER = {"schema": "ownership.events/1", "nodes": {"kv": {"pages": 4, "page_size": 1, "reserved": [0]}}}


def _tiny(tmp_path: Path) -> Path:
    path = tmp_path / "log_pool.py"
    path.write_text(TINY, encoding="utf-8")
    return path


def _run(n: str, kind: str, pages: list[int] | None = None) -> dict[str, Any]:
    return {"event": kind, "req": n} if pages is None else {"event": kind, "req": n, "node": "kv", "pages": pages}


def test_request_ids_are_bound_at_first_sight_and_released_by_finish(tmp_path: Path) -> None:
    events = []
    for n in ("a", "b", "c", "d"):  # four requests one after another on a two-request instance
        events += [_run(n, "alloc", [1, 2]), _run(n, "free", [1, 2]), _run(n, "finish")]
    r = validate(_tiny(tmp_path), write_log(tmp_path / "seq.jsonl", events, TINY_HEADER))
    assert r.verdict == "VALIDATED" and r.params["requests"] == 2


def test_more_running_requests_than_elements_is_rejected_and_a_larger_instance_fits(tmp_path: Path) -> None:
    events = [_run("a", "alloc", [1]), _run("b", "alloc", [2]), _run("c", "alloc", [3])]
    log = write_log(tmp_path / "three.jsonl", events, TINY_HEADER)
    j = validate(_tiny(tmp_path), log).rejection
    assert j is not None and j.line == 4
    assert "no element of Req is free for request 'c'" in j.candidates[0].reason
    assert validate(_tiny(tmp_path), log, params={"requests": 3}).verdict == "VALIDATED"


def test_a_free_by_another_request_and_a_leak_at_finish_are_rejected(tmp_path: Path) -> None:
    spec = _tiny(tmp_path)
    foreign = [_run("a", "alloc", [1]), _run("b", "alloc", [2]), _run("b", "free", [1])]
    j = validate(spec, write_log(tmp_path / "foreign.jsonl", foreign, TINY_HEADER)).rejection
    assert j is not None and j.line == 4 and j.states[0]["requests"] == {"a": "A", "b": "B"}
    assert [c.action for c in j.candidates] == ["release(B, P1)"]
    assert j.candidates[0].reason.startswith("guard false: require(s.held[r, p])")
    leak = write_log(tmp_path / "leak.jsonl", [_run("a", "alloc", [1]), _run("a", "finish")], TINY_HEADER)
    j = validate(spec, leak).rejection
    assert j is not None and j.line == 3 and "where=" in j.candidates[0].reason
    # A log declared not to record frees: a's free may have happened in the gap.
    assert validate(spec, leak, ValidateOptions(unlogged=("free",))).verdict == "VALIDATED"


# -- bad input -------------------------------------------------------------------------------------
GOOD = json.dumps(HEADER)


@pytest.mark.parametrize(("lines", "code", "line", "needle"), [
    ([GOOD, "{nope"], "OWN085", 2, "not JSON"),
    ([GOOD, ""], "OWN085", 2, "blank line"),
    ([GOOD, "[1, 2]"], "OWN085", 2, "not an object"),
    (['{"schema": "other/1", "nodes": {}}'], "OWN086", 1, "header"),
    ([GOOD, '{"seq": 1, "event": "evict", "req": "r1"}'], "OWN086", 2, "must be one of"),
    ([GOOD, '{"seq": 1, "event": "alloc", "req": "r1", "node": "gpu"}'], "OWN086", 2, 'needs "pages"'),
    ([GOOD, '{"seq": 1, "event": "share", "req": "r1", "node": "gpu", "pages": [1]}'], "OWN086", 2, "content"),
    ([GOOD, '{"seq": 1, "event": "finish", "req": "r1"}', '{"seq": 3, "event": "finish", "req": "r1"}'],
     "OWN087", 3, "seq 3 where 2 was due"),
    ([GOOD, '{"seq": 1, "event": "alloc", "req": "r1", "node": "cpu", "pages": [1]}'], "OWN088", 2, "node 'cpu'"),
    ([GOOD, '{"seq": 1, "event": "alloc", "req": "r1", "node": "gpu", "pages": [9]}'], "OWN088", 2, "page 9"),
    ([json.dumps({**HEADER, "nodes": {"gpu": {"pages": 5000, "page_size": 4, "reserved": [0]}}})],
     "OWN089", 1, "outside its range"),
    ([json.dumps({**HEADER, "nodes": {"a": HEADER["nodes"]["gpu"], "b": HEADER["nodes"]["gpu"]}})],
     "OWN089", 1, "does not say which one"),
])
def test_corrupt_logs_are_errors_at_their_line(tmp_path: Path, lines: list[str], code: str, line: int,
                                                needle: str) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(OwnershipError) as exc:
        validate(VLLM, log)
    assert exc.value.code.label == code and exc.value.line == line and needle in exc.value.message
    res = CliRunner().invoke(app, ["validate", str(VLLM), str(log)])
    assert res.exit_code == 2 and f"error[{code}]: {log}:{line}: " in res.stderr


def test_a_spec_that_declares_no_log_reading_is_refused(tmp_path: Path) -> None:
    log = write_log(tmp_path / "clean.jsonl", CLEAN)
    res = CliRunner().invoke(app, ["validate", str(ROOT / "specs" / "sglang_disagg_v0_5_21.py"), str(log)])
    assert res.exit_code == 2 and "error[OWN089]" in res.stderr and "log_ids" in res.stderr


@pytest.mark.parametrize(("declare", "needle"), [
    (lambda s, d: s.logs("evict", "go"), "not an event kind"),
    (lambda s, d: s.logs("free", "nope"), "not an action"),
    (lambda s, d: s.logs("free", "go", per_page=True, args={"q": "page"}), "has no argument 'q'"),
    (lambda s, d: s.logs("free", "go", args={"p": "page"}), "per_page=True"),
    (lambda s, d: s.logs("free", "go", per_page=True, args={"p": "req"}), "maps onto no domain"),
    (lambda s, d: s.logs("free", "go", changes="nothing"), "not a variable"),
])
def test_malformed_log_declarations_are_refused_at_their_line(declare: Any, needle: str) -> None:
    s = Spec("decl")
    Page = s.domain("Page", 2)  # noqa: N806 - read by the annotation below, which names it
    s.var("x", int, per=Page, init=0)

    @s.action
    def go(v: Any, p: Page) -> None:  # type: ignore[valid-type]
        v.x[p] = 1

    s.log_ids(pages=Page)
    with pytest.raises(OwnershipError) as exc:
        declare(s, Page)
    assert exc.value.code.label == "OWN092" and needle in exc.value.message
    assert exc.value.file == __file__


# -- the command line ------------------------------------------------------------------------------
def test_cli_validated_and_rejected_with_json(tmp_path: Path) -> None:
    runner = CliRunner()
    clean = write_log(tmp_path / "clean.jsonl", CLEAN)
    res = runner.invoke(app, ["validate", str(VLLM), str(clean), "--json", str(tmp_path / "ok.json")])
    assert res.exit_code == 0 and res.stdout.startswith(f"VALIDATED  vllm_block_pool  {clean}: all 12 events")
    ok = json.loads((tmp_path / "ok.json").read_text())
    assert ok["format"] == "ownership-validate" and ok["version"] == 1 and ok["verdict"] == "VALIDATED"
    assert ok["rejection"] is None and ok["events"] == 12 and ok["max_gap"] == 2
    bad = write_log(tmp_path / "bad.jsonl", altered(11, pages=[4, 3]))
    res = runner.invoke(app, ["validate", str(VLLM), str(bad), "--json", str(tmp_path / "no.json")])
    assert res.exit_code == 1
    assert res.stdout.startswith(f"REJECTED  vllm_block_pool  {bad}:13: no behaviour of the spec explains seq 12")
    # The reason leads, in the engine's terms; the spec's states only with -v.
    lines = res.stdout.splitlines()
    assert lines[1] == ("  why: get_new_blocks(1): effect disagrees with the log: it changes ref_cnt at B3, "
                        "the log says B4"), res.stdout
    assert lines[2] == "  event: alloc of pages 4, 3 by request r3 on node gpu" and lines[3] == "  in the spec: page 4 is B4"
    assert "state 1:" not in res.stdout and "ref_cnt: as initially" not in res.stdout and "-v shows its state" in res.stdout
    verbose = runner.invoke(app, ["validate", str(VLLM), str(bad), "-v"])
    assert verbose.exit_code == 1 and verbose.stdout.splitlines()[:4] == lines[:4]
    assert "[state 1] get_new_blocks(1): effect disagrees with the log" in verbose.stdout
    assert "      ref_cnt: as initially\n      block_hash[B1]=h0  block_hash[B2]=h1  (the rest as initially)\n" in verbose.stdout
    no = json.loads((tmp_path / "no.json").read_text())
    assert set(no) == {"format", "version", "verdict", "spec", "log", "events", "params", "max_gap",
                       "internal_actions", "configurations", "seconds", "notes", "rejection"}
    rej = no["rejection"]
    assert rej["line"] == 13 and rej["seq"] == 12 and rej["event"]["pages"] == [4, 3] and rej["step"] == "page 4"
    assert set(rej["states"][0]) == {"state", "content"} and rej["candidates"][0]["action"] == "get_new_blocks(1)"
    assert set(no["configurations"]) == {"max", "final", "truncated_at"}


def test_cli_refuses_a_negative_gap(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["validate", str(VLLM), str(write_log(tmp_path / "c.jsonl", CLEAN)),
                                   "--max-gap", "-1"])
    assert res.exit_code == 2 and "error[OWN015]" in res.stderr


# -- the committed logs of real runs (examples/logs, written by the monitor's instrumentation) ----------
LOGS = ROOT / "examples" / "logs"
SPECS_FOR = {"vllm": [VLLM, CONTRACT], "sglang": [CONTRACT]}


def _engine(log: Path) -> str:
    return str(json.loads(log.read_text(encoding="utf-8").split("\n", 1)[0])["engine"])


def _monitor_first_violation(log: Path) -> int:
    """The seq of the first event the runtime monitor flags when the log is fed to it again."""
    from ownership.monitor.log import apply, monitor_from_header

    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    m = monitor_from_header(records[0], raise_on_violation=False)
    for r in records[1:]:
        apply(m, r)
    assert m.violations, f"{log.name}: the monitor flags nothing"
    return int(m.violations[0].seq)


def test_the_committed_real_logs_are_there() -> None:
    assert {p.name for p in LOGS.glob("*.jsonl")} >= {"sglang-clean.jsonl", "sglang-seeded.jsonl", "vllm-clean.jsonl",
                                                     "vllm-seeded.jsonl"}


@pytest.mark.parametrize("log", sorted(LOGS.glob("*-clean.jsonl")), ids=lambda p: p.name)
def test_a_clean_real_log_is_validated(log: Path) -> None:
    for spec in SPECS_FOR[_engine(log)]:
        r = validate(spec, log)
        assert r.verdict == "VALIDATED", (spec.name, r.rejection)
        assert r.events == len(log.read_text(encoding="utf-8").splitlines()) - 1


def _seeded_cases() -> list[Any]:
    """(log, spec) pairs; the contract spec on vLLM's 47-block log builds 286,000 action instances: slow."""
    cases = []
    for log in sorted(LOGS.glob("*-seeded.jsonl")):
        for spec in SPECS_FOR[_engine(log)]:
            big = spec == CONTRACT and _engine(log) == "vllm"
            cases.append(pytest.param(log, spec, id=f"{log.name}-{spec.stem}", marks=[pytest.mark.slow] if big else []))
    return cases


@pytest.mark.parametrize(("log", "spec"), _seeded_cases())
def test_a_seeded_real_log_is_rejected_where_the_monitor_flags_the_bug(log: Path, spec: Path) -> None:
    """The online monitor and the spec agree on the line (for the contract spec: two implementations of it)."""
    seq = _monitor_first_violation(log)
    r = validate(spec, log)
    j = r.rejection
    assert r.verdict == "REJECTED" and j is not None
    assert (j.seq, j.line) == (seq, seq + 1)
    assert j.candidates and all(c.reason.startswith(("guard false", "effect disagrees")) for c in j.candidates)


def test_an_event_with_no_pages_is_no_call(tmp_path: Path) -> None:
    events = [*CLEAN[:1], {"event": "alloc", "req": "r1", "node": "gpu", "pages": []}, *CLEAN[1:]]
    assert validate(VLLM, write_log(tmp_path / "empty.jsonl", events)).verdict == "VALIDATED"


def test_progress_is_reported_about_once_a_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ownership.validate.search as search

    ticks = iter(range(0, 10_000, 2))  # every reading of the clock is two seconds later
    monkeypatch.setattr(search.time, "monotonic", lambda: float(next(ticks)))
    seen: list[tuple[int, int]] = []
    validate(VLLM, write_log(tmp_path / "clean.jsonl", CLEAN), progress=lambda line, n: seen.append((line, n)))
    assert [line for line, _ in seen] == list(range(1, len(CLEAN) + 1)) and all(n >= 1 for _, n in seen)


def test_a_reserved_page_in_an_event_is_rejected_not_mapped(tmp_path: Path) -> None:
    j = validate(VLLM, write_log(tmp_path / "null.jsonl", [{"event": "alloc", "req": "r1", "node": "gpu",
                                                             "pages": [0]}])).rejection
    assert j is not None and j.line == 2 and "page 0 is reserved" in j.candidates[0].reason


def test_cli_refuses_an_unknown_unlogged_kind(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["validate", str(VLLM), str(write_log(tmp_path / "c.jsonl", CLEAN)),
                                   "--unlogged", "evict"])
    assert res.exit_code == 2 and "error[OWN013]" in res.stderr and "--unlogged evict" in res.stderr
    res = CliRunner().invoke(app, ["validate", str(VLLM), str(write_log(tmp_path / "p.jsonl", without("cache"))),
                                   "--unlogged", "cache", "--max-gap", "1"])
    assert res.exit_code == 0 and "internal (unlogged) actions: cache_full_blocks" in res.stdout


def test_a_constant_argument_no_instance_has_is_explained(tmp_path: Path) -> None:
    """A rule binding num_blocks to a value outside NumBlocks: the candidate says so instead of nothing."""
    src = (ROOT / "specs" / "vllm_block_pool.py").read_text(encoding="utf-8")
    changed = src.replace('args={"num_blocks": 1}, changes="ref_cnt"', 'args={"num_blocks": 3}, changes="ref_cnt"')
    assert changed != src
    spec = tmp_path / "vllm_block_pool.py"
    spec.write_text(changed, encoding="utf-8")
    j = validate(spec, write_log(tmp_path / "c.jsonl", CLEAN)).rejection
    assert j is not None and j.line == 2
    assert j.candidates[0].reason == "no instance of get_new_blocks has the logged arguments (num_blocks=3)"


def test_a_where_that_raises_is_a_located_spec_error(tmp_path: Path) -> None:
    src = TINY.replace("spec.logs(\"finish\", where=lambda s, e: not any(s.held[e.req, p] for p in s.all(Page)))",
                       "spec.logs(\"finish\", where=lambda s, e: 1 / 0 > 0)")
    assert src != TINY
    spec = tmp_path / "raising.py"
    spec.write_text(src, encoding="utf-8")
    with pytest.raises(OwnershipError) as exc:
        validate(spec, write_log(tmp_path / "f.jsonl", [_run("a", "finish")], TINY_HEADER))
    assert exc.value.code.label == "OWN006" and exc.value.file == str(spec) and "ZeroDivisionError" in exc.value.message


def test_the_bound_also_cuts_the_internal_steps(tmp_path: Path) -> None:
    """One configuration allowed: the gap before the hit cannot even cache block 1, so no REJECTED is claimed."""
    log = write_log(tmp_path / "nocache.jsonl", [CLEAN[0], CLEAN[3]])
    assert validate(VLLM, log, ValidateOptions(max_gap=1, unlogged=("cache",))).verdict == "VALIDATED"
    cut = validate(VLLM, log, ValidateOptions(max_gap=1, max_configs=1, unlogged=("cache",)))
    assert cut.verdict == "UNKNOWN" and cut.truncated_at == 3
