"""Model-based testing: drive a spec and an implementation in lock step.

Hypothesis picks actions among those the spec allows, through the generated
:mod:`~ownership.testing.conformance` machine; the first step where the
implementation's observation differs from the spec's fails, is shrunk, and is
shown with both sides.  The adapter contract is in
:mod:`~ownership.testing.adapter`; see ``docs/testing-your-allocator.md``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis

from ownership import inputs
from ownership.core.limits import limited, stop_reason_of
from ownership.core.replay import build_trace
from ownership.core.result import CheckResult, CoverageKind, Measure, Stats, StopReason, Verdict
from ownership.engines.coverage import action_records
from ownership.engines.hypothesis_engine.machine import InvariantViolation
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.hypothesis_engine.sample import capturing, hypothesis_settings
from ownership.inputs import DEFAULT_MAX_DOMAIN
from ownership.lang.instance import Instance
from ownership.lang.model import Spec
from ownership.testing.adapter import Adapter, resolve_spec
from ownership.testing.conformance import (
    ConformanceMachine,
    ConformanceRun,
    Disagreement,
    FlaggedStep,
    conformance_machine,
    step_table,
)

if TYPE_CHECKING:
    from ownership.session.run import Limits


@dataclass(frozen=True)
class MBTOptions:
    """Options of a model-based test run (see :class:`~ownership.engines.hypothesis_engine.options.HypothesisOptions`).

    ``max_domain`` and ``max_seconds`` are the guards of every check (the
    instance-size check, OWN017, and the wall-clock limit), with the
    command line's defaults.
    """

    max_examples: int = 100
    steps: int = 30
    seed: int | None = None
    derandomize: bool = False
    max_seconds: float | None = None
    max_domain: int = DEFAULT_MAX_DOMAIN


def run_mbt(
    adapter_cls: type[Adapter],
    options: MBTOptions = MBTOptions(),
    *,
    spec: str | Path | Spec | None = None,
    params: Mapping[str, int] | None = None,
    limits: Limits | None = None,
) -> CheckResult:
    """Test the implementation behind ``adapter_cls`` against its spec; VIOLATED on the first disagreement.

    An instance with a domain of more than ``options.max_domain`` elements is
    refused (OWN017) before it is built; ``options.max_seconds`` ends the run
    as UNKNOWN.  ``limits`` names the knobs in those messages (default: the
    keyword arguments of :class:`MBTOptions`).
    """
    from hypothesis.stateful import get_state_machine_test

    from ownership.session.run import PYTHON_API, check_size

    knobs = limits or PYTHON_API
    the_spec = resolve_spec(adapter_cls, spec)
    values = {**adapter_cls.params, **(params or {})}
    check_size(the_spec, values, options.max_domain, knobs)
    inputs.check_seconds(knobs.max_seconds, options.max_seconds)
    inst = Instance(the_spec, values)
    run = ConformanceRun()
    base = conformance_machine(inst, adapter_cls)
    machine = type(base.__name__, (base,), {"_run": run})
    hopts = HypothesisOptions(max_examples=options.max_examples, steps=options.steps, derandomize=options.derandomize)
    test = get_state_machine_test(machine, settings=hypothesis_settings(hopts))
    if options.seed is not None:
        test = hypothesis.seed(options.seed)(test)
    lines: list[str] = []
    failure: BaseException | None = None
    stopped: StopReason | None = None
    try:
        with limited(options.max_seconds), inst.mode(recording=False), capturing(lines):
            test()
    except (Disagreement, InvariantViolation) as exc:
        failure = exc
    except KeyboardInterrupt as exc:  # the wall-clock limit, Ctrl-C or SIGTERM
        stopped = stop_reason_of(exc)
    log = run.log
    opts: dict[str, Any] = {**asdict(options), "adapter": f"{adapter_cls.__module__}:{adapter_cls.__qualname__}"}
    seed = options.seed if options.seed is not None else getattr(test, "_hypothesis_internal_use_generated_seed", None)
    if seed is not None:
        opts["seed"] = seed
    stats = Stats(states=len(log.states), transitions=log.steps, depth=log.max_depth, seconds=time.monotonic() - log.started)
    common: dict[str, Any] = {
        "spec": the_spec.name,
        "engine": "mbt",
        "params": dict(inst.param_values),
        "invariants": tuple(the_spec.invariants),
        "options": opts,
        # Steps taken per spec action, along the random runs (enabledness is not measured here).
        "actions": action_records(inst, [None] * len(the_spec.actions),
                                  [log.action_counts.get(a, 0) for a in the_spec.actions],
                                  Measure.SAMPLED, len(log.states), log.max_depth, False),
        "coverage_kind": CoverageKind.SAMPLED,
    }
    notes = [f"{adapter_cls.__name__} ran {log.examples:,} examples in lock step with the spec ({log.steps:,} steps)"]
    if stopped is not None:
        notes.append(f"inconclusive: the run {stopped.value}"
                     + (f" of {options.max_seconds}s; raise {knobs.max_seconds} to let it finish"
                        if stopped is StopReason.TIME_LIMIT else ""))
        return CheckResult(verdict=Verdict.UNKNOWN, stop_reason=stopped, stats=stats, notes=tuple(notes), **common)
    if failure is None:
        return CheckResult(verdict=Verdict.BOUNDED_OK, stop_reason=StopReason.EXAMPLES_DONE, stats=stats, notes=tuple(notes), **common)
    last: ConformanceMachine = log.last
    if isinstance(failure, Disagreement):
        headline, table = failure.headline, failure.report
        violated = "conformance"
    else:
        assert isinstance(failure, InvariantViolation)
        headline, table, violated = str(failure), step_table(last.rows), failure.invariant
    # A flagged step ends its trace in the violation it flags (replay checks that it does).
    trace = build_trace(inst, last.path, engine="mbt", violation=violated if isinstance(failure, FlaggedStep) else None)
    steps = [
        ln for ln in getattr(failure, "__notes__", ()) if ln.startswith("state") and not ln.startswith("state.spec_invariant_")
    ]
    return CheckResult(
        verdict=Verdict.VIOLATED,
        stop_reason=StopReason.DISAGREEMENT,
        stats=stats,
        violated=violated,
        trace=trace,
        notes=(headline, *notes),
        reproduction=table + ("\n\nHypothesis' steps:\n" + "\n".join(steps) if steps else ""),
        **common,
    )


def assert_conforms(adapter_cls: type[Adapter], **kwargs: Any) -> CheckResult:
    """Run :func:`run_mbt` (keyword arguments: :class:`MBTOptions` fields, ``spec``, ``params``).

    Fails on a disagreement, a violated spec invariant, or a step the spec flags as a violation.
    """
    spec = kwargs.pop("spec", None)
    params = kwargs.pop("params", None)
    result = run_mbt(adapter_cls, MBTOptions(**kwargs), spec=spec, params=params)
    if result.verdict is Verdict.VIOLATED:
        raise AssertionError(f"{result.notes[0]}\n{result.reproduction}\nreproduce with seed={result.options.get('seed')}")
    if result.verdict is Verdict.UNKNOWN:
        # A run stopped before its examples were done confirms nothing: not a pass.
        raise AssertionError(f"{adapter_cls.__name__}: no verdict: {'; '.join(result.notes)}")
    return result
