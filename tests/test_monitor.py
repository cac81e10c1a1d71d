"""ownership.monitor: each invariant broken by a short event sequence, clean sequences that pass, the log."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest

from ownership.errors import Code, OwnershipError
from ownership.monitor import (
    INVARIANTS,
    SCHEMA,
    MalformedEventError,
    Monitor,
    OwnershipViolation,
    apply,
    monitor_from_header,
)

NODES = {"gpu": {"pages": 8, "page_size": 4, "reserved": [0]}, "cpu": {"pages": 4, "page_size": 4}}


def fresh(**kwargs: object) -> Monitor:
    return Monitor(NODES, **kwargs)  # type: ignore[arg-type]


def prefilled(m: Monitor, req: str, pages: list[int], keys: list[str]) -> None:
    """req allocates, writes and publishes its prompt pages."""
    m.alloc(req, pages)
    m.write(req, pages, keys)
    m.cache(req, pages, keys)


# -- one broken sequence per invariant: (invariant, the events, request, page the message names) --------------
def double_alloc(m: Monitor) -> None:
    m.alloc("a", [1, 2])
    m.alloc("b", [3, 2])


def reserved_alloc(m: Monitor) -> None:
    m.alloc("a", [0])


def double_free(m: Monitor) -> None:
    m.alloc("a", [1])
    m.free("a", [1])
    m.free("a", [1])


def foreign_free(m: Monitor) -> None:
    m.alloc("a", [1])
    m.alloc("b", [2])
    m.free("b", [1])


def unowned_write(m: Monitor) -> None:
    m.alloc("a", [1])
    m.write("b", [1], ["kb"])


def unowned_read_after_free(m: Monitor) -> None:
    prefilled(m, "a", [1], ["k1"])
    m.free("a", [1])
    m.read("a", [1], ["k1"])


def unowned_transfer_source(m: Monitor) -> None:
    m.alloc("a", [1], node="cpu")
    m.transfer("a", [1], ["k"], src_node="gpu", src_pages=[2], node="cpu")


def write_to_shared(m: Monitor) -> None:
    prefilled(m, "a", [1], ["k1"])
    m.share("b", [1], ["k1"])
    m.write("b", [1], ["kb"])


def wrong_cache_hit_key(m: Monitor) -> None:
    prefilled(m, "a", [1], ["k1"])
    m.share("b", [1], ["other"])


def cache_hit_after_evicting_alloc(m: Monitor) -> None:
    prefilled(m, "a", [1], ["k1"])
    m.free("a", [1])
    m.alloc("c", [1])  # evicts the cache entry
    m.share("b", [1], ["k1"])


def stale_read_after_realloc(m: Monitor) -> None:
    prefilled(m, "a", [1], ["k1"])
    m.free("a", [1])
    m.finish("a")
    m.alloc("b", [1])
    m.read("b", [1], ["k1"])


def read_of_another_writers_content(m: Monitor) -> None:
    prefilled(m, "a", [1], ["k1"])
    m.share("b", [1], ["k1"])
    m.read("b", [1], ["k-b-expects"])


def read_never_written(m: Monitor) -> None:
    m.alloc("a", [3])
    m.read("a", [3], ["k3"])


def transfer_of_stale_source(m: Monitor) -> None:
    m.alloc("a", [1])
    m.alloc("a", [2], node="cpu")
    m.transfer("a", [2], ["k1"], src_node="gpu", src_pages=[1], node="cpu")


def leak_at_finish(m: Monitor) -> None:
    m.alloc("a", [1, 2])
    m.free("a", [1])
    m.finish("a")


BROKEN: list[tuple[str, Callable[[Monitor], None], str, int]] = [
    ("no_double_alloc", double_alloc, "b", 2),
    ("no_double_alloc", reserved_alloc, "a", 0),
    ("no_foreign_free", double_free, "a", 1),
    ("no_foreign_free", foreign_free, "b", 1),
    ("no_unowned_access", unowned_write, "b", 1),
    ("no_unowned_access", unowned_read_after_free, "a", 1),
    ("no_unowned_access", unowned_transfer_source, "a", 2),
    ("no_write_to_shared", write_to_shared, "b", 1),
    ("no_wrong_cache_hit", wrong_cache_hit_key, "b", 1),
    ("no_wrong_cache_hit", cache_hit_after_evicting_alloc, "b", 1),
    ("no_foreign_read", stale_read_after_realloc, "b", 1),
    ("no_foreign_read", read_of_another_writers_content, "b", 1),
    ("no_foreign_read", read_never_written, "a", 3),
    ("no_foreign_read", transfer_of_stale_source, "a", 1),
    ("no_leak_at_finish", leak_at_finish, "a", 2),
]


def test_every_invariant_has_a_sequence_that_breaks_it() -> None:
    assert {inv for inv, *_ in BROKEN} == set(INVARIANTS)


@pytest.mark.parametrize(("invariant", "events", "req", "page"), BROKEN, ids=[f.__name__ for _, f, _, _ in BROKEN])
def test_the_first_breaking_event_raises_with_invariant_seq_request_and_page(
        invariant: str, events: Callable[[Monitor], None], req: str, page: int) -> None:
    log = io.StringIO()
    m = fresh(log=log)
    with pytest.raises(OwnershipViolation) as caught:
        events(m)
    v = caught.value
    assert isinstance(v, AssertionError)
    assert (v.invariant, v.req, v.page) == (invariant, req, page)
    assert v.seq == m.seq, "raised at the last event made, not later"
    assert v.event["seq"] == v.seq and v.event["req"] == req
    text = str(v)
    assert text.startswith(f"{invariant} at seq {v.seq} ({v.event['event']}): ")
    assert f"request {req}" in text and f"page {page}" in text and f"node {v.node}" in text
    assert (f"written by {v.writer}" in text) if v.writer else ("nothing written" in text)
    # the violating event is in the log, as its last line
    lines = log.getvalue().splitlines()
    assert len(lines) == v.seq + 1 and json.loads(lines[-1]) == v.event


def test_the_message_names_who_wrote_the_stale_content() -> None:
    m = fresh()
    with pytest.raises(OwnershipViolation) as caught:
        stale_read_after_realloc(m)
    assert caught.value.writer == "request a at seq 2"
    assert "stale 'k1' written by request a at seq 2" in str(caught.value)
    m = fresh()
    with pytest.raises(OwnershipViolation) as caught:
        read_never_written(m)
    assert caught.value.writer is None and "nothing written" in str(caught.value)


# -- clean sequences -----------------------------------------------------------------------------------------
def test_prefix_cache_share_transfer_and_free_of_a_shared_page_by_one_holder_are_clean() -> None:
    m = fresh()
    prefilled(m, "a", [1, 2], ["k1", "k12"])
    m.read("a", [1, 2], ["k1", "k12"])
    m.share("b", [1], ["k1"])  # prefix hit on the first page only
    m.alloc("b", [3])
    m.write("b", [3], ["k13"])
    m.read("b", [1, 3], ["k1", "k13"])
    m.free("a", [1, 2])  # one holder of page 1 lets go; b still reads it
    m.finish("a")
    m.read("b", [1], ["k1"])
    assert m.holders(1) == {"b": 1} and m.holders(2) == {}
    m.alloc("b", [0], node="cpu")  # offload: copy to the cpu node
    m.transfer("b", [0], ["k13"], src_node="gpu", src_pages=[3], node="cpu")
    m.read("b", [0], ["k13"], node="cpu")
    m.free("b", [1, 3])
    m.free("b", [0], node="cpu")
    m.finish("b")
    # a freed cached page is still a hit (vLLM's lazy eviction), and a shared page may be taken twice
    m.share("c", [2, 2], ["k12", "k12"])
    m.read("c", [2], ["k12"])
    m.free("c", [2, 2])
    m.finish("c")
    assert m.violations == [] and m.held_by("b") == {} and m.held_by("c") == {}


def test_a_page_allocated_again_then_written_then_read_is_clean() -> None:
    m = fresh()
    prefilled(m, "a", [1], ["k1"])
    m.free("a", [1])
    m.finish("a")
    m.alloc("b", [1])
    m.write("b", [1], ["kb"])
    m.read("b", [1], ["kb"])
    assert m.cached(1) is None and m.content(1) == "kb"


def test_without_raising_every_violation_is_collected_and_the_events_take_effect() -> None:
    m = fresh(raise_on_violation=False)
    double_free(m)
    m.alloc("b", [1])  # the double free did not take a reference from anyone
    leak_at_finish(m)
    assert [v.invariant for v in m.violations] == ["no_foreign_free", "no_double_alloc", "no_leak_at_finish"]


# -- the log ---------------------------------------------------------------------------------------------------
def test_the_log_is_a_header_then_one_numbered_event_a_line_and_replays_to_the_same_violation(tmp_path) -> None:
    path = tmp_path / "run.jsonl"
    with fresh(log=path, engine="sglang", engine_version="0.5.23", source="test") as m:
        prefilled(m, "a", [1], ["k1"])
        m.read("a", [1], ["k1"], at="radix_cache.py:552", note="decode")
        with pytest.raises(OwnershipViolation):
            m.free("b", [1])
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header == {"schema": SCHEMA, "engine": "sglang", "engine_version": "0.5.23",
                      "nodes": {"gpu": {"pages": 8, "page_size": 4, "reserved": [0]},
                                "cpu": {"pages": 4, "page_size": 4, "reserved": []}}, "source": "test"}
    events = [json.loads(line) for line in lines[1:]]
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    assert events[3] == {"seq": 4, "event": "read", "req": "a", "node": "gpu", "pages": [1], "content": ["k1"],
                         "at": "radix_cache.py:552", "note": "decode"}
    again = monitor_from_header(header)
    for e in events[:-1]:
        apply(again, e)
    with pytest.raises(OwnershipViolation) as caught:
        apply(again, events[-1])
    assert (caught.value.invariant, caught.value.seq) == ("no_foreign_free", 5)


@pytest.mark.parametrize(("record", "says"), [
    ({"seq": 1, "event": "steal", "req": "a"}, "unknown event kind"),
    ({"seq": 2, "event": "finish", "req": "a"}, "expected 1"),
    ({"seq": 1, "event": "alloc", "req": "a", "node": "gpu"}, "lacks pages"),
    ({"seq": 1, "event": "alloc", "req": "a", "node": "tpu", "pages": [1]}, "unknown node"),
    ({"seq": 1, "event": "alloc", "req": "a", "node": "gpu", "pages": [8]}, "page 8 is not on node"),
    ({"seq": 1, "event": "write", "req": "a", "node": "gpu", "pages": [1], "content": []}, "one string per page"),
    ({"seq": 1, "event": "alloc", "req": 7, "node": "gpu", "pages": [1]}, "req must be a string"),
])
def test_a_malformed_record_is_a_numbered_error(record: dict[str, object], says: str) -> None:
    with pytest.raises(MalformedEventError) as caught:
        apply(fresh(), record)
    assert caught.value.code is Code.MONITOR_BAD_EVENT and says in caught.value.one_line()
    assert caught.value.one_line().startswith("error[OWN084]: ")


def test_an_unwritable_log_path_is_an_output_path_error(tmp_path) -> None:
    with pytest.raises(OwnershipError) as caught:
        fresh(log=tmp_path / "missing" / "run.jsonl")
    assert caught.value.code is Code.OUTPUT_PATH


def test_the_monitor_imports_no_engine_and_no_solver() -> None:
    import subprocess
    import sys

    code = ("import sys, ownership.monitor; "
            "print(sorted(m for m in ('torch', 'z3', 'hypothesis', 'sglang', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- the SGLang instrumentation's content keys (no SGLang needed) ------------------------------------------------
class _Row(list):  # type: ignore[type-arg]
    """A req_to_token row stand-in: slicing gives a row, tolist() the indices."""

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        got = super().__getitem__(i)
        return _Row(got) if isinstance(i, slice) else got

    def tolist(self) -> list[int]:
        return list(self)


def test_content_keys_are_equal_exactly_for_equal_prefixes_up_to_the_page_end() -> None:
    from ownership.monitor.sglang import content_keys

    a = content_keys([1, 2, 3, 4, 5], 2)
    assert len(a) == 3 and len(set(a)) == 3
    assert content_keys([1, 2, 3, 4, 9], 2)[:2] == a[:2] and content_keys([1, 2, 3, 4, 9], 2)[2] != a[2]
    assert content_keys([7, 2, 3, 4], 2)[1] != a[1], "a page's key depends on every token before it"
    assert content_keys([1, 2], 2, extra_key=("lora", None)) != a[:1]


def test_forward_reuses_keys_of_full_pages_and_reads_the_row_as_the_engine_holds_it() -> None:
    from types import SimpleNamespace

    from ownership.monitor.sglang import SglangMonitor, content_keys

    m = Monitor({"gpu": {"pages": 8, "page_size": 2, "reserved": [0]}})
    sm = SglangMonitor(m, SimpleNamespace(page_size=2), SimpleNamespace())
    tokens = [5, 6, 7]
    row = _Row([2, 3, 4, 5, 8, 9])  # token slots: pages 1 and 2
    m.alloc("r", [1, 2])
    sm.forward("r", row, tokens, 0)
    for t in (8, 9, 10):  # decode: page 3 starts at the 5th token
        tokens.append(t)
        if len(tokens) == 5:
            m.alloc("r", [3])
        row = _Row([2, 3, 4, 5, 6, 7])
        sm.forward("r", row, tokens, len(tokens) - 1)
        assert [m.content(p) for p in (1, 2, 3)][: -(-len(tokens) // 2)] == content_keys(tokens, 2)
    with pytest.raises(OwnershipViolation) as caught:  # a row pointing at a page the request does not hold
        sm.forward("r", _Row([2, 3, 14, 15, 6, 7]), tokens, 6)
    assert caught.value.invariant == "no_unowned_access" and caught.value.page == 7


def test_around_names_the_acting_request_for_an_engine_entry_point() -> None:
    from types import SimpleNamespace

    from ownership.monitor.sglang import SglangMonitor

    sm = SglangMonitor(fresh(), SimpleNamespace(page_size=4), SimpleNamespace())
    seen: list[str] = []
    release = sm.around(lambda req: seen.append(sm._actor("release")), lambda req: [req.rid])
    release(SimpleNamespace(rid="r7"))
    assert seen == ["r7"] and sm._actors == []
    with pytest.raises(RuntimeError, match="acting"):
        sm._actor("free")


# -- a seeded random workload of a correct allocator never raises; one fault in it does -------------------------
def _random_run(m: Monitor, seed: int, steps: int, fault: str | None = None) -> str | None:
    """A refcounting pool with a lazy prefix cache (vLLM-like) driving the monitor for ``steps`` steps.

    ``fault``: "reuse-held" hands out a page someone holds, "skip-write" reads a fresh page unwritten.
    """
    import random

    rng = random.Random(seed)
    pages = list(range(1, 8))
    refs = dict.fromkeys(pages, 0)
    cached: dict[int, str] = {}  # page -> key, kept after free until re-allocation
    content: dict[int, str] = {}
    held: dict[str, list[int]] = {}
    faulty: str | None = None  # the request the fault was put into (once, at the first chance after half-way)
    for step in range(steps):
        armed = fault is not None and faulty is None and step >= steps // 2
        live = list(held)
        if live and (len(live) > 3 or rng.random() < 0.3):  # a request finishes
            r = rng.choice(live)
            m.read(r, held[r], [content[p] for p in held[r]])
            m.free(r, held[r])
            for p in held.pop(r):
                refs[p] -= 1
            m.finish(r)
            continue
        r = f"q{step}"
        hit = [p for p, k in cached.items() if rng.random() < 0.3][:2]
        if hit:
            m.share(r, hit, [cached[p] for p in hit])
            for p in hit:
                refs[p] += 1
        free = [p for p in pages if refs[p] == 0 and p not in hit]
        if armed and fault == "reuse-held" and any(refs[p] > 0 for p in pages if p not in hit):
            free, faulty = [p for p in pages if refs[p] > 0 and p not in hit], r
        mine = free[:1]
        held[r] = hit + mine
        if mine:
            m.alloc(r, mine)
            refs[mine[0]] += 1
            cached.pop(mine[0], None)
            key = f"{r}:{mine[0]}"
            if armed and fault == "skip-write":
                faulty = r
            else:
                m.write(r, mine, [key])
                content[mine[0]] = key
            m.cache(r, mine, [content.get(mine[0], key)])
            cached[mine[0]] = content.get(mine[0], key)
        if held[r]:
            m.read(r, held[r], [content.get(p, "?") for p in held[r]])
    return faulty


@pytest.mark.parametrize("seed", range(5))
def test_a_correct_random_run_is_silent(seed: int) -> None:
    m = fresh()
    _random_run(m, seed, 400)
    assert m.violations == [] and m.seq > 400


@pytest.mark.parametrize(("fault", "invariant"), [("reuse-held", "no_double_alloc"), ("skip-write", "no_foreign_read")])
def test_one_fault_in_a_random_run_is_caught_where_it_happens(fault: str, invariant: str) -> None:
    m = fresh(raise_on_violation=False)
    faulty = _random_run(m, 0, 400, fault)
    assert faulty is not None and m.violations, "the fault was put in and noticed"
    first = m.violations[0]
    assert (first.invariant, first.req) == (invariant, faulty)
