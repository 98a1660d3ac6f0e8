"""``statcurator serve``: the curator service (HTTP API + web console), and the client side
of ``statcurator query --server URL --token T``.

    statcurator serve [--config curator.toml] [--host H] [--port P] [--workers N] [--json]

Without ``--config`` it starts on http://127.0.0.1:8750/ with DuckDB, the command line's SQLite
ledger (in the user's data directory) and the bundled Adult data with a demo budget, and prints
the console's URL and, on first start, the admin token (shown once). docs/service.md
describes the configuration file and its environment overrides.

The service package sits *below* the command line in DESIGN.md's layers (it reuses the CLI's
ledger helpers), so the CLI loads it by name at run time — as uvicorn loads the app — and never
imports it at module level.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import JSON_OPTION, handle_errors

CONFIG_OPTION = typer.Option("--config", "-c", help="Service configuration (TOML); default: "
                                                   "the demo on localhost.")


def service(module: str) -> Any:
    """A module of ``statcurator.service``, loaded by name (see the module docs); a missing
    ``service`` extra is refused with the install command."""
    from ..core.errors import InvalidParameterError

    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise InvalidParameterError(f"the service needs {', '.join(missing)}, which is not "
                                    "installed", remedy="pip install -e '.[service]' (or "
                                                        "pip install 'statcurator[service]')")
    return importlib.import_module(f"statcurator.service.{module}")


def register(app: typer.Typer) -> None:
    @app.command("serve")
    @handle_errors
    def serve_command(
        config: Annotated[Path | None, CONFIG_OPTION] = None,
        host: Annotated[str | None, typer.Option("--host", help="Address to listen on "
                                                 "(default 127.0.0.1).")] = None,
        port: Annotated[int | None, typer.Option("--port", help="Port (default 8750; 0: a "
                                                 "free one).")] = None,
        workers: Annotated[int | None, typer.Option(
            "--workers", help="Worker processes (several need PostgreSQL or share the "
                              "SQLite file on this machine).")] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Serve the curator: HTTP API, OpenAPI at /docs, web console at /.

        Example: pip install -e '.[service]' && statcurator serve
        """
        service("_run").serve(str(config) if config else None, host=host, port=port,
                              workers=workers, as_json=json_output)


# -- the client side of `statcurator query --server` -------------------------------------------

def remote_query(server: str, token: str | None, sql: str, *, epsilon: Any, delta: Any,
                 alpha: float, dry_run: bool, request_id: str | None, rows: int | None,
                 json_output: bool, warnings: list[str], rho: Any = None,
                 nonnegative: bool = False, report: Any = None) -> None:
    """Ask a running service; print what the local ``statcurator query`` prints."""
    from ..core.errors import InvalidParameterError
    from . import query as local

    if not token:
        raise InvalidParameterError("no API token for the server",
                                    remedy="pass --token T (or set STATCURATOR_TOKEN)")
    body: dict[str, Any] = {"sql": sql, "alpha": alpha}
    for key, value in (("epsilon", epsilon), ("delta", delta), ("rho", rho)):
        if value is not None:
            body[key] = str(value)
    if nonnegative:
        body["nonnegative"] = True
    if dry_run:
        out = _call(server, token, "/v1/queries/dry-run", body)
        budget = out["budget"]
        mine = budget.get("analyst")
        view = {"ledger": server, "analyst": "(your token)", "dataset": out["dataset"],
                "grant_remaining": _text(mine["remaining"]) if mine else None,
                "dataset_remaining": _text(budget["dataset_remaining"])
                if budget.get("dataset_remaining") else None}
        local._dry_run(_RemoteQuery(out, rows), epsilon, delta, alpha, rows, json_output, view,
                       warnings, rho=rho)
        return
    out = _call(server, token, "/v1/queries", body, request_id)
    from ..query.release import Release

    rel = Release.from_dict(out["release"], replayed=bool(out["replayed"]))
    who = rel.provenance.get("analyst", "(your token)")
    written = local.write_release_report(rel, report)
    local._show_release(_RemoteCurator(server, out["budget"]), rel, who, out["dataset"],
                        json_output, warnings, written)


