"""Checking engines.  Each takes an :class:`~ownership.lang.instance.Instance`
and options and returns a :class:`~ownership.core.result.CheckResult`; the
engines are looked up by name in :mod:`ownership.engines.registry`.  This
module relates two engines' results (``--engine all``).

Engines import their solvers (z3, hypothesis) inside their own modules, so
listing or loading specs never pays for them.
"""

from __future__ import annotations

from ownership.core.result import CheckResult, Verdict

AGREES = "agrees"
MISSED = "missed"
NOT_COMPARABLE = "not comparable"
DISAGREES = "disagrees"


def _bound(r: CheckResult) -> int | None:
    """The depth up to which ``r`` saw every execution without a violation, or ``None`` (no such promise)."""
    if r.sampled or r.verdict is not Verdict.BOUNDED_OK:
        return None
    return r.stats.depth


def relate(ref: CheckResult, other: CheckResult) -> tuple[str, str]:
    """How ``other`` relates to the reference result ``ref``: a relation and why.

    The relation is ``agrees`` (both found the same first violation, or both
    exhaustive/proof passes), ``missed`` (a sampled engine found nothing where
    the reference found a violation: random testing is not a proof of
    absence, so this is a weakness of the sample, not a contradiction),
    ``not comparable`` (one side promises too little: a sampled or bounded
    pass, an inconclusive run, a violation beyond the other's bound) or
    ``disagrees`` (the two cannot both be right).
    """
    pair = (ref, other)
    bad = [r for r in pair if r.verdict is Verdict.VIOLATED]
    if len(bad) == 2:
        if ref.violated != other.violated:
            return DISAGREES, (
                f"{ref.engine} finds {ref.violated} violated first, {other.engine} finds {other.violated}"
            )
        return AGREES, f"both find {ref.violated} violated"
    if len(bad) == 1:
        (v,) = bad
        (ok,) = [r for r in pair if r is not v]
        steps = len(v.trace) if v.trace is not None else None
        bound = _bound(ok)
        if ok.verdict is Verdict.PROVED:
            return DISAGREES, f"{ok.engine} says PROVED, {v.engine} finds {v.violated} violated"
        if bound is not None and steps is not None and steps <= bound:
            return DISAGREES, (
                f"{ok.engine} saw every execution of up to {bound} steps, "
                f"{v.engine} finds a {steps}-step violation of {v.violated}"
            )
        if ok.sampled and ok.verdict is Verdict.BOUNDED_OK:
            return MISSED, f"{ok.engine}'s random sample found no violation where {v.engine} finds {v.violated} violated"
        return NOT_COMPARABLE, f"{ok.engine} stopped without a verdict that covers {v.engine}'s violation"
    if ref.verdict is Verdict.PROVED and other.verdict is Verdict.PROVED:
        return AGREES, "both prove the invariants"
    if ref.verdict is Verdict.UNKNOWN or other.verdict is Verdict.UNKNOWN:
        return NOT_COMPARABLE, "an inconclusive run confirms nothing"
    if any(r.sampled for r in pair):
        return NOT_COMPARABLE, "a sampled pass (random testing) is not a proof: it neither confirms nor contradicts"
    return AGREES, "no violation within either engine's bound"


def compare(results: list[CheckResult]) -> str | None:
    """Why engines disagree, or ``None``: verdicts, first violated invariant, shortest length.

    A sampled pass next to a violation is "missed", not a disagreement; see :func:`relate`.
    """
    reasons = []
    for i, a in enumerate(results):
        for b in results[i + 1:]:
            relation, why = relate(a, b)
            if relation == DISAGREES:
                reasons.append(why)
    if reasons:
        return "; ".join(reasons)
    if any(r.extremum is not None for r in results):
        return None  # an optimised trace is padded to the depth bound, not a shortest one
    # Random testing shrinks its traces but does not promise a shortest one.
    violated = [r for r in results if r.trace is not None and r.verdict is Verdict.VIOLATED and not r.sampled]
    if len({len(r.trace) for r in violated if r.trace is not None}) > 1:
        return "; ".join(f"{r.engine} found a {len(r.trace)}-step trace" for r in violated if r.trace is not None)
    return None
