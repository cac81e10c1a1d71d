"""What a check was asked to do: one frozen :class:`Settings` for every front end.

The command line, the pytest plugin and ``ownership.testing`` build one and
hand it to :func:`ownership.session.check`.  ``Settings`` holds what every
engine shares (the engine, the instance, the limits, the outputs); the
options of particular engines are ``options``, keyed by the fields their
registry rows declare (:data:`ownership.engines.registry.OPTIONS`), and each
engine's options type reads them (``from_settings``).  Every flag is spelled
once, as an :class:`~ownership.engines.schema.Option`: the shared ones in
:data:`SHARED`, the others in their engine's row.  Those rows write the
``reproduce:`` line and name the counterexample folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ownership import inputs
from ownership.engines import registry
from ownership.engines.schema import Kind, Option
from ownership.errors import Code, OwnershipError


@dataclass(frozen=True)
class Settings:
    """A check's settings: the engine, the instance, the limits, the options of every engine, the outputs.

    ``None`` means "not given" (the engine's default); the defaults of the
    other fields are those of ``ownership check`` without options.
    """

    engine: str = registry.DEFAULT
    params: Mapping[str, int] = field(default_factory=dict)
    max_depth: int | None = None
    max_states: int | None = None
    max_seconds: float | None = None
    """Wall-clock limit for the whole check of one spec: building the instance and every engine."""
    max_memory: int | str | None = None
    """The search's resident-memory budget: a size as written (``4G``, ``none``) or bytes; ``None``: the default share.

    :func:`ownership.inputs.memory_budget` turns it into bytes; the default
    is :func:`ownership.core.memory.default_budget`.
    """
    symmetry: bool = True
    invariants: tuple[str, ...] | None = None
    out: Path | None = None
    """The counterexample folder (``None``: the default under ``counterexamples/``)."""
    formats: tuple[str, ...] = ("svg",)
    render: bool = True
    progress: bool = True
    explain: bool = False
    max_domain: int = inputs.DEFAULT_MAX_DOMAIN
    options: Mapping[str, Any] = field(default_factory=dict)
    """The engine options given, by field (``seed``, ``kernel``, ``free``, ...); a missing key is its default.

    The keys are those of :data:`ownership.engines.registry.OPTIONS`; an
    unknown key is OWN013.  An option that no engine of the run takes is
    refused when the engines are resolved.
    """

    def __post_init__(self) -> None:
        for name in self.options:
            if name not in registry.OPTION_BY_FIELD:
                raise OwnershipError(Code.BAD_OPTION, f"unknown engine option {name!r} (options: "
                                     f"{', '.join(registry.OPTION_BY_FIELD)})")
        # A value equal to its default is not an option given: `--engine bmc --kernel auto` is no refusal.
        rows = registry.OPTION_BY_FIELD
        values = {k: tuple(v or ()) if rows[k].kind is Kind.EACH else v for k, v in self.options.items()}
        given = {k: v for k, v in values.items() if v != rows[k].default}
        object.__setattr__(self, "options", given)

    def option(self, name: str) -> Any:
        """The value of the engine option ``name``: as given, else its declared default."""
        if name in self.options:
            return self.options[name]
        return registry.OPTION_BY_FIELD[name].default

    def value(self, name: str) -> Any:
        """A shared field or an engine option, by name."""
        return getattr(self, name) if name in _SHARED_FIELDS else self.option(name)

    def reproduce_flags(self, drawn_seed: int | None = None) -> list[str]:
        """The flags of ``reproduce:``, in :data:`FLAGS` order; ``drawn_seed`` is the seed a random run drew."""
        out: list[str] = []
        for row in FLAGS:
            out += self._spell(row, drawn_seed)
        return out

    def _spell(self, row: Option, drawn_seed: int | None) -> list[str]:
        return row.spell(self.value(row.field), drawn_seed, bool(self.option("derandomize")))

    def search_flags(self, params: Mapping[str, int], defaults: Mapping[str, int],
                     claim: Sequence[str] | None = None) -> list[str]:
        """The flags that change what this run searches: they name its counterexample folder.

        The parameters that differ from the spec's defaults, then the
        reproduce line's flags except those that do not change the search
        (``--engine`` has a folder level of its own, ``--explain`` reads the
        result).  ``claim`` (an engine's ``claim_flags``) keeps only the flags
        of those fields, spelled ``--flag=value``.
        """
        flags = [f"{k}={v}" for k, v in params.items() if defaults.get(k) != v]
        if claim is not None:
            rows = sorted((r for r in FLAGS if r.field in claim), key=lambda r: claim.index(r.field))
            return flags + [f"{r.flag}={v}" for r in rows for v in self.value(r.field) or ()]
        for row in FLAGS:
            if row.names_folder:
                flags += self._spell(row, None)
        return flags


SHARED: tuple[Option, ...] = (
    Option("engine", "--engine", default=registry.DEFAULT, names_folder=False, commands=()),
    Option("symmetry", "--no-symmetry", Kind.OFF, True, commands=()),
    Option("max_depth", "--max-depth", commands=()),
    Option("max_states", "--max-states", commands=()),
    Option("max_seconds", "--max-seconds", commands=()),
    Option("max_memory", "--max-memory", names_folder=False, commands=()),
    Option("invariants", "--invariant", Kind.EACH, commands=()),
    Option("explain", "--explain", Kind.ON, False, names_folder=False, commands=()),
)
"""The flags every engine shares (each command declares them by hand, with its own help)."""

FLAGS: tuple[Option, ...] = (*SHARED, *registry.OPTIONS)
"""Every flag of a check, spelled once, in the order of the reproduce line."""

_SHARED_FIELDS = frozenset(f.name for f in fields(Settings)) - {"options"}
