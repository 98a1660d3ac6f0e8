"""``statcurator analysts add|list|rotate|revoke``: the service's analysts and their API tokens.

    statcurator analysts add NAME [--role analyst|admin] [--config curator.toml] [--json]
    statcurator analysts list [--config curator.toml] [--json]
    statcurator analysts rotate NAME [--config curator.toml] [--json]
    statcurator analysts revoke NAME [--config curator.toml] [--json]

A token is printed once and stored only as a hash; rotating replaces it (the old one stops
working) and keeps every budget, which belongs to the analyst's identity. Revoking removes the
token (no token works for that analyst until it is rotated again) and also keeps the identity:
its spent budget stays spent. The last admin with a working token cannot be revoked. A new analyst gets
each dataset's configured grant (``grant`` in the configuration); ``statcurator budget grant``
gives others. These commands work on the ledger and token store that ``statcurator serve
--config`` uses (the same ``--config``), also while the service runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import JSON_OPTION, emit, handle_errors, print_json, print_table
from .serve import CONFIG_OPTION, service


def register(app: typer.Typer) -> None:
    analysts_app = typer.Typer(help="The service's analysts and their API tokens.",
                               no_args_is_help=True)
    app.add_typer(analysts_app, name="analysts")

    @analysts_app.command("add")
    @handle_errors
    def add_command(
        name: Annotated[str, typer.Argument(help="The analyst's name (normalized).")],
        role: Annotated[str, typer.Option("--role", help="analyst or admin")] = "analyst",
        config: Annotated[Path | None, CONFIG_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Create an analyst and print its API token (shown once)."""
        out = service("_run").analysts_add(str(config) if config else None, name, role)
        if json_output:
            print_json(out)
            return
        emit(f"analyst {out['analyst']} ({out['role']}) created; token (shown once, keep it):")
        emit(out["token"])
        for g in out["grants"]:
            emit(f"  grant on {g['dataset']}: {g['text']}")

    @analysts_app.command("list")
    @handle_errors
    def list_command(
        config: Annotated[Path | None, CONFIG_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """List the analysts (name, role, token hint, grants); tokens are never shown."""
        out = service("_run").analysts_list(str(config) if config else None)
        if json_output:
            print_json(out)
            return
        print_table(("analyst", "role", "token", "created", "rotated", "grants"),
                    [(a["analyst"], a["role"],
                      "REVOKED" if a["revoked"] else a["token_hint"] + "…", a["created_at"],
                      a["rotated_at"] or "", "; ".join(f"{g['dataset']}: {g['text']}"
                                                      for g in a["grants"]))
                     for a in out["analysts"]], title=f"analysts ({out['store']})")

    @analysts_app.command("rotate")
    @handle_errors
    def rotate_command(
        name: Annotated[str, typer.Argument(help="The analyst (or admin).")],
        config: Annotated[Path | None, CONFIG_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Give an analyst a new token; the old one stops working, budgets are kept."""
        out = service("_run").analysts_rotate(str(config) if config else None, name)
        if json_output:
            print_json(out)
            return
        emit(f"new token of {out['analyst']} (shown once; the old one no longer works):")
        emit(out["token"])

    @analysts_app.command("revoke")
    @handle_errors
    def revoke_command(
        name: Annotated[str, typer.Argument(help="The analyst (or an admin, not the last).")],
        config: Annotated[Path | None, CONFIG_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Revoke an analyst's token at once; its spent budget stays (rotate re-enables)."""
        out = service("_run").analysts_revoke(str(config) if config else None, name)
        if json_output:
            print_json(out)
            return
        emit(f"analyst {out['analyst']} revoked: no token works for it any more; its spent "
             f"budget stays (`statcurator analysts rotate {out['analyst']}` issues a new token)")
