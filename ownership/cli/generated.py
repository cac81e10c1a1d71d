"""The engine flags of a command, generated from the engines' registry rows.

:func:`engine_options` adds one typer option per
:class:`~ownership.engines.schema.Option` the registry offers a command
(``--seed``, ``--kernel``, ``--max-k``, ...) to a command function that
takes ``options``: the values given reach it as that mapping, checked for
range (OWN015), ready for :class:`~ownership.session.Settings`.  A new
engine flag is a row in its engine's registry entry; no command changes.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from ownership.engines import registry
from ownership.engines.schema import Kind, Option

F = TypeVar("F", bound=Callable[..., Any])


def _choice_type(row: Option) -> Any:
    # An enum keeps click's own refusal of a value that is not one of the choices.
    return enum.Enum(f"{row.field.title().replace('_', '')}Choice", {c: c for c in row.choices}, type=str)


def _parameter(row: Option) -> inspect.Parameter:
    """The typer parameter that offers ``row``."""
    names = [row.flag] + ([row.short] if row.short else [])
    common: dict[str, Any] = {"metavar": row.metavar, "rich_help_panel": row.panel, "help": row.help}
    annotation: Any
    default: Any = row.default
    if row.kind is Kind.ON:
        annotation, default = bool, bool(row.default)
    elif row.kind is Kind.OFF:
        on = row.flag.replace("--no-", "--", 1)
        names = [f"{on}/{row.flag}"]
        annotation, default = bool, bool(row.default)
    elif row.kind is Kind.EACH:
        annotation, default = list[str] | None, None
    elif row.choices:
        annotation, default = _choice_type(row), row.default
        common["show_default"] = False
    elif row.parse is not None:
        annotation, default = str, row.cli_default
        common["show_default"] = False
    else:
        # Ranges are checked by Option.check, so a value out of range is OWN015 like every other flag's.
        annotation = row.value_type | None if row.default is None else row.value_type
    return inspect.Parameter(row.field, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[annotation, typer.Option(*names, **common)])


def _value(row: Option, given: Any) -> Any:
    """The settings value of what the command line gave for ``row``, checked for range."""
    if row.kind is Kind.EACH:
        return tuple(given or ())
    if isinstance(given, enum.Enum):
        given = given.value
    if row.parse is not None:
        return row.parse(row.flag, given)
    row.check(given)
    return given


def engine_options(command: str) -> Callable[[F], F]:
    """Add the registry's engine flags for ``command`` to a command function taking ``options``."""
    rows = registry.options_for(command)

    def decorate(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "options"]
        added = [_parameter(row) for row in rows]

        @functools.wraps(func)
        def command_with_options(**kwargs: Any) -> Any:
            options = {row.field: _value(row, kwargs.pop(row.field, row.default)) for row in rows}
            return func(**kwargs, options=options)

        parameters = sorted(own + added, key=lambda p: p.kind)  # keyword-only after the positional ones
        command_with_options.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        command_with_options.__annotations__ = {p.name: p.annotation for p in parameters}
        return command_with_options  # type: ignore[return-value]

    return decorate
