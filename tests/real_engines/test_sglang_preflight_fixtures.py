"""The committed SGLang preflight fixtures are what each release's own code prints (no drift).

Runs in ``.venvs/sglang-releases`` (``scripts/real-engines.sh sglang-releases``), where the
releases are installed side by side in ``releases/<version>/``; each release's fixtures are made
again in a process of its own (``sglang_release_fixtures.py``) and compared with the committed
files.  Skipped where no release is installed (that script fails on a skip).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "real_engines"))
sys.path.insert(0, str(ROOT))

import preflight_fixtures as fx  # noqa: E402

#: The releases whose fixtures the readers' tests use: the first with disaggregation, the
#: incident's, the last vulnerable one, the first with the door checks, and the newest.
REQUIRED = ("0.5.4", "0.5.11", "0.5.19", "0.5.21", "0.5.23")
RELEASES = fx.release_dirs()
pytestmark = pytest.mark.skipif(not RELEASES, reason="no SGLang release directories: scripts/real-engines.sh "
                                "sglang-releases builds them and runs these tests there")


@pytest.fixture(scope="module")
def produced() -> dict[str, str]:
    return fx.releases_files()


def test_the_required_releases_are_installed() -> None:
    assert set(REQUIRED) <= set(RELEASES), sorted(RELEASES)


def test_every_committed_release_fixture_is_made_again(produced: dict[str, str]) -> None:
    committed = {str(p.relative_to(ROOT)) for p in (fx.DATA / "releases").rglob("*") if p.is_file()}
    assert committed == {rel for rel in produced if rel.startswith("tests/data/preflight/releases/")}


def test_the_startup_logs_are_the_release_s_lines(produced: dict[str, str]) -> None:
    logs = [rel for rel in produced if rel.endswith(".log")]
    assert len(logs) >= 2 * len(REQUIRED) + 4  # both nodes of each release, and the incident's in two places
    for rel in logs:
        committed = (ROOT / rel).read_text().splitlines()
        fresh = produced[rel].splitlines()
        assert [fx.message(x) for x in committed] == [fx.message(x) for x in fresh], rel


def test_the_server_info_documents_are_the_release_s(produced: dict[str, str]) -> None:
    docs = [rel for rel in produced if rel.endswith(".json")]
    assert {Path(rel).name for rel in docs} >= {"server-info-prefill.json", "server-info-decode.json",
                                                "server-info-default-prefill.json", "server-info-default-decode.json"}
    for rel in docs:
        assert json.loads((ROOT / rel).read_text()) == json.loads(produced[rel]), rel


def test_the_incident_logs_are_0_5_11_s(produced: dict[str, str]) -> None:
    for role in fx.POOLS:
        assert produced[f"tests/data/preflight/incident-{role}.log"] == produced[
            f"tests/data/preflight/releases/0.5.11/{role}.log"]
        assert "server_args=ServerArgs(" in produced[f"examples/preflight/incident-{role}.log"]


def test_preflight_reads_what_each_release_printed(produced: dict[str, str], tmp_path: Path) -> None:
    from ownership.preflight import read_node

    for rel, text in produced.items():
        if "default" in rel:  # a default launch: checked by the fast suite (context derived or named missing)
            continue
        path = tmp_path / rel.replace("/", "_")
        path.write_text(text)
        node = read_node(path)
        role = "prefill" if "prefill" in rel else "decode"
        assert (node.role, node.context_len, node.pool_tokens, node.page_size) == (
            role, fx.CONTEXT, fx.POOLS[role], fx.PAGE), rel
        assert node.transfer_backend == "mooncake", rel


def test_0_5_11_s_limit_is_its_tp_worker_s(produced: dict[str, str]) -> None:
    """The default launch's max_req_input_len: 0.5.11's own statements (tp_worker.py:302-306) on the pool."""
    for role, pool in fx.POOLS.items():
        doc = json.loads(produced[f"tests/data/preflight/releases/0.5.11/server-info-default-{role}.json"])
        assert doc["context_length"] is None and doc["version"] == "0.5.11"
        assert doc["max_req_input_len"] == min(fx.CONTEXT - 1, pool - 1) - 5
