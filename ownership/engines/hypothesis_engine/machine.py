"""The generated ``RuleBasedStateMachine``: one rule per spec action, the spec's invariants as one Hypothesis invariant."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import hypothesis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ownership.core.progress import Progress, ProgressFn
from ownership.errors import Code, OwnershipError
from ownership.lang.elements import Element
from ownership.lang.instance import Instance, State
from ownership.lang.invariants import select_invariants
from ownership.lang.successors import ActionInstance, Successor

PICKS = "picks"
"""Name of the rule argument that carries the values of ``s.choose``."""


class InvariantViolation(AssertionError):  # noqa: N818 - a failed check, like AssertionError
    """Raised inside the machine when a spec invariant fails (Hypothesis then shrinks)."""

    def __init__(self, invariant: str, after: str) -> None:
        super().__init__(f"invariant {invariant} violated after {after}")
        self.invariant = invariant


@dataclass
class Covered:
    """What random runs covered: counts, the distinct states visited, and where each action was seen enabled."""

    examples: int = 0
    walks: int = 0
    steps: int = 0
    max_depth: int = 0
    states: set[State] = field(default_factory=set)
    action_counts: Counter[str] = field(default_factory=Counter)
    enabled_in: dict[str, set[State]] = field(default_factory=dict)
    """Per action, the visited states in which it was seen enabled (preconditions are asked lazily)."""


@dataclass
class RunLog(Covered):
    """What a run observed while it runs; lives as long as one engine call (no global state)."""

    last: Any = None  # the latest machine: after a failure, the shrunk example's
    started: float = field(default_factory=time.monotonic)
    next_progress: float = 0.0


def class_name(spec_name: str) -> str:
    """The generated machine's class name for a spec (``sglang-disagg`` gives ``SglangDisagg``)."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", spec_name) if part) or "Spec"


def rule_name(action: str, taken: set[str]) -> str:
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
        return shown_arg(self._inst, ai, k)

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
        self._inst.audit_step(self.state, ai, succ)  # run again in the same state: the same step, the same data
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


def shown_arg(inst: Instance, ai: ActionInstance, k: int) -> Any:
    """The ``k``-th argument of ``ai`` as the spec names it (``'B'``), or the int itself."""
    d = ai.action.arg_domains[k]
    text = inst.format_arg(d, ai.args[k])
    return ai.args[k] if text == str(ai.args[k]) else text


def rule_names(inst: Instance) -> dict[str, str]:
    """Each action's rule name on the generated machine (a reproduction calls these)."""
    taken: set[str] = set()
    return {act: rule_name(act, taken) for act in inst.spec.actions}


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
    names = rule_names(inst)
    taken = set(names.values())
    for act in spec.actions.values():
        ns[names[act.name]] = _make_rule(names[act.name], act.name, act.arg_names)
    inv_name = rule_name("invariant_holds", taken)
    ns[inv_name] = _make_invariants(inv_name)
    restart_name = rule_name("restart_when_done", taken)
    ns[restart_name] = _make_restart(restart_name)
    return type(class_name(spec.name), (SpecMachine,), ns)


def load_machine(spec_path: str, **params: int) -> type[SpecMachine]:
    """The machine for the spec file at ``spec_path`` with ``params``: what reproductions paste.

    A machine made here checks every invariant after each step itself, so a
    pasted reproduction raises at the step where the invariant fails.
    """
    from ownership.lang.loader import load_spec

    return machine_class(Instance(load_spec(spec_path), params))
