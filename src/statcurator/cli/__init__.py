"""The ``statcurator`` command line: a thin layer over the Python API.

Every command module in this package (a file not starting with ``_``) defines
``register(app)``; they are discovered here so that each command lives in its own file, and
``--help`` lists exactly the commands that exist. Heavy libraries are imported inside the
commands, so ``statcurator --help`` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

app = typer.Typer(
    name="statcurator",
    help="statcurator, a privacy-preserving statistical database: one command per job of the "
         "curator (listed below). Every command has --help and --json.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)



def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"statcurator {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """statcurator, a privacy-preserving statistical database: one command per job of the
    curator (listed below). Every command has --help and --json."""
    # sqlglot logs a warning before statcurator refuses SQL it cannot read ("... contains
    # unsupported syntax"); the refusal says it with a remedy, so the warning is only noise
    from ..query.sql import quiet_parser_warnings

    quiet_parser_warnings()


for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}").register(app)


def main() -> None:
    """Entry point of the ``statcurator`` console script."""
    app()