def _call(server: str, token: str, path: str, body: dict[str, Any],
          request_id: str | None = None) -> dict[str, Any]:
    import json
    import urllib.error
    import urllib.request

    from ..core import errors

    url = server.rstrip("/") + path
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json"}
    if request_id:
        headers["Idempotency-Key"] = request_id
    req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:  # noqa: S310 - the user's URL
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        try:
            doc = json.loads(e.read())
        except ValueError:
            doc = {"detail": f"HTTP {e.code} {e.reason}"}
        kind = getattr(errors, str(doc.get("error")), None)
        if not (isinstance(kind, type) and issubclass(kind, errors.StatcuratorError)):
            kind = errors.InvalidParameterError
        raise kind(f"the server refused ({e.code}): {doc.get('detail')}",
                   remedy=doc.get("remedy")) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise errors.DataError(f"cannot reach the server {server}: {getattr(e, 'reason', e)}",
                               remedy="check --server URL (is `statcurator serve` running?)"
                               ) from None


def _loss(d: dict[str, str]) -> Any:
    from ..query.release import loss_from_dict

    return loss_from_dict(d)


def _text(d: dict[str, str]) -> str:
    return str(_loss(d))


class _RemoteCurator:
    """What ``query._show_release`` reads of a curator, from the server's answer."""

    def __init__(self, server: str, budget: dict[str, Any]) -> None:
        self.ledger = _RemoteLedger(server, budget)


class _RemoteLedger:
    persistent = True

    def __init__(self, server: str, budget: dict[str, Any]) -> None:
        self.location = server
        self._budget = budget

    def status(self, analyst: str, dataset: str) -> Any:
        from fractions import Fraction

        from ..accounting import BudgetStatus
        from ..core.measures import ZCDP, ApproxDP, PureDP

        b = self._budget["analyst"]

        def loss(d: dict[str, str]) -> Any:  # in the budget's own currency, as the server's
            if b["kind"] == "zcdp":
                return ZCDP(Fraction(d["rho"]))
            if b["kind"] == "approx":
                return ApproxDP(Fraction(d["epsilon"]), Fraction(d.get("delta", "0")))
            return PureDP(Fraction(d["epsilon"]))

        return BudgetStatus(loss(b["total"]), loss(b["spent"]), loss(b["remaining"]),
                            b["charges"])

    def dataset_status(self, dataset: str) -> Any:
        return _Remaining(_loss(self._budget["dataset_remaining"]))


class _Remaining:
    """The dataset-wide budget as an analyst sees it: only what remains for everyone."""

    def __init__(self, remaining: Any) -> None:
        self.remaining = remaining

    def __str__(self) -> str:
        return f"remaining {self.remaining} (all analysts together)"


class _RemoteQuery:
    """What ``query._dry_run`` reads of a query, from the server's dry run."""

    def __init__(self, out: dict[str, Any], rows: int | None) -> None:
        self.query_text = out["query"]
        self._out = out

    def bind(self, epsilon: Any, delta: Any, rho: Any = None) -> Any:
        from fractions import Fraction
        from types import SimpleNamespace

        out = self._out

        def num(x: Any) -> Any:
            return None if x is None else Fraction(str(x))

        def info(m: dict[str, Any]) -> Any:
            return SimpleNamespace(
                as_dict=lambda m=m: m, label=m.get("measure", ""), mechanism=m["mechanism"],
                epsilon=num(m.get("epsilon", m.get("rho", 0))), rho=num(m.get("rho")),
                sensitivity=num(m.get("sensitivity")), scale=num(m.get("scale")))

        return SimpleNamespace(accuracy=lambda alpha, rows: out["accuracy"],
                               infos=[info(m) for m in out["mechanisms"]],
                               cost=_loss(out["cost"]))
