"""Text that more than one CI report repeats: the trace report, the violating event, the tool version."""

from __future__ import annotations

from ownership.core.result import CheckResult
from ownership.errors import SpecWarning
from ownership.render.ci.records import SpecRun


def _report_text(run: SpecRun) -> str:
    from ownership.render.text import result_report

    result = run.result
    assert result is not None
    lines = result_report(
        result,
        invariant_doc=run.invariant_docs.get(result.violated or "", ""),
        ghosts=run.ghosts,
        derived=run.derived,
    )
    if run.files:
        lines += ["", "  wrote " + ", ".join(run.files)]
        trace_json = next((f for f in run.files if f.endswith("trace.json")), None)
        if trace_json is not None:
            lines.append(f"  replay: ownership replay {trace_json}")
    return "\n".join(lines) + "\n"


def _violating_event(result: CheckResult) -> str | None:
    """The sentence for the event that breaks the invariant (``B reads D0, which holds A's KV``)."""
    from ownership.render.text import violation_sentence

    return (violation_sentence(result.trace) or None) if result.trace is not None else None


def _tool_version() -> str:
    from ownership.distribution import version

    return version()


def _warning_text(w: SpecWarning) -> str:
    from ownership.render.text import warning_line

    return warning_line(w)


def _kind(result: CheckResult) -> str:
    """``exhaustive``, ``bounded``, ``sampled`` or ``proof``: what a pass of this engine can claim."""
    return result.coverage_kind.value if result.coverage_kind is not None else "exhaustive"
