"""``statcurator query``: answer one SQL query with differential privacy.

    statcurator query DATA --metadata M.toml --epsilon 0.5 [--delta D] [--alpha 0.05]
                      [--engine duckdb|spark] [--dry-run] [--json]
                      [--ledger PATH|:memory:] [--analyst NAME] [--request-id ID] "SELECT ..."
    statcurator query --server URL --token T --epsilon 0.5 [--dry-run] "SELECT ..."

DATA is a CSV or Parquet file, a DuckDB database (``FILE.duckdb`` or ``FILE.duckdb:TABLE``),
or ``adult`` (the bundled demo, table ``adult``). The table is named by the metadata's
``[table] name`` (else the file name).

Every answer is charged to a persistent privacy ledger: ``--ledger PATH``, else
``$STATCURATOR_LEDGER``, else ``ledger.db`` in the user's data directory (its location is
printed). The dataset needs a dataset-wide budget and the analyst a grant, set with
``statcurator budget set``; without them nothing is spent and nothing answered. The analyst is
``--analyst NAME``, else the operating-system user, normalized. ``--ledger :memory:`` asks for
a throwaway ledger whose only budget is this query's cost, forgotten when the command exits
(and said so). ``--dry-run`` shows the cost, the accuracy and the remaining budgets.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import (
    JSON_OPTION,
    console,
    emit,
    exact_option,
    handle_errors,
    print_json,
    print_table,
)
from .ledger import LEDGER_OPTION, MEMORY, ledger_path, open_ledger, save_anchor


def register(app: typer.Typer) -> None:
    @app.command("query")
    @handle_errors
    def query_command(
        data: Annotated[str, typer.Argument(
            help="CSV/Parquet file, DuckDB database (FILE.duckdb[:TABLE]), or 'adult' "
                 "(with --server: the SQL query alone).")],
        epsilon: Annotated[str, typer.Option("--epsilon", "-e",
                                             help="Privacy loss ε to spend.")],
        sql: Annotated[str | None, typer.Argument(
            help="The SQL query (an aggregate SELECT).")] = None,
        metadata: Annotated[Path | None, typer.Option(
            "--metadata", "-m", help="Dataset metadata (TOML).")] = None,
        delta: Annotated[str | None, typer.Option(
            "--delta", "-d", help="δ (needed for keys without a public key set).")] = None,
        alpha: Annotated[float, typer.Option(
            "--alpha", help="Error rate of the confidence intervals.")] = 0.05,
        engine: Annotated[str, typer.Option("--engine", help="duckdb or spark.")] = "duckdb",
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="Print cost and accuracy; touch no data, spend nothing.")] = False,
        ledger: Annotated[str | None, LEDGER_OPTION] = None,
        analyst: Annotated[str | None, typer.Option(
            "--analyst", help="Whose budget is charged (default: the OS user).")] = None,
        request_id: Annotated[str | None, typer.Option(
            "--request-id", help="Idempotency key: a replay returns the stored answer, free.")] = None,
        rows: Annotated[int | None, typer.Option(
            "--rows", help="Public estimate of n for the accuracy of AVG in dry runs.")] = None,
        server: Annotated[str | None, typer.Option(
            "--server", help="Ask a running `statcurator serve` at this URL instead.")] = None,
        token: Annotated[str | None, typer.Option(
            "--token", envvar="STATCURATOR_TOKEN", help="API token for --server.")] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Answer an aggregate SQL query with differential privacy (intervals included)."""
        from ..core.errors import InvalidParameterError
        from ..curator import Curator

        eps = exact_option(epsilon, "epsilon")
        dlt = exact_option(delta, "delta", allow_zero=True) if delta is not None else None
        if not 0 < alpha < 1:
            raise InvalidParameterError(f"--alpha must be in (0, 1), got {alpha}",
                                        remedy="--alpha 0.05 gives 95% intervals")
        if engine not in ("duckdb", "spark"):
            raise InvalidParameterError(f"unknown engine {engine!r}", remedy="use duckdb or spark")
        if server is not None:  # the client side: the server's token is the analyst
            from .serve import remote_query

            remote_query(server, token, sql if sql is not None else data, epsilon=eps,
                         delta=dlt, alpha=alpha, dry_run=dry_run, request_id=request_id,
                         rows=rows, json_output=json_output, warnings=_warnings(eps))
            return
        if sql is None:
            raise InvalidParameterError("no SQL query given",
                                        remedy='pass DATA and then the query, e.g. statcurator '
                                               'query adult --epsilon 1 "SELECT COUNT(*) FROM '
                                               'adult"')
        who = _analyst(analyst)
        location = ledger_path(ledger)
        throwaway = location == MEMORY
        warnings = _warnings(eps)
        if dry_run:
            cur = Curator(engine="memory", default_budget=None, dataset_budget=None,
                          alpha=alpha)
            try:
                name = _register(cur, data, metadata, dry_run)
                q = cur.sql(sql)
                budget = None if throwaway else _remaining(ledger, who, name)
                _dry_run(q, eps, dlt, alpha, rows, json_output, budget, warnings)
            finally:
                cur.close()
            return
        led = None if throwaway else open_ledger(ledger)
        cur = Curator(engine=engine, ledger=led, default_budget=None, dataset_budget=None,
                      alpha=alpha)
        try:
            name = _register(cur, data, metadata, dry_run)
            q = cur.sql(sql)
            if throwaway:  # a one-off release: the budget is exactly this query's cost
                cost = q.bind(eps, dlt).cost
                cur.set_dataset_budget(name, cost)
                cur.set_budget(who, name, cost)
            if json_output:
                rel = q.release(eps, dlt, analyst=who, request_id=request_id, alpha=alpha)
            else:
                for w in warnings:
                    emit(("warning: ", "bold yellow"), w, stderr=True)
                _where(cur.ledger, stderr=True)
                with console(stderr=True).status(f"running the query on {engine}..."):
                    rel = q.release(eps, dlt, analyst=who, request_id=request_id,
                                    alpha=alpha)
            if not throwaway:
                save_anchor(cur.ledger)
            _show_release(cur, rel, who, name, json_output, warnings)
        finally:
            cur.close()


