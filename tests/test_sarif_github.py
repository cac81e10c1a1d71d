"""The SARIF of real runs is what GitHub code scanning accepts.

Each log is validated against the SARIF 2.1.0 schema (vendored in tests/data/)
and checked against code scanning's upload rules: every rule has a short and
full description, ``help`` (text and markdown) and ``helpUri``; every result
has a ``ruleId``, a message, a level and a location whose URI is relative to
``%SRCROOT%`` (declared in ``originalUriBaseIds``) with ``startLine >= 1``;
related and code-flow locations likewise; no URI is absolute, climbs out of
the repository or points into an installed package.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, ROOT, SPECS
from ownership.cli import app
from ownership.render.ci.sarif import SRCROOT, _artifact

jsonschema = pytest.importorskip("jsonschema")

SCHEMA_FILE = Path(__file__).parent / "data" / "sarif-2.1.0-rtm.5.json"


def _schema_errors(log: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA_FILE.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]


def _physical_locations(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every physicalLocation of a result: its locations, related locations and code-flow steps."""
    out = [("location", loc["physicalLocation"]) for loc in result.get("locations", []) if "physicalLocation" in loc]
    out += [("related", loc["physicalLocation"]) for loc in result.get("relatedLocations", [])
            if "physicalLocation" in loc]
    for flow in result.get("codeFlows", []):
        for thread in flow["threadFlows"]:
            for step in thread["locations"]:
                if "physicalLocation" in step.get("location", {}):
                    out.append(("flow", step["location"]["physicalLocation"]))
    return out


def github_errors(log: dict[str, Any], root: Path) -> list[str]:
    """What code scanning's upload would reject or misplace in ``log``, whose %SRCROOT% must be ``root``."""
    errors: list[str] = []
    (run,) = log["runs"]
    if run.get("originalUriBaseIds", {}).get(SRCROOT, {}).get("uri") != root.resolve().as_uri() + "/":
        errors.append(f"originalUriBaseIds does not declare {SRCROOT} as {root}")
    rules = run["tool"]["driver"]["rules"]
    for rule in rules:
        for key in ("shortDescription", "fullDescription"):
            if not rule.get(key, {}).get("text"):
                errors.append(f"rule {rule['id']}: no {key}")
        help_ = rule.get("help", {})
        if not help_.get("text") or not help_.get("markdown"):
            errors.append(f"rule {rule['id']}: help needs text and markdown")
        if not str(rule.get("helpUri", "")).startswith("https://"):
            errors.append(f"rule {rule['id']}: no https helpUri")
        if rule.get("name") == rule["id"]:
            errors.append(f"rule {rule['id']}: name repeats the id")
    ids = [r["id"] for r in rules]
    for i, result in enumerate(run["results"]):
        where = f"result {i} ({result.get('ruleId')})"
        if result.get("ruleId") not in ids or ids.index(result["ruleId"]) != result.get("ruleIndex"):
            errors.append(f"{where}: ruleId/ruleIndex do not name a rule")
        if result.get("level") not in ("error", "warning", "note", "none"):
            errors.append(f"{where}: level {result.get('level')!r}")
        if not result.get("message", {}).get("text"):
            errors.append(f"{where}: no message")
        if not any("physicalLocation" in loc for loc in result.get("locations", [])):
            errors.append(f"{where}: no physical location")
        for kind, phys in _physical_locations(result):
            art = phys["artifactLocation"]
            uri = art.get("uri", "")
            if art.get("uriBaseId") != SRCROOT:
                errors.append(f"{where}: {kind} {uri} is not relative to {SRCROOT}")
            if ":" in uri or uri.startswith("/") or ".." in uri.split("/"):
                errors.append(f"{where}: {kind} {uri} is not a relative path inside the repository")
            if "site-packages" in uri or "dist-packages" in uri:
                errors.append(f"{where}: {kind} {uri} points into an installed package")
            elif not (root / uri).is_file():
                errors.append(f"{where}: {kind} {uri} is no file of the repository")
            if phys.get("region", {}).get("startLine", 1) < 1:
                errors.append(f"{where}: {kind} {uri} startLine < 1")
    for note in run["invocations"][0].get("toolExecutionNotifications", []):
        for loc in note.get("locations", []):
            if loc["physicalLocation"]["artifactLocation"].get("uriBaseId") != SRCROOT:
                errors.append(f"notification at {loc} is not relative to {SRCROOT}")
    return errors


