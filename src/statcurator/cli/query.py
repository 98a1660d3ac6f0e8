"""``statcurator query``: answer one SQL query with differential privacy.

    statcurator query DATA --metadata M.toml (--epsilon 0.5 [--delta D] | --rho R)
                      [--alpha 0.05] [--nonnegative] [--engine duckdb|spark] [--dry-run]
                      [--json] [--ledger PATH|:memory:] [--analyst NAME] [--request-id ID]
                      "SELECT ..."
    statcurator query --server URL --token T --epsilon 0.5 [--dry-run] "SELECT ..."

DATA is a CSV or Parquet file, a DuckDB database (``FILE.duckdb`` or ``FILE.duckdb:TABLE``),
a metadata TOML whose ``source`` names the data, or ``adult`` (the bundled demo, table
``adult``). The table is named by the metadata's ``[table] name`` (else the file name).
``--rho`` asks for Gaussian noise under ρ-zCDP instead of Laplace noise at ε.
``--nonnegative`` clamps released counts and their intervals at 0: post-processing, which
costs nothing and is stated under the answer (counts are integers already: their noise is
discrete).

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
    INPUT_SEPARATOR_ALIAS,
    JSON_OPTION,
    analyst_of,
    console,
    emit,
    exact_option,
    handle_errors,
    output_path,
    print_json,
    print_table,
    register_data,
    show_ledger,
    writing,
)
from .ledger import LEDGER_OPTION, MEMORY, ledger_path, open_ledger, save_anchor
from .serve import SERVER_OPTION, TOKEN_OPTION, asks_a_server


def register(app: typer.Typer) -> None:
    @app.command("query")
    @handle_errors(aliases={**INPUT_SEPARATOR_ALIAS, "n": "--rows"})
    def query_command(
        ctx: typer.Context,
        data: Annotated[str, typer.Argument(
            help="CSV/Parquet file, DuckDB database (FILE.duckdb[:TABLE]), a metadata TOML "
                 "whose source names the data, or 'adult' (with --server: the SQL query "
                 "alone).")],
        sql: Annotated[str | None, typer.Argument(
            help="The SQL query (an aggregate SELECT).")] = None,
        epsilon: Annotated[str | None, typer.Option(
            "--epsilon", "-e", help="Privacy loss ε to spend (Laplace noise).")] = None,
        rho: Annotated[str | None, typer.Option(
            "--rho", help="ρ-zCDP to spend instead of ε (Gaussian noise).")] = None,
        metadata: Annotated[Path | None, typer.Option(
            "--metadata", "-m", help="Dataset metadata (TOML).")] = None,
        delta: Annotated[str | None, typer.Option(
            "--delta", "-d", help="δ (needed for keys without a public key set).")] = None,
        alpha: Annotated[float, typer.Option(
            "--alpha", help="Error rate of the confidence intervals.")] = 0.05,
        nonnegative: Annotated[bool, typer.Option(
            "--nonnegative", help="Clamp counts and their intervals at 0 (post-processing, "
                                  "free; stated in the output).")] = False,
        input_separator: Annotated[str | None, typer.Option(
            "--input-separator", help="Field separator of a CSV DATA (default: the "
                                      "metadata's, else guessed from the header).")] = None,
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
        server: Annotated[str | None, SERVER_OPTION] = None,
        token: Annotated[str | None, TOKEN_OPTION] = None,
        report: Annotated[Path | None, typer.Option(
            "--report", help="Write an HTML report of the release: answers with intervals as "
                             "a chart, the guarantee in words, the certificate.")] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Answer an aggregate SQL query with differential privacy (intervals included)."""
        from ..core.errors import InvalidParameterError
        from ..curator import Curator

        if (epsilon is None) == (rho is None):
            raise InvalidParameterError("give exactly one of --epsilon and --rho",
                                        remedy="--epsilon 1 for Laplace noise, --rho 0.125 for "
                                               "Gaussian noise under zCDP")
        eps = exact_option(epsilon, "epsilon")
        r = exact_option(rho, "rho")
        dlt = exact_option(delta, "delta", allow_zero=True) if delta is not None else None
        if input_separator is not None and len(input_separator) != 1:
            raise InvalidParameterError(
                f"--input-separator must be one character, got {input_separator!r}",
                remedy="pass e.g. --input-separator ';' (or $'\\t' for a tab)")
        loss = {"rho": r} if r is not None else {}
        if not 0 < alpha < 1:
            raise InvalidParameterError(f"--alpha must be in (0, 1), got {alpha}",
                                        remedy="--alpha 0.05 gives 95% intervals")
        if engine not in ("duckdb", "spark"):
            raise InvalidParameterError(f"unknown engine {engine!r}", remedy="use duckdb or spark")
        if report is not None and dry_run:
            raise InvalidParameterError("--report describes a release, and a dry run releases "
                                        "nothing", remedy="drop --report, or drop --dry-run")
        output_path(report, "--report", (".html", ".htm"))  # checked before anything is spent
        local = {"--analyst": analyst, "--ledger": ledger, "--metadata": metadata,
                 "--input-separator": input_separator,
                 "--engine": engine if _typed(ctx, "engine") else None}
        if asks_a_server(ctx, server, token, local):  # the server's token is the analyst
            from .serve import remote_query

            remote_query(str(server), token, sql if sql is not None else data, epsilon=eps,
                         delta=dlt, rho=r, alpha=alpha, dry_run=dry_run,
                         request_id=request_id, rows=rows, nonnegative=nonnegative,
                         json_output=json_output, warnings=_warnings(eps), report=report)
            return
        if sql is None:
            raise InvalidParameterError("no SQL query given",
                                        remedy='pass DATA and then the query, e.g. statcurator '
                                               'query adult --epsilon 1 "SELECT COUNT(*) FROM '
                                               'adult"')
        who = analyst_of(analyst)
        location = ledger_path(ledger)
        throwaway = location == MEMORY
        warnings = _warnings(eps)
        if dry_run:
            cur = Curator(engine="memory", default_budget=None, dataset_budget=None,
                          alpha=alpha)
            try:
                name = register_data(cur, data, metadata, dry_run=True)
                q = cur.sql(sql)
                budget = None if throwaway else _remaining(ledger, who, name)
                _dry_run(q, eps, dlt, alpha, rows, json_output, budget, warnings, rho=r)
            finally:
                cur.close()
            return
        led = None if throwaway else open_ledger(ledger)
        cur = Curator(engine=engine, ledger=led, default_budget=None, dataset_budget=None,
                      alpha=alpha)
        try:
            name = register_data(cur, data, metadata, separator=input_separator)
            q = cur.sql(sql)
            if throwaway:  # a one-off release: the budget is exactly this query's cost
                cost = q.cost(eps, dlt, **loss)
                cur.set_dataset_budget(name, cost)
                cur.set_budget(who, name, cost)
            if json_output:
                rel = q.release(eps, dlt, analyst=who, request_id=request_id, alpha=alpha,
                                nonnegative=nonnegative, **loss)
            else:
                for w in warnings:
                    emit(("warning: ", "bold yellow"), w, stderr=True)
                show_ledger(cur.ledger, stderr=True)
                with console(stderr=True).status(f"running the query on {engine}..."):
                    rel = q.release(eps, dlt, analyst=who, request_id=request_id,
                                    alpha=alpha, nonnegative=nonnegative, **loss)
            if not throwaway:
                save_anchor(cur.ledger)
            written = write_release_report(rel, report)
            _show_release(cur, rel, who, name, json_output, warnings, written)
        finally:
            cur.close()


