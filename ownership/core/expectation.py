"""Does a check's result meet what was asked of it?

Two questions share one answer here, so ``ownership test``, the pytest plugin
and the CI reports (JUnit, SARIF, JSON) can never disagree:

* :func:`judge`: does a result meet the verdict a spec declares (``expect=``)?
  A spec expected to violate ``X`` passes when the check finds a violation of
  exactly ``X``; a spec expected to be safe passes only when the result is
  PROVED (every reachable state checked), never on a bounded or inconclusive
  run.
* :func:`invariant_outcomes`: the same decision split per invariant, for
  reports that list one test case per invariant.  Without an expectation
  (``ownership check``) an invariant passes when it was not violated within
  the stated bounds, as the exit status says.

Engines stop at the first violation, so after a violation the other
invariants are *undecided*, never reported as holding.

A safe result qualified by a vacuity warning (an action that never fired and
that the spec does not declare ``may_be_dead``, a function that looks like an
unregistered action, an allocation larger than its pool) is *vacuous*, and a
vacuous verdict is never a pass: ``ownership test`` fails it ("expected safe,
got a vacuous safe verdict (action cleanup never fired)"), and ``ownership
check`` and ``prove`` report it inconclusive (exit 3, each invariant
``inconclusive``) unless the user passes ``--allow-vacuous``, which keeps the
warning and passes.  The spec's own warnings fail an expected violation too.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ownership.core.result import CheckResult, StopReason, Verdict
from ownership.lang.declarations import Expect

DEADLOCK = "deadlock"
"""The name a deadlock takes where an invariant's name would stand."""


@dataclass(frozen=True)
class Judgement:
    """Whether one spec's result meets its declared verdict, and why not."""

    ok: bool
    expected: str
    """``safe`` or ``violates X``."""
    got: str
    """``safe`` or ``violates X`` (``violates deadlock`` for a deadlock)."""
    reason: str = ""
    """What to do when ``got`` is a vacuous safe verdict (declare the action ``may_be_dead``); empty otherwise."""


def got_text(result: CheckResult) -> str:
    """What the check found, in the words of ``expect=``: ``safe``, ``violates X`` or what kept it from either.

    ``safe`` means exactly a PROVED verdict nothing qualifies; a vacuous one
    reads ``a vacuous safe verdict (action cleanup never fired)``, so that
    ``expected safe, got ...`` never repeats the word it is failing.
    """
    phrases = result.vacuity_phrases()
    why = "; ".join(phrases)
    if result.violated is not None:
        found = f"violates {result.violated}"
        return f"{found} with {'a warning' if len(phrases) == 1 else 'warnings'} ({why})" if why else found
    if result.stop_reason is StopReason.NOTHING_ENABLED:
        return "an inconclusive verdict (no action is enabled in the initial state)"
    if result.verdict is Verdict.UNKNOWN:
        return f"an inconclusive verdict ({result.stop_reason.value})"
    if result.verdict is Verdict.BOUNDED_OK:
        bound = "random testing" if result.sampled else result.stop_reason.value
        return f"no violation, but not exhaustive ({bound})" + (f"; vacuous ({why})" if why else "")
    return f"a vacuous safe verdict ({why})" if why else "safe"


def vacuity_reason(result: CheckResult) -> str:
    """Why a result is vacuous, and the way out (empty: nothing qualifies it)."""
    phrases = result.vacuity_phrases()
    if not phrases:
        return ""
    hint = ""
    if result.dead_actions() and result.safe:
        hint = ' (declare @spec.action(may_be_dead="why") if intended)'
    return f"vacuous: {'; '.join(phrases)}{hint}"


def judge(expect: Expect, result: CheckResult) -> Judgement:
    """The pass/fail decision of ``ownership test`` for one spec.

    ``reason`` is set only when ``got`` alone does not say how to pass: the
    ``may_be_dead`` declaration for a dead action.
    """
    got = got_text(result)
    vacuous = vacuity_reason(result)
    hint = 'declare @spec.action(may_be_dead="why") if intended' if result.safe and result.dead_actions() else ""
    if expect.safe:
        if result.violated is not None:
            return Judgement(False, expect.describe(), got)
        if result.verdict is not Verdict.PROVED:
            # A bounded or interrupted search says nothing about longer interleavings.
            return Judgement(False, expect.describe(), got)
        if vacuous:
            return Judgement(False, expect.describe(), got, hint)
        return Judgement(True, expect.describe(), got)
    if result.violated == expect.violates and vacuous:
        return Judgement(False, expect.describe(), got)
    return Judgement(result.violated == expect.violates, expect.describe(), got)