def _analyst(option: str | None) -> str:
    """The CLI's analyst identity: ``--analyst``, else the operating-system user."""
    import getpass

    from ..accounting import analyst_id
    from ..core.errors import InvalidParameterError

    if option is not None:
        return analyst_id(option)
    try:
        return analyst_id(getpass.getuser())
    except (InvalidParameterError, KeyError, OSError) as e:
        raise InvalidParameterError("the operating-system user name cannot be used as the "
                                    f"analyst identity ({e})", remedy="pass --analyst NAME"
                                    ) from None


def _warnings(eps: Any) -> list[str]:
    if eps > 10:
        return [f"ε={float(eps):g} is large: an answer at this ε carries little privacy "
                "protection (each extra unit of ε multiplies what an observer can learn "
                "about one person by up to e ≈ 2.7)"]
    return []


def _where(led: Any, stderr: bool) -> None:
    if led.persistent:
        emit("ledger: ", led.location, stderr=stderr)
    else:
        emit(("ledger: throwaway, in memory (--ledger :memory:): ", "bold yellow"),
             "this charge is forgotten when the command exits", stderr=stderr)


def _ledger_json(led: Any) -> dict[str, Any]:
    return {"ledger": led.location, "ledger_persistent": led.persistent}


def _remaining(option: str | None, who: str, dataset: str) -> dict[str, Any]:
    """What is left of the analyst's grant and of the dataset's budget (nothing created)."""
    from ..accounting import NoBudgetError

    out: dict[str, Any] = {"ledger": ledger_path(option), "analyst": who, "dataset": dataset,
                           "grant_remaining": None, "dataset_remaining": None}
    led = open_ledger(option, create=False)
    if led is None:
        return out
    with led:
        for key, read in (("grant_remaining", lambda: led.status(who, dataset)),
                          ("dataset_remaining", lambda: led.dataset_status(dataset))):
            with contextlib.suppress(NoBudgetError):
                out[key] = str(read().remaining)
    return out


def _register(cur: Any, data: str, metadata: Path | None, dry_run: bool) -> str:
    from .. import datasets
    from ..core.errors import MetadataError
    from ..io.metadata import load_metadata

    if data in datasets.names() and not Path(data).exists():
        ds = datasets.load(data)
        meta = load_metadata(metadata) if metadata is not None else ds.meta
        name = data
        if dry_run:
            cur.register(name, None, meta.replace(source=None))
        else:
            cur.register(name, ds.with_meta(meta))
        return name
    path = Path(data.rpartition(":")[0] if (":" in Path(data).name and not Path(data).exists())
                else data)
    meta = None
    if metadata is not None:
        meta = load_metadata(metadata)
    elif path.with_suffix(".toml").exists():
        meta = load_metadata(path.with_suffix(".toml"))
    name = meta.name if meta is not None else path.stem
    if dry_run:
        if meta is None:
            raise MetadataError("a dry run needs the dataset's metadata (it reads no data)",
                                remedy="pass --metadata M.toml")
        cur.register(name, None, meta.replace(source=None))
    else:
        cur.register(name, data, meta)
    return name


