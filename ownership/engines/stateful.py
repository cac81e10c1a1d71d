"""Random interleavings with Hypothesis: the spec as a ``RuleBasedStateMachine``.

The explorer enumerates every state; at sizes where that is hopeless (16
requests, 256 pages) this engine samples long random interleavings instead
and lets Hypothesis shrink a failing one to a short, readable trace.

The machine is generated from the spec, not written by hand:

* one **rule per action**.  Its arguments are drawn among the action's
  instances that are *enabled* in the current state (the machine is the
  strategy's ``runner``), so no step is wasted on a disabled guard and there
  is no rule per (action, argument tuple);
* a **precondition** per rule: some instance of the action is enabled;
* the values of ``s.choose`` are drawn too and passed to the rule as
  ``picks``, so every printed step is plain data:
  ``state.decode_admit(r='B', picks=())`` — Hypothesis' own reproduction is
  pasteable Python (see :func:`load_machine`);
* one Hypothesis ``@invariant`` that checks the spec invariants in declaration
  order, so this engine names the same first violation as the explorer.

A failure is shrunk by Hypothesis, then rebuilt as the common
:class:`~ownership.core.trace.Trace` by replaying its steps through the
concrete semantics, like every other engine's counterexample.  A pass is
``BOUNDED_OK``: it says how many examples and steps ran and how often each
action ran (sampled :class:`~ownership.core.result.ActionCoverage`); random
testing never proves anything.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ownership.core.limits import stop_reason_of
from ownership.core.progress import Progress, ProgressFn
from ownership.core.replay import build_trace
from ownership.core.result import CheckResult, CoverageKind, Measure, Stats, StopReason, Verdict
from ownership.engines.coverage import action_records, with_coverage
from ownership.errors import Code, OwnershipError
from ownership.spec.elements import Element
from ownership.spec.instance import Instance, State
from ownership.spec.invariants import select_invariants
from ownership.spec.successors import ActionInstance, Successor

if TYPE_CHECKING:
    from ownership.session.settings import Settings

PICKS = "picks"
"""Name of the rule argument that carries the values of ``s.choose``."""


@dataclass(frozen=True)
class HypothesisOptions:
    """Options of the stateful (random) engine.

    ``seed`` fixes Hypothesis' random choices (a run without one prints the
    seed it used); ``derandomize`` derives the seed from the test itself, so
    every run gives the same result (CI mode).
    """

    max_examples: int = 200
    steps: int = 50
    seed: int | None = None
    derandomize: bool = False
    invariants: tuple[str, ...] | None = None
    progress_every: float = 1.0
    walks: int | None = None
    """Swarm random walks tried before Hypothesis' search (``None``: five per example; 0: none)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> HypothesisOptions:
        """The random engine's options for a check (the search limits of the other engines are refused)."""
        if settings.free or settings.max_states is not None or settings.max_depth is not None:
            raise OwnershipError(
                Code.BAD_OPTION, "the hypothesis engine takes --max-examples, --steps, --seed, --derandomize "
                "and --max-seconds (not --free, --max-states or --max-depth)"
            )
        options = cls(
            max_examples=settings.max_examples if settings.max_examples is not None else cls.max_examples,
            steps=settings.steps if settings.steps is not None else cls.steps,
            seed=settings.seed, derandomize=settings.derandomize, invariants=settings.invariants, walks=settings.walks,
        )
        options.validate()
        return options

    def validate(self) -> None:
        """Refuse counts out of range (OWN015), named by their flags."""
        from ownership import inputs

        inputs.check_count("--seed", self.seed, 0)
        inputs.check_count("--max-examples", self.max_examples, 1)
        inputs.check_count("--steps", self.steps, 1)
        inputs.check_count("--walks", self.walks, 0)

    @property
    def walk_budget(self) -> int:
        """How many random walks run before Hypothesis."""
        return 5 * self.max_examples if self.walks is None else self.walks


