"""The words of a verdict, written once for every output: the headline and the coverage sentence.

The terminal report, the HTML report, JUnit, SARIF, JSON, the pytest
plugin and ``ownership.testing`` all take a result's headline
(:func:`headline`), its verdict in words (:func:`verdict_words`: a sampled
pass never reads like a proof) and its coverage sentence (:func:`coverage`,
also ``CheckResult.coverage()``) from here.  How a pass reads follows what
the engine decides (``CoverageKind``), which its registry row declares.
"""

from __future__ import annotations

from ownership.core.result import CheckResult, CoverageKind, StopReason, Verdict

SAMPLED_PASS = "NO VIOLATION FOUND (sampled)"
"""A random engine's pass: nothing that reads like a proof or a bounded guarantee."""


def verdict_words(result: CheckResult, qualified: bool = False) -> str:
    """``VIOLATED``, ``PROVED``, ``NO VIOLATION FOUND (sampled)``; with ``qualified``, its vacuity in parentheses."""
    qualifier = result.qualifier() if qualified and result.safe else ""
    if result.sampled and result.verdict is Verdict.BOUNDED_OK:
        return SAMPLED_PASS[:-1] + (f"; {qualifier})" if qualifier else ")")
    return f"{result.verdict.name} ({qualifier})" if qualifier else result.verdict.name


def headline(result: CheckResult) -> str:
    """``VIOLATED  no_foreign_read  in sglang_disagg_v0_5_19 (explore)``.

    A qualified safe verdict says so: ``PROVED (vacuous: 1 action never
    fired: cleanup)  spec (explore)``.
    """
    if result.verdict is Verdict.VIOLATED:
        what = "deadlock" if result.violated == "deadlock" else result.violated
        return f"VIOLATED  {what}  in {result.spec} ({result.engine})"
    return f"{verdict_words(result, qualified=True)}  {result.spec} ({result.engine})"


def coverage(result: CheckResult) -> str:
    """One sentence saying exactly what was checked."""
    s = result.stats
    sym = result.options.get("symmetry")
    states = f"{s.states:,} distinct states" + (" (up to symmetry)" if sym else "")
    scope = ", ".join(f"{k}={v}" for k, v in result.params.items()) or "this instance (no parameters)"
    base = f"{states}, {s.transitions:,} transitions, depth {s.depth}, {s.seconds:.2f}s"
    # What the engine can decide says how its coverage reads (the registry declares it per engine).
    if result.coverage_kind in (CoverageKind.BOUNDED, CoverageKind.PROOF):
        return _solver_coverage(result)
    if result.coverage_kind is CoverageKind.SAMPLED:
        return _random_coverage(result, scope)
    if result.verdict is Verdict.PROVED and result.stop_reason is StopReason.EXHAUSTED:
        claims = [f"invariants {', '.join(result.invariants)} hold for every interleaving of any length"] \
            if result.invariants else []
        if result.properties:
            claims.append(f"temporal properties {', '.join(result.properties)} hold on every fair path")
        return f"all reachable states of this instance checked ({base}); {'; '.join(claims) or 'nothing checked'} at {scope}"
    if result.verdict is Verdict.BOUNDED_OK:
        return (
            f"no violation in any interleaving of up to {s.depth} steps ({base}); "
            f"stopped because the engine {result.stop_reason.value}: longer interleavings NOT checked"
        )
    if result.verdict is Verdict.VIOLATED:
        return f"{result.stop_reason.value} after {base}"
    return f"{result.stop_reason.value}: {base}"

def _random_coverage(result: CheckResult, scope: str) -> str:
    s = result.stats
    # A derandomized run prints no timing, so two runs print the same text.
    took = "" if result.options.get("derandomize") else f"{s.seconds:.2f}s "
    base = (
        f"{s.transitions:,} random steps, {s.states:,} distinct states, longest example {s.depth} steps, "
        f"{took}at {scope}"
    )
    if result.verdict is Verdict.VIOLATED:
        what = "the implementation and the spec disagree" if result.engine == "mbt" else "found a violation"
        how = "by deleting steps" if result.options.get("found_by") == "walk" else "by Hypothesis"
        return f"{what} after {base}; the failing run was shrunk {how}"
    if result.verdict is Verdict.BOUNDED_OK:
        walks = f"{result.options['walks']:,} swarm random walks and " if result.options.get("walks") else ""
        return (
            f"no violation in {walks}{result.options.get('max_examples', '?')} random examples of up to "
            f"{result.options.get('steps', '?')} steps ({base}); random testing: interleavings it did not sample "
            "were NOT checked"
        )
    return f"{result.stop_reason.value}: {base}"

def _solver_coverage(result: CheckResult) -> str:
    s = result.stats
    scope = ", ".join(f"{k}={v}" for k, v in result.params.items()) or "this instance (no parameters)"
    if result.verdict is Verdict.VIOLATED:
        return f"shortest violation at depth {s.depth} ({s.seconds:.2f}s) at {scope}"
    if result.verdict is Verdict.PROVED:
        if result.stop_reason is StopReason.INVARIANT_FOUND and s.states:
            how = f"{result.stop_reason.value}: the {s.states:,} reachable states, all within {s.depth} steps"
        elif result.stop_reason is StopReason.INVARIANT_FOUND:
            how = f"{result.stop_reason.value}, after k-induction up to k={s.depth + 1}"
        else:
            how = f"{result.stop_reason.value} at k={s.depth}"
        return (
            f"invariants {', '.join(result.invariants)} proved for executions of any length "
            f"({how}, {s.seconds:.2f}s) at {scope}"
        )
    if result.verdict is Verdict.BOUNDED_OK:
        return (
            f"no violation in any execution of up to {s.depth} steps ({s.seconds:.2f}s) at {scope}; "
            "longer executions NOT checked"
        )
    return f"{result.stop_reason.value} at depth {s.depth} ({s.seconds:.2f}s) at {scope}"
