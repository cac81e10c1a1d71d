"""The lock-step machine: each spec action's rule runs it on the spec and through the adapter, then compares what both show."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ownership.engines.hypothesis_engine.machine import InvariantViolation, RunLog, rule_name
from ownership.errors import Code, OwnershipError
from ownership.lang.elements import plain
from ownership.lang.evaluator import Evaluator
from ownership.lang.instance import Instance, State
from ownership.lang.successors import ActionInstance
from ownership.testing.adapter import Adapter, Rejected, source_of
from ownership.testing.boundary import BoundaryView


class FlaggedStep(InvariantViolation):
    """A step the spec itself flags as violating a checked invariant (``s.flag``, an event marked ``violates=``)."""

    def __init__(self, invariant: str, where: str) -> None:
        AssertionError.__init__(self, f"invariant {invariant} violated: {where}")
        self.invariant = invariant


class Disagreement(AssertionError):  # noqa: N818 - a failed check, like AssertionError
    """The implementation and the spec differ at a step (message: the step table)."""

    def __init__(self, headline: str, report: str) -> None:
        super().__init__(f"{headline}\n{report}")
        self.headline = headline
        self.report = report


@dataclass
class Row:
    """One line of the step table: the call, what the spec said, what the implementation did."""

    call: str
    spec: str
    impl: str


@dataclass
class ConformanceRun:
    """What one model-based test observed (its engine run log and the last example's step table)."""

    log: RunLog = field(default_factory=RunLog)
    last_rows: list[Row] = field(default_factory=list)


def _method_for(adapter_cls: type[Adapter], action: str) -> str | None:
    return action if callable(getattr(adapter_cls, action, None)) else None


def _diff(observed: Mapping[str, Any], expected: Mapping[str, Any], adapter: str) -> tuple[str, Any, Any] | None:
    if set(observed) != set(expected):
        missing = sorted(set(expected) ^ set(observed))
        raise OwnershipError(
            Code.ADAPTER_INVALID, f"{adapter}: observe() and expected() return different keys ({', '.join(map(str, missing))})"
        )
    for key in expected:
        if observed[key] != expected[key]:
            return key, observed[key], expected[key]
    return None


class ConformanceMachine(RuleBasedStateMachine):
    """Base of generated lock-step machines: the spec state, the adapter, the step table."""

    _inst: Instance
    _eval: Evaluator
    """The spec's semantics on a view of the machine's own, recording nothing (the steps are not traced)."""
    _adapter_cls: type[Adapter]
    _by_action: Mapping[str, Sequence[ActionInstance]]
    _checked: tuple[str, ...]
    _run: ConformanceRun | None = None
    _strategies: dict[tuple[Any, ...], st.SearchStrategy[Any]]

    def __init__(self) -> None:
        super().__init__()
        self.state: State = self._inst.init_state
        self.path: list[tuple[int, tuple[Any, ...]]] = []
        self.rows: list[Row] = []
        self._cands_at: State | None = None
        self._cands: dict[str, list[ActionInstance]] = {}
        self._pending: tuple[tuple[str, int], ActionInstance] | None = None
        self.adapter = self._adapter_cls()
        self.adapter.setup()
        if self._run is not None:
            self._run.log.examples += 1
            self._run.log.last = self
            self._run.last_rows = self.rows
        self._compare("initial state")

    def teardown(self) -> None:
        self.adapter.teardown()

    def candidates(self, action: str) -> list[ActionInstance]:
        """Instances to try: the enabled ones, plus every one for a probed action."""
        if self._cands_at is not self.state:
            ev, state = self._eval, self.state
            probed = self._adapter_cls.probe_disabled
            self._cands = {
                a: list(ais) if a in probed else [ai for ai in ais if ev.first_outcome(state, ai) is not None]
                for a, ais in self._by_action.items()
            }
            self._cands_at = state
        return self._cands[action]

    def selected(self, action: str, draw: Callable[[st.SearchStrategy[Any]], Any]) -> ActionInstance:
        key = (action, len(self.rows))
        if self._pending is None or self._pending[0] != key:
            options = tuple(self.candidates(action))
            strategy = self._strategies.get(options)
            if strategy is None:
                strategy = self._strategies[options] = st.sampled_from(options)
            self._pending = (key, draw(strategy))
        return self._pending[1]

    def arg_value(self, ai: ActionInstance, k: int) -> Any:
        d = ai.action.arg_domains[k]
        text = self._inst.format_arg(d, ai.args[k])
        return ai.args[k] if text == str(ai.args[k]) else text

    # -- one lock step ------------------------------------------------------------
    def _fail(self, headline: str) -> None:
        raise Disagreement(headline, step_table(self.rows))

    def _step(self, action: str, kwargs: Mapping[str, Any]) -> None:
        inst = self._inst
        act = inst.spec.actions[action]
        if act.arg_names:
            args = tuple(inst.parse_arg(d, kwargs[n]) for n, d in zip(act.arg_names, act.arg_domains, strict=True))
            ai = inst.find_instance(action, args)
        else:
            ai = self._by_action[action][0]
        method = getattr(self.adapter, action)
        allowed = self._eval.first_outcome(self.state, ai)
        refused: tuple[type[BaseException], ...] = (Rejected, *self._adapter_cls.rejected)
        row = Row(ai.label, "allowed" if allowed is not None else "forbidden (guard false)", "")
        self.rows.append(row)
        if allowed is None:
            try:
                method(*ai.args)
            except refused as exc:
                row.impl = f"refused ({type(exc).__name__})"
            except Exception as exc:  # noqa: BLE001 - the implementation's own failure is the finding
                row.impl = f"raised {type(exc).__name__}: {exc}"
                self._fail(f"step {len(self.rows)} {ai.label}: the implementation raised {type(exc).__name__}: {exc}")
            else:
                row.impl = "accepted"
                self._fail(f"step {len(self.rows)} {ai.label}: the spec forbids it here, the implementation accepted it")
            self._compare(ai.label)
            return
        try:
            picks = method(*ai.args)
        except refused as exc:
            row.impl = f"refused ({type(exc).__name__}: {exc})"
            self._fail(f"step {len(self.rows)} {ai.label}: the spec allows it here, the implementation refused it")
            return
        except Exception as exc:  # noqa: BLE001
            row.impl = f"raised {type(exc).__name__}: {exc}"
            self._fail(f"step {len(self.rows)} {ai.label}: the implementation raised {type(exc).__name__}: {exc}")
            return
        chosen = tuple(picks) if picks is not None else ()
        succ = self._eval.run_with_picks(self.state, ai, chosen)
        if succ is None:
            if not chosen and allowed.picks:
                raise OwnershipError(
                    Code.ADAPTER_INVALID,
                    f"{self._adapter_cls.__name__}.{action} returned no picks, but the spec's action chooses "
                    f"{len(allowed.picks)} value(s): return the values the implementation picked",
                )
            row.impl = f"picked {list(chosen)}"
            self._fail(f"step {len(self.rows)} {ai.label}: the implementation picked {list(chosen)}, which the spec does not allow here")
            return
        row.impl = "done" + (f", picked {list(chosen)}" if chosen else "")
        self.state = succ.state
        self.path.append((ai.index, chosen))
        if self._run is not None:
            log = self._run.log
            log.steps += 1
            log.action_counts[action] += 1
            log.max_depth = max(log.max_depth, len(self.path))
            log.states.add(self.state)
        self._compare(ai.label)
        self._check_flags(ai, succ.violations)

    def _check_flags(self, ai: ActionInstance, flags: Sequence[str]) -> None:
        """A step the spec flags (``s.flag``, ``emit(..., violates=X)``) violates that invariant, as in every engine.

        The implementation did what the spec allows, so the two agree; but the
        spec itself says this step breaks one of its checked invariants, which
        makes the run a failure, never a pass.
        """
        bad = next((name for name in self._checked if name in flags), None)
        if bad is None:
            return
        doc = self._inst.spec.invariants[bad].doc
        self.rows[-1].spec += f"; flags a violation of {bad}"
        raise FlaggedStep(bad, f"step {len(self.rows)} {ai.label}: the spec flags this step as a violation of {bad}"
                               + (f" ({doc})" if doc else ""))

    def _compare(self, after: str) -> None:
        view = self._eval.at(self.state)
        # The implementation names pages and requests by number: compare the spec's elements as indices.
        expected = plain(self.adapter.expected(BoundaryView(view)))
        observed = self.adapter.observe()
        d = _diff(observed, expected, self._adapter_cls.__name__)
        if d is not None:
            key, got, want = d
            if self.rows:
                self.rows[-1].impl += f"; {key} = {got!r}, spec says {want!r}"
            self._fail(f"after {after}: {key} is {got!r} in the implementation, the spec says {want!r}")


def step_table(rows: Sequence[Row]) -> str:
    """The step table shown with a disagreement: spec and implementation side by side."""
    if not rows:
        return "  (before any step)"
    w = max(len(r.call) for r in rows)
    ws = max(len(r.spec) for r in rows)
    lines = [f"  {'#':>3}  {'step':<{w}}  {'spec':<{ws}}  implementation"]
    lines += [f"  {i:>3}  {r.call:<{w}}  {r.spec:<{ws}}  {r.impl}" for i, r in enumerate(rows, start=1)]
    return "\n".join(lines)


def _make_rule(name: str, action: str, arg_names: Sequence[str]) -> Callable[..., None]:
    def step(self: ConformanceMachine, **kwargs: Any) -> None:
        self._step(action, kwargs)

    step.__name__ = step.__qualname__ = name

    def argument(k: int) -> st.SearchStrategy[Any]:
        @st.composite
        def value(draw: Callable[[st.SearchStrategy[Any]], Any]) -> Any:
            m: ConformanceMachine = draw(st.runner())
            return m.arg_value(m.selected(action, draw), k)

        return value()

    args = {n: argument(k) for k, n in enumerate(arg_names)}
    return precondition(lambda self: bool(self.candidates(action)))(rule(**args)(step))  # type: ignore[call-overload]


@precondition(lambda self: not any(self.candidates(a) for a in self._by_action))
@rule()
def _restart(self: ConformanceMachine) -> None:
    """Nothing can run: start again with a fresh implementation and the spec's initial state."""
    self.adapter.teardown()
    self.adapter = self._adapter_cls()
    self.adapter.setup()
    self.state = self._inst.init_state
    self.path = []
    self.rows.append(Row("(restart)", "initial state", "fresh implementation"))
    self._compare("restart")


def _make_invariant(name: str) -> Callable[[ConformanceMachine], None]:
    def check(self: ConformanceMachine) -> None:
        if not self._eval.holds(self.state, name):
            raise InvariantViolation(name, f"step {len(self.rows)} (the spec itself is inconsistent)")

    check.__name__ = check.__qualname__ = f"spec_invariant_{name}"
    return invariant()(check)


def conformance_machine(inst: Instance, adapter_cls: type[Adapter]) -> type[ConformanceMachine]:
    """The lock-step ``RuleBasedStateMachine`` class for ``inst`` and ``adapter_cls``."""
    spec = inst.spec
    missing = [a for a in spec.actions if _method_for(adapter_cls, a) is None]
    if missing:
        raise OwnershipError(
            Code.ADAPTER_INVALID,
            f"{adapter_cls.__name__} has no method for spec action(s) {', '.join(missing)} of {spec.name}",
            source_of(adapter_cls),
        )
    unknown = sorted(set(adapter_cls.probe_disabled) - set(spec.actions))
    if unknown:
        raise OwnershipError(Code.ADAPTER_INVALID, f"{adapter_cls.__name__}.probe_disabled names unknown action(s) {', '.join(unknown)}")
    by_action: dict[str, list[ActionInstance]] = {a: [] for a in spec.actions}
    for ai in inst.action_instances:
        by_action[ai.action.name].append(ai)
    ns: dict[str, Any] = {
        "_inst": inst,
        "_eval": inst.evaluator(recording=False),
        "_adapter_cls": adapter_cls,
        "_by_action": by_action,
        "_checked": tuple(spec.invariants),
        "_strategies": {},
        "__doc__": f"{adapter_cls.__name__} against spec {spec.name} in lock step.",
    }
    taken = set(dir(ConformanceMachine))
    for act in spec.actions.values():
        method = rule_name(act.name, taken)
        ns[method] = _make_rule(method, act.name, act.arg_names)
    for name in spec.invariants:
        ns[rule_name(f"spec_invariant_{name}", taken)] = _make_invariant(name)
    ns[rule_name("restart_when_done", taken)] = _restart
    return type(f"{adapter_cls.__name__}Conformance", (ConformanceMachine,), ns)
