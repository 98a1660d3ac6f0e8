"""``statcurator serve``: the curator service (HTTP API + web console), and the client side
of ``statcurator query|budget show|budget history|releases list|releases show --server URL
--token T``.

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


# -- the client side: `statcurator query|budget|releases ... --server URL` --------------------

SERVER_OPTION = typer.Option("--server", help="Ask a running `statcurator serve` at this URL "
                                              "instead.")
TOKEN_OPTION = typer.Option("--token", envvar="STATCURATOR_TOKEN", help="API token for "
                                                                        "--server.")

#: why an option of the local commands means nothing with --server
_LOCAL_ONLY = {
    "--analyst": "the server acts for the analyst its token belongs to",
    "--ledger": "the server keeps its own ledger",
    "--metadata": "the server's datasets and their metadata are registered by its curator",
    "--input-separator": "the server's datasets are registered by its curator",
    "--engine": "the server runs the engine its curator configured",
    "--config": "the server reads its own configuration",
}


def refuse_local_options(given: dict[str, Any]) -> None:
    """Refuse, instead of ignoring, the options in ``given`` (flag -> value; None: not given)
    that only the local command reads: with ``--server``, the token says who the analyst is,
    and the server has its own ledger, data and engine.

    >>> refuse_local_options({"--analyst": None, "--ledger": None})
    >>> refuse_local_options({"--analyst": "bob"})
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: --analyst cannot be used with --server: the server acts for the analyst its token belongs to; drop --analyst (or drop --server to use the local command)
    """
    from ..core.errors import InvalidParameterError

    for flag, value in given.items():
        if value is not None:
            raise InvalidParameterError(f"{flag} cannot be used with --server: "
                                        f"{_LOCAL_ONLY[flag]}",
                                        remedy=f"drop {flag} (or drop --server to use the "
                                               "local command)")


def refuse_token_without_server(token: str | None, ctx: Any = None) -> None:
    """Refuse ``--token`` given without ``--server``, where it would be ignored; a token that
    comes from ``$STATCURATOR_TOKEN`` (set for every command) is fine. ``ctx`` (the command's
    context) says where the value came from; without it, a value equal to the variable's is
    taken to come from it.

    >>> refuse_token_without_server(None)
    >>> refuse_token_without_server("sct_x")
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: --token is read only with --server; add --server URL (a running statcurator serve), or drop --token to use the local ledger
    """
    import os

    from ..core.errors import InvalidParameterError

    if token is None:
        return
    source = None if ctx is None else ctx.get_parameter_source("token")
    if source is not None:
        from_environment = getattr(source, "name", "") == "ENVIRONMENT"
    else:
        from_environment = token == os.environ.get("STATCURATOR_TOKEN")
    if not from_environment:
        raise InvalidParameterError("--token is read only with --server",
                                    remedy="add --server URL (a running statcurator serve), "
                                           "or drop --token to use the local ledger")


def asks_a_server(ctx: Any, server: str | None, token: str | None,
                  local: dict[str, Any]) -> bool:
    """Whether the command is the client side of a running service (``--server``). Then the
    options in ``local`` (flag -> value) that only the local command reads are refused;
    otherwise a typed ``--token``, which would be ignored, is."""
    if server is not None:
        refuse_local_options(local)
        return True
    refuse_token_without_server(token, ctx)
    return False


def _token(token: str | None) -> str:
    from ..core.errors import InvalidParameterError

    if not token:
        raise InvalidParameterError("no API token for the server",
                                    remedy="pass --token T (or set STATCURATOR_TOKEN)")
    return token


def remote_budget(server: str, token: str | None, dataset: str | None,
                  json_output: bool) -> None:
    """``statcurator budget show --server``: the token's analyst's grants, each with what its
    dataset has left for all analysts together (``GET /v1/budget``)."""
    from ._common import print_json, print_table

    doc = _call(server, _token(token), "/v1/budget")
    grants = [g for g in doc["grants"] if dataset is None or g["dataset"] == dataset]
    rows = [{"analyst": doc["analyst"], "dataset": g["dataset"], "kind": g["kind"],
             **{k: _text(g[k]) for k in ("total", "spent", "remaining")},
             "charges": g["charges"], "exhausted": g["exhausted"],
             "dataset_remaining": None if g.get("dataset_remaining") is None
             else _text(g["dataset_remaining"])} for g in grants]
    if json_output:
        print_json({"server": server, "analyst": doc["analyst"], "grants": rows})
        return
    print_table(("dataset", "total", "spent", "remaining", "charges", "dataset-wide remaining"),
                [[r["dataset"], r["total"], r["spent"], r["remaining"], r["charges"],
                  r["dataset_remaining"] or "(none)"] for r in rows],
                title=f"grants of {doc['analyst']} ({server})")


def remote_history(server: str, token: str | None, dataset: str | None,
                   json_output: bool) -> None:
    """``statcurator budget history --server``: the token's analyst's grants and charges,
    oldest first (``GET /v1/budget/history``)."""
    from ._common import print_json, print_table

    doc = _call(server, _token(token), "/v1/budget/history")
    events = [{"analyst": doc["analyst"], **e} for e in doc["events"]
              if dataset is None or e["dataset"] == dataset]
    if json_output:
        print_json({"server": server, "analyst": doc["analyst"], "events": events})
        return
    keys = ("at", "event", "dataset", "amount", "request_id", "query")
    print_table(("time", "event", "dataset", "amount", "request id", "query"),
                [["" if e.get(k) is None else e[k] for k in keys] for e in events],
                title=f"history of {doc['analyst']} ({server})")


def remote_releases(server: str, token: str | None) -> tuple[str, str, list[dict[str, Any]]]:
    """``statcurator releases list --server``: (server, analyst, the token's analyst's charged
    requests, newest first) from ``GET /v1/releases``."""
    doc = _call(server, _token(token), "/v1/releases")
    return server, doc["analyst"], [
        {"request_id": r["request_id"], "analyst": doc["analyst"], "dataset": r["dataset"],
         "cost": r["cost_text"], "at": r["at"], "answered": r["answered"], "query": r["query"]}
        for r in doc["releases"]]


def remote_release(server: str, token: str | None, request_id: str, report: Path | None,
                   json_output: bool) -> None:
    """``statcurator releases show --server``: one of the token's analyst's stored answers
    (``GET /v1/releases/{id}``, free), printed as ``statcurator query`` prints a release, with
    what is left of the analyst's grant on its dataset."""
    import json
    import urllib.parse

    from . import query as local
    from .releases import release_of, show_payload

    token = _token(token)
    doc = _call(server, token, "/v1/releases/" + urllib.parse.quote(request_id, safe=""),
                remedies={404: "list yours: statcurator releases list --server URL --token T"})
    rel = release_of(json.dumps(doc["release"]))
    if rel is None:
        show_payload(json.dumps(doc["release"]), request_id, json_output)
        return
    dataset = str(rel.provenance.get("dataset"))
    grants = _call(server, token, "/v1/budget")["grants"]
    mine = next((g for g in grants if g["dataset"] == dataset), None)
    budget = {"analyst": mine, "dataset_remaining": None if mine is None
              else mine.get("dataset_remaining")}
    written = local.write_release_report(rel, report)
    local._show_release(_RemoteCurator(server, budget), rel,
                        rel.provenance.get("analyst", "(your token)"), dataset, json_output, [],
                        written)