def write_release_report(rel: Any, report: Path | None) -> Path | None:
    """Write ``--report`` (the release is already made and charged: a failure to write says
    so, and the answer is still printed by the caller's next step)."""
    if report is None:
        return None
    from ..report.release import write_report

    return writing(report, "--report", lambda: write_report(rel, report))


def _typed(ctx: Any, name: str) -> bool:
    """Whether the option ``name`` was given on the command line (not its default)."""
    source = ctx.get_parameter_source(name)
    return getattr(source, "name", "") == "COMMANDLINE"


def _warnings(eps: Any) -> list[str]:
    if eps is not None and eps > 10:
        return [f"ε={float(eps):g} is large: an answer at this ε carries little privacy "
                "protection (each extra unit of ε multiplies what an observer can learn "
                "about one person by up to e ≈ 2.7)"]
    return []


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


def _dry_run(q: Any, eps: Any, delta: Any, alpha: float, rows: int | None, as_json: bool,
             budget: dict[str, Any] | None, warnings: list[str], rho: Any = None) -> None:
    bound = q.bind(eps, delta, rho=rho)
    acc = bound.accuracy(alpha, rows)
    mechanisms = [i.as_dict() for i in bound.infos]
    cost = bound.cost
    if as_json:
        print_json({"dry_run": True, "query": q.query_text,
                    "epsilon": getattr(cost, "epsilon", 0), "delta": getattr(cost, "delta", 0),
                    "rho": getattr(cost, "rho", None), "alpha": alpha, "accuracy": acc, "mechanisms": mechanisms,
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
    share = "ρ" if rho is not None else "ε"
    print_table(("measure", "mechanism", share, "sensitivity", "scale"),
                [(m.label, m.mechanism,
                  f"{float(m.rho if rho is not None else m.epsilon):.6g}", _num(m.sensitivity),
                  "" if m.scale is None else f"{float(m.scale):.6g}") for m in bound.infos],
                title=f"{share} split")
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
                  warnings: list[str], report: Path | None = None) -> None:
    mech = {col: [{"mechanism": i["mechanism"], "scale": i.get("scale"),
                   "epsilon": i.get("epsilon"), "rho": i.get("rho"),
                   "measure": i.get("measure")}
                  for i in infos]
            for col, infos in rel.mechanisms.items()}
    led = cur.ledger
    grant, data = led.status(analyst, dataset), led.dataset_status(dataset)
    if as_json:
        out = {"rows": rel.rows(), "cost": str(rel.cost), "epsilon_spent": rel.epsilon_spent,
               "delta_spent": rel.delta_spent, "mechanisms": _floats(mech),
               "alpha": rel.alpha, "replayed": rel.replayed,
               "request_id": rel.provenance.get("request_id"), "analyst": analyst,
               "post_processing": rel.provenance.get("post_processing"),
               "certificate": rel.provenance.get("certificate"),
               "report": None if report is None else str(report),
               **_ledger_json(led), "budget_remaining": str(grant.remaining),
               "dataset_budget_remaining": str(data.remaining), "warnings": warnings}
        print_json(out)
        return
    heads, cells = rel.display()
    print_table(heads, cells, title=rel._header())
    for line in rel.mechanism_lines():
        emit("  " + line)
    if rel.provenance.get("post_processing"):
        emit(f"  post-processing: {rel.provenance['post_processing']}")
    emit(f"  budget of {analyst} on {dataset}: {grant}")
    emit(f"  dataset-wide budget of {dataset}: {data}")
    check = (rel.provenance.get("certificate") or {}).get("recheck")
    if check:
        emit("  certificate: cost re-derived independently — "
             + ("passed" if check["passed"] else "FAILED"))
    if report is not None:
        emit(f"  report: {report}")


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
