"""Assertions for ordinary tests: check a spec and fail with the trace table.

::

    from ownership.testing.assertions import assert_safe

    def test_allocator_spec_is_safe():
        assert_safe("specs/allocator.py", requests=3)

A spec is *safe* when the check is PROVED: every reachable state of the
instance was checked, the rule ``ownership test`` applies to a spec declared
``expect=safe()``.  A bounded or interrupted run fails the assertion and says
what was not covered.  The engines are run with the options ``ownership
test`` uses, behind the same guards as the command line: an instance with a
domain of more than ``max_domain`` elements (64 by default, as
``--max-domain``) is refused with OWN017 before it is built, and
``max_seconds`` (none by default, as ``--max-seconds``) bounds the whole
check; the messages name these keyword arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ownership.core.expectation import judge
from ownership.core.result import CheckResult, StopReason
from ownership.engines import registry
from ownership.inputs import DEFAULT_MAX_DOMAIN
from ownership.lang.declarations import Expect
from ownership.lang.model import Spec

if TYPE_CHECKING:
    from ownership.session import Outcome
    from ownership.session.run import Limits


def _spec(spec: Spec | str | Path) -> tuple[Spec, str | None]:
    if isinstance(spec, Spec):
        return spec, spec.file
    from ownership.lang.loader import load_spec

    return load_spec(spec), str(spec)


def run_check(
    spec: Spec | str | Path,
    engine: str = registry.DEFAULT,
    params: Mapping[str, int] | None = None,
    *,
    max_seconds: float | None = None,
    max_domain: int = DEFAULT_MAX_DOMAIN,
    symmetry: bool = True,
) -> CheckResult:
    """Check ``spec`` (a Spec or a spec file) with one engine, or ``all`` (every engine, compared).

    The session of ``ownership test`` runs it, so engines get exactly the
    options the command line gives them; nothing is written.  Bad input (an
    unknown engine or parameter, a broken spec, an instance with a domain of
    more than ``max_domain`` elements) raises
    :class:`~ownership.errors.OwnershipError`; engines that disagree raise
    OWN040.  ``max_seconds`` bounds the whole check (an UNKNOWN result when
    reached).  With ``all`` the reference engine's result is returned.
    """
    return check_outcome(spec, engine, params, max_seconds=max_seconds, max_domain=max_domain,
                         symmetry=symmetry).result


def check_outcome(
    spec: Spec | str | Path,
    engine: str = registry.DEFAULT,
    params: Mapping[str, int] | None = None,
    *,
    max_seconds: float | None = None,
    max_domain: int = DEFAULT_MAX_DOMAIN,
    symmetry: bool = True,
    limits: Limits | None = None,
) -> Outcome:
    """:func:`run_check`'s whole session outcome (every engine's result, the judgement, the reproduce line).

    ``limits`` names the knobs in the guards' messages (default: these keyword arguments).
    """
    from ownership import session
    from ownership.session.run import PYTHON_API

    the_spec, path = _spec(spec)
    settings = session.Settings(engine=engine, params=dict(params or {}), max_seconds=max_seconds, symmetry=symmetry,
                                progress=False, max_domain=max_domain)
    return session.check(Path(path) if path is not None else None, settings, spec=the_spec, outputs=False,
                         limits=limits or PYTHON_API)


def time_limit_hint(result: CheckResult, limits: Limits | None = None) -> list[str]:
    """A line naming the knob that raises the time limit, when the limit is what stopped ``result``."""
    from ownership.session.run import PYTHON_API

    if result.stop_reason is not StopReason.TIME_LIMIT:
        return []
    limit = result.options.get("max_seconds")
    now = f" (now {limit}s)" if limit is not None else ""
    return [f"  the time limit stopped the check{now}: raise {(limits or PYTHON_API).max_seconds} to let it finish"]


def failure_report(result: CheckResult, spec: Spec, spec_path: str | None = None,
                   reproduce: str | None = None) -> list[str]:
    """The lines ``ownership check`` prints for ``result`` (verdict, coverage, trace table) and a reproduce line.

    ``reproduce`` is the session's command (:meth:`Outcome.reproduce_at`), which
    carries every flag and a random engine's seed; without it the line is built
    from the engine and parameters alone.
    """
    from ownership.render.text import reproduce_command, result_report

    doc = spec.invariants[result.violated].doc if result.violated in spec.invariants else ""
    lines = result_report(
        result,
        invariant_doc=doc,
        ghosts=[v.name for v in spec.vars.values() if v.ghost],
        derived=spec.derived_values.values(),
    )
    if reproduce is None and spec_path is not None:
        flags = ["--engine", result.engine] if result.engine != registry.DEFAULT else []
        params = {k: v for k, v in result.params.items() if isinstance(v, int)}
        reproduce = reproduce_command(spec_path, params, spec.default_params(), flags)
    if reproduce is not None:
        lines.append("  reproduce: " + reproduce)
    return lines


def _reproduce(outcome: Outcome, path: str | None) -> str | None:
    return outcome.reproduce_at(path) if path is not None and not outcome.stopped_in_setup else None


def assert_safe(spec: Spec | str | Path, engine: str = registry.DEFAULT, *, max_seconds: float | None = None,
                max_domain: int = DEFAULT_MAX_DOMAIN, **params: int) -> CheckResult:
    """Assert that ``spec`` at these parameter values is PROVED safe by ``engine``.

    ``spec`` is a :class:`~ownership.lang.model.Spec` or the path of a spec
    file; ``params`` override the spec's defaults; ``max_seconds`` and
    ``max_domain`` are :func:`run_check`'s guards.  On failure the
    AssertionError's message is the verdict, what was covered and the trace
    table.  Returns the result (its coverage, statistics).
    """
    the_spec, path = _spec(spec)
    outcome = check_outcome(the_spec, engine, params, max_seconds=max_seconds, max_domain=max_domain)
    result = outcome.result
    verdict = judge(Expect(None), result)
    if not verdict.ok:
        head = f"{the_spec.name} is not proved safe by {result.engine}: got {verdict.got}"
        head += f"; {verdict.reason}" if verdict.reason else ""
        raise AssertionError("\n".join([head, *time_limit_hint(result),
                                        *failure_report(result, the_spec, path, _reproduce(outcome, path))]))
    return result


def assert_violates(spec: Spec | str | Path, invariant: str, engine: str = registry.DEFAULT, *,
                    max_seconds: float | None = None, max_domain: int = DEFAULT_MAX_DOMAIN,
                    **params: int) -> CheckResult:
    """Assert that checking ``spec`` finds a violation of ``invariant`` (the first one found).

    Returns the result; its ``trace`` is the counterexample, replayed
    through the spec.  ``max_seconds`` and ``max_domain`` as for :func:`assert_safe`.
    """
    the_spec, path = _spec(spec)
    outcome = check_outcome(the_spec, engine, params, max_seconds=max_seconds, max_domain=max_domain)
    result = outcome.result
    verdict = judge(Expect(invariant), result)
    if not verdict.ok:
        head = f"{the_spec.name}: expected {verdict.expected} from {result.engine}, got {verdict.got}"
        raise AssertionError("\n".join([head, *time_limit_hint(result),
                                        *failure_report(result, the_spec, path, _reproduce(outcome, path))]))
    return result
