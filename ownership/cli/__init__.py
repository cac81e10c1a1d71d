"""The ``ownership`` command line.

Exit codes (every command): 0 no violation within the stated bounds, 1 a
violation (or, for ``replay``, a trace that does not replay), 2 usage or spec
error, 3 inconclusive, 4 internal error; ``preflight`` adds 5 NOT COVERED and 6
for a deployment file it cannot use.  Errors are one line:
``error[OWN0xx]: file:line: message``.

The commands parse their flags and print; the work is the session's
(:mod:`ownership.session`).  :mod:`ownership.cli.checking` holds ``check``,
``prove``, ``test`` and ``report``; :mod:`ownership.cli.tools` the others;
:mod:`ownership.cli.common` the options they share.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - older typer depends on click itself
    from click import exceptions as click_exc  # type: ignore[no-redef]

from ownership.errors import Code, ExitCode, OwnershipError


class _Group(TyperGroup):
    """Turns every usage error and user error into one line and a distinct exit code."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_type_placeholders(super().get_params(ctx), ctx)

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click_exc.NoSuchOption as exc:
            possible = getattr(exc, "possibilities", None)
            hint = f" (did you mean {', '.join(possible)}?)" if possible else ""
            _die(OwnershipError(Code.BAD_OPTION, f"unknown option {exc.option_name}{hint}; see --help"))
        except click_exc.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `ownership`: show the help
                sys.stderr.write(exc.format_message() + "\n")
                sys.exit(int(ExitCode.USAGE))
            # Typer's choice check says "Value error, 'x' is not one of ...": keep what is wrong and the choices.
            message = exc.format_message().replace("Value error, ", "").rstrip(".")
            _die(OwnershipError(Code.BAD_OPTION, f"{message}; see --help"))
        except typer.Abort:
            sys.stderr.write("interrupted\n")
            sys.exit(130)
        except OwnershipError as exc:
            _die(exc)
        except Exception as exc:  # noqa: BLE001 - a bug in ownership itself: say so, keep the details
            import traceback

            traceback.print_exc()
            sys.stderr.write(f"internal error: {type(exc).__name__}: {exc} (this is a bug in ownership)\n")
            sys.exit(int(ExitCode.INTERNAL))
        sys.exit(rv if isinstance(rv, int) else 0)


def _without_type_placeholders(params: list[Any], ctx: Any) -> list[Any]:
    """``params`` with no ``<type>`` placeholder in ``--help``: the metavars and the help say what to give.

    Typer prints a Python type beside each parameter (``<bool>`` for a flag,
    ``<list[Path]>`` for an argument); a flag takes no value, and an argument
    with a metavar (SPEC, LOG) is named by it.
    """
    for param in params:
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = (param.name or "value").upper()
            param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]
        elif param.metavar is None:
            if getattr(param, "is_flag", False):
                param.metavar = ""
            elif not param.type_descriptor.is_choice:  # choices are shown as they are: they say what to give
                # An option that did not name its value gets a word for its type, not the Python type.
                label = param.display_type(ctx).strip("<>").removeprefix("list[").removesuffix("]")
                param.metavar = _METAVARS.get(label.split()[0], label.upper())
    return params


_METAVARS = {"int": "N", "float": "NUMBER", "str": "TEXT", "Path": "PATH", "path": "PATH", "file": "FILE",
             "directory": "DIR"}
"""The word ``--help`` shows for a value of each type when the option names none."""


class _Command(TyperCommand):
    """A command whose ``--help`` has no ``<type>`` placeholders (see :func:`_without_type_placeholders`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_type_placeholders(super().get_params(ctx), ctx)


def _die(exc: OwnershipError) -> None:
    sys.stderr.write(exc.one_line() + "\n")
    sys.exit(int(exc.exit_code))


app = typer.Typer(
    cls=_Group,
    add_completion=True,
    no_args_is_help=True,
    help="Model checker for KV-cache page ownership protocols. Exit codes: 0 safe within the stated bounds, "
    "1 violation, 2 usage/spec error, 3 inconclusive.",
    pretty_exceptions_enable=False,
)


def main() -> None:
    """Console-script entry point."""
    app()


def _print_version(value: bool) -> None:
    if value:
        from ownership.distribution import version_line

        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version,
        help="Print the distribution name and version, and exit.",
    ),
) -> None:
    """Model checker for KV-cache page ownership protocols."""



def _register() -> None:
    """The commands, in the order ``--help`` lists them."""
    from ownership.cli import checking, preflight, tools

    for name, command in (
        ("check", checking.check), ("report", checking.report), ("list", tools.list_specs), ("mbt", tools.mbt),
        ("replay", tools.replay), ("render", tools.render), ("test", checking.test_specs), ("graph", tools.graph),
        ("prove", checking.prove), ("mutate", tools.mutate), ("preflight", preflight.preflight),
        ("validate", tools.validate),
    ):
        app.command(name, cls=_Command)(command)


_register()
