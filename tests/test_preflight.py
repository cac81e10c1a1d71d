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
from ownership.preflight.readers import NodeConfig
from ownership.preflight.verdict import SPECS, _leaking, analyse

DATA = ROOT / "tests" / "data" / "preflight"
#: Each release's startup logs of the incident deployment, printed by its own code (the incident's are 0.5.11's).
RELEASES = DATA / "releases"


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
    def spec_of(version: str) -> str | None:
        key = releases.parse_version(version)
        row = None if key is None else releases.release_for("sglang", key)
        return None if row is None else row.spec

    assert spec_of("0.5.19") == "sglang_disagg_v0_5_19.py"
    assert releases.release_for("sglang", (0, 5, 5)).vulnerable  # type: ignore[union-attr]  # PR #12312's to_finish
    # 0.5.4 and 0.5.4.post1 set finished_reason, yet prefill still sends the placeholder: vulnerable too
    assert spec_of("0.5.4") == spec_of("0.5.4.post1") == "sglang_disagg_v0_5_4.py"
    assert spec_of("0.5.4.post2") == "sglang_disagg_v0_5_19.py"  # to_finish first appears here
    fixed_by_prefill = releases.release_for("sglang", (0, 5, 20))
    assert fixed_by_prefill is not None and fixed_by_prefill.spec == "sglang_disagg_v0_5_20.py"
    assert not fixed_by_prefill.vulnerable  # PR #36988: prefill retires the stub instead of sending it
    assert releases.release_for("sglang", (0, 5, 11)).vulnerable  # type: ignore[union-attr]  # the incident
    assert spec_of("0.5.21") == spec_of("0.5.23.post1") == "sglang_disagg_v0_5_21.py"
    assert spec_of("0.4.7") == spec_of("0.5.3") == "sglang_disagg_v0_5_4.py"  # the same path as 0.5.4
    assert spec_of("0.4.6") is None and spec_of("0.5.24") is None and spec_of("0.6.0") is None
    assert releases.parse_version("0.5.20.post1") == (0, 5, 20, 1) and releases.parse_version("latest") is None
    assert releases.parse_version("0.5.20rc1") is None  # a pre-release's code is not the release's
    assert releases.describe(releases.release_for("sglang", (0, 5, 11))) == "SGLang 0.5.4.post2 to 0.5.19"  # type: ignore[arg-type]
    for row in releases.SGLANG_DISAGG:
        assert (SPECS / row.spec).exists()
        assert row.kv_checksum == (row.first >= (0, 5, 21, 0))  # --disaggregation-enable-kv-checksum: 0.5.21+


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


def test_not_covered_vllm_single_node_and_unknown_release(tmp_path: Path) -> None:
    (why,) = _not_covered(read_node(DATA / "vllm-node.log"), None, None)
    assert why.startswith("vLLM's admission of prompts longer than it can serve (no library spec models it")
    assert "Checked: each KV cache holds one request of max_model_len tokens" in why and "check_enough_kv_cache_memory" in why
    assert why.endswith("KV cache 1,114,112 tokens, max_model_len 1,048,576): passed")
    p, d = read_node(DATA / "incident-prefill.log"), read_node(DATA / "incident-decode.log")
    assert "single-node" in _not_covered(p, None, "0.5.19")[0]
    assert "no row of the release table" in _not_covered(p, d, "0.6.0")[0]
    # a pre-release is no release the table was read from: NOT COVERED, not a usage error
    (why,) = _not_covered(p, d, "0.5.21rc0")
    assert why.startswith("SGLang 0.5.21rc0 is a pre-release")
    assert releases.is_prerelease("0.5.22.dev3") and not releases.is_prerelease("0.5.22.post1")
    with pytest.raises(OwnershipError, match="is not a version such as") as err:
        deployment(p, d, "latest")
    assert err.value.code is Code.PREFLIGHT_VERSION
    other = node_log(tmp_path, "decode", context=1_048_576, pool=1_114_112, page=1024)
    assert "different page sizes (64 and 1,024 tokens)" in _not_covered(p, read_node(other), "0.5.19")[0]