def _sarif(root: Path, *args: str, monkeypatch: pytest.MonkeyPatch, exit_code: int,
           out: Path | None = None) -> dict[str, Any]:
    """Run the CLI from ``root`` (the repository) with ``--sarif``; the log, checked both ways."""
    monkeypatch.chdir(root)
    out = out or root / "o.sarif"
    res = CliRunner().invoke(app, [*args, "--sarif", str(out)])
    assert res.exit_code == exit_code, res.output
    log: dict[str, Any] = json.loads(out.read_text())
    assert _schema_errors(log) == []
    assert github_errors(log, root) == []
    return log


def test_a_violated_spec_from_the_repository_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _sarif(ROOT, "check", str(SPECS / "sglang_disagg_v0_5_19.py"), "--no-render", "--out", str(tmp_path),
                 monkeypatch=monkeypatch, exit_code=1, out=tmp_path / "o.sarif")
    (result,) = log["runs"][0]["results"]
    (rule,) = log["runs"][0]["tool"]["driver"]["rules"]
    assert result["ruleId"] == rule["id"] == "no_foreign_read"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "specs/sglang_disagg_v0_5_19.py"
    assert rule["fullDescription"]["text"] in rule["help"]["text"]
    assert log["runs"][0]["tool"]["driver"]["informationUri"] == rule["helpUri"]


def test_a_safe_spec_has_no_results_and_a_valid_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(CORPUS / "toy_safe_counter.py", tmp_path)
    log = _sarif(tmp_path, "test", str(tmp_path), monkeypatch=monkeypatch, exit_code=0)
    assert log["runs"][0]["results"] == []
    assert log["runs"][0]["invocations"][0]["properties"]["verdicts"][0]["verdict"] == "PROVED"


def test_a_library_invariant_is_located_at_the_spec_not_in_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no_double_ownership is defined in ownership/vocab/pool.py, outside this repository (tmp_path).
    shutil.copy(CORPUS / "toy_double_free.py", tmp_path)
    log = _sarif(tmp_path, "check", "toy_double_free.py", "--no-render", "--out", str(tmp_path / "ce"),
                 monkeypatch=monkeypatch, exit_code=1)
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "no_double_ownership"
    (related,) = result["relatedLocations"]
    assert related["physicalLocation"]["artifactLocation"]["uri"] == "toy_double_free.py"
    assert "defined in the ownership library, pool.py" in related["message"]["text"]
    assert "ownership/vocab" not in json.dumps(log["runs"][0]["results"])


def test_the_library_is_located_where_the_repository_holds_it() -> None:
    # Run from this repository's root, the library's source is the repository's own file.
    assert _artifact(str(ROOT / "ownership" / "vocab" / "pool.py"), ROOT) == {
        "uri": "ownership/vocab/pool.py", "uriBaseId": SRCROOT}


def test_installed_packages_and_outside_files_have_no_location(tmp_path: Path) -> None:
    venv_file = tmp_path / ".venv" / "lib" / "python3.12" / "site-packages" / "ownership" / "vocab" / "pool.py"
    assert _artifact(str(venv_file), tmp_path) is None
    assert _artifact(str(tmp_path / "usr" / "lib" / "python3" / "dist-packages" / "x.py"), tmp_path) is None
    assert _artifact("/elsewhere/spec.py", tmp_path) is None
    assert _artifact(str(tmp_path / "specs" / "a b.py"), tmp_path) == {"uri": "specs/a%20b.py", "uriBaseId": SRCROOT}


def test_the_github_check_catches_what_code_scanning_rejects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(CORPUS / "toy_double_free.py", tmp_path)
    log = _sarif(tmp_path, "check", "toy_double_free.py", "--no-render", "--out", str(tmp_path / "ce"),
                 monkeypatch=monkeypatch, exit_code=1)
    broken = json.loads(json.dumps(log))
    run = broken["runs"][0]
    del run["tool"]["driver"]["rules"][0]["help"]
    run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"] = {
        "uri": "file:///usr/lib/python3/site-packages/ownership/vocab/pool.py"}
    errors = github_errors(broken, tmp_path)
    assert any("help needs text and markdown" in e for e in errors)
    assert any("not relative to %SRCROOT%" in e for e in errors)
    assert any("points into an installed package" in e for e in errors)
