"""``ownership preflight``'s readers on what each SGLang release really prints, and on operators' spellings.

``tests/data/preflight/releases/<version>/`` holds the startup logs of the
incident deployment's two nodes as each release's own code prints them
(``tests/real_engines/sglang_release_fixtures.py``; the real-engine tests
regenerate and compare them).  Here the readers must get every number right
from every release's format, and turn every unreadable field into one located
error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import ROOT
from ownership.errors import Code, OwnershipError
from ownership.preflight import read_node
from ownership.preflight.readers import whole_number

DATA = ROOT / "tests" / "data" / "preflight"
RELEASES = DATA / "releases"
CONTEXT, PAGE = 1_048_576, 64
POOLS = {"prefill": 681_280, "decode": 1_114_112}
#: The releases printed, and the form of their server_args line (engine.py's logging statement).
FORMS = {"0.5.4": "ServerArgs(", "0.5.11": "ServerArgs(", "0.5.19": "{", "0.5.20": "{", "0.5.21": "{", "0.5.23": "{"}


def test_every_required_release_has_its_fixtures() -> None:
    assert {d.name for d in RELEASES.iterdir()} >= set(FORMS)


@pytest.mark.parametrize("version", sorted(FORMS))
@pytest.mark.parametrize("role", sorted(POOLS))
def test_reads_each_release_s_startup_log(version: str, role: str) -> None:
    path = RELEASES / version / f"{role}.log"
    lines = path.read_text().splitlines()
    args_line = next(n for n, text in enumerate(lines, 1) if "server_args=" in text)
    sched_line = next(n for n, text in enumerate(lines, 1) if "max_total_num_tokens=" in text)
    assert lines[args_line - 1].split("server_args=", 1)[1].startswith(FORMS[version])
    node = read_node(path)
    assert (node.engine, node.role, node.context_len, node.pool_tokens, node.page_size) == (
        "sglang", role, CONTEXT, POOLS[role], PAGE)
    assert (node.transfer_backend, node.allow_auto_truncate, node.version) == ("mooncake", False, None)
    assert node.lines["page_size"] == args_line and node.lines["max_total_num_tokens"] == sched_line


@pytest.mark.parametrize("version", sorted(FORMS))
def test_the_resolved_arguments_agree_with_the_scheduler_line(version: str) -> None:
    """chunked_prefill_size is resolved (as a launch resolves it), not the raw None, and the scheduler says the same."""
    text = (RELEASES / version / "prefill.log").read_text()
    printed = re.search(r"(?:'chunked_prefill_size': |\bchunked_prefill_size=)(\w+)", text.split("\n", 1)[0])
    scheduler = re.search(r"\] max_total_num_tokens=.*\bchunked_prefill_size=(\w+)", text)
    assert printed is not None and scheduler is not None
    assert printed.group(1) == scheduler.group(1) == "8192"


def test_the_old_releases_lack_the_new_arguments() -> None:
    """0.5.11 printed fewer fields than 0.5.23, and no KV checksum flag (0.5.21+)."""
    old = (RELEASES / "0.5.11" / "decode.log").read_text().split("\n", 1)[0]
    new = (RELEASES / "0.5.23" / "decode.log").read_text().split("\n", 1)[0]
    assert old.count("=") < new.count("': ")
    assert "disaggregation_enable_kv_checksum" not in old
    assert "'disaggregation_enable_kv_checksum': False" in new


def test_the_incident_logs_are_0_5_11_s() -> None:
    for role in POOLS:
        assert (DATA / f"incident-{role}.log").read_text() == (RELEASES / "0.5.11" / f"{role}.log").read_text()


# -- /server_info of a default launch: context_length is null ------------------------------------
def test_a_default_launch_s_server_info_derives_the_context_from_decode_s_limit() -> None:
    path = RELEASES / "0.5.11" / "server-info-default-decode.json"
    assert json.loads(path.read_text())["context_length"] is None
    node = read_node(path)
    assert (node.role, node.pool_tokens, node.max_req_input_len, node.version) == ("decode", 1_114_112, 1_048_570,
                                                                                   "0.5.11")
    assert node.context_len == 1_048_570 + 6 == CONTEXT  # the limit is the context's: below pool - 6
    assert node.where("context_len").endswith(f"server-info-default-decode.json:{_line(path, 'max_req_input_len')}")


def test_a_default_launch_s_server_info_says_what_is_missing_when_the_pool_decides_the_limit() -> None:
    path = RELEASES / "0.5.11" / "server-info-default-prefill.json"
    with pytest.raises(OwnershipError) as err:
        read_node(path)
    assert err.value.code is Code.PREFLIGHT_MISSING and err.value.line == _line(path, "context_length")
    assert "context_length null" in err.value.message and "max_req_input_len 681,274" in err.value.message
    assert "context_len=" in err.value.message and "\n" not in err.value.message


def test_a_default_launch_without_a_limit_says_so(tmp_path: Path) -> None:
    doc = json.loads((RELEASES / "0.5.11" / "server-info-default-decode.json").read_text())
    del doc["max_req_input_len"]
    path = tmp_path / "info.json"
    path.write_text(json.dumps(doc, indent=2))
    with pytest.raises(OwnershipError, match="no max_req_input_len to derive it from") as err:
        read_node(path)
    assert err.value.line == _line(path, "context_length")


def _line(path: Path, key: str) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(f'"{key}":'))


# -- number spellings ---------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "value"), [
    ("1114112", 1_114_112), ("1,114,112", 1_114_112), ("1_114_112", 1_114_112), ("1114112.0", 1_114_112),
    ("1.114112e6", 1_114_112), ("1.1e6", 1_100_000), ("1E3", 1000), ("64", 64),
    ("1114112.5", None), ("1,14,112", None), ("1,114,112,", None), ("abc", None), ("", None), ("0x10", None),
])
def test_whole_number_spellings(text: str, value: int | None) -> None:
    assert whole_number(text) == value


def _with_pool(tmp_path: Path, spelled: str) -> Path:
    text = (RELEASES / "0.5.23" / "decode.log").read_text()
    path = tmp_path / "decode.log"
    path.write_text(re.sub(r"max_total_num_tokens=\d+", f"max_total_num_tokens={spelled}", text))
    return path


@pytest.mark.parametrize("spelled", ["1,114,112", "1_114_112", "1114112.0", "1.114112e6"])
def test_the_scheduler_line_reads_any_spelling_of_the_pool(tmp_path: Path, spelled: str) -> None:
    node = read_node(_with_pool(tmp_path, spelled))
    assert (node.pool_tokens, node.context_len) == (1_114_112, CONTEXT)


@pytest.mark.parametrize("spelled", ["1114112.5", "lots", "None"])
def test_an_unreadable_pool_is_one_located_error(tmp_path: Path, spelled: str) -> None:
    path = _with_pool(tmp_path, spelled)
    with pytest.raises(OwnershipError) as err:
        read_node(path)
    assert err.value.code is Code.PREFLIGHT_MISSING and err.value.line == 2
    assert f"max_total_num_tokens={spelled!r} is not a whole number of tokens" in err.value.message


def test_a_scheduler_line_cut_before_context_len_is_located(tmp_path: Path) -> None:
    text = (RELEASES / "0.5.11" / "prefill.log").read_text().splitlines()
    path = tmp_path / "cut.log"
    path.write_text(text[0] + "\n" + text[1].split(", max_prefill_tokens")[0] + "\n")
    with pytest.raises(OwnershipError, match="no context_len=") as err:
        read_node(path)
    assert err.value.line == 2


def test_server_info_numbers_in_other_spellings(tmp_path: Path) -> None:
    doc = json.loads((DATA / "server-info-decode.json").read_text())
    doc["max_total_num_tokens"], doc["context_length"] = "1,114,112", 1048576.0
    path = tmp_path / "info.json"
    path.write_text(json.dumps(doc, indent=2))
    node = read_node(path)
    assert (node.pool_tokens, node.context_len) == (1_114_112, CONTEXT)
    doc["max_total_num_tokens"] = True
    path.write_text(json.dumps(doc, indent=2))
    with pytest.raises(OwnershipError, match="max_total_num_tokens is True, not a number") as err:
        read_node(path)
    assert err.value.line == _line(path, "max_total_num_tokens")


# -- the ServerArgs repr ------------------------------------------------------------------------
def test_a_repr_with_values_that_are_not_python_is_read_field_by_field(tmp_path: Path) -> None:
    """A repr can hold ``<object at 0x...>``; the fields preflight reads are still found, commas in strings kept."""
    lines = (RELEASES / "0.5.11" / "decode.log").read_text().splitlines()
    odd = lines[0].replace("ServerArgs(", "ServerArgs(weird=<Foo object at 0x7f00>, note='a, page_size=1', "
                           "lst=[1, 2], dct={'x': (1, 2)}, ", 1)
    path = tmp_path / "odd.log"
    path.write_text(odd + "\n" + lines[1] + "\n")
    node = read_node(path)
    assert (node.role, node.page_size, node.transfer_backend, node.context_len) == ("decode", 64, "mooncake", CONTEXT)


def test_a_repr_field_that_is_no_literal_is_located(tmp_path: Path) -> None:
    lines = (RELEASES / "0.5.11" / "decode.log").read_text().splitlines()
    bad = re.sub(r"\bpage_size=64", "page_size=<Page object at 0x1>", lines[0])
    path = tmp_path / "bad.log"
    path.write_text(bad + "\n" + lines[1] + "\n")
    with pytest.raises(OwnershipError, match="server_args page_size is not a plain value") as err:
        read_node(path)
    assert err.value.line == 1 and err.value.code is Code.PREFLIGHT_MISSING


def test_the_vllm_log_names_vllm_s_own_logger_locations() -> None:
    text = (DATA / "vllm-node.log").read_text()
    assert "preflight_fixtures" not in text
    assert "(EngineCore pid=" in text and "[core.py:139] Initializing a V1 LLM engine" in text
    assert "[kv_cache_utils.py:1147] GPU KV cache size: 1,114,112 tokens" in text
    node = read_node(DATA / "vllm-node.log")
    assert (node.pool_tokens, node.context_len) == (1_114_112, CONTEXT)