class Status(enum.Enum):
    """The outcome of one invariant in one check."""

    PASSED = "passed"
    FAILED = "failed"
    UNDECIDED = "undecided"
    """The run stopped at another violation before it could decide this invariant."""
    INCONCLUSIVE = "inconclusive"
    """A state or time limit stopped the run (``ownership check`` exits 3)."""


@dataclass(frozen=True)
class InvariantOutcome:
    """One invariant's outcome with a one-line explanation."""

    invariant: str
    status: Status
    message: str


def checked_names(result: CheckResult) -> tuple[str, ...]:
    """The invariants and temporal properties a result covers, plus ``deadlock`` when deadlocks were looked for or found."""
    names = tuple(result.invariants) + tuple(p for p in result.properties if p not in result.invariants)
    if (result.violated == DEADLOCK or result.options.get("deadlock")) and DEADLOCK not in names:
        names += (DEADLOCK,)
    return names


def _violation_line(result: CheckResult) -> str:
    trace = result.trace
    if trace is None:
        return f"{result.violated} is violated ({result.coverage()})"
    n = len(trace)
    if trace.loop is not None:
        goes = "stays there" if trace.loop == n else f"loops back to state {trace.loop}"
        return (f"{result.violated} is broken on a fair path ({n}-step lasso that {goes} for ever; "
                f"{result.coverage()})")
    where = f"after {trace.steps[-1].call}" if trace.steps else "in the initial state"
    return f"{result.violated} is violated {where} ({n}-step counterexample; {result.coverage()})"


def invariant_outcomes(result: CheckResult, expect: Expect | None = None, *,
                       allow_vacuous: bool = False) -> tuple[InvariantOutcome, ...]:
    """One outcome per checked invariant (see the module docstring for the rules).

    With ``expect`` the outcomes follow :func:`judge`: the judgement is ok
    exactly when no outcome is ``FAILED``.  Without it they follow the exit
    status of ``check``: a vacuous verdict is ``INCONCLUSIVE`` unless
    ``allow_vacuous`` (``--allow-vacuous``).
    """
    names = checked_names(result)
    if expect is not None and expect.violates is not None and expect.violates not in names:
        names += (expect.violates,)  # not checked at all: it cannot have been found
    bad = result.violated
    vacuous = vacuity_reason(result)
    out: list[InvariantOutcome] = []
    for name in names:
        if bad is not None:
            if name == bad:
                expected_here = expect is not None and expect.violates == name
                status = Status.PASSED if expected_here else Status.FAILED
                message = _violation_line(result) + (", as the spec expects" if expected_here else "")
                if expect is not None and not expected_here:
                    message += f"; the spec expects {expect.describe()}"
            elif expect is not None and expect.violates == name:
                status = Status.FAILED
                message = f"expected a violation of {name}, but the check stopped at a violation of {bad} first"
            else:
                status = Status.UNDECIDED
                message = (
                    f"not decided: the check stops at the first violation ({bad}) "
                    f"and checked {result.stats.states:,} states before it"
                )
        elif expect is None:
            status = Status.INCONCLUSIVE if result.verdict is Verdict.UNKNOWN else Status.PASSED
            message = result.coverage()
        elif expect.violates == name:
            status = Status.FAILED
            message = f"expected a violation of {name}, none found: {result.coverage()}"
        elif result.verdict is Verdict.PROVED:
            status = Status.PASSED
            message = result.coverage()
        else:
            status = Status.FAILED
            message = f"not exhaustive: {result.stop_reason.value}: {result.coverage()}"
        if vacuous and status is Status.PASSED:
            if expect is not None:
                # `ownership test` fails a qualified verdict: say so on every invariant it would pass.
                status = Status.FAILED
                message = f"{vacuous}: {message}"
            elif allow_vacuous:
                message = f"warning: {vacuous}: {message}"
            else:
                # `check` exits 3 for a vacuous verdict: the invariant is not known to hold.
                status = Status.INCONCLUSIVE
                message = f"{vacuous}: {message}"
        out.append(InvariantOutcome(name, status, message))
    return tuple(out)