class InvariantViolation(AssertionError):  # noqa: N818 - a failed check, like AssertionError
    """Raised inside the machine when a spec invariant fails (Hypothesis then shrinks)."""

    def __init__(self, invariant: str, after: str) -> None:
        super().__init__(f"invariant {invariant} violated after {after}")
        self.invariant = invariant


@dataclass
class RunLog:
    """What a run observed; lives as long as one engine call (no global state)."""

    examples: int = 0
    walks: int = 0
    steps: int = 0
    max_depth: int = 0
    states: set[State] = field(default_factory=set)
    action_counts: Counter[str] = field(default_factory=Counter)
    enabled_in: dict[str, set[State]] = field(default_factory=dict)
    """Per action, the visited states in which it was seen enabled (preconditions are asked lazily)."""
    last: Any = None  # the latest machine: after a failure, the shrunk example's
    started: float = field(default_factory=time.monotonic)
    next_progress: float = 0.0


SWARM_P_DISABLED = (0.0, 0.25, 0.5)
"""Swarm testing: each walk leaves out each action with one of these probabilities (drawn per walk)."""


def _class_name(spec_name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", spec_name) if part) or "Spec"


def _rule_name(action: str, taken: set[str]) -> str:
    """A method name for the action's rule that does not shadow the machine's own methods."""
    name = action
    while hasattr(RuleBasedStateMachine, name) or name in taken:
        name = f"do_{name}"
    taken.add(name)
    return name


class SpecMachine(RuleBasedStateMachine):
    """Base of generated machines: the current spec state and the path that reached it."""

    _inst: Instance
    _checked: tuple[str, ...]
    _by_action: Mapping[str, Sequence[ActionInstance]]
    _log: RunLog | None = None
    _progress: ProgressFn | None = None
    _progress_every: float = 1.0
    _strategies: dict[tuple[Any, ...], st.SearchStrategy[Any]]

    def __init__(self) -> None:
        super().__init__()
        self.state: State = self._inst.init_state
        self.flags: tuple[str, ...] = ()
        self.path: list[tuple[int, tuple[Any, ...]]] = []
        self._enabled_at: State | None = None
        self._enabled: dict[str, list[ActionInstance]] = {}
        self._any: dict[str, bool] = {}
        self._pending: tuple[tuple[str, int], ActionInstance] | None = None
        self._drawn: tuple[State, ActionInstance, Successor] | None = None
        self.deepest = 0
        log = self._log
        if log is not None:
            log.examples += 1
            log.last = self
            log.states.add(self.state)

    # -- enabledness, computed once per state ----------------------------------
    def enabled(self, action: str) -> list[ActionInstance]:
        """The instances of ``action`` whose guard holds in the current state (computed when asked)."""
        if self._enabled_at is not self.state:
            self._enabled = {}
            self._any = {}
            self._enabled_at = self.state
        found = self._enabled.get(action)
        if found is None:
            inst, state = self._inst, self.state
            found = self._enabled[action] = [ai for ai in self._by_action[action] if inst.first_outcome(state, ai) is not None]
            self._any[action] = bool(found)
            if found and self._log is not None:
                self._log.enabled_in.setdefault(action, set()).add(state)
        return found

    def can_run(self, action: str) -> bool:
        """Whether some instance of ``action`` is enabled: a precondition, so it stops at the first one.

        Hypothesis checks preconditions of several rules per step; running
        every guard (an allocation scans the whole pool) only to answer yes
        or no dominated large instances.
        """
        if self._enabled_at is not self.state:
            self._enabled = {}
            self._any = {}
            self._enabled_at = self.state
        known = self._any.get(action)
        if known is None:
            inst, state = self._inst, self.state
            known = self._any[action] = any(inst.first_outcome(state, ai) is not None for ai in self._by_action[action])
            if known and self._log is not None:
                self._log.enabled_in.setdefault(action, set()).add(state)
        return known

    # -- argument strategies (the machine is Hypothesis' runner) ----------------
    def selected(self, action: str, draw: Callable[[st.SearchStrategy[Any]], Any]) -> ActionInstance:
        """The instance of ``action`` this step runs, drawn among the enabled ones.

        Hypothesis draws a rule's arguments one by one (sorted by name); the
        first of them draws the instance and the others reuse it, so every
        argument is a plain value in the printed step.
        """
        key = (action, len(self.path))
        if self._pending is None or self._pending[0] != key:
            self._pending = (key, draw(self.sampled(tuple(self.enabled(action)))))
        return self._pending[1]

    def sampled(self, options: tuple[Any, ...]) -> st.SearchStrategy[Any]:
        """``st.sampled_from(options)``, built once per distinct tuple (building one is not free)."""
        cache = self._strategies
        # Keyed by plain values: elements of one domain share a hash, and comparing an
        # element with an int is refused (OWN060).
        key = tuple((o._domain, o._i) if isinstance(o, Element) else o for o in options)
        strategy = cache.get(key)
        if strategy is None:
            strategy = cache[key] = st.sampled_from(options)
        return strategy

    def arg_value(self, ai: ActionInstance, k: int) -> Any:
        """The ``k``-th argument of ``ai`` as the spec names it (``'B'``), or the int itself."""
        return _arg_value(self._inst, ai, k)

    def _draw_picks(self, draw: Callable[[st.SearchStrategy[Any]], Any], ai: ActionInstance) -> tuple[Any, ...]:
        inst = self._inst
        succ = inst.run_with_chooser(self.state, ai, lambda options: draw(self.sampled(tuple(options))))
        if succ is None:  # the drawn choices disable the action: take the first that fires
            succ = inst.first_outcome(self.state, ai)
        assert succ is not None  # the precondition said ai is enabled
        self._drawn = (self.state, ai, succ)  # the rule body reuses this run
        return succ.picks

    # -- stepping ---------------------------------------------------------------
    def _resolve(self, action: str, kwargs: Mapping[str, Any]) -> ActionInstance:
        act = self._inst.spec.actions[action]
        try:
            args = tuple(self._inst.parse_arg(d, kwargs[p]) for p, d in zip(act.arg_names, act.arg_domains, strict=True))
            return self._inst.find_instance(action, args)
        except (KeyError, ValueError) as exc:
            raise OwnershipError(Code.BAD_OPTION, f"{action}({kwargs}): not an instance of the action ({exc})") from None

    def _step(self, action: str, kwargs: dict[str, Any]) -> None:
        picks = tuple(kwargs.pop(PICKS, ()))
        ai = self._resolve(action, kwargs)
        drawn = self._drawn
        if drawn is not None and drawn[0] is self.state and drawn[1] is ai and drawn[2].picks == picks:
            succ: Successor | None = drawn[2]
        else:
            succ = self._inst.run_with_picks(self.state, ai, picks)
        self._drawn = None
        if succ is None:
            raise OwnershipError(Code.BAD_OPTION, f"{ai.label} with picks {list(picks)} is not enabled in this state")
        self.state = succ.state
        self.flags = succ.violations  # invariants an event of this step is marked as violating
        self.path.append((ai.index, picks))
        log = self._log
        if log is None:
            # Run by hand (a pasted reproduction): check the invariants here,
            # since Hypothesis' runner is not there to do it.
            self._check_all(ai.label)
            return
        log.steps += 1
        log.action_counts[action] += 1
        log.max_depth = max(log.max_depth, len(self.path))
        self.deepest = max(self.deepest, len(self.path))
        log.states.add(self.state)
        if self._progress is not None:
            now = time.monotonic()
            if now >= log.next_progress:
                log.next_progress = now + self._progress_every
                self._progress(Progress(now - log.started, len(log.states), examples=log.walks + log.examples, steps=log.steps))

    def teardown(self) -> None:
        if self._log is not None:
            # Targeted search: prefer examples whose runs get deep.  Failure
            # paths (timeouts, aborts) end requests early, so depth rewards
            # the long successful interleavings ownership bugs need.
            hypothesis.target(float(self.deepest), label="depth of the deepest run")

    def _after(self) -> str:
        if not self.path:
            return "the initial state"
        ai = self._inst.action_instances[self.path[-1][0]]
        return f"step {len(self.path)} {ai.label}"

    def _check(self, name: str) -> None:
        if name in self.flags or not self._inst.holds(self.state, name):
            raise InvariantViolation(name, self._after())

    def _check_all(self, label: str) -> None:
        for name in self._checked:
            self._check(name)


def _arg_value(inst: Instance, ai: ActionInstance, k: int) -> Any:
    d = ai.action.arg_domains[k]
    text = inst.format_arg(d, ai.args[k])
    return ai.args[k] if text == str(ai.args[k]) else text


def _rule_names(inst: Instance) -> dict[str, str]:
    """Each action's rule name on the generated machine (a reproduction calls these)."""
    taken: set[str] = set()
    return {act: _rule_name(act, taken) for act in inst.spec.actions}


def _make_rule(name: str, action: str, arg_names: Sequence[str]) -> Callable[..., None]:
    def step(self: SpecMachine, **kwargs: Any) -> None:
        self._step(action, kwargs)

    step.__name__ = step.__qualname__ = name
    step.__doc__ = f"Run the spec's action {action} (arguments drawn among its enabled instances)."

    def argument(k: int) -> st.SearchStrategy[Any]:
        @st.composite
        def value(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Any:
            m: SpecMachine = draw(st.runner())
            return m.arg_value(m.selected(action, draw), k)

        return value()

    @st.composite
    def picks(draw: Callable[[st.SearchStrategy[Any]], Any]) -> tuple[Any, ...]:
        m: SpecMachine = draw(st.runner())
        return m._draw_picks(draw, m.selected(action, draw))

    args: dict[str, st.SearchStrategy[Any]] = {n: argument(k) for k, n in enumerate(arg_names)}
    args[PICKS] = picks()
    enabled = precondition(lambda self: self.can_run(action))
    return enabled(rule(**args)(step))  # type: ignore[call-overload]


def _make_restart(name: str) -> Callable[[SpecMachine], None]:
    def restart(self: SpecMachine) -> None:
        self.state = self._inst.init_state
        self.flags = ()
        self.path = []

    # Hypothesis prints a step by the function's __name__: it must be the
    # attribute the class has, or a pasted reproduction fails on that line.
    restart.__name__ = restart.__qualname__ = name
    restart.__doc__ = (
        "Nothing can run (every request is done, or stuck): start a fresh run from the initial state.\n\n"
        "Hypothesis cannot end an example early, and idling would spend the rest of it doing nothing; "
        "a fresh run keeps exploring.  A violation's trace starts at the last restart."
    )
    idle = precondition(lambda self: not any(self.can_run(a) for a in self._by_action))
    return idle(rule()(restart))  # type: ignore[no-any-return]


def _make_invariants(name: str) -> Callable[[SpecMachine], None]:
    def check(self: SpecMachine) -> None:
        self._check_all("")

    # One Hypothesis invariant that checks the spec's invariants in their
    # declaration order, as explore does, so both engines name the same
    # first violated invariant (Hypothesis orders separate invariants by name).
    check.__name__ = check.__qualname__ = name
    check.__doc__ = "The spec's invariants, in declaration order."
    return invariant()(check)


def machine_class(inst: Instance, invariants: Sequence[str] | None = None) -> type[SpecMachine]:
    """A ``RuleBasedStateMachine`` class for ``inst``: one rule per action, one invariant per spec invariant."""
    spec = inst.spec
    checked = tuple(inv.name for inv in select_invariants(inst, invariants))
    by_action: dict[str, list[ActionInstance]] = {a: [] for a in spec.actions}
    for ai in inst.action_instances:
        by_action[ai.action.name].append(ai)
    ns: dict[str, Any] = {
        "_inst": inst,
        "_checked": checked,
        "_by_action": by_action,
        "_strategies": {},  # per generated class, so per engine run
        "__doc__": f"Random interleavings of spec {spec.name} ({inst.describe_params()}).",
    }
    names = _rule_names(inst)
    taken = set(names.values())
    for act in spec.actions.values():
        ns[names[act.name]] = _make_rule(names[act.name], act.name, act.arg_names)
    inv_name = _rule_name("invariant_holds", taken)
    ns[inv_name] = _make_invariants(inv_name)
    restart_name = _rule_name("restart_when_done", taken)
    ns[restart_name] = _make_restart(restart_name)
    return type(_class_name(spec.name), (SpecMachine,), ns)


def load_machine(spec_path: str, **params: int) -> type[SpecMachine]:
    """The machine for the spec file at ``spec_path`` with ``params``: what reproductions paste.

    A machine made here checks every invariant after each step itself, so a
    pasted reproduction raises at the step where the invariant fails.
    """
    from ownership.spec.loader import load_spec

    return machine_class(Instance(load_spec(spec_path), params))


def _settings(options: HypothesisOptions) -> settings:
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


Path = list[tuple[int, tuple[Any, ...]]]
"""Steps as (action instance index, picks): what traces are rebuilt from."""


def _first_failing(inst: Instance, state: State, checked: Sequence[str], flags: Sequence[str] = ()) -> str | None:
    """The first invariant, in declaration order as explore checks them, that the step broke.

    ``flags`` are the invariants an event of the step is marked as violating.
    """
    for name in checked:
        if name in flags or not inst.holds(state, name):
            return name
    return None


def _walks(inst: Instance, checked: Sequence[str], options: HypothesisOptions, rng: random.Random,
           log: RunLog, progress: ProgressFn | None) -> tuple[Path, str] | None:
    """Swarm random walks from the initial state: the first one that breaks an invariant, or ``None``.

    Each walk draws uniformly among the enabled actions (then among their
    enabled instances and ``s.choose`` values), and leaves out a random
    subset of the actions (swarm testing): a walk with the timeout and abort
    actions left out runs the long successful interleavings that ownership
    bugs need, which uniform choice rarely does.  A walk whose remaining
    actions are all disabled falls back on the others, so it never stalls.
    These walks are cheap (no Hypothesis bookkeeping): they find the
    library's known bugs in a fraction of Hypothesis' time.
    """
    by_action: dict[str, list[ActionInstance]] = {a: [] for a in inst.spec.actions}
    for ai in inst.action_instances:
        by_action[ai.action.name].append(ai)
    names = sorted(by_action)
    for _ in range(options.walk_budget):
        p = rng.choice(SWARM_P_DISABLED)
        left_out = {a for a in names if rng.random() < p}
        state = inst.init_state
        path: Path = []
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
            action = rng.choice(choices)
            ai = rng.choice(enabled[action])
            succ = inst.run_with_chooser(state, ai, lambda opts: rng.choice(list(opts)))
            if succ is None:  # the drawn choices disable it: take the first outcome that fires
                succ = inst.first_outcome(state, ai)
            assert succ is not None
            state = succ.state
            path.append((ai.index, succ.picks))
            log.steps += 1
            log.action_counts[action] += 1
            log.max_depth = max(log.max_depth, len(path))
            log.states.add(state)
            bad = _first_failing(inst, state, checked, succ.violations)
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
        bad = _first_failing(inst, state, checked, succ.violations)
        if bad is not None:
            return k + 1, bad
    return None


def _shrink(inst: Instance, path: Path, invariant: str, checked: Sequence[str]) -> Path:
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


def _path_reproduction(inst: Instance, path: Path) -> str:
    """The pasteable reproduction of ``path``, in the form Hypothesis prints its steps."""
    rules = _rule_names(inst)
    cls = _class_name(inst.spec.name)
    params = ", ".join(f"{k}={v}" for k, v in inst.param_values.items())
    spec_path = build_trace(inst, [], engine="hypothesis", violation=None).spec_path
    lines = [
        "from ownership.engines.stateful import load_machine",
        f"{cls} = load_machine({spec_path!r}{', ' if params else ''}{params})",
        f"state = {cls}()",
    ]
    for index, picks in path:
        ai = inst.action_instances[index]
        kwargs = {n: _arg_value(inst, ai, k) for k, n in enumerate(ai.action.arg_names)}
        kwargs[PICKS] = tuple(picks)
        lines.append(f"state.{rules[ai.action.name]}({', '.join(f'{k}={kwargs[k]!r}' for k in sorted(kwargs))})")
    lines.append("state.teardown()")
    return "\n".join(lines)


def _reproduction(inst: Instance, exc: BaseException) -> str | None:
    """Hypothesis' printed steps (its exception notes), made runnable by a ``load_machine`` header."""
    steps = [
        ln for ln in getattr(exc, "__notes__", ()) if ln.startswith("state") and not ln.startswith("state.invariant_")
    ]
    if not steps:
        return None
    params = ", ".join(f"{k}={v}" for k, v in inst.param_values.items())
    cls = _class_name(inst.spec.name)
    path = build_trace(inst, [], engine="hypothesis", violation=None).spec_path
    head = [
        "from ownership.engines.stateful import load_machine",
        f"{cls} = load_machine({path!r}{', ' if params else ''}{params})",
    ]
    return "\n".join(head + steps)


def _enabled_counts(inst: Instance, log: RunLog) -> list[int]:
    """Per action, the visited states in which it was seen enabled.

    Hypothesis asks preconditions lazily, so for an action it was asked about
    the count is a lower bound; an action never seen enabled is looked for in
    every visited state, so a 0 means it is enabled in none of them.
    """
    counts = [len(log.enabled_in.get(a, ())) for a in inst.spec.actions]
    unseen = {a for a, n in zip(inst.spec.actions, counts, strict=True) if not n}
    if not unseen:
        return counts
    found: dict[str, int] = dict.fromkeys(unseen, 0)
    with inst.mode(recording=False):
        for state in log.states:
            hit = {ai.action.name for ai in inst.action_instances
                   if ai.action.name in unseen and inst.first_outcome(state, ai) is not None}
            for a in hit:
                found[a] += 1
    return [found.get(a, n) for a, n in zip(inst.spec.actions, counts, strict=True)]


def _machine_test(get_test: Callable[..., Callable[[], None]], machine: type[SpecMachine], options: HypothesisOptions) -> Callable[[], None]:
    """Hypothesis' test function for ``machine``.

    Examples run at least half of ``steps`` steps: Hypothesis otherwise
    favours very short examples, and ownership bugs need a request to go all
    the way through before another reuses its pages.  A spec that finishes
    early restarts (see ``_make_restart``); shrinking still removes every step the
    failure does not need.
    """
    try:
        return get_test(machine, settings=_settings(options), _min_steps=options.steps // 2)
    except TypeError:  # a Hypothesis without the private knob
        return get_test(machine, settings=_settings(options))


@contextlib.contextmanager
def _capturing(lines: list[str]) -> Iterator[None]:
    with with_reporter(lambda value: lines.extend(str(value).splitlines())):
        yield


def check_stateful(
    inst: Instance, options: HypothesisOptions = HypothesisOptions(), progress: ProgressFn | None = None
) -> CheckResult:
    """Run random interleavings of ``inst`` until an invariant fails or the examples run out."""
    from hypothesis.stateful import get_state_machine_test

    if options.max_examples < 1 or options.steps < 1:
        raise OwnershipError(Code.BAD_OPTION, "--max-examples and --steps must be at least 1")
    log = RunLog()
    base = machine_class(inst, options.invariants)
    machine = type(base.__name__, (base,), {"_log": log, "_progress": progress, "_progress_every": options.progress_every})
    test = _machine_test(get_state_machine_test, machine, options)
    # One seed drives the walks and Hypothesis, so `--seed S` reproduces the whole run;
    # --derandomize fixes both (the walks at seed 0).
    seed = options.seed
    if seed is None and not options.derandomize:
        seed = random.SystemRandom().randrange(2**63)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    lines: list[str] = []
    opts = {k: v for k, v in asdict(options).items() if k != "progress_every"}
    opts["walks"] = options.walk_budget
    checked = base._checked
    failure: BaseException | None = None
    interrupted: StopReason | None = None
    walked: tuple[Path, str] | None = None
    try:
        with inst.mode(recording=False):
            walked = _walks(inst, checked, options, random.Random(seed or 0), log, progress)
            if walked is None:
                with _capturing(lines):
                    test()
    except InvariantViolation as exc:
        failure = exc
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or the wall-clock limit
        interrupted = stop_reason_of(exc)
    except OwnershipError:
        raise
    except hypothesis.errors.InvalidDefinition as exc:
        raise OwnershipError(Code.SPEC_INVALID, f"spec {inst.spec.name}: {exc}", inst.spec.file) from None
    if seed is not None:
        opts["seed"] = seed
    elapsed = time.monotonic() - log.started
    actions = action_records(
        inst, _enabled_counts(inst, log), [log.action_counts.get(a, 0) for a in inst.spec.actions],
        Measure.SAMPLED, len(log.states), log.max_depth, False,
    )
    notes = [
        f"ran {log.walks:,} swarm random walks, then {log.examples:,} Hypothesis examples, of up to {options.steps} "
        f"steps ({log.steps:,} steps in all); Hypothesis counts only those that did not end early towards --max-examples"
    ]
    stats = Stats(states=len(log.states), transitions=log.steps, depth=log.max_depth, seconds=elapsed)
    common: dict[str, Any] = {
        "spec": inst.spec.name,
        "engine": "hypothesis",
        "params": dict(inst.param_values),
        "invariants": checked,
        "options": opts,
        "actions": actions,
        "coverage_kind": CoverageKind.SAMPLED,
    }
    if interrupted is not None:
        notes.append(f"inconclusive: {interrupted.value} after {log.examples:,} random examples")
        return with_coverage(CheckResult(
            verdict=Verdict.UNKNOWN, stop_reason=interrupted, stats=stats, notes=tuple(notes), **common
        ), inst, actions)
    if walked is not None:
        found, bad = walked
        shrunk = _shrink(inst, found, bad, checked)
        notes.insert(0, f"found by swarm random walk {log.walks:,} ({len(found)} steps), shrunk to {len(shrunk)} "
                        "steps by deleting steps")
        opts["found_by"] = "walk"
        return with_coverage(CheckResult(
            verdict=Verdict.VIOLATED, stop_reason=StopReason.VIOLATION, stats=stats, violated=bad,
            trace=build_trace(inst, shrunk, engine="hypothesis", violation=bad), notes=tuple(notes),
            reproduction=_path_reproduction(inst, shrunk), **common,
        ), inst, actions)
    if failure is None:
        return with_coverage(CheckResult(
            verdict=Verdict.BOUNDED_OK, stop_reason=StopReason.EXAMPLES_DONE, stats=stats, notes=tuple(notes), **common
        ), inst, actions)
    assert isinstance(failure, InvariantViolation)
    last: SpecMachine = log.last
    trace = build_trace(inst, last.path, engine="hypothesis", violation=failure.invariant)
    return with_coverage(CheckResult(
        verdict=Verdict.VIOLATED,
        stop_reason=StopReason.VIOLATION,
        stats=stats,
        violated=failure.invariant,
        trace=trace,
        notes=tuple(notes),
        reproduction=_reproduction(inst, failure),
        **common,
    ), inst, actions)
