"""Model-based testing: drive a spec and an implementation in lock step.

An :class:`Adapter` binds each spec action to a call on the implementation
and says how to read back what can be observed (free-list size, page owners,
refcounts).  Hypothesis picks actions among those the spec allows; after
every step the implementation's observation must equal the one computed from
the spec's state.  The first step where they differ fails, is shrunk, and is
shown with both sides::

    class MyAdapter(Adapter):
        spec = "my_allocator_spec.py"
        rejected = (OutOfPages,)

        def setup(self):
            self.impl = MyAllocator(num_pages=4)

        def allocate(self, req, n):  # same name and arguments as the spec action
            return self.impl.allocate(req, n)  # the pages it picked = the spec's s.choose values

        def observe(self):
            return {"free": self.impl.num_free()}

        def expected(self, s):
            return {"free": sum(s.free[p] for p in s.all(Page))}

    def test_my_allocator():
        assert_conforms(MyAdapter)

See ``docs/testing-your-allocator.md`` for the whole contract.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import hypothesis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ownership.core.replay import build_trace
from ownership.core.result import CheckResult, CoverageKind, Measure, Stats, StopReason, Verdict
from ownership.engines.coverage import action_records
from ownership.engines.hypothesis_engine.engine import capturing, hypothesis_settings
from ownership.engines.hypothesis_engine.machine import InvariantViolation, RunLog, rule_name
from ownership.engines.hypothesis_engine.options import HypothesisOptions
from ownership.errors import Code, OwnershipError
from ownership.spec.elements import plain
from ownership.spec.instance import ActionInstance, Instance, State
from ownership.spec.model import Spec


class Rejected(Exception):  # noqa: N818 - reads as "the implementation rejected it"
    """Raise from an adapter method to say the implementation refused the call."""


class Adapter:
    """Binds a spec's actions to an implementation; subclass it (see the module docstring).

    For every spec action ``name(args...)`` define a method ``name(self, *args)``
    taking the element indices (ints).  It performs the action on the
    implementation and returns ``None``, or the values the implementation
    picked where the spec calls ``s.choose`` (e.g. the pages it allocated, as
    spec page indices), in the order of those calls.
    """

    spec: ClassVar[str | Spec | None] = None
    """The spec: a path (relative to this adapter's file, else the working directory) or a Spec."""
    params: ClassVar[Mapping[str, int]] = {}
    """Instance overrides (parameters of the spec)."""
    rejected: ClassVar[tuple[type[BaseException], ...]] = ()
    """Implementation exceptions that mean "refused" (besides :class:`Rejected`)."""
    probe_disabled: ClassVar[frozenset[str]] = frozenset()
    """Actions also sent when the spec's guard is false: the implementation must then refuse."""

    def setup(self) -> None:
        """Build a fresh implementation (called at the start of every example)."""

    def teardown(self) -> None:
        """Release the implementation (called at the end of every example)."""

    def observe(self) -> Mapping[str, Any]:
        """The implementation's observable state."""
        raise NotImplementedError(f"{type(self).__name__} must define observe()")

    def expected(self, s: Any) -> Mapping[str, Any]:
        """The same keys as :meth:`observe`, computed from the spec state ``s`` (read it only)."""
        raise NotImplementedError(f"{type(self).__name__} must define expected(s)")


@dataclass(frozen=True)
class MBTOptions:
    """Options of a model-based test run (see :class:`~ownership.engines.hypothesis_engine.options.HypothesisOptions`)."""

    max_examples: int = 100
    steps: int = 30
    seed: int | None = None
    derandomize: bool = False


class Disagreement(AssertionError):  # noqa: N818 - a failed check, like AssertionError
    """The implementation and the spec differ at a step (message: the step table)."""

    def __init__(self, headline: str, report: str) -> None:
        super().__init__(f"{headline}\n{report}")
        self.headline = headline
        self.report = report


@dataclass
class _Row:
    call: str
    spec: str
    impl: str


@dataclass
class _Run:
    log: RunLog = field(default_factory=RunLog)
    last_rows: list[_Row] = field(default_factory=list)


def _source_of(cls: type) -> str | None:
    try:
        return inspect.getsourcefile(cls)
    except (TypeError, OSError):  # defined in a module that is not importable by name
        return None


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
    _adapter_cls: type[Adapter]
    _by_action: Mapping[str, Sequence[ActionInstance]]
    _checked: tuple[str, ...]
    _run: _Run | None = None
    _strategies: dict[tuple[Any, ...], st.SearchStrategy[Any]]

    def __init__(self) -> None:
        super().__init__()
        self.state: State = self._inst.init_state
        self.path: list[tuple[int, tuple[Any, ...]]] = []
        self.rows: list[_Row] = []
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
            inst, state = self._inst, self.state
            probed = self._adapter_cls.probe_disabled
            self._cands = {
                a: list(ais) if a in probed else [ai for ai in ais if inst.first_outcome(state, ai) is not None]
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
        raise Disagreement(headline, _table(self.rows))

    def _step(self, action: str, kwargs: Mapping[str, Any]) -> None:
        inst = self._inst
        act = inst.spec.actions[action]
        if act.arg_names:
            args = tuple(inst.parse_arg(d, kwargs[n]) for n, d in zip(act.arg_names, act.arg_domains, strict=True))
            ai = inst.find_instance(action, args)
        else:
            ai = self._by_action[action][0]
        method = getattr(self.adapter, action)
        allowed = inst.first_outcome(self.state, ai)
        refused: tuple[type[BaseException], ...] = (Rejected, *self._adapter_cls.rejected)
        row = _Row(ai.label, "allowed" if allowed is not None else "forbidden (guard false)", "")
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
        succ = inst.run_with_picks(self.state, ai, chosen)
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

    def _compare(self, after: str) -> None:
        view = self._inst.view
        view._cells[:] = self.state
        # The implementation names pages and requests by number: compare the spec's elements as indices.
        expected = plain(self.adapter.expected(view))
        observed = self.adapter.observe()
        d = _diff(observed, expected, self._adapter_cls.__name__)
        if d is not None:
            key, got, want = d
            if self.rows:
                self.rows[-1].impl += f"; {key} = {got!r}, spec says {want!r}"
            self._fail(f"after {after}: {key} is {got!r} in the implementation, the spec says {want!r}")


def _table(rows: Sequence[_Row]) -> str:
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
    self.rows.append(_Row("(restart)", "initial state", "fresh implementation"))
    self._compare("restart")


def _make_invariant(name: str) -> Callable[[ConformanceMachine], None]:
    def check(self: ConformanceMachine) -> None:
        if not self._inst.holds(self.state, name):
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
            _source_of(adapter_cls),
        )
    unknown = sorted(set(adapter_cls.probe_disabled) - set(spec.actions))
    if unknown:
        raise OwnershipError(Code.ADAPTER_INVALID, f"{adapter_cls.__name__}.probe_disabled names unknown action(s) {', '.join(unknown)}")
    by_action: dict[str, list[ActionInstance]] = {a: [] for a in spec.actions}
    for ai in inst.action_instances:
        by_action[ai.action.name].append(ai)
    ns: dict[str, Any] = {
        "_inst": inst,
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


def _resolve_spec(adapter_cls: type[Adapter], spec: str | Path | Spec | None) -> Spec:
    from ownership.spec.loader import load_spec

    target = spec if spec is not None else adapter_cls.spec
    if target is None:
        raise OwnershipError(Code.ADAPTER_INVALID, f"{adapter_cls.__name__} names no spec: set `spec = \"path/to/spec.py\"`")
    if isinstance(target, Spec):
        return target
    path = Path(target)
    if not path.is_absolute() and spec is None:
        # Relative to the file of the class that set `spec` (a subclass may live elsewhere).
        owner = next((c for c in adapter_cls.__mro__ if "spec" in vars(c)), adapter_cls)
        source = _source_of(owner)
        if source is not None and (Path(source).parent / path).exists():
            path = Path(source).parent / path
    return load_spec(path)


def load_adapter(ref: str) -> type[Adapter]:
    """``module:Class`` or ``path/to/file.py:Class`` (relative to the working directory)."""
    module_ref, sep, cls_name = ref.rpartition(":")
    if not sep or not module_ref or not cls_name:
        raise OwnershipError(Code.ADAPTER_LOAD, f"--adapter {ref!r}: use module:Class or path/to/file.py:Class")
    try:
        if module_ref.endswith(".py"):
            path = Path(module_ref)
            if not path.exists():
                raise OwnershipError(Code.ADAPTER_LOAD, f"adapter file {module_ref} does not exist")
            name = f"ownership_adapter_{abs(hash(path.resolve()))}"
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            sys.path.insert(0, str(path.resolve().parent))
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_ref)
    except OwnershipError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code
        raise OwnershipError(Code.ADAPTER_LOAD, f"importing {module_ref} raised {type(exc).__name__}: {exc}") from None
    cls = getattr(module, cls_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        raise OwnershipError(Code.ADAPTER_LOAD, f"{module_ref} has no Adapter subclass named {cls_name}")
    return cls


def run_mbt(
    adapter_cls: type[Adapter],
    options: MBTOptions = MBTOptions(),
    *,
    spec: str | Path | Spec | None = None,
    params: Mapping[str, int] | None = None,
) -> CheckResult:
    """Test the implementation behind ``adapter_cls`` against its spec; VIOLATED on the first disagreement."""
    from hypothesis.stateful import get_state_machine_test

    the_spec = _resolve_spec(adapter_cls, spec)
    inst = Instance(the_spec, {**adapter_cls.params, **(params or {})})
    run = _Run()
    base = conformance_machine(inst, adapter_cls)
    machine = type(base.__name__, (base,), {"_run": run})
    hopts = HypothesisOptions(max_examples=options.max_examples, steps=options.steps, derandomize=options.derandomize)
    test = get_state_machine_test(machine, settings=hypothesis_settings(hopts))
    if options.seed is not None:
        test = hypothesis.seed(options.seed)(test)
    lines: list[str] = []
    failure: BaseException | None = None
    try:
        with inst.mode(recording=False), capturing(lines):
            test()
    except (Disagreement, InvariantViolation) as exc:
        failure = exc
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
    if failure is None:
        return CheckResult(verdict=Verdict.BOUNDED_OK, stop_reason=StopReason.EXAMPLES_DONE, stats=stats, notes=tuple(notes), **common)
    last: ConformanceMachine = log.last
    trace = build_trace(inst, last.path, engine="mbt", violation=None)
    if isinstance(failure, Disagreement):
        headline, table = failure.headline, failure.report
        violated = "conformance"
    else:
        assert isinstance(failure, InvariantViolation)
        headline, table, violated = str(failure), _table(last.rows), failure.invariant
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
    """Run :func:`run_mbt` (keyword arguments: :class:`MBTOptions` fields, ``spec``, ``params``); fail on disagreement."""
    spec = kwargs.pop("spec", None)
    params = kwargs.pop("params", None)
    result = run_mbt(adapter_cls, MBTOptions(**kwargs), spec=spec, params=params)
    if result.verdict is Verdict.VIOLATED:
        raise AssertionError(f"{result.notes[0]}\n{result.reproduction}\nreproduce with seed={result.options.get('seed')}")
    return result
