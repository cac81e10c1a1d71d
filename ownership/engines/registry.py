"""The engines a check can run, by name, and what each can decide.

One registry: ``--engine NAME``, the pytest plugin's ``--ownership-engine``,
``ownership.testing`` and the session all look engines up here, so adding
an engine is its module and one line of :data:`ENGINES`.  Each engine owns
its options type: ``from_settings(settings)`` builds it from a check's
:class:`~ownership.session.settings.Settings` (refusing what the engine
cannot honour) and ``validate()`` refuses values out of range.

Engine modules are imported when an engine runs or its options are built,
so listing or loading specs never pays for Z3 or Hypothesis.

``all`` is :data:`ALL`: which engines it runs, which one is the reference
whose result is reported, and that the others are compared with it by
:func:`ownership.engines.relate` (a disagreement is OWN040).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from ownership import inputs
from ownership.core.progress import ProgressFn
from ownership.core.result import CheckResult, CoverageKind
from ownership.core.trace import TraceKind
from ownership.engines.schema import LIMITS, PROOF, RANDOM, Capabilities, Kind, Option
from ownership.errors import Code, OwnershipError, SpecWarning
from ownership.kernel import KERNELS, STORAGES
from ownership.lang.instance import Instance

if TYPE_CHECKING:
    from ownership.session.settings import Settings


class EngineOptions(Protocol):
    """An engine's frozen options: built from a check's settings, checked for values out of range."""

    @classmethod
    def from_settings(cls, settings: Settings) -> EngineOptions: ...

    def validate(self) -> None: ...


class Engine(Protocol):
    """A checking strategy: a name, what a pass from it means, its options, and how it runs."""

    @property
    def name(self) -> str:
        """The name ``--engine`` takes."""
        ...

    @property
    def decides(self) -> CoverageKind:
        """What a verdict without a violation can claim (exhaustive, bounded, proof, sampled)."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What it can do: shortest counterexamples, deadlocks, liveness, several workers."""
        ...

    @property
    def options_schema(self) -> tuple[Option, ...]:
        """The options it takes beyond those every engine shares: its flags, defaults and help."""
        ...

    @property
    def claim_flags(self) -> tuple[str, ...] | None:
        """Settings fields whose flags alone name its counterexample folder (``None``: every search flag)."""
        ...

    def options_types(self) -> tuple[type[EngineOptions], ...]:
        """The options types it runs with (explore has two: with and without ``--free``)."""
        ...

    def options(self, settings: Settings) -> EngineOptions:
        """Its options for ``settings``; what it cannot honour is OWN013."""
        ...

    def run(self, inst: Instance, options: Any, progress: ProgressFn | None) -> CheckResult:
        """Check ``inst``."""
        ...


