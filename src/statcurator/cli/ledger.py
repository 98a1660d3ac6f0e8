"""``statcurator ledger verify|export``, and where the command line keeps its ledger.

The CLI's privacy ledger is persistent by default: ``--ledger PATH``, else the environment
variable ``STATCURATOR_LEDGER``, else ``ledger.db`` in the user's data directory
(platformdirs: ``~/.local/share/statcurator`` on Linux). ``--ledger :memory:`` asks for a
throwaway ledger that forgets every charge when the command exits.

The CLI also keeps an *anchor* of each ledger it writes — its row count and last hash — in
the user's state directory (``~/.local/state/statcurator/anchors.json``). A ledger that no
longer holds its anchored row (rows cut off its end, an older copy put back, the file deleted
and a new one started) is refused. The anchor lives beside the ledger's owner, so a user who
deletes both can still reset their own CLI ledger: docs/ledger.md explains this limit and
why the service, not the CLI, is what protects data from its analysts.

    statcurator ledger verify [--ledger PATH] [--json]
    statcurator ledger export [--ledger PATH] [--format jsonl|csv] [--output FILE] [--json]
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import JSON_OPTION, emit, handle_errors, print_json

LEDGER_ENV = "STATCURATOR_LEDGER"
MEMORY = ":memory:"

LEDGER_OPTION = typer.Option(
    "--ledger", help=f"Privacy ledger file (default: ${LEDGER_ENV}, else ledger.db in the user "
                     "data directory; ':memory:' for a throwaway one).")


def ledger_path(option: str | None) -> str:
    """The ledger the CLI uses: the option, the environment variable, or the default file."""
    if option:
        return option
    if os.environ.get(LEDGER_ENV):
        return os.environ[LEDGER_ENV]
    import platformdirs

    return str(platformdirs.user_data_path("statcurator") / "ledger.db")


def _anchors_file() -> Path:
    import platformdirs

    return platformdirs.user_state_path("statcurator") / "anchors.json"


def _anchors() -> dict[str, str]:
    try:
        data = json.loads(_anchors_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_anchor(ledger: Any) -> None:
    """Record the ledger's current anchor (after a command that wrote to it)."""
    if not ledger.persistent or ledger.path is None:
        return
    anchors = _anchors()
    anchors[str(Path(ledger.path).resolve())] = ledger.anchor()
    target = _anchors_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(anchors, indent=1), encoding="utf-8")
        os.replace(tmp, target)
    except OSError:  # the anchor is a second line of defence: never fail a charge for it
        pass


def open_ledger(option: str | None, *, create: bool = True) -> Any:
    """Open the CLI's ledger (verifying its chain and its anchor); None when it does not
    exist and ``create`` is False. ``:memory:`` is refused here: callers handle it."""
    from ..accounting import Ledger
    from ..core.errors import LedgerError

    path = Path(ledger_path(option)).expanduser()
    anchor = _anchors().get(str(path.resolve()))
    if not path.exists():
        if anchor is not None:
            raise LedgerError(
                f"the ledger {path} is missing, but this user's anchor says it held "
                f"{anchor.partition(':')[0]} rows: it was deleted or moved",
                remedy=f"restore it from a backup; to start a new, empty ledger on purpose "
                       f"(every budget reset), delete its entry in {_anchors_file()}")
        if not create:
            return None
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the owner's only
    return Ledger(path, anchor=anchor)


CONFIG_LEDGER_OPTION = typer.Option(
    "--config", "-c", help="A service configuration (TOML): use the ledger it names (its SQLite "
                           "file or PostgreSQL) instead of --ledger.")


def open_any_ledger(option: str | None, config: Path | None, *, create: bool = True) -> Any:
    """The ledger of ``--ledger`` (see :func:`open_ledger`), or of ``--config``: the one the
    service configured there uses (a PostgreSQL ledger, whose commands have no file, or its
    SQLite file with this user's anchor check). None when it does not exist and ``create``
    is False (a mistyped schema must not be created and then verified as empty)."""
    from ..core.errors import InvalidParameterError

    if config is None:
        return open_ledger(option, create=create)
    if option is not None:
        raise InvalidParameterError("--ledger and --config both name a ledger",
                                    remedy="pass one of them")
    cfg = _service_config(config)
    if cfg.ledger.dsn is None:
        return open_ledger(configured_file(cfg, config), create=create)
    from ..accounting._postgres import table_exists

    if not create and not table_exists(cfg.ledger.dsn, cfg.ledger.schema, "ledger"):
        return None
    from .serve import service

    return service("_core").open_ledger(cfg)