def test_vllm_pool_smaller_than_one_request_says_the_check_failed(tmp_path: Path) -> None:
    small = tmp_path / "vllm.log"
    small.write_text((DATA / "vllm-node.log").read_text().replace("KV cache size: 1,114,112", "KV cache size: 1,000,000"))
    (why,) = _not_covered(read_node(small), None, None)
    assert "KV cache 1,000,000 tokens, max_model_len 1,048,576): failed: vLLM 0.33.0 refuses to start" in why


def test_evaluate_names_each_phase_and_hands_the_explorer_the_same_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mapping, the analysis and the remedy's re-check are announced in order; the explorer reports to the same object."""
    from ownership.core.progress import Progress
    from ownership.preflight import verdict

    seen: list[str] = []

    class Recorder:
        def phase(self, name: str) -> None:
            seen.append(name)

        def __call__(self, p: Progress) -> None:
            seen.append(f"report {p.states}")

    def fake(spec_path: Path, mapped, max_seconds, progress=None):  # noqa: ANN001, ANN202 - stands in for analyse
        assert isinstance(progress, Recorder)
        progress(Progress(1.5, states=len(seen)))
        closed = mapped.params["prefill_pool_tokens"] == mapped.params["decode_pool_tokens"]
        derived = {"lo": 681_274, "hi": 1_048_570}
        region = None if closed else "unsafe exactly when prompt_tokens >= lo and prompt_tokens < hi"
        return verdict.Analysis("PROVED" if closed else "VIOLATED", 1, 1, 0.1, region, "x", derived)

    monkeypatch.setattr(verdict, "analyse", fake)
    dep = deployment(read_node(DATA / "incident-prefill.log"), read_node(DATA / "incident-decode.log"), "0.5.19")
    r = evaluate(dep, progress=Recorder())
    assert r.status is Status.UNSAFE and r.leaking == (681_274, 1_048_569)
    assert seen == ["mapping onto specs/sglang_disagg_v0_5_19.py", "free-parameter analysis", "report 2",
                    "remedy re-check: upgrade both nodes to SGLang >= 0.5.20", "report 4",
                    "remedy re-check: restart both nodes with --context-length 681280", "report 6"]


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


