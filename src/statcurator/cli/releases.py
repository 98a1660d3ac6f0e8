"""``statcurator releases list|show``: past answers, retrieved again at no cost.

    statcurator releases list [--analyst A] [--dataset D] [--ledger L] [--json]
    statcurator releases show REQUEST_ID [--analyst A] [--ledger L] [--report R.html] [--json]
    statcurator releases list|show ... --server URL --token T      # your own, on a service

Every charged request keeps its answer in the ledger. ``list`` shows the charged requests,
newest first, and whether each answer is stored (a request charged but not answered — the
curator stopped between the debit and the release — is never answered afresh for free).
``show`` prints a stored answer as ``statcurator query`` printed it, marked as replayed: no
budget is spent. Locally, ``list`` shows every analyst's requests unless ``--analyst`` is
given, and ``show`` looks for the request among ``--analyst``'s (default: the OS user); with
``--server``, the token's analyst sees only their own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import (
    JSON_OPTION,
    analyst_of,
    emit,
    handle_errors,
    output_path,
    print_json,
    print_table,
)
from .ledger import CONFIG_LEDGER_OPTION, LEDGER_OPTION
from .serve import SERVER_OPTION, TOKEN_OPTION, asks_a_server

ANALYST_OPTION = typer.Option("--analyst", "-a", help="Whose requests (identity, normalized); "
                                                      "list: default every analyst's, show: "
                                                      "default the OS user.")
DATASET_OPTION = typer.Option("--dataset", "-D", help="Only this dataset's requests.")
REPORT_OPTION = typer.Option("--report", help="Write the release's HTML report (answers with "
                                              "intervals as a chart, the certificate).")


def register(app: typer.Typer) -> None:
    releases_app = typer.Typer(help="Past answers, retrieved again at no cost.",
                               no_args_is_help=True)
    app.add_typer(releases_app, name="releases")

    @releases_app.command("list")
    @handle_errors
    def list_command(
        ctx: typer.Context,
        analyst: Annotated[str | None, ANALYST_OPTION] = None,
        dataset: Annotated[str | None, DATASET_OPTION] = None,
        ledger: Annotated[str | None, LEDGER_OPTION] = None,
        config: Annotated[Path | None, CONFIG_LEDGER_OPTION] = None,
        server: Annotated[str | None, SERVER_OPTION] = None,
        token: Annotated[str | None, TOKEN_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Charged requests, newest first, and whether each answer is stored."""
        if asks_a_server(ctx, server, token,
                         {"--analyst": analyst, "--ledger": ledger, "--config": config}):
            from .serve import remote_releases

            where, who, rows = remote_releases(str(server), token)
            rows = [r for r in rows if dataset is None or r["dataset"] == dataset]
        else:
            from ..accounting import analyst_id
            from .budget import _persistent

            with _persistent(ledger, create=False, config=config) as led:
                charges = led.charges(None if analyst is None else analyst_id(analyst),
                                      dataset)
                where, who = led.location, None
            rows = [{"request_id": c.request_id, "analyst": c.analyst, "dataset": c.dataset,
                     "cost": str(c.cost), "at": c.timestamp.isoformat(timespec="seconds"),
                     "answered": c.answered, "query": c.query} for c in reversed(charges)]
        if json_output:
            print_json({"server" if server is not None else "ledger": where,
                        **({"analyst": who} if who is not None else {}), "releases": rows})
            return
        keys = ("request_id", "analyst", "dataset", "cost", "at", "answered", "query")
        print_table(("request id", "analyst", "dataset", "cost", "time", "answer stored",
                     "query"),
                    [[("yes" if r[k] else "NO (lost)") if k == "answered" else r[k]
                      for k in keys] for r in rows],
                    title=f"releases ({where}), newest first")
        if not rows:
            emit("  no charged requests" + (f" on {dataset}" if dataset else ""))

    @releases_app.command("show")
    @handle_errors
    def show_command(
        ctx: typer.Context,
        request_id: Annotated[str, typer.Argument(help="The request id (see `releases "
                                                       "list`).")],
        analyst: Annotated[str | None, ANALYST_OPTION] = None,
        ledger: Annotated[str | None, LEDGER_OPTION] = None,
        config: Annotated[Path | None, CONFIG_LEDGER_OPTION] = None,
        server: Annotated[str | None, SERVER_OPTION] = None,
        token: Annotated[str | None, TOKEN_OPTION] = None,
        report: Annotated[Path | None, REPORT_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Print a stored answer again, as `statcurator query` printed it (free)."""
        from . import query as local

        output_path(report, "--report", (".html", ".htm"))
        if asks_a_server(ctx, server, token,
                         {"--analyst": analyst, "--ledger": ledger, "--config": config}):
            from .serve import remote_release

            remote_release(str(server), token, request_id, report, json_output)
            return
        from .budget import _persistent

        who = analyst_of(analyst)
        with _persistent(ledger, create=False, config=config) as led:
            if not any(c.request_id == request_id for c in led.charges(who)):
                from ..core.errors import LedgerError

                raise LedgerError(f"analyst {who!r} has no request {request_id!r} in the "
                                  f"ledger {led.location}",
                                  remedy="list the requests: statcurator releases list "
                                         "[--analyst A]; a request is another analyst's if "
                                         "it was made under --analyst")
            payload = led.replay(who, request_id)
            rel = release_of(payload)
            if rel is None:
                show_payload(payload, request_id, json_output)
                return
            written = local.write_release_report(rel, report)
            local._show_release(_Held(led), rel, who, str(rel.provenance.get("dataset")),
                                json_output, [], written)


class _Held:
    """What ``query._show_release`` reads of a curator: its ledger."""

    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger


def release_of(payload: str) -> Any:
    """The query :class:`~statcurator.query.release.Release` a stored answer holds, replayed;
    None for another kind of answer (an estimator's, or a library user's own text).

    >>> release_of('{"columns": ["n"], "types": ["int64"], "rows": [[3]], '
    ...            '"cost": {"epsilon": "1"}}').replayed
    True
    >>> release_of('{"estimator": "median"}') is None, release_of("42") is None
    (True, True)
    """
    from ..query.release import Release

    try:
        doc = json.loads(payload)
    except ValueError:
        return None
    if not (isinstance(doc, dict) and {"columns", "types", "rows", "cost"} <= doc.keys()):
        return None
    return Release.from_dict(doc, replayed=True)


def show_payload(payload: str, request_id: str, json_output: bool) -> None:
    """A stored answer that is not a query release, as it was stored."""
    try:
        doc: Any = json.loads(payload)
    except ValueError:
        doc = payload
    if json_output:
        print_json({"request_id": request_id, "replayed": True, "answer": doc})
        return
    emit(f"stored answer of request {request_id} (replayed: no new cost):")
    emit(json.dumps(doc, indent=2, ensure_ascii=False) if not isinstance(doc, str) else doc)
