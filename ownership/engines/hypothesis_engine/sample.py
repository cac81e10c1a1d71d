"""The random phase of one process: swarm walks, then Hypothesis' search, as a :class:`Sample`.

A :class:`Sample` is plain data that pickles: what the phase covered (walks,
examples, steps, the states it visited and where each action was enabled)
and what it found (a walk's path or Hypothesis' shrunk example, with the
invariant it breaks).  The engine turns one into its result; a swarm
(:mod:`.swarm`) runs one per worker on seeds of their own and merges them
(:func:`merge`).  Paths are rebuilt into traces, and so replayed through the
spec, by the engine in the coordinating process.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.reporting import with_reporter

from ownership.core.limits import stop_reason_of
from ownership.core.progress import ProgressFn
from ownership.core.result import StopReason
from ownership.engines.hypothesis_engine.machine import Covered, InvariantViolation, RunLog, SpecMachine, machine_class
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.engines.hypothesis_engine.reproduction import hypothesis_reproduction
from ownership.engines.hypothesis_engine.walks import Path, Start, swarm_walks
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance


def hypothesis_settings(options: HypothesisOptions) -> settings:
    """Hypothesis' settings for a run with ``options`` (model-based testing uses them too)."""
    return settings(
        max_examples=options.max_examples,
        stateful_step_count=options.steps,
        deadline=None,
        database=None,  # a run depends on its seed only, not on earlier runs' files
        derandomize=options.derandomize,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        report_multiple_bugs=False,
        # No Phase.explain: the engine rebuilds and explains its own trace, and
        # Hypothesis' explain phase re-ran every shrink step under a tracer
        # (it tripled the CPU time of a failing run).
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    )


def _machine_test(get_test: Callable[..., Callable[[], None]], machine: type[SpecMachine], options: HypothesisOptions) -> Callable[[], None]:
    """Hypothesis' test function for ``machine``.

    Examples run at least half of ``steps`` steps: Hypothesis otherwise
    favours very short examples, and ownership bugs need a request to go all
    the way through before another reuses its pages.  A spec that finishes
    early restarts (see ``_make_restart``); shrinking still removes every step the
    failure does not need.
    """
    try:
        return get_test(machine, settings=hypothesis_settings(options), _min_steps=options.steps // 2)
    except TypeError:  # a Hypothesis without the private knob
        return get_test(machine, settings=hypothesis_settings(options))


@contextlib.contextmanager
def capturing(lines: list[str]) -> Iterator[None]:
    """Collect what Hypothesis reports (its printed steps) into ``lines`` instead of printing it."""
    with with_reporter(lambda value: lines.extend(str(value).splitlines())):
        yield


@dataclass
class Found:
    """A failing run of the random phase: its path from the initial state and the invariant it breaks first."""

    by: str
    """``walk`` (a swarm walk: the engine shrinks it by deleting steps) or ``hypothesis`` (shrunk already)."""
    path: Path
    invariant: str
    walk: int = 0
    """Which walk of its process found it (``by == "walk"``)."""
    reproduction: str | None = None
    """Hypothesis' printed steps made runnable (``by == "hypothesis"``)."""
    worker: int | None = None
    """The swarm worker that found it (``None``: one process)."""


@dataclass
class Sample(Covered):
    """What a random phase covered and found; merged over a swarm's workers by :func:`merge`."""

    found: Found | None = None
    interrupted: StopReason | None = None
    seconds: float = 0.0


def sample(inst: Instance, options: HypothesisOptions, seed: int | None, starts: Sequence[Start],
           progress: ProgressFn | None, examples: bool = True) -> Sample:
    """Swarm walks from the initial state and ``starts``, then (``examples``) Hypothesis' search, until one fails.

    ``seed`` drives both (``None`` with ``options.derandomize``: the walks at
    seed 0, Hypothesis derandomized).  A stop from outside (the time limit,
    Ctrl-C, SIGTERM) ends it with what was covered so far.
    """
    from hypothesis.stateful import get_state_machine_test

    log = RunLog()
    base = machine_class(inst, options.invariants)
    machine = type(base.__name__, (base,), {"_log": log, "_progress": progress, "_progress_every": options.progress_every})
    test = _machine_test(get_state_machine_test, machine, options)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    checked = base._checked
    found: Found | None = None
    interrupted: StopReason | None = None
    lines: list[str] = []
    try:
        with inst.mode(recording=False):
            walked = swarm_walks(inst, checked, options, random.Random(seed or 0), log, progress, starts)
            if walked is not None:
                found = Found("walk", walked[0], walked[1], walk=log.walks)
            elif examples:
                with capturing(lines):
                    test()
    except InvariantViolation as exc:
        last: Any = log.last
        found = Found("hypothesis", list(last.path), exc.invariant,
                      reproduction=hypothesis_reproduction(inst, exc))
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or the wall-clock limit
        interrupted = stop_reason_of(exc)
    except hypothesis.errors.InvalidDefinition as exc:
        raise OwnershipError(Code.SPEC_INVALID, f"spec {inst.spec.name}: {exc}", inst.spec.file) from None
    return Sample(log.examples, log.walks, log.steps, log.max_depth, log.states, log.action_counts, log.enabled_in,
                  found, interrupted, time.monotonic() - log.started)


def merge(samples: Sequence[Sample]) -> Sample:
    """The union of a swarm's samples: counts added, states and enabled sets united.

    The failure reported is the lowest-numbered worker's, so a run with the
    same seed and workers reports the same one whichever finished first.
    """
    out = Sample()
    for i, s in enumerate(samples):
        out.walks += s.walks
        out.examples += s.examples
        out.steps += s.steps
        out.max_depth = max(out.max_depth, s.max_depth)
        out.states |= s.states
        out.action_counts.update(s.action_counts)
        for action, states in s.enabled_in.items():
            out.enabled_in.setdefault(action, set()).update(states)
        if out.found is None and s.found is not None:
            out.found = s.found
            out.found.worker = i
        out.interrupted = out.interrupted or s.interrupted
        out.seconds = max(out.seconds, s.seconds)
    return out
