"""``statcurator query``: answer one SQL query with differential privacy.

    statcurator query DATA --metadata M.toml --epsilon 0.5 [--delta D] [--alpha 0.05]
                      [--engine duckdb|spark] [--dry-run] [--json]
                      [--ledger curator.db --analyst alice] "SELECT ..."

DATA is a CSV or Parquet file, a DuckDB database (``FILE.duckdb`` or ``FILE.duckdb:TABLE``),
or ``adult`` (the bundled demo, table ``adult``). The table is named by the metadata's
``[table] name`` (else the file name). Without ``--ledger`` the query is a one-off release
whose budget is exactly its cost; with ``--ledger`` the analyst's persistent budget is
charged (the default budget policy applies on first use).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import JSON_OPTION, console, exact_option, handle_errors, print_json


def register(app: typer.Typer) -> None:
    @app.command("query")
    @handle_errors
    def query_command(
        data: Annotated[str, typer.Argument(
            help="CSV/Parquet file, DuckDB database (FILE.duckdb[:TABLE]), or 'adult'.")],
        sql: Annotated[str, typer.Argument(help="The SQL query (an aggregate SELECT).")],
        epsilon: Annotated[str, typer.Option("--epsilon", "-e",
                                             help="Privacy loss ε to spend.")],
        metadata: Annotated[Path | None, typer.Option(
            "--metadata", "-m", help="Dataset metadata (TOML).")] = None,
        delta: Annotated[str | None, typer.Option(
            "--delta", "-d", help="δ (needed for keys without a public key set).")] = None,
        alpha: Annotated[float, typer.Option(
            "--alpha", help="Error rate of the confidence intervals.")] = 0.05,
        engine: Annotated[str, typer.Option("--engine", help="duckdb or spark.")] = "duckdb",
        dry_run: Annotated[bool, typer.Option(
            "--dry-run", help="Print cost and accuracy; touch no data, spend nothing.")] = False,
        ledger: Annotated[Path | None, typer.Option(
            "--ledger", help="Persistent privacy ledger (SQLite file).")] = None,
        analyst: Annotated[str, typer.Option(
            "--analyst", help="Whose budget is charged.")] = "cli",
        request_id: Annotated[str | None, typer.Option(
            "--request-id", help="Idempotency key: a replay returns the stored answer, free.")] = None,
        rows: Annotated[int | None, typer.Option(
            "--rows", help="Public estimate of n for the accuracy of AVG in dry runs.")] = None,
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
        from ..curator import DEFAULT_BUDGET

        # without --ledger the budget is exactly this query's cost (set below); with one,
        # the default budget policy applies to an analyst's first query
        cur = Curator(engine=engine if not dry_run else "memory",
                      ledger=str(ledger) if ledger is not None else None,
                      default_budget=DEFAULT_BUDGET if ledger is not None else None,
                      alpha=alpha)
        try:
            name = _register(cur, data, metadata, dry_run)
            q = cur.sql(sql)
            if dry_run:
                _dry_run(q, eps, dlt, alpha, rows, json_output)
                return
            bound = q.bind(eps, dlt)
            if ledger is None:
                cur.set_budget(analyst, name, bound.cost)
            quiet = json_output
            if quiet:
                rel = q.release(eps, dlt, analyst=analyst, request_id=request_id, alpha=alpha)
            else:
                with console(stderr=True).status(f"running the query on {engine}..."):
                    rel = q.release(eps, dlt, analyst=analyst, request_id=request_id,
                                    alpha=alpha)
            _show_release(cur, rel, analyst, name, ledger is not None, json_output)
        finally:
            cur.close()


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


def _dry_run(q: Any, eps: Any, delta: Any, alpha: float, rows: int | None, as_json: bool) -> None:
    bound = q.bind(eps, delta)
    acc = bound.accuracy(alpha, rows)
    mechanisms = [i.as_dict() for i in bound.infos]
    cost = bound.cost
    if as_json:
        print_json({"dry_run": True, "query": q.query_text,
                    "epsilon": getattr(cost, "epsilon", 0), "delta": getattr(cost, "delta", 0),
                    "alpha": alpha, "accuracy": acc, "mechanisms": mechanisms})
        return
    from rich.table import Table

    con = console()
    t = Table("output", "aggregate", "mechanism", f"±{(1 - alpha) * 100:g}%",
              title=f"dry run: cost {cost} (no data read, nothing spent)")
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
        t.add_row(a["output"], a["aggregate"], a["mechanism"], h)
    con.print(t)
    s = Table("measure", "mechanism", "ε", "sensitivity", "scale", title="ε split")
    for m in bound.infos:
        s.add_row(m.label, m.mechanism, f"{float(m.epsilon):.6g}", _num(m.sensitivity),
                  "" if m.scale is None else f"{float(m.scale):.6g}")
    con.print(s)


def _num(x: Any) -> str:
    return str(x) if getattr(x, "denominator", 2) == 1 else f"{float(x):.6g}"


def _show_release(cur: Any, rel: Any, analyst: str, dataset: str, persistent: bool,
                  as_json: bool) -> None:
    mech = {col: [{"mechanism": i["mechanism"], "scale": i.get("scale"),
                   "epsilon": i.get("epsilon"), "measure": i.get("measure")}
                  for i in infos]
            for col, infos in rel.mechanisms.items()}
    if as_json:
        out = {"rows": rel.rows(), "epsilon_spent": rel.epsilon_spent,
               "delta_spent": rel.delta_spent, "mechanisms": _floats(mech),
               "alpha": rel.alpha, "replayed": rel.replayed,
               "request_id": rel.provenance.get("request_id")}
        if persistent:
            st = cur.budget(analyst, dataset)
            out["budget_remaining"] = str(st.remaining)
        print_json(out)
        return
    from rich.table import Table

    heads, cells = rel._display()
    t = Table(*heads, title=rel._header())
    for r in cells:
        t.add_row(*r)
    con = console()
    con.print(t)
    for line in rel.mechanism_lines():
        con.print("  " + line, highlight=False)
    if persistent:
        con.print(f"  budget of {analyst} on {dataset}: {cur.budget(analyst, dataset)}",
                  highlight=False)


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
