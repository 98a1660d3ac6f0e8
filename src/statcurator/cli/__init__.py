"""The ``statcurator`` command line: a thin layer over the Python API.

Every command module in this package (a file not starting with ``_``) defines
``register(app)``; they are discovered here so that each command lives in its own file.
Heavy libraries are imported inside the commands, so ``statcurator --help`` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

app = typer.Typer(
    name="statcurator",
    help="A privacy-preserving statistical database: anonymize, attack, and answer queries "
         "with differential privacy.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)



@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """statcurator: a privacy-preserving statistical database."""
    if version:
        from importlib.metadata import version as _v

        typer.echo(_v("statcurator"))
        raise typer.Exit()


for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}").register(app)


def main() -> None:
    """Entry point of the ``statcurator`` console script."""
    app()
