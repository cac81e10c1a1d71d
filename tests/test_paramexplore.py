"""The explorer with free (symbolic) parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import SPECS, instance
from ownership.cli import app
from ownership.core.replay import replay
from ownership.core.result import StopReason, Verdict
from ownership.engines.paramexplore import ParamOptions, explore_params
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec

SOLVER = Path(__file__).resolve().parent / "solver"


@pytest.mark.slow
def test_smallest_leaking_prompt_is_the_admission_limit() -> None:
    inst = instance("sglang_disagg_v0_5_19")
    r = explore_params(inst, ParamOptions(free=("prompt_tokens",), minimize="prompt_tokens"))
    p = inst.param_values
    limit = min(p["context_len"] - 1, p["prefill_pool_tokens"] - 1)  # managers/utils.py max_req_input_len
    assert r.verdict is Verdict.VIOLATED and r.violated == "no_foreign_read"
    assert r.extremum == ("prompt_tokens", limit)
    # The trace is for that prompt length and replays through the concrete semantics.
    assert r.trace is not None and r.trace.params["prompt_tokens"] == limit
    concrete = Instance(inst.spec, dict(r.trace.params))
    assert replay(concrete, r.trace).ok
    assert len(r.trace) == 15


@pytest.mark.slow
def test_fixed_version_is_safe_for_every_prompt_length() -> None:
    r = explore_params(
        instance("sglang_disagg_v0_5_21"),
        ParamOptions(free=("prompt_tokens",), where=("prompt_tokens <= context_len",)),
    )
    assert r.verdict is Verdict.PROVED and r.stop_reason is StopReason.EXHAUSTED
    assert r.params["prompt_tokens"] == "free"
    assert any("every value" in n for n in r.notes)


def test_boundary_in_closed_form_and_maximize() -> None:
    inst = Instance(load_spec(SOLVER / "reserve_overflow.py"))
    r = explore_params(inst, ParamOptions(free=("prompt_tokens",), minimize="prompt_tokens"))
    assert r.extremum == ("prompt_tokens", 3 * 4 + 1)
    r = explore_params(inst, ParamOptions(free=("prompt_tokens",), where=("prompt_tokens <= 100",),
                                          maximize="prompt_tokens"))
    assert r.extremum == ("prompt_tokens", 100)
    r = explore_params(inst, ParamOptions(free=("prompt_tokens",), where=("prompt_tokens <= 12",)))
    assert r.verdict is Verdict.PROVED


@pytest.mark.slow
def test_cli_free_minimize_prints_the_value_and_writes_the_trace(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, [
        "check", str(SPECS / "sglang_disagg_v0_5_19.py"), "--free", "prompt_tokens", "--minimize", "prompt_tokens",
        "--out", str(tmp_path), "--no-render",
    ])
    assert res.exit_code == 1, res.output
    assert "prompt_tokens = 5" in res.output
    assert "--free prompt_tokens --minimize prompt_tokens" in res.output  # the reproduce line
    res = CliRunner().invoke(app, ["replay", str(tmp_path / "trace.json")])
    assert res.exit_code == 0, res.output


def test_minimize_needs_free() -> None:
    res = CliRunner().invoke(app, ["check", str(SPECS / "sglang_disagg_v0_5_19.py"), "--minimize", "prompt_tokens"])
    assert res.exit_code == 2 and "need --free" in res.output


@pytest.mark.slow
def test_unsafe_region_over_pool_size_and_context_length() -> None:
    """The check the incident's operators did not enforce, as a region of deployments."""
    opts = ParamOptions(free=("prefill_pool_tokens", "context_len"),
                        where=("prefill_pool_tokens <= 6", "context_len <= 10"))
    r = explore_params(instance("sglang_disagg_v0_5_19", prompt_tokens=4), opts)
    assert r.verdict is Verdict.VIOLATED
    text = " ".join(r.notes)
    # Split into cases by the prefill pool's page count, explained with the spec's own formulas.
    assert "cases by domain size" in text
    assert ("unsafe exactly when prompt_tokens >= prefill_max_req_input_len and "
            "prompt_tokens < decode_max_req_input_len") in text
    fixed = explore_params(instance("sglang_disagg_v0_5_21", prompt_tokens=4), opts)
    assert fixed.verdict is Verdict.PROVED


INCIDENT = {
    # The 2026 deployment: 1,048,576-token context, 681,280-token prefill pool; the page size is
    # scaled up so the model tracks a handful of pages (the limits do not depend on it).
    "context_len": 1_048_576,
    "prefill_pool_tokens": 681_280,
    "decode_pool_tokens": 1_048_576,
    "page_size": 262_144,
    "short_prompt_tokens": 262_144,
}


@pytest.mark.slow
def test_incident_configuration_smallest_leaking_prompt_and_the_fix() -> None:
    opts = ParamOptions(free=("prompt_tokens",), where=("prompt_tokens <= context_len",), minimize="prompt_tokens")
    r = explore_params(instance("sglang_disagg_v0_5_19", **INCIDENT), opts)
    assert r.extremum == ("prompt_tokens", 681_279)  # min(context_len - 1, prefill_pool_tokens - 1)
    fixed = explore_params(instance("sglang_disagg_v0_5_21", **INCIDENT),
                           ParamOptions(free=("prompt_tokens",), where=("prompt_tokens <= context_len",)))
    assert fixed.verdict is Verdict.PROVED
