"""Swarm random walks, run before Hypothesis, and the step-deleting shrink of the path one of them breaks an invariant on."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

from ownership.core.progress import Progress, ProgressFn
from ownership.engines.hypothesis_engine.machine import RunLog
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance

SWARM_P_DISABLED = (0.0, 0.25, 0.5)
"""Swarm testing: each walk leaves out each action with one of these probabilities (drawn per walk)."""


Path = list[tuple[int, tuple[Any, ...]]]
"""Steps as (action instance index, picks): what traces are rebuilt from."""


def first_failing(inst: Instance, state: State, checked: Sequence[str], flags: Sequence[str] = ()) -> str | None:
    """The first invariant, in declaration order as explore checks them, that the step broke.

    ``flags`` are the invariants an event of the step is marked as violating.
    """
    for name in checked:
        if name in flags or not inst.holds(state, name):
            return name
    return None


ARCHIVE_MAX = 4096
"""Starting points kept for later walks (a uniform sample once there are more)."""

Start = tuple[Path, State]
"""A walk's starting point: the path from the initial state and the state it reaches."""


def start_points(inst: Instance, paths: Sequence[Path]) -> list[Start]:
    """Each path with the state it reaches (a path a step of which is disabled is left out)."""
    out: list[Start] = []
    for path in paths:
        state = inst.init_state
        for index, picks in path:
            succ = inst.run_with_picks(state, inst.action_instances[index], picks)
            if succ is None:
                break
            state = succ.state
        else:
            out.append((list(path), state))
    return out


def _keep(archive: list[Start], start: Start, offered: int, rng: random.Random) -> None:
    """Reservoir sampling: ``archive`` stays a uniform sample of the ``offered`` starting points."""
    if len(archive) < ARCHIVE_MAX:
        archive.append(start)
        return
    k = rng.randrange(offered)
    if k < ARCHIVE_MAX:
        archive[k] = start


def swarm_walks(inst: Instance, checked: Sequence[str], options: HypothesisOptions, rng: random.Random,
                log: RunLog, progress: ProgressFn | None, starts: Sequence[Start] = ()) -> tuple[Path, str] | None:
    """Swarm random walks: the first one that breaks an invariant, or ``None``.

    Each walk draws among the enabled actions (then among their enabled
    instances and ``s.choose`` values), and leaves out a random subset of
    the actions (swarm testing): a walk with the timeout and abort actions
    left out runs the long successful interleavings that ownership bugs
    need, which uniform choice rarely does.  A walk whose remaining actions
    are all disabled falls back on the others, so it never stalls.

    Two things steer walks to what they have not seen yet.  Half of the
    walks start, not from the initial state, but from an archive of states:
    ``starts`` (the breadth-first phase's deepest states) and states a walk
    was first to reach.  A bug behind a run of specific choices is then
    reached a few choices at a time, from states that already made the
    first ones, instead of all at once from the start.  And half of the
    walks weigh each action by how rarely it has run so far, so an action
    that is seldom enabled is not drowned by the frequent ones.
    """
    by_action: dict[str, list[ActionInstance]] = {a: [] for a in inst.spec.actions}
    for ai in inst.action_instances:
        by_action[ai.action.name].append(ai)
    names = sorted(by_action)
    archive: list[Start] = list(starts)[:ARCHIVE_MAX]
    offered = len(archive)
    for _ in range(options.walk_budget):
        p = rng.choice(SWARM_P_DISABLED)
        left_out = {a for a in names if rng.random() < p}
        rare_first = rng.random() < 0.5
        path: Path
        if archive and rng.random() < 0.5:
            prefix, state = rng.choice(archive)
            path = list(prefix)
        else:
            state, path = inst.init_state, []
        log.walks += 1
        if progress is not None:
            now = time.monotonic()
            if now >= log.next_progress:
                log.next_progress = now + options.progress_every
                progress(Progress(now - log.started, len(log.states), examples=log.walks, steps=log.steps))
        for _step in range(options.steps):
            enabled = {a: [ai for ai in by_action[a] if inst.first_outcome(state, ai) is not None] for a in names}
            choices = [a for a in names if enabled[a] and a not in left_out] or [a for a in names if enabled[a]]
            if not choices:
                break
            for a in names:
                if enabled[a]:
                    log.enabled_in.setdefault(a, set()).add(state)
            if rare_first:
                action = rng.choices(choices, [1.0 / (1 + log.action_counts[a]) for a in choices])[0]
            else:
                action = rng.choice(choices)
            ai = rng.choice(enabled[action])
            succ = inst.run_with_chooser(state, ai, lambda opts: rng.choice(list(opts)))
            if succ is None:  # the drawn choices disable it: take the first outcome that fires
                succ = inst.first_outcome(state, ai)
            assert succ is not None
            inst.audit_step(state, ai, succ)  # run again in the same state: the same step, the same module data
            state = succ.state
            path.append((ai.index, succ.picks))
            log.steps += 1
            log.action_counts[action] += 1
            log.max_depth = max(log.max_depth, len(path))
            if state not in log.states:
                log.states.add(state)
                offered += 1
                _keep(archive, (list(path), state), offered, rng)
            bad = first_failing(inst, state, checked, succ.violations)
            if bad is not None:
                return path, bad
    return None


def _replay(inst: Instance, path: Path, checked: Sequence[str]) -> tuple[int, str] | None:
    """Where ``path`` first breaks an invariant (steps taken, invariant), or ``None`` (also if a step is disabled)."""
    state = inst.init_state
    for k, (index, picks) in enumerate(path):
        succ = inst.run_with_picks(state, inst.action_instances[index], picks)
        if succ is None:
            return None
        state = succ.state
        bad = first_failing(inst, state, checked, succ.violations)
        if bad is not None:
            return k + 1, bad
    return None


def shrink_path(inst: Instance, path: Path, invariant: str, checked: Sequence[str]) -> Path:
    """Delete steps (halves, quarters, ... single steps) while the path still breaks ``invariant`` first."""
    changed = True
    while changed:
        changed = False
        size = max(len(path) // 2, 1)
        while size >= 1:
            i = 0
            while i < len(path):
                candidate = path[:i] + path[i + size:]
                found = _replay(inst, candidate, checked)
                if found is not None and found[1] == invariant:
                    path = candidate[: found[0]]
                    changed = True
                else:
                    i += size
            size //= 2
    return path