def _load(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class ModuleEngine:
    """An engine that is one function and one options type of an engine module, imported on first use."""

    name: str
    decides: CoverageKind
    runner: str
    """``module:function`` taking ``(inst, options, progress)``."""
    options_type: str
    """``module:Class`` with ``from_settings`` and ``validate``."""
    capabilities: Capabilities = Capabilities()
    options_schema: tuple[Option, ...] = ()
    claim_flags: tuple[str, ...] | None = None

    def options_types(self) -> tuple[type[EngineOptions], ...]:
        return (_load(self.options_type),)

    def options(self, settings: Settings) -> EngineOptions:
        result: EngineOptions = _load(self.options_type).from_settings(settings)
        return result

    def run(self, inst: Instance, options: Any, progress: ProgressFn | None) -> CheckResult:
        return self.undecided(inst, options, self.stamped(_load(self.runner)(inst, options, progress)))

    def undecided(self, inst: Instance, options: Any, result: CheckResult) -> CheckResult:
        """``result`` with a warning (OWN115) per temporal property it checked though this engine cannot decide it."""
        if self.capabilities.liveness or not inst.spec.properties:
            return result
        names = getattr(options, "invariants", None)
        props = [p for p in inst.spec.properties.values() if names is None or p.name in names]
        deciders = " or ".join(f"--engine {e.name}" for e in ENGINES.values() if e.capabilities.liveness)
        warnings = [SpecWarning(Code.PROPERTY_UNDECIDED, f"{self.name} does not decide temporal properties: "
                                f"{p.name} was not checked (run {deciders})", p.file, p.line, p.name) for p in props]
        return replace(result, warnings=(*result.warnings, *warnings)) if warnings else result

    def stamped(self, result: CheckResult) -> CheckResult:
        """``result`` with what the engine's capabilities promise of its counterexample."""
        # An optimised free parameter's trace is the extreme value's, not a promise about its length.
        # A lasso is short, not shortest: its loop is built to be fair, not minimal.
        if (result.trace is None or self.capabilities.shortest is None or result.engine != self.name
                or result.extremum is not None or result.trace.kind is TraceKind.LASSO):
            return result
        return replace(result, shortest=self.capabilities.shortest)


@dataclass(frozen=True)
class ExploreEngine(ModuleEngine):
    """The explorer: breadth-first over concrete parameters, or over Z3 terms for ``--free`` ones."""

    free_runner: str = "ownership.engines.paramexplore:explore_params"
    free_options_type: str = "ownership.engines.paramexplore:ParamOptions"

    def options_types(self) -> tuple[type[EngineOptions], ...]:
        return (_load(self.options_type), _load(self.free_options_type))

    def options(self, settings: Settings) -> EngineOptions:
        if settings.option("free") or settings.option("minimize") or settings.option("maximize"):
            result: EngineOptions = _load(self.free_options_type).from_settings(settings)
            return result
        return super().options(settings)

    def run(self, inst: Instance, options: Any, progress: ProgressFn | None) -> CheckResult:
        if isinstance(options, _load(self.free_options_type)):
            return self.stamped(_load(self.free_runner)(inst, options, progress))
        return super().run(inst, options, progress)


FREE_OPTIONS = (
    Option("free", "--free", Kind.EACH, (), help="Check every value of this parameter at once.", metavar="NAME",
           value_type=str, commands=("check", "prove")),
    Option("where", "--where", Kind.EACH, (), help="Constraint on free parameters: 'prompt_tokens <= context_len'.",
           metavar="EXPR", value_type=str, commands=("check", "prove")),
    Option("minimize", "--minimize", help="The smallest value of a free parameter that violates.", metavar="NAME",
           value_type=str),
    Option("maximize", "--maximize", help="The largest value of a free parameter that violates.", metavar="NAME",
           value_type=str),
)
"""The options over free parameters, shared by the engines that search them symbolically."""

SOLVER_TIMEOUT = Option("solver_timeout", "--solver-timeout", help="bmc, prove: limit per solver call.",
                        metavar="SECONDS", panel=LIMITS, value_type=float, minimum=0, commands=("check", "prove"))

WORKERS = Option("workers", "--workers", names_folder=False, metavar="auto|N", value_type=str,
                 parse=inputs.parse_workers, cli_default="auto",
                 help="Worker processes: explore's (auto: every core past 20,000 states) or the random swarm's "
                      "(auto: 1).")
RAY = Option("ray", "--ray", names_folder=False, metavar="auto|ADDRESS", value_type=str,
             help="explore, hypothesis: the workers as Ray actors (the ray extra).")
"""Parallel runs, for the engines whose capabilities say ``parallel``."""

DEADLOCK = Option("deadlock", "--deadlock", Kind.ON, False, metavar="", value_type=bool, commands=("check", "prove"),
                  help="Also report states with work pending and nothing enabled.")
"""Deadlocks, which every engine whose capabilities say ``deadlock`` looks for."""

EXPLORE_OPTIONS = (
    DEADLOCK,
    Option("kernel", "--kernel", default="auto", metavar="auto|compiled|python", names_folder=False, value_type=str,
           choices=KERNELS,
           help="explore: compiled (no symmetry; same states, faster), python, or auto (default: compiled past "
                "20,000 states)."),
    Option("storage", "--storage", default="exact", metavar="exact|fingerprint", names_folder=False, value_type=str,
           choices=STORAGES,
           help="Compiled kernel: every state (default), or 64-bit fingerprints (13 bytes a state; the verdict gives "
                "the odds of a collision)."),
    WORKERS,
    RAY,
)

RANDOM_OPTIONS = (
    Option("max_examples", "--max-examples", help="Random examples (default 200).", panel=RANDOM, minimum=1),
    Option("steps", "--steps", help="Steps per example (default 50).", panel=RANDOM, minimum=1),
    Option("walks", "--walks", help="Swarm random walks first (default 5 per example).", panel=RANDOM, minimum=0),
    Option("derandomize", "--derandomize", Kind.ON, False, help="The same examples on every run (CI).", metavar="",
           panel=RANDOM, value_type=bool),
    Option("seed", "--seed", Kind.SEED, help="Random seed (default: drawn, and printed).", panel=RANDOM, minimum=0),
    WORKERS,
    RAY,
    DEADLOCK,
)

PROOF_OPTIONS = (
    Option("max_k", "--max-k", default=2, help="Largest k for k-induction.", metavar="K", panel=PROOF, minimum=0,
           commands=("prove",)),
    Option("spacer", "--no-spacer", Kind.OFF, True, help="Then try Z3's Spacer (IC3/PDR).", metavar="", panel=PROOF,
           value_type=bool, commands=("prove",)),
    Option("spacer_timeout", "--spacer-timeout", default=600.0, help="Limit for Spacer (reached: exit 3).",
           metavar="SECONDS", panel=PROOF, value_type=float, minimum=0, commands=("prove",)),
    Option("reach_states", "--reach-states", default=200_000,
           help="Then check up to N reachable states as the invariant (0: never).", panel=PROOF, minimum=0,
           commands=("prove",)),
)

ENGINES: Mapping[str, Engine] = MappingProxyType({
    "explore": ExploreEngine("explore", CoverageKind.EXHAUSTIVE, "ownership.engines.explore:explore",
                             "ownership.engines.explore:ExploreOptions",
                             Capabilities(shortest="breadth-first", deadlock=True, liveness=True, parallel=True),
                             (*EXPLORE_OPTIONS, *FREE_OPTIONS)),
    # bmc asks depth 0, 1, 2, ... in turn (a breadth-first prefix first): its first violation is a shortest one.
    "bmc": ModuleEngine("bmc", CoverageKind.BOUNDED, "ownership.engines.bmc:bmc", "ownership.engines.z3run:BmcOptions",
                        Capabilities(shortest="depth by depth", deadlock=True, liveness=True),
                        (*FREE_OPTIONS, SOLVER_TIMEOUT, DEADLOCK)),
    "hypothesis": ModuleEngine("hypothesis", CoverageKind.SAMPLED,
                               "ownership.engines.hypothesis_engine.engine:check_stateful",
                               "ownership.engines.hypothesis_engine.options:HypothesisOptions",
                               Capabilities(deadlock=True, liveness=True, parallel=True), RANDOM_OPTIONS),
    # A proof's folder is named by what it claims (-p, --free, --where, -i), not by how it was searched.
    "prove": ModuleEngine("prove", CoverageKind.PROOF, "ownership.engines.prove:prove", "ownership.engines.z3run:BmcOptions",
                          Capabilities(deadlock=True, liveness=True),
                          (*FREE_OPTIONS, SOLVER_TIMEOUT, *PROOF_OPTIONS, DEADLOCK),
                          claim_flags=("free", "where", "invariants")),
})
"""Every engine, by the name ``--engine`` takes."""


@dataclass(frozen=True)
class EngineSet:
    """``--engine all``: engines run one after the other on one instance and compared.

    The first is the reference: its result is the one reported (verdict,
    trace, exit status); each other result is related to it by
    :func:`ownership.engines.relate` and any disagreement is OWN040.
    """

    name: str
    engines: tuple[str, ...]

    @property
    def reference(self) -> str:
        return self.engines[0]


ALL = EngineSet("all", ("explore", "bmc", "hypothesis"))
"""What ``all`` means, for the command line, the pytest plugin and ``ownership.testing`` alike."""

ENGINE_NAMES = (*ENGINES, ALL.name)
"""Every name ``--engine`` accepts."""

DEFAULT = "explore"
"""The engine of a check that names none: its counterexamples are the committed ones."""


def _union() -> tuple[Option, ...]:
    rows: dict[str, Option] = {}
    for engine in ENGINES.values():
        for row in engine.options_schema:
            if rows.setdefault(row.field, row) != row:
                raise AssertionError(f"engines declare option {row.field!r} twice, differently")
    return tuple(rows.values())


OPTIONS: tuple[Option, ...] = _union()
"""Every engine option once, in registry order: the flags beyond those every engine shares."""

OPTION_BY_FIELD: Mapping[str, Option] = MappingProxyType({row.field: row for row in OPTIONS})


def options_for(command: str) -> tuple[Option, ...]:
    """The engine options ``command``'s ``--help`` offers."""
    return tuple(row for row in OPTIONS if command in row.commands)


def owners(field: str) -> tuple[str, ...]:
    """The engines that take the option ``field``."""
    return tuple(name for name, e in ENGINES.items() if any(row.field == field for row in e.options_schema))


def get(name: str) -> Engine:
    """The engine called ``name``; an unknown name is OWN013 with the list."""
    engine = ENGINES.get(name)
    if engine is None:
        raise unknown(name)
    return engine


def unknown(name: str) -> OwnershipError:
    """The error for an engine name that is not registered."""
    return OwnershipError(Code.BAD_OPTION, f"unknown engine {name!r} (available: {', '.join(ENGINE_NAMES)})")


def expand(name: str) -> tuple[str, ...]:
    """The engines ``name`` runs: itself, or every engine of ``all``."""
    if name == ALL.name:
        return ALL.engines
    get(name)
    return (name,)


def resolve(settings: Settings) -> tuple[tuple[Engine, EngineOptions], ...]:
    """Each engine ``settings.engine`` names with its options, every option refused before any engine runs.

    An option that no engine of the run takes is OWN013 naming the engines
    that do; ``--deadlock`` needs every engine of the run to find deadlocks.
    """
    engines = tuple(get(name) for name in expand(settings.engine))
    taken = {row.field for e in engines for row in e.options_schema}
    for name in settings.options:
        if name not in taken:
            flag = OPTION_BY_FIELD[name].flag
            raise OwnershipError(Code.BAD_OPTION, f"{flag} is an option of --engine {' or '.join(owners(name))}, "
                                 f"not of {settings.engine}")
    if settings.option("where") and not settings.option("free"):
        raise OwnershipError(Code.BAD_OPTION, "--where constrains free parameters: add --free")
    if settings.option("deadlock") and (settings.option("free") or not all(e.capabilities.deadlock for e in engines)):
        able = ", ".join(name for name, e in ENGINES.items() if e.capabilities.deadlock)
        raise OwnershipError(Code.BAD_OPTION, f"--deadlock is supported by {able} without --free only")
    return tuple((e, e.options(settings)) for e in engines)


def run_engine(name: str, inst: Instance, options: Any, progress: ProgressFn | None = None) -> CheckResult:
    """Run the engine called ``name`` on ``inst`` with its options object."""
    return get(name).run(inst, options, progress)
