"""What a check was asked to do: one frozen :class:`Settings` for every front end.

The command line, the pytest plugin and ``ownership.testing`` build one and
hand it to :func:`ownership.session.check`.  Each engine's options type
reads the fields it understands (``from_settings``).  Each field that has a
flag is spelled once, in :data:`FLAGS`: that table writes the ``reproduce:``
line and names the counterexample folder.  A new option is a field here, a
row of :data:`FLAGS`, and the CLI option that sets it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ownership import inputs


@dataclass(frozen=True)
class Settings:
    """A check's settings: the engine, the instance, the limits, the options of every engine, the outputs.

    ``None`` means "not given" (the engine's default); the defaults of the
    other fields are those of ``ownership check`` without options.
    """

    engine: str = "explore"
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
    kernel: str = "auto"
    """The explorer's search: ``auto``, ``compiled`` or ``python`` (:mod:`ownership.engines.compiled`)."""
    storage: str = "exact"
    """The compiled kernel's storage: ``exact`` or ``fingerprint``."""
    workers: int | None = None
    """The explorer's worker processes; ``None``: ``auto`` (one, every core past a size on the Python path)."""
    ray: str | None = None
    """The explorer's workers as Ray actors on this cluster (``auto`` or an address); ``None``: local processes."""
    deadlock: bool = False
    invariants: tuple[str, ...] | None = None
    out: Path | None = None
    """The counterexample folder (``None``: the default under ``counterexamples/``)."""
    formats: tuple[str, ...] = ("svg",)
    render: bool = True
    progress: bool = True
    solver_timeout: float | None = None
    free: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    minimize: str | None = None
    maximize: str | None = None
    explain: bool = False
    seed: int | None = None
    max_examples: int | None = None
    steps: int | None = None
    derandomize: bool = False
    walks: int | None = None
    max_k: int = 2
    spacer: bool = True
    spacer_timeout: float = 600.0
    reach_states: int = 200_000
    max_domain: int = inputs.DEFAULT_MAX_DOMAIN

    def sampling_flags(self) -> bool:
        """Whether an option only a sampling (random) engine takes was given."""
        return (self.seed is not None or self.max_examples is not None or self.steps is not None
                or self.derandomize or self.walks is not None)

    def reproduce_flags(self, drawn_seed: int | None = None) -> list[str]:
        """The flags of ``reproduce:``, in :data:`FLAGS` order; ``drawn_seed`` is the seed a random run drew."""
        out: list[str] = []
        for row in FLAGS:
            out += row.spell(self, drawn_seed)
        return out

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
            return flags + [f"{r.flag}={v}" for r in rows for v in getattr(self, r.field) or ()]
        for row in FLAGS:
            if row.names_folder:
                flags += row.spell(self, None)
        return flags


class Kind(enum.Enum):
    """How a field is spelled on the command line."""

    VALUE = "value"
    """``--flag VALUE``, when the value differs from the field's default."""
    EACH = "each"
    """``--flag VALUE`` per item of a tuple."""
    ON = "on"
    """``--flag`` when true."""
    OFF = "off"
    """``--flag`` when false (``--no-symmetry``)."""
    SEED = "seed"
    """The random seed: given or drawn; left out under ``--derandomize``."""


@dataclass(frozen=True)
class Flag:
    """One settings field and the command-line flag that sets it."""

    field: str
    flag: str
    kind: Kind
    names_folder: bool = True
    """Whether it changes the search (and so names the counterexample folder)."""

    def spell(self, settings: Settings, drawn_seed: int | None) -> list[str]:
        value = getattr(settings, self.field)
        if self.kind is Kind.EACH:
            return [part for item in value or () for part in (self.flag, str(item))]
        if self.kind is Kind.ON:
            return [self.flag] if value else []
        if self.kind is Kind.OFF:
            return [] if value else [self.flag]
        if self.kind is Kind.SEED:
            if settings.derandomize:
                return []
            value = drawn_seed if value is None else value
            return [] if value is None else [self.flag, str(value)]
        return [] if value == _DEFAULTS[self.field] else [self.flag, str(value)]


FLAGS: tuple[Flag, ...] = (
    Flag("engine", "--engine", Kind.VALUE, names_folder=False),
    Flag("symmetry", "--no-symmetry", Kind.OFF),
    Flag("deadlock", "--deadlock", Kind.ON),
    Flag("max_depth", "--max-depth", Kind.VALUE),
    Flag("max_states", "--max-states", Kind.VALUE),
    Flag("max_seconds", "--max-seconds", Kind.VALUE),
    Flag("max_memory", "--max-memory", Kind.VALUE, names_folder=False),
    Flag("kernel", "--kernel", Kind.VALUE, names_folder=False),
    Flag("storage", "--storage", Kind.VALUE, names_folder=False),
    Flag("workers", "--workers", Kind.VALUE, names_folder=False),
    Flag("ray", "--ray", Kind.VALUE, names_folder=False),
    Flag("invariants", "--invariant", Kind.EACH),
    Flag("solver_timeout", "--solver-timeout", Kind.VALUE),
    Flag("free", "--free", Kind.EACH),
    Flag("where", "--where", Kind.EACH),
    Flag("minimize", "--minimize", Kind.VALUE),
    Flag("maximize", "--maximize", Kind.VALUE),
    Flag("explain", "--explain", Kind.ON, names_folder=False),
    Flag("max_examples", "--max-examples", Kind.VALUE),
    Flag("steps", "--steps", Kind.VALUE),
    Flag("walks", "--walks", Kind.VALUE),
    Flag("derandomize", "--derandomize", Kind.ON),
    Flag("seed", "--seed", Kind.SEED),
    Flag("max_k", "--max-k", Kind.VALUE),
    Flag("spacer", "--no-spacer", Kind.OFF),
    Flag("spacer_timeout", "--spacer-timeout", Kind.VALUE),
    Flag("reach_states", "--reach-states", Kind.VALUE),
)
"""Every flag of a check, spelled once, in the order of the reproduce line."""

_DEFAULTS: Mapping[str, Any] = MappingProxyType({f.name: f.default for f in fields(Settings)})
