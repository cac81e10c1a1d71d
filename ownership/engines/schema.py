"""What an engine declares about itself: the options it takes and what it can do.

An engine's registry row (:mod:`ownership.engines.registry`) carries a
tuple of :class:`Option` and one :class:`Capabilities`.  From those rows the
command line builds its engine flags (``ownership.cli.generated``), the
session spells the ``reproduce:`` line and names counterexample folders
(:class:`~ownership.session.settings.Settings`), and the registry refuses
an option no engine of the run takes.  A new engine flag is one
:class:`Option` in its engine's row; nothing else spells it.

This module imports nothing heavy: ``ownership --help`` reads it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

INSTANCE = "Instance"
"""Help panels: options grouped by what they set, so ``--help`` reads at 80 columns."""
SEARCH = "What to check"
LIMITS = "Limits"
RANDOM = "Random testing (--engine hypothesis)"
PROOF = "Proof"
OUTPUT = "Output"
REPORTS = "Reports and exit status"


class Kind(enum.Enum):
    """How an option is spelled on the command line (and so on the ``reproduce:`` line)."""

    VALUE = "value"
    """``--flag VALUE``, when the value differs from the default."""
    EACH = "each"
    """``--flag VALUE`` per item of a tuple."""
    ON = "on"
    """``--flag`` when true."""
    OFF = "off"
    """``--no-flag`` when false (``--no-symmetry``)."""
    SEED = "seed"
    """The random seed: given or drawn; left out under ``--derandomize``."""


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do, read by the registry, the session and the wording of its results."""

    shortest: str | None = None
    """How its counterexamples are shortest (``breadth-first``), or ``None`` when they need not be."""
    deadlock: bool = False
    """Whether ``--deadlock`` means something to it."""
    liveness: bool = False
    """Whether it decides temporal properties."""
    parallel: bool = False
    """Whether ``--workers``/``--ray`` spread it over processes."""


@dataclass(frozen=True)
class Option:
    """One option of a check: the settings key, its flag, its default, and how the command line offers it.

    ``field`` is the key in :attr:`Settings.options` (or a field of
    ``Settings`` for the options every engine shares).  ``commands`` are the
    commands whose ``--help`` offers it (``()``: spelled on the reproduce
    line only, the command declares it by hand).
    """

    field: str
    flag: str
    kind: Kind = Kind.VALUE
    default: Any = None
    help: str = ""
    metavar: str = "N"
    panel: str = SEARCH
    names_folder: bool = True
    """Whether it changes what is searched (and so names the counterexample folder)."""
    commands: tuple[str, ...] = ("check",)
    value_type: type = int
    """``int``, ``float`` or ``str`` for a value; ``bool`` for ON/OFF flags; ``str`` items for EACH."""
    minimum: int | None = None
    """An int below it, or a float not above 0 when set, is OWN015."""
    choices: tuple[str, ...] = ()
    parse: Callable[[str, str], Any] | None = None
    """Turns the command line's text into the value (``--workers auto`` is ``None``); ``(flag, text)``."""
    cli_default: str | None = None
    """What the command line shows and parses when ``parse`` is set."""
    short: str = ""
    """A one-letter alias (``-i``)."""

    def spell(self, value: Any, drawn_seed: int | None = None, derandomize: bool = False) -> list[str]:
        """The words of ``value`` on a command line: ``[]`` for the default."""
        if self.kind is Kind.EACH:
            return [part for item in value or () for part in (self.flag, str(item))]
        if self.kind is Kind.ON:
            return [self.flag] if value else []
        if self.kind is Kind.OFF:
            return [] if value else [self.flag]
        if self.kind is Kind.SEED:
            if derandomize:
                return []
            value = drawn_seed if value is None else value
            return [] if value is None else [self.flag, str(value)]
        return [] if value == self.default else [self.flag, str(value)]

    def check(self, value: Any) -> None:
        """Refuse a value out of range (OWN015), named by the flag."""
        from ownership import inputs

        if self.minimum is None or value is None or self.kind is not Kind.VALUE:
            return
        if self.value_type is float:
            inputs.check_seconds(self.flag, value)
        elif self.value_type is int:
            inputs.check_count(self.flag, value, self.minimum)