def test_truncation_keeps_the_page_rounding_that_decides_it() -> None:
    """With prefill truncating, ceil(Lp / page) * page against decode's longest length decides the verdict."""
    on = {"prefill_auto_truncate": 1, "decode_auto_truncate": 1}
    # real page 64: prefill's 681,274 tokens fill pages up to 681,280 < 681,300: decode needs one more page
    m = spec_params(681_274, 681_300, 64, switches=on)
    assert -(-681_274 // m.page_size) * m.page_size < 681_300 and max(m.pages) <= 16
    # real page 64: 681,270 rounds up to 681,280 >= 681,279 (decode rejects from there): no page more
    m = spec_params(681_270, 681_280, 64, switches={"prefill_auto_truncate": 1, "decode_auto_truncate": 0})
    assert -(-681_270 // m.page_size) * m.page_size >= 681_279 and max(m.pages) <= 16
    assert m.params["prefill_auto_truncate"] == 1 and m.params["decode_auto_truncate"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(("lp", "ld", "real", "truncate"),
                         [(4, 7, 2, 0), (7, 4, 2, 0), (5, 7, 2, 1), (7, 5, 2, 1)],
                         ids=["prefill-limit-lower", "decode-limit-lower", "truncating-prefill-lower",
                              "truncating-decode-lower"])
def test_scaled_instance_has_the_unscaled_verdict_and_range(lp: int, ld: int, real: int, truncate: int) -> None:
    """The scaling argument of ownership.preflight.mapping, checked where the unscaled instance can be explored too.

    Decode's limit lower is safe: Mooncake cuts prefill's pages to decode's
    one-page reservation and decode's prebuilt step answers its own 400.
    """
    on = {"prefill_auto_truncate": truncate, "decode_auto_truncate": truncate}
    # Scaled to at most 2 pages a node (the deploy gate's cap is larger): the same argument at a size whose
    # unscaled instance the symbolic search decides in seconds, not minutes.
    scaled, unscaled = spec_params(lp, ld, real, max_pages=2, switches=on), spec_params(lp, ld, real, max_pages=100,
                                                                                       switches=on)
    assert scaled.page_size != unscaled.page_size == real
    a, b = (analyse(SPECS / "sglang_disagg_v0_5_19.py", m, None) for m in (scaled, unscaled))
    assert (a.verdict, a.violated) == (b.verdict, b.violated)
    assert a.verdict == ("VIOLATED" if lp < ld else "PROVED")
    assert a.region == b.region
    expected = None if lp > ld else (lp, ld - 1) if not truncate else (-(-lp // real) * real + 1, None)
    assert _leaking(a, scaled)[0] == _leaking(b, unscaled)[0] == expected
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
    assert [(m.kind, m.value) for m in r.remedies] == [("upgrade", "0.5.20"), ("context_length", 681_280)]
    assert all(m.checked is not None and m.checked.verdict == "PROVED" for m in r.remedies)
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
    """At page size 4 a 4-token prompt is one page: the leak starts at 5, the first prompt past prefill's page."""
    p = node_log(tmp_path, "prefill", context=16, pool=10, page=4)
    d = node_log(tmp_path, "decode", context=16, pool=16, page=4)
    r = evaluate(deployment(read_node(p), read_node(d), "0.5.19"), check_remedy=False)
    assert r.limits is not None and (r.limits[0].tokens, r.limits[1].tokens) == (4, 10)
    assert r.status is Status.UNSAFE and r.leaking == (5, 9)
    assert r.formula is not None and "prompt_tokens >= prefill_truncated_pages_end" in r.formula


@pytest.mark.slow
def test_incident_on_0_5_4_is_unsafe_as_on_0_5_11() -> None:
    """0.5.4 sets finished_reason instead of to_finish, but prefill still sends the placeholder."""
    dep = deployment(read_node(DATA / "incident-prefill.log"), read_node(DATA / "incident-decode.log"), "0.5.4")
    r = evaluate(dep, check_remedy=False)
    assert r.status is Status.UNSAFE and r.spec == "sglang_disagg_v0_5_4.py"
    assert r.leaking == (681_274, 1_048_569)


def _swapped(tmp_path: Path) -> tuple[Path, Path]:
    """The incident's two logs with their pools exchanged: decode's limit is now the lower one."""
    p, d = tmp_path / "prefill.log", tmp_path / "decode.log"
    p.write_text((DATA / "incident-prefill.log").read_text().replace("max_total_num_tokens=681280,",
                                                                    "max_total_num_tokens=1114112,"))
    d.write_text((DATA / "incident-decode.log").read_text().replace("max_total_num_tokens=1114112,",
                                                                   "max_total_num_tokens=681280,"))
    return p, d


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.5.19", "0.5.20"])
def test_decode_limit_lower_is_safe(tmp_path: Path, version: str) -> None:
    """Decode rejecting what prefill admits leaks nothing: the transfer is cut to decode's page, decode answers 400."""
    p, d = _swapped(tmp_path)
    r = evaluate(deployment(read_node(p), read_node(d), version))
    assert r.limits is not None and r.limits[1].tokens < r.limits[0].tokens
    assert r.status is Status.SAFE, (r.analysis, r.leaking)


def _truncating(tmp_path: Path, checksum: bool) -> tuple[Path, Path]:
    out = []
    for role in ("prefill", "decode"):
        text = (RELEASES / "0.5.21" / f"{role}.log").read_text().replace("'allow_auto_truncate': False",
                                                                        "'allow_auto_truncate': True")
        if checksum:
            text = text.replace("'disaggregation_enable_kv_checksum': False", "'disaggregation_enable_kv_checksum': True")
        (tmp_path / f"{role}.log").write_text(text)
        out.append(tmp_path / f"{role}.log")
    return out[0], out[1]


@pytest.mark.slow
def test_auto_truncate_with_different_limits_is_unsafe_on_0_5_21_unless_the_checksum_is_on(tmp_path: Path) -> None:
    """Each node truncates to its own limit; prefill sends its length, decode reads its longer one."""
    p, d = _truncating(tmp_path, checksum=False)
    r = evaluate(deployment(read_node(p), read_node(d), "0.5.21"))
    assert r.status is Status.UNSAFE
    assert r.leaking == (-(-681_274 // 64) * 64 + 1, None)  # from the first prompt that needs one more page
    assert {m.kind for m in r.remedies} == {"context_length", "no_auto_truncate", "kv_checksum"}
    assert all(m.checked is not None and m.checked.verdict == "PROVED" for m in r.remedies)
    p, d = _truncating(tmp_path, checksum=True)
    r = evaluate(deployment(read_node(p), read_node(d), "0.5.21"))
    assert r.status is Status.SAFE and r.mapped is not None and r.mapped.params["kv_checksum"] == 1


# -- each release's admission formula ---------------------------------------------------------
def test_admission_formula_follows_the_release() -> None:
    """The pool term of max_req_input_len changed over the releases (ownership/preflight/admission.py cites the lines)."""
    from ownership.preflight import admission

    def formula(version: str) -> admission.Formula:
        f = admission.formula_for(releases.parse_version(version) or ())
        assert f is not None, version
        return f

    assert formula("0.5.4").pool_term == "max_total_num_tokens"
    assert formula("0.5.11").pool_term.startswith("max_token_pool_size")
    assert formula("0.5.19").times_dcp and formula("0.5.17").times_dcp and not formula("0.5.16").times_dcp
    assert not formula("0.5.21").times_dcp and formula("0.5.23").sharded  # 0.5.21+ print the logical pool
    assert admission.formula_for((0, 4, 4, 0)) is None and admission.formula_for((0, 5, 24, 0)) is None
    # the incident's prefill node: 681,280-token pool, 1,048,576-token context
    assert admission.max_req_input_len(formula("0.5.11"), 1_048_576, 681_280) == 681_274
    assert admission.max_req_input_len(formula("0.5.19"), 1_048_576, 681_280, dcp_size=2) == 1_048_570
    assert admission.max_req_input_len(formula("0.5.21"), 1_048_576, 681_280, dcp_size=2) == 681_274


def test_decode_context_parallelism_raises_the_limit_on_0_5_19(tmp_path: Path) -> None:
    text = (RELEASES / "0.5.19" / "prefill.log").read_text()
    assert "'dcp_size': 1" in text
    path = tmp_path / "p.log"
    path.write_text(text.replace("'dcp_size': 1", "'dcp_size': 2"))
    node = read_node(path)
    assert node.dcp_size == 2
    from ownership.preflight import admission

    limit = Limit.of(node, formula=admission.formula_for((0, 5, 19, 0)))
    assert limit.tokens == 1_048_570 and "* dcp_size 2" in limit.how and ":542-556 (0.5.19, 0.5.20)" in limit.how
    assert Limit.of(node, formula=admission.formula_for((0, 5, 21, 0))).tokens == 681_274


def test_a_limit_term_no_log_prints_is_not_covered(tmp_path: Path) -> None:
    text = (RELEASES / "0.5.23" / "prefill.log").read_text()
    assert "'enable_kv_cache_sharding': False" in text
    path = tmp_path / "p.log"
    path.write_text(text.replace("'enable_kv_cache_sharding': False", "'enable_kv_cache_sharding': True"))
    (why,) = _not_covered(read_node(path), read_node(RELEASES / "0.5.23" / "decode.log"), "0.5.23")
    assert "enable_kv_cache_sharding=True" in why and "max_req_input_len" in why


def test_the_kv_checksum_counts_only_where_decode_compares_it(tmp_path: Path) -> None:
    """0.5.23 admits unverified a request from a prefill of another TP width: no checksum protection there."""
    from ownership.preflight.verdict import switches

    def node(role: str, tp: int) -> NodeConfig:
        text = (DATA / "releases" / "0.5.23" / f"{role}.log").read_text()  # the release that has the flag
        text = text.replace("'disaggregation_enable_kv_checksum': False", "'disaggregation_enable_kv_checksum': True")
        path = tmp_path / f"{role}-{tp}.log"
        path.write_text(text.replace("'tp_size': 8", f"'tp_size': {tp}"))
        return read_node(path)

    same, other = (node("prefill", 8), node("decode", 8)), (node("prefill", 8), node("decode", 4))
    assert other[1].tp_size == 4 and other[1].kv_checksum
    for version, layouts, on in [("0.5.21", other, 1), ("0.5.23", same, 1), ("0.5.23", other, 0)]:
        dep = deployment(layouts[0], layouts[1], version)
        row = releases.release_for("sglang", releases.parse_version(version) or ())
        assert row is not None and switches(dep, row)["kv_checksum"] == on, (version, layouts[1].tp_size)