def remote_query(server: str, token: str | None, sql: str, *, epsilon: Any, delta: Any,
                 alpha: float, dry_run: bool, request_id: str | None, rows: int | None,
                 json_output: bool, warnings: list[str], rho: Any = None,
                 nonnegative: bool = False, report: Any = None) -> None:
    """Ask a running service; print what the local ``statcurator query`` prints."""
    from . import query as local

    token = _token(token)
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


#: request fields whose JSON form (``"delta": 1e-6``) a server's remedy may name: the client
#: names them as its own flags (``--delta 1e-6``)
_REQUEST_FIELDS = ("epsilon", "delta", "rho", "alpha", "nonnegative")


def _call(server: str, token: str, path: str, body: dict[str, Any] | None = None,
          request_id: str | None = None, *,
          remedies: dict[int, str] | None = None) -> dict[str, Any]:
    """The JSON answer of ``POST path`` with ``body`` (``GET path`` without); a refusal is
    raised as the server's error, its remedy in the command line's terms (``remedies``: the
    command's own remedy for a status, in place of the server's, which names endpoints)."""
    import json
    import urllib.error
    import urllib.request

    from ..core import errors
    from ._common import keyword_form

    url = server.rstrip("/") + path
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if request_id:
        headers["Idempotency-Key"] = request_id
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, headers, method="GET" if body is None else "POST")
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
        remedy = (remedies or {}).get(e.code, doc.get("remedy"))
        raise kind(f"the server refused ({e.code}): {doc.get('detail')}",
                   remedy=keyword_form(remedy, _REQUEST_FIELDS) if isinstance(remedy, str)
                   else None) from None
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
        if b is None:  # no grant (any more) on the dataset
            return _Remaining(None, "no grant on this dataset")

        def loss(d: dict[str, str]) -> Any:  # in the budget's own currency, as the server's
            if b["kind"] == "zcdp":
                return ZCDP(Fraction(d["rho"]))
            if b["kind"] == "approx":
                return ApproxDP(Fraction(d["epsilon"]), Fraction(d.get("delta", "0")))
            return PureDP(Fraction(d["epsilon"]))

        return BudgetStatus(loss(b["total"]), loss(b["spent"]), loss(b["remaining"]),
                            b["charges"])

    def dataset_status(self, dataset: str) -> Any:
        left = self._budget.get("dataset_remaining")
        if left is None:
            return _Remaining(None, "no dataset-wide budget")
        return _Remaining(_loss(left))


class _Remaining:
    """The dataset-wide budget as an analyst sees it: only what remains for everyone (or
    ``text`` when there is none to show)."""

    def __init__(self, remaining: Any, text: str | None = None) -> None:
        self.remaining = remaining
        self._text = text

    def __str__(self) -> str:
        if self._text is not None:
            return self._text
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
