"""``statcurator budget set|grant|show|history``: dataset-wide budgets and per-analyst grants.

    statcurator budget set --dataset adult --epsilon 10 [--delta 1e-5]     # all analysts
    statcurator budget set --dataset adult --analyst alice --epsilon 1     # alice's grant
    statcurator budget grant --dataset adult --analyst alice --epsilon 1   # the same
    statcurator budget show [--dataset D] [--analyst A] [--json]
    statcurator budget history [--dataset D] [--analyst A] [--json]
    statcurator budget show|history --server URL --token T [--dataset D]  # an analyst's own

A dataset's budget bounds the privacy loss of its data across every analyst; a charge must
fit in it *and* in the analyst's grant. ``--rho`` sets a zCDP budget (for Gaussian work).
Every command takes ``--ledger PATH`` (default: see ``statcurator ledger --help``). With
``--server`` (and the analyst's ``--token``), ``show`` and ``history`` ask a running ``statcurator
serve`` for the token's analyst's own grants and charges instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import JSON_OPTION, emit, exact_option, handle_errors, print_json, print_table
from .ledger import (
    CONFIG_LEDGER_OPTION,
    LEDGER_OPTION,
    MEMORY,
    configured_file,
    ledger_path,
    missing_ledger,
    open_any_ledger,
    save_anchor,
)
from .serve import (
    SERVER_OPTION,
    TOKEN_OPTION,
    asks_a_server,
    remote_budget,
    remote_history,
)

DATASET_OPTION = typer.Option("--dataset", "-D", help="The dataset (its table name).")
ANALYST_OPTION = typer.Option("--analyst", "-a", help="The analyst (identity, normalized).")


def _status(s: Any) -> dict[str, Any]:
    return {"kind": s.kind, "total": str(s.total), "spent": str(s.spent),
            "remaining": str(s.remaining), "charges": s.charges, "exhausted": s.exhausted}


def _persistent(option: str | None, *, create: bool, config: Path | None = None) -> Any:
    """The ledger of ``--ledger`` or ``--config`` (a service's: SQLite or PostgreSQL)."""
    from ..core.errors import InvalidParameterError

    if config is None and ledger_path(option) == MEMORY:
        raise InvalidParameterError("budgets in a throwaway in-memory ledger are forgotten at "
                                    "once", remedy="pass --ledger PATH (or leave it out)")
    led = open_any_ledger(option, config, create=create)
    if led is None:
        raise missing_ledger(option, config)
    return led


def _check_service_names(config: Path, dataset: str, analyst: str | None) -> None:
    """With ``--config``, a budget names a dataset the service serves and an analyst it
    knows (the API refuses others too): a mistyped name would be a budget nobody uses."""
    from ..core.errors import InvalidParameterError
    from .serve import service

    core = service("_core")
    cfg = service("_config").ServiceConfig.load(str(config))
    if cfg.ledger.dsn is None:
        configured_file(cfg, config)  # a throwaway ledger is refused before anything opens
    datasets, known = {d.name for d in cfg.datasets}, set()
    if core.store_exists(cfg):  # (a refused grant must not leave a new store behind)
        store = core.open_store(cfg)
        try:
            datasets |= {d[0] for d in store.datasets()}
            known = {a["analyst"] for a in store.list()}
        finally:
            store.close()
    if dataset not in datasets:
        raise InvalidParameterError(
            f"the service configured in {config} serves no dataset {dataset!r}",
            remedy="its datasets: " + (", ".join(sorted(datasets)) or "none"))
    if analyst is not None and analyst not in known:
        raise InvalidParameterError(
            f"the service configured in {config} has no analyst {analyst!r}",
            remedy=f"create it first: statcurator analysts add {analyst} --config {config}")


def register(app: typer.Typer) -> None:
    budget_app = typer.Typer(help="Dataset-wide budgets and per-analyst grants.",
                             no_args_is_help=True)
    app.add_typer(budget_app, name="budget")

    @budget_app.command("set")
    @handle_errors
    def set_command(
        dataset: Annotated[str, DATASET_OPTION],
        analyst: Annotated[str | None, ANALYST_OPTION] = None,
        epsilon: Annotated[str | None, typer.Option("--epsilon", "-e", help="Total ε.")] = None,
        delta: Annotated[str | None, typer.Option("--delta", "-d", help="Total δ.")] = None,
        rho: Annotated[str | None, typer.Option("--rho", help="Total ρ (zCDP).")] = None,
        ledger: Annotated[str | None, LEDGER_OPTION] = None,
        config: Annotated[Path | None, CONFIG_LEDGER_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Set a dataset's budget (all analysts together), or an analyst's grant on it."""
        from ..core.errors import InvalidParameterError
        from ..core.measures import loss_from_parameters

        if epsilon is None and rho is None:
            raise InvalidParameterError("no budget given",
                                        remedy="pass --epsilon E (with --delta D), or --rho R")
        total = loss_from_parameters(
            epsilon=exact_option(epsilon, "epsilon"),
            delta=exact_option(delta, "delta", allow_zero=True),
            rho=exact_option(rho, "rho"))
        from ..accounting import analyst_id

        who = None if analyst is None else analyst_id(analyst)
        if config is not None:
            _check_service_names(config, dataset, who)
        with _persistent(ledger, create=True, config=config) as led:
            if who is None:
                status = led.set_dataset_budget(dataset, total)
            else:
                status = led.set_budget(who, dataset, total)
            save_anchor(led)
            location = led.location
        if json_output:
            print_json({"ledger": location, "dataset": dataset, "analyst": who,
                        **_status(status)})
            return
        whom = (f"dataset {dataset} (all analysts)" if who is None
                else f"analyst {who} on dataset {dataset}")
        emit(f"budget of {whom}: {status}")
        emit("ledger: ", location, stderr=True)

    @budget_app.command("grant")
    @handle_errors
    def grant_command(
        dataset: Annotated[str, DATASET_OPTION],
        analyst: Annotated[str, ANALYST_OPTION],
        epsilon: Annotated[str | None, typer.Option("--epsilon", "-e", help="Total ε.")] = None,
        delta: Annotated[str | None, typer.Option("--delta", "-d", help="Total δ.")] = None,
        rho: Annotated[str | None, typer.Option("--rho", help="Total ρ (zCDP).")] = None,
        ledger: Annotated[str | None, LEDGER_OPTION] = None,
        config: Annotated[Path | None, CONFIG_LEDGER_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Grant an analyst a budget on a dataset (the same as `budget set --analyst`)."""
        # by keyword: set_command's error handler reads json_output from its keywords
        set_command(dataset=dataset, analyst=analyst, epsilon=epsilon, delta=delta, rho=rho,
                    ledger=ledger, config=config, json_output=json_output)

    @budget_app.command("show")
    @handle_errors
    def show_command(
        ctx: typer.Context,
        dataset: Annotated[str | None, DATASET_OPTION] = None,
        analyst: Annotated[str | None, ANALYST_OPTION] = None,
        ledger: Annotated[str | None, LEDGER_OPTION] = None,
        config: Annotated[Path | None, CONFIG_LEDGER_OPTION] = None,
        server: Annotated[str | None, SERVER_OPTION] = None,
        token: Annotated[str | None, TOKEN_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Show dataset budgets and grants (optionally of one dataset / analyst); with
        --server, your own grants on a running service."""
        from ..accounting import analyst_id

        if asks_a_server(ctx, server, token,
                         {"--analyst": analyst, "--ledger": ledger, "--config": config}):
            remote_budget(str(server), token, dataset, json_output)
            return
        who = None if analyst is None else analyst_id(analyst)
        with _persistent(ledger, create=False, config=config) as led:
            datasets = {d: s for d, s in led.dataset_budgets().items()
                        if dataset is None or d == dataset}
            grants = {k: s for k, s in led.budgets().items()
                      if (dataset is None or k[1] == dataset) and (who is None or k[0] == who)}
            location = led.location
        if json_output:
            print_json({"ledger": location,
                        "datasets": [{"dataset": d, **_status(s)} for d, s in datasets.items()],
                        "grants": [{"analyst": a, "dataset": d, **_status(s)}
                                   for (a, d), s in grants.items()]})
            return
        _tables(location, datasets, grants)

    @budget_app.command("history")
    @handle_errors
    def history_command(
        ctx: typer.Context,
        dataset: Annotated[str | None, DATASET_OPTION] = None,
        analyst: Annotated[str | None, ANALYST_OPTION] = None,
        ledger: Annotated[str | None, LEDGER_OPTION] = None,
        config: Annotated[Path | None, CONFIG_LEDGER_OPTION] = None,
        server: Annotated[str | None, SERVER_OPTION] = None,
        token: Annotated[str | None, TOKEN_OPTION] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Budget records and charges, oldest first; with --server, your own on a running
        service."""
        if asks_a_server(ctx, server, token,
                         {"--analyst": analyst, "--ledger": ledger, "--config": config}):
            remote_history(str(server), token, dataset, json_output)
            return
        with _persistent(ledger, create=False, config=config) as led:
            rows = led.entries(analyst=analyst, dataset=dataset,
                               types=("dataset_budget", "grant", "charge"))
            location = led.location
        events = [_event(e) for e in rows]
        if json_output:
            print_json({"ledger": location, "events": events})
            return
        keys = ("seq", "at", "event", "analyst", "dataset", "amount", "request_id", "query")
        print_table(("#", "time", "event", "analyst", "dataset", "amount", "request id",
                     "query"), [["" if ev[k] is None else ev[k] for k in keys] for ev in events],
                    title=f"history ({location})")


def _event(e: Any) -> dict[str, Any]:
    names = {"dataset_budget": "dataset budget set", "grant": "grant set", "charge": "charge"}
    return {"seq": e.seq, "at": e.at, "event": names[e.type], "analyst": e.analyst,
            "dataset": e.dataset, "amount": str(e.amount), "request_id": e.request_id,
            "query": e.query}


def _tables(location: str, datasets: dict[str, Any], grants: dict[tuple[str, str], Any]) -> None:
    def cells(s: Any) -> list[Any]:
        return [s.total, s.spent, s.remaining, s.charges]

    print_table(("dataset", "total", "spent", "remaining", "charges"),
                [[d, *cells(s)] for d, s in datasets.items()],
                title=f"dataset-wide budgets ({location})")
    print_table(("analyst", "dataset", "total", "spent", "remaining", "charges"),
                [[a, d, *cells(s)] for (a, d), s in grants.items()], title="grants")
