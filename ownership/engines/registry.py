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
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from ownership.core.progress import ProgressFn
from ownership.core.result import CheckResult, CoverageKind
from ownership.errors import Code, OwnershipError
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
    def finds_deadlocks(self) -> bool:
        """Whether ``--deadlock`` means something to it."""
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
    finds_deadlocks: bool = False
    claim_flags: tuple[str, ...] | None = None

    def options_types(self) -> tuple[type[EngineOptions], ...]:
        return (_load(self.options_type),)

    def options(self, settings: Settings) -> EngineOptions:
        result: EngineOptions = _load(self.options_type).from_settings(settings)
        return result

    def run(self, inst: Instance, options: Any, progress: ProgressFn | None) -> CheckResult:
        result: CheckResult = _load(self.runner)(inst, options, progress)
        return result


@dataclass(frozen=True)
class ExploreEngine(ModuleEngine):
    """The explorer: breadth-first over concrete parameters, or over Z3 terms for ``--free`` ones."""

    free_runner: str = "ownership.engines.paramexplore:explore_params"
    free_options_type: str = "ownership.engines.paramexplore:ParamOptions"

    def options_types(self) -> tuple[type[EngineOptions], ...]:
        return (_load(self.options_type), _load(self.free_options_type))

    def options(self, settings: Settings) -> EngineOptions:
        if settings.free or settings.minimize or settings.maximize:
            result: EngineOptions = _load(self.free_options_type).from_settings(settings)
            return result
        return super().options(settings)

    def run(self, inst: Instance, options: Any, progress: ProgressFn | None) -> CheckResult:
        if isinstance(options, _load(self.free_options_type)):
            result: CheckResult = _load(self.free_runner)(inst, options, progress)
            return result
        return super().run(inst, options, progress)


ENGINES: Mapping[str, Engine] = MappingProxyType({
    "explore": ExploreEngine("explore", CoverageKind.EXHAUSTIVE, "ownership.engines.explore:explore",
                             "ownership.engines.explore:ExploreOptions", finds_deadlocks=True),
    "bmc": ModuleEngine("bmc", CoverageKind.BOUNDED, "ownership.engines.bmc:bmc", "ownership.engines.z3run:BmcOptions"),
    "hypothesis": ModuleEngine("hypothesis", CoverageKind.SAMPLED,
                               "ownership.engines.hypothesis_engine.engine:check_stateful",
                               "ownership.engines.hypothesis_engine.options:HypothesisOptions"),
    # A proof's folder is named by what it claims (-p, --free, --where, -i), not by how it was searched.
    "prove": ModuleEngine("prove", CoverageKind.PROOF, "ownership.engines.prove:prove", "ownership.engines.z3run:BmcOptions",
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
    """Each engine ``settings.engine`` names with its options, every option refused before any engine runs."""
    engines = tuple(get(name) for name in expand(settings.engine))
    if settings.where and not settings.free:
        raise OwnershipError(Code.BAD_OPTION, "--where constrains free parameters: add --free")
    if settings.deadlock and (settings.free or not all(e.finds_deadlocks for e in engines)):
        raise OwnershipError(Code.BAD_OPTION, "--deadlock is supported by the explorer without --free only")
    if settings.sampling_flags() and not any(e.decides is CoverageKind.SAMPLED for e in engines):
        raise OwnershipError(Code.BAD_OPTION, "--seed/--max-examples/--steps/--derandomize are options of --engine hypothesis")
    return tuple((e, e.options(settings)) for e in engines)


def run_engine(name: str, inst: Instance, options: Any, progress: ProgressFn | None = None) -> CheckResult:
    """Run the engine called ``name`` on ``inst`` with its options object."""
    return get(name).run(inst, options, progress)
