"""``ownership preflight``'s readers, release table, mapping and verdicts.

The fixtures in ``tests/data/preflight/`` were printed by the engines' own code
(``tests/real_engines/preflight_fixtures.py``; the real-engine tests check they
have not drifted).  Smaller deployments are the same lines with the numbers
replaced, so the readers see the engines' formats throughout.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT
from ownership.errors import Code, OwnershipError
from ownership.preflight import Status, deployment, evaluate, read_node, releases
from ownership.preflight.mapping import Limit, context_to_close, scaled_page_size, spec_params
from ownership.preflight.verdict import SPECS, _leaking, analyse

DATA = ROOT / "tests" / "data" / "preflight"


def node_log(tmp_path: Path, role: str, *, context: int, pool: int, page: int, name: str | None = None,
             extra: str = "") -> Path:
    """The incident's startup log of ``role`` with other numbers (the engine's line formats kept)."""
    text = (DATA / f"incident-{role}.log").read_text()
    text = re.sub(r"max_total_num_tokens=\d+", f"max_total_num_tokens={pool}", text)
    text = text.replace("context_len=1048576", f"context_len={context}")
    # the server_args line is ServerArgs(k=v, ...) in the incident's release (0.5.11), a dict from 0.5.19
    text = re.sub(r"('context_length': |\bcontext_length=)1048576", rf"\g<1>{context}", text)
    text = re.sub(r"('page_size': |\bpage_size=)64\b", rf"\g<1>{page}", text)
    path = tmp_path / (name or f"{role}.log")
    path.write_text(extra + text)
    return path


# -- readers ---------------------------------------------------------------------------------
def test_reads_the_incident_startup_logs() -> None:
    p, d = read_node(DATA / "incident-prefill.log"), read_node(DATA / "incident-decode.log")
    assert (p.engine, p.role, p.context_len, p.pool_tokens, p.page_size) == ("sglang", "prefill", 1_048_576, 681_280, 64)
    assert (d.role, d.pool_tokens, d.transfer_backend, d.allow_auto_truncate) == ("decode", 1_114_112, "mooncake", False)
    assert p.version is None  # SGLang's startup log does not print its version
    assert p.where("max_total_num_tokens").endswith("incident-prefill.log:2")
    assert p.where("page_size").endswith("incident-prefill.log:1")


def test_reads_the_server_info_json_with_its_version_and_limit() -> None:
    p = read_node(DATA / "server-info-prefill.json")
    assert (p.role, p.context_len, p.pool_tokens, p.page_size, p.version) == ("prefill", 1_048_576, 681_280, 64, "0.5.23")
    assert p.max_req_input_len == min(1_048_576 - 1, 681_280 - 1) - 5
    assert Limit.of(p).tokens == Limit.of(p, p.context_len).tokens  # the computed limit agrees with SGLang's own


def test_finds_the_lines_in_a_whole_log(tmp_path: Path) -> None:
    noise = "[2026-08-27 10:00:00] Load weight begin. avail mem=78.00 GB\nINFO:     Started server process [1]\n"
    path = node_log(tmp_path, "prefill", context=4096, pool=2048, page=16, extra=noise)
    node = read_node(path)
    assert (node.context_len, node.pool_tokens, node.page_size) == (4096, 2048, 16)
    assert node.lines["max_total_num_tokens"] == 4


def test_reads_the_older_server_args_repr(tmp_path: Path) -> None:
    sched = (DATA / "incident-decode.log").read_text().splitlines()[1]
    path = tmp_path / "old.log"
    path.write_text("[2025-11-01 10:00:00] server_args=ServerArgs(model_path='m', context_length=None, page_size=64, "
                    "disaggregation_mode='decode', disaggregation_transfer_backend='mooncake', tp_size=8)\n" + sched + "\n")
    node = read_node(path)
    assert (node.role, node.page_size, node.context_len) == ("decode", 64, 1_048_576)


def test_reads_the_vllm_log() -> None:
    node = read_node(DATA / "vllm-node.log")
    assert (node.engine, node.version, node.context_len, node.pool_tokens) == ("vllm", "0.33.0", 1_048_576, 1_114_112)


@pytest.mark.parametrize(("content", "code", "line", "needle"), [
    (b"\xff\xfe", Code.PREFLIGHT_UNREADABLE, 1, "not UTF-8"),
    (b"hello\nworld\n", Code.PREFLIGHT_MISSING, None, "no SGLang server_args= line"),
    (b"{\"page_size\": 64,\n  oops}\n", Code.PREFLIGHT_MISSING, 2, "not JSON"),
    (b"{\"page_size\": 64}\n", Code.PREFLIGHT_MISSING, 1, "server info has no max_total_num_tokens"),
    (b"x server_args={'page_size': 64, 'disaggregation_mode': 'prefill'\n", Code.PREFLIGHT_MISSING, 1, "does not parse"),
])
def test_bad_files_are_located_errors(tmp_path: Path, content: bytes, code: Code, line: int | None, needle: str) -> None:
    path = tmp_path / "bad.log"
    path.write_bytes(content)
    with pytest.raises(OwnershipError) as err:
        read_node(path)
    assert err.value.code is code and err.value.line == line and needle in err.value.message
    assert err.value.exit_code == 6


def test_a_scheduler_line_without_server_args_says_what_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "sched.log"
    path.write_text((DATA / "incident-prefill.log").read_text().splitlines()[1] + "\n")
    with pytest.raises(OwnershipError, match="no server_args= line") as err:
        read_node(path)
    assert err.value.line == 1


def test_two_starts_with_different_pools_in_one_file_contradict(tmp_path: Path) -> None:
    text = (DATA / "incident-prefill.log").read_text()
    path = tmp_path / "twice.log"
    path.write_text(text + text.replace("max_total_num_tokens=681280", "max_total_num_tokens=5"))
    with pytest.raises(OwnershipError) as err:
        read_node(path)
    assert err.value.code is Code.PREFLIGHT_CONTRADICTORY and err.value.line == 4
    assert "at line 2" in err.value.message


# -- the release table, roles, versions ---------------------------------------------------------
def test_release_table_rows() -> None:
    assert releases.release_for("sglang", (0, 5, 19)).spec == "sglang_disagg_v0_5_19.py"  # type: ignore[union-attr]
    assert releases.release_for("sglang", (0, 5, 5)).vulnerable  # type: ignore[union-attr]  # PR #12312's to_finish
    assert releases.release_for("sglang", (0, 5, 4)) is None  # finished_reason set directly: another path
    fixed_by_prefill = releases.release_for("sglang", (0, 5, 20))
    assert fixed_by_prefill is not None and fixed_by_prefill.spec == "sglang_disagg_v0_5_20.py"
    assert not fixed_by_prefill.vulnerable  # PR #36988: prefill retires the stub instead of sending it
    assert releases.release_for("sglang", (0, 5, 11)).vulnerable  # type: ignore[union-attr]  # the incident
    assert releases.release_for("sglang", (0, 5, 21)).spec == "sglang_disagg_v0_5_21.py"  # type: ignore[union-attr]
    assert releases.release_for("sglang", (0, 6, 0)) is None
    assert releases.parse_version("0.5.20.post1") == (0, 5, 20) and releases.parse_version("latest") is None
    for row in releases.SGLANG_DISAGG:
        assert (SPECS / row.spec).exists()


def test_nodes_swapped_is_a_contradiction() -> None:
    p, d = read_node(DATA / "incident-prefill.log"), read_node(DATA / "incident-decode.log")
    with pytest.raises(OwnershipError) as err:
        deployment(d, p, "0.5.19")
    assert err.value.code is Code.PREFLIGHT_CONTRADICTORY and "disaggregation_mode is 'decode'" in err.value.message


def test_a_log_needs_a_version_and_a_json_version_must_match() -> None:
    p, d = read_node(DATA / "incident-prefill.log"), read_node(DATA / "incident-decode.log")
    with pytest.raises(OwnershipError, match="pass --version") as err:
        deployment(p, d, None)
    assert err.value.code is Code.PREFLIGHT_VERSION and err.value.exit_code == 2
    jp, jd = read_node(DATA / "server-info-prefill.json"), read_node(DATA / "server-info-decode.json")
    assert deployment(jp, jd, None).version == "0.5.23"
    with pytest.raises(OwnershipError, match="--version says 0.5.19") as err:
        deployment(jp, jd, "0.5.19")
    version_line = next(n for n, text in enumerate((DATA / "server-info-decode.json").read_text().splitlines(), 1)
                        if text.strip().startswith('"version":'))
    assert err.value.code is Code.PREFLIGHT_CONTRADICTORY and err.value.line == version_line


# -- NOT COVERED: never SAFE for what no spec models ------------------------------------------
def _not_covered(prefill: object, decode: object, version: str | None) -> tuple[str, ...]:
    result = evaluate(deployment(prefill, decode, version))  # type: ignore[arg-type]
    assert result.status is Status.NOT_COVERED and result.analysis is None
    return result.reasons


def test_not_covered_vllm_single_node_unknown_release_and_truncation(tmp_path: Path) -> None:
    (why,) = _not_covered(read_node(DATA / "vllm-node.log"), None, None)
    assert "no library spec models vLLM" in why and "check_enough_kv_cache_memory" in why and "this pool holds one" in why
    p, d = read_node(DATA / "incident-prefill.log"), read_node(DATA / "incident-decode.log")
    assert "single-node" in _not_covered(p, None, "0.5.19")[0]
    assert "no row of the release table" in _not_covered(p, d, "0.6.0")[0]
    truncating = tmp_path / "t.log"
    truncating.write_text((DATA / "incident-decode.log").read_text().replace(
        "allow_auto_truncate=False", "allow_auto_truncate=True"))
    assert "allow_auto_truncate is on" in _not_covered(p, read_node(truncating), "0.5.19")[0]
    other = node_log(tmp_path, "decode", context=1_048_576, pool=1_114_112, page=32)
    assert "different page sizes" in _not_covered(p, read_node(other), "0.5.19")[0]


# -- mapping and the page-size scaling ------------------------------------------------------
def test_mapping_makes_the_spec_limits_the_deployment_s() -> None:
    m = spec_params(681_274, 1_048_570, 64)
    p = m.params
    assert min(p["context_len"] - 1, p["prefill_pool_tokens"] - 1) == 681_274
    assert min(p["context_len"] - 1, p["decode_pool_tokens"] - 1) == 1_048_570
    assert m.page_size == 262_143 and m.pages == (3, 4)  # a handful of pages, not 16,384
    assert 1 < -(-681_274 // m.page_size)  # every rejected prompt still spans two pages


def test_page_size_is_kept_when_it_decides_which_prompts_span_two_pages() -> None:
    assert scaled_page_size(4, 4, 10) == 4  # a 4-token prompt is one page and does not leak
    assert scaled_page_size(2, 4, 10) == 3  # below both limits: scaled
    assert scaled_page_size(64, 100, 200) == 64  # already few pages


def test_context_to_close_is_the_smaller_pool() -> None:
    p, d = read_node(DATA / "incident-prefill.log"), read_node(DATA / "incident-decode.log")
    n = context_to_close(p, d)
    assert n == 681_280
    assert Limit.of(p, n).tokens == Limit.of(d, n).tokens
    assert Limit.of(p, n + 1).tokens != Limit.of(d, n + 1).tokens


@pytest.mark.slow
@pytest.mark.parametrize(("lp", "ld", "real"), [(4, 10, 2), (10, 4, 2)], ids=["prefill-limit-lower", "decode-limit-lower"])
def test_scaled_instance_has_the_unscaled_verdict_and_range(lp: int, ld: int, real: int) -> None:
    """The scaling argument of ownership.preflight.mapping, checked where the unscaled instance can be explored too."""
    scaled, unscaled = spec_params(lp, ld, real), spec_params(lp, ld, real, max_pages=100)
    assert scaled.page_size != unscaled.page_size == real
    a, b = (analyse(SPECS / "sglang_disagg_v0_5_19.py", m, None) for m in (scaled, unscaled))
    assert (a.verdict, a.violated) == (b.verdict, b.violated) == ("VIOLATED", a.violated)
    assert a.region == b.region
    assert _leaking(a, scaled)[0] == _leaking(b, unscaled)[0] == (min(lp, ld), max(lp, ld) - 1)
    assert b.states > a.states  # the unscaled instance really is larger


# -- verdicts ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_incident_on_0_5_20_is_unsafe_with_the_exact_leaking_range() -> None:
    dep = deployment(read_node(DATA / "incident-prefill.log"), read_node(DATA / "incident-decode.log"), "0.5.19")
    r = evaluate(dep)
    assert r.status is Status.UNSAFE and r.analysis is not None and r.analysis.violated == "no_foreign_read"
    lp, ld = min(1_048_575, 681_279) - 5, min(1_048_575, 1_114_111) - 5
    assert r.leaking == (lp, ld - 1) == (681_274, 1_048_569)
    assert r.context_length == 681_280
    assert r.remedy_checked is not None and r.remedy_checked.verdict == "PROVED"
    assert r.formula is not None and r.formula.startswith("prompt_tokens >= prefill_max_req_input_len and")


@pytest.mark.slow
def test_incident_on_0_5_23_from_server_info_is_safe() -> None:
    dep = deployment(read_node(DATA / "server-info-prefill.json"), read_node(DATA / "server-info-decode.json"), None)
    r = evaluate(dep)
    assert r.status is Status.SAFE and r.spec == "sglang_disagg_v0_5_21.py" and r.leaking is None
    assert r.analysis is not None and r.analysis.verdict == "PROVED"


@pytest.mark.slow
def test_0_5_20_with_the_context_lowered_to_the_pool_is_safe(tmp_path: Path) -> None:
    p = node_log(tmp_path, "prefill", context=681_280, pool=681_280, page=64)
    d = node_log(tmp_path, "decode", context=681_280, pool=1_114_112, page=64)
    r = evaluate(deployment(read_node(p), read_node(d), "0.5.19"))
    assert r.status is Status.SAFE and r.release is not None and r.release.vulnerable
    assert r.limits is not None and r.limits[0].tokens == r.limits[1].tokens == 681_274


@pytest.mark.slow
def test_small_deployment_unsafe_range_follows_the_page_size(tmp_path: Path) -> None:
    """At page size 4 a 4-token prompt is one page: the leak starts at 5, and no one-line range is claimed."""
    p = node_log(tmp_path, "prefill", context=16, pool=10, page=4)
    d = node_log(tmp_path, "decode", context=16, pool=16, page=4)
    r = evaluate(deployment(read_node(p), read_node(d), "0.5.19"), check_remedy=False)
    assert r.status is Status.UNSAFE and r.leaking is None
    assert r.analysis is not None and r.analysis.region is not None and "for some values" in r.analysis.region