def _dry_run(q: Any, eps: Any, delta: Any, alpha: float, rows: int | None, as_json: bool,
             budget: dict[str, Any] | None, warnings: list[str]) -> None:
    bound = q.bind(eps, delta)
    acc = bound.accuracy(alpha, rows)
    mechanisms = [i.as_dict() for i in bound.infos]
    cost = bound.cost
    if as_json:
        print_json({"dry_run": True, "query": q.query_text,
                    "epsilon": getattr(cost, "epsilon", 0), "delta": getattr(cost, "delta", 0),
                    "alpha": alpha, "accuracy": acc, "mechanisms": mechanisms,
                    "budget": budget, "warnings": warnings})
        return
    t = []
    for a in acc:
        if a.get("halfwidth") is not None:
            h = f"{a['halfwidth']:.6g}"
        elif a.get("rank_error") is not None:
            h = f"rank ±{a['rank_error']:.4g} rows"
        elif a.get("threshold") is not None:
            h = f"threshold {a['threshold']:g} units"
        else:
            comps = ", ".join(f"{k} ±{v:.4g}" for k, v in a.get("components", {}).items())
            h = f"depends on n ({comps})"
        t.append((a["output"], a["aggregate"], a["mechanism"], h))
    print_table(("output", "aggregate", "mechanism", f"±{(1 - alpha) * 100:g}%"), t,
                title=f"dry run: cost {cost} (no data read, nothing spent)")
    print_table(("measure", "mechanism", "ε", "sensitivity", "scale"),
                [(m.label, m.mechanism, f"{float(m.epsilon):.6g}", _num(m.sensitivity),
                  "" if m.scale is None else f"{float(m.scale):.6g}") for m in bound.infos],
                title="ε split")
    for w in warnings:
        emit(("warning: ", "bold yellow"), w)
    if budget is None:
        emit("remaining budget: none (--ledger :memory: is a one-off budget of this cost)")
        return
    who, dataset = budget["analyst"], budget["dataset"]
    emit(f"remaining budget ({budget['ledger']}):")
    emit(f"  analyst {who} on {dataset}: ", budget["grant_remaining"]
         or f"no grant (statcurator budget set --dataset {dataset} --analyst {who} --epsilon E)")
    emit(f"  dataset {dataset}, all analysts: ", budget["dataset_remaining"]
         or f"no budget (statcurator budget set --dataset {dataset} --epsilon E)")


def _num(x: Any) -> str:
    return str(x) if getattr(x, "denominator", 2) == 1 else f"{float(x):.6g}"


def _show_release(cur: Any, rel: Any, analyst: str, dataset: str, as_json: bool,
                  warnings: list[str]) -> None:
    mech = {col: [{"mechanism": i["mechanism"], "scale": i.get("scale"),
                   "epsilon": i.get("epsilon"), "measure": i.get("measure")}
                  for i in infos]
            for col, infos in rel.mechanisms.items()}
    led = cur.ledger
    grant, data = led.status(analyst, dataset), led.dataset_status(dataset)
    if as_json:
        out = {"rows": rel.rows(), "epsilon_spent": rel.epsilon_spent,
               "delta_spent": rel.delta_spent, "mechanisms": _floats(mech),
               "alpha": rel.alpha, "replayed": rel.replayed,
               "request_id": rel.provenance.get("request_id"), "analyst": analyst,
               **_ledger_json(led), "budget_remaining": str(grant.remaining),
               "dataset_budget_remaining": str(data.remaining), "warnings": warnings}
        print_json(out)
        return
    heads, cells = rel.display()
    print_table(heads, cells, title=rel._header())
    for line in rel.mechanism_lines():
        emit("  " + line)
    emit(f"  budget of {analyst} on {dataset}: {grant}")
    emit(f"  dataset-wide budget of {dataset}: {data}")


def _floats(x: Any) -> Any:
    from fractions import Fraction

    if isinstance(x, dict):
        return {k: _floats(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_floats(v) for v in x]
    if isinstance(x, str):
        try:
            return float(Fraction(x))
        except (ValueError, ZeroDivisionError):
            return x
    return x