def configured_file(cfg: Any, config: Path) -> str:
    """The SQLite file of a service configuration ``cfg`` (read from ``config``), refused
    when it is a throwaway in-memory one (a budget set there is forgotten at once)."""
    from ..core.errors import InvalidParameterError

    path = str(cfg.sqlite_path())
    if path == MEMORY:
        why = (f"{config} names a throwaway in-memory ledger" if cfg.ledger.path else
               f"{config} names no ledger, and ${LEDGER_ENV} asks for a throwaway in-memory one")
        raise InvalidParameterError(f"{why}, whose budgets are forgotten at once",
                                    remedy="set [ledger] path (or dsn) in the configuration")
    return path


def _service_config(config: Path) -> Any:
    from .serve import service

    return service("_config").ServiceConfig.load(str(config))


def missing_ledger(option: str | None, config: Path | None) -> Any:
    """The error for a ledger that does not exist (yet), in the command's terms."""
    from ..core.errors import LedgerError

    if config is None:
        return LedgerError(f"there is no ledger at {ledger_path(option)} yet",
                           remedy="set a budget first: statcurator budget set --dataset D "
                                  "--epsilon E (or pass --ledger PATH)")
    return LedgerError(f"there is no ledger at {_service_config(config).ledger_location()} "
                       f"(the ledger {config} names) yet",
                       remedy=f"start the service once (statcurator serve --config {config}), "
                              f"or set a budget first: statcurator budget set --dataset D "
                              f"--epsilon E --config {config}")


def register(app: typer.Typer) -> None:
    ledger_app = typer.Typer(help="Verify and export the privacy ledger.", no_args_is_help=True)
    app.add_typer(ledger_app, name="ledger")

    @ledger_app.command("verify")
    @handle_errors
    def verify_command(ledger: Annotated[str | None, LEDGER_OPTION] = None,
                       config: Annotated[Path | None, CONFIG_LEDGER_OPTION] = None,
                       json_output: bool = JSON_OPTION) -> None:
        """Verify the hash chain and re-derive every running total; name the first bad row."""
        led = open_any_ledger(ledger, config, create=False)
        if led is None:
            raise missing_ledger(ledger, config)
        with led:
            result = led.verify()
            counts = led.counts()
        out = {"ok": True, "ledger": result.location, "rows": result.rows,
               "head": result.head, "keyed": result.keyed, "ledger_id": result.ledger_id,
               "anchor": result.anchor, **counts}
        if json_output:
            print_json(out)
            return
        emit(("ok ", "bold green"), f"{result}; {counts['charges']} charges, "
             f"{counts['budgets']} grants, {counts['dataset_budgets']} dataset budget records")

    @ledger_app.command("export")
    @handle_errors
    def export_command(
        ledger: Annotated[str | None, LEDGER_OPTION] = None,
        config: Annotated[Path | None, CONFIG_LEDGER_OPTION] = None,
        fmt: Annotated[str, typer.Option("--format", help="jsonl or csv.")] = "jsonl",
        output: Annotated[Path | None, typer.Option(
            "--output", "-o", help="Write to this file instead of standard output.")] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Export every ledger row (budgets, grants, charges, answers, hashes)."""
        import sys

        from ..accounting import ENTRY_TYPES
        from ..core.errors import InvalidParameterError

        if json_output and output is None:
            fmt = "jsonl"
        if fmt not in ("jsonl", "csv"):
            raise InvalidParameterError(f"unknown format {fmt!r}", remedy="use --format jsonl "
                                        "or --format csv")
        led = open_any_ledger(ledger, config, create=False)
        if led is None:
            raise missing_ledger(ledger, config)
        with led:
            rows = [e.as_dict() for e in led.entries(types=ENTRY_TYPES)]
        with contextlib.ExitStack() as stack:
            stream = (stack.enter_context(open(output, "w", encoding="utf-8", newline=""))
                      if output else sys.stdout)
            if fmt == "jsonl":
                for row in rows:
                    stream.write(json.dumps(row, ensure_ascii=False) + "\n")
            else:
                import csv

                writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
        if output is not None:
            summary = {"ledger": led.location, "rows": len(rows), "format": fmt,
                       "output": str(output)}
            if json_output:
                print_json(summary)
            else:
                emit(f"exported {len(rows)} rows to {output}", stderr=True)
