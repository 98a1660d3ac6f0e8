"""``statcurator estimate``: a DP statistic (sc.estimators) of a dataset, charged in the ledger.

    statcurator estimate DATA --epsilon E [--delta D | --rho R] STATISTIC COLUMN...
                         [--q 0.25 --q 0.75] [--trim 0.1] [--bound B] [--metadata M.toml]
                         [--ledger PATH|:memory:] [--analyst NAME] [--request-id ID] [--json]

STATISTIC is one of median, trimmed-mean, quantiles, iqr, ptr-median, linear-regression,
logistic-regression, lad-regression, edge-count, degree-histogram, triangle-count. COLUMN
names the column (regressions: the target, then the features; graphs: the two endpoint
columns). DATA and the ledger are as for ``statcurator query``: every answer is charged to
the persistent ledger (the dataset needs a budget and the analyst a grant; ``--ledger
:memory:`` makes a throwaway ledger whose budget is exactly this estimate's cost).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import (
    JSON_OPTION,
    analyst_of,
    console,
    emit,
    exact_option,
    handle_errors,
    print_json,
    print_table,
    register_data,
    show_ledger,
)
from .ledger import LEDGER_OPTION, MEMORY, ledger_path, open_ledger, save_anchor

STATISTICS = ("median", "trimmed-mean", "quantiles", "iqr", "ptr-median", "linear-regression",
              "logistic-regression", "lad-regression", "edge-count", "degree-histogram",
              "triangle-count")


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    @handle_errors
    def estimate_command(
        data: Annotated[str, typer.Argument(
            help="CSV/Parquet file, DuckDB database (FILE.duckdb[:TABLE]), a metadata TOML "
                 "whose source names the data, or 'adult'.")],
        statistic: Annotated[str, typer.Argument(help="One of: " + ", ".join(STATISTICS))],
        columns: Annotated[list[str], typer.Argument(
            help="The column(s): regressions take the target then the features.")],
        epsilon: Annotated[str | None, typer.Option(
            "--epsilon", "-e", help="Privacy loss ε to spend.")] = None,
        delta: Annotated[str | None, typer.Option(
            "--delta", "-d", help="δ (propose-test-release needs it).")] = None,
        rho: Annotated[str | None, typer.Option(
            "--rho", help="ρ-zCDP instead of ε (linear regression).")] = None,
        q: Annotated[list[float] | None, typer.Option(
            "--q", help="A quantile level (repeat for several).")] = None,
        trim: Annotated[str | None, typer.Option(
            "--trim", help="Trimmed mean: a proportion (0.1) or a count per side (50).")] = None,
        bound: Annotated[str | None, typer.Option(
            "--bound", help="PTR median: the proposed local-sensitivity bound.")] = None,
        alpha: Annotated[float, typer.Option(
            "--alpha", help="Error rate of the intervals.")] = 0.05,
        metadata: Annotated[Path | None, typer.Option(
            "--metadata", "-m", help="Dataset metadata (TOML).")] = None,
        ledger: Annotated[str | None, LEDGER_OPTION] = None,
        analyst: Annotated[str | None, typer.Option(
            "--analyst", help="Whose budget is charged (default: the OS user).")] = None,
        request_id: Annotated[str | None, typer.Option(
            "--request-id", help="Idempotency key: a replay returns the stored answer, free.")] = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Estimate a statistic with differential privacy (smooth sensitivity, PTR, ...)."""
        from ..core.errors import InvalidParameterError
        from ..curator import Curator
        from ..estimators._protocol import loss_from

        if statistic not in STATISTICS:
            raise InvalidParameterError(f"unknown statistic {statistic!r}",
                                        remedy="use one of: " + ", ".join(STATISTICS))
        if epsilon is None and rho is None:
            raise InvalidParameterError("no privacy budget given", remedy="pass --epsilon 1")
        if not 0 < alpha < 1:
            raise InvalidParameterError(f"--alpha must be in (0, 1), got {alpha}",
                                        remedy="--alpha 0.05 gives 95% intervals")
        loss = loss_from(exact_option(epsilon, "epsilon"),
                         exact_option(delta, "delta", allow_zero=True),
                         exact_option(rho, "rho"))
        est = build_estimator(statistic, columns, q=q, trim=trim, bound=bound, alpha=alpha)
        who = analyst_of(analyst)
        throwaway = ledger_path(ledger) == MEMORY
        led = None if throwaway else open_ledger(ledger)
        cur = Curator(engine="memory", ledger=led, default_budget=None, dataset_budget=None,
                      alpha=alpha)
        try:
            name = register_data(cur, data, metadata)
            if throwaway:
                from ..estimators._protocol import prepare

                cost = prepare(est, cur.metadata(name), loss).measurement.cost
                cur.set_dataset_budget(name, cost)
                cur.set_budget(who, name, cost)
            if not json_output:
                show_ledger(cur.ledger, stderr=True)
                with console(stderr=True).status(f"estimating the {statistic}..."):
                    result = cur.estimate(name, est, epsilon=loss_arg(loss, "epsilon"),
                                          delta=loss_arg(loss, "delta"),
                                          rho=loss_arg(loss, "rho"), analyst=who,
                                          request_id=request_id)
            else:
                result = cur.estimate(name, est, epsilon=loss_arg(loss, "epsilon"),
                                      delta=loss_arg(loss, "delta"), rho=loss_arg(loss, "rho"),
                                      analyst=who, request_id=request_id)
            if not throwaway:
                save_anchor(cur.ledger)
            _show(result, statistic, json_output)
        finally:
            cur.close()


def loss_arg(loss: Any, name: str) -> Any:
    """One parameter of a loss, or None."""
    value = getattr(loss, name, None)
    return None if value is None or (name == "delta" and value == 0) else value


def build_estimator(statistic: str, columns: list[str], *, q: list[float] | None = None,
                    trim: str | None = None, bound: str | None = None,
                    alpha: float = 0.05) -> Any:
    """The estimator a command line asks for (parameters as public values).

    >>> build_estimator("quantiles", ["age"], q=[0.25, 0.75]).qs
    (Fraction(1, 4), Fraction(3, 4))
    """
    from .. import estimators as E
    from ..core.errors import InvalidParameterError

    def need(k: int) -> None:
        if len(columns) < k:
            raise InvalidParameterError(f"{statistic} needs {k} column(s)",
                                        remedy=f"e.g. statcurator estimate DATA --epsilon 1 "
                                               f"{statistic} " + " ".join(["COL"] * k))

    need(1)
    col = columns[0]
    if statistic == "median":
        return E.Median(col)
    if statistic == "trimmed-mean":
        t: Any = Fraction(1, 10)
        if trim is not None:
            t = int(trim) if trim.isdigit() else exact_option(trim, "trim", allow_zero=True)
        return E.TrimmedMean(col, trim=t)
    if statistic == "quantiles":
        levels = tuple(Fraction(str(v)) for v in (q or [0.25, 0.5, 0.75]))
        return E.Quantiles(col, levels, alpha=alpha)
    if statistic == "iqr":
        return E.IQR(col)
    if statistic == "ptr-median":
        return E.PTRMedian(col, bound=exact_option(bound, "bound"), alpha=alpha)
    if statistic in ("linear-regression", "logistic-regression", "lad-regression"):
        need(2)
        if statistic == "linear-regression":
            return E.LinearRegression(target=col, features=columns[1:])
        if statistic == "logistic-regression":
            return E.LogisticRegression(target=col, features=columns[1:])
        return E.LADRegression(col, tuple(columns[1:]))
    need(2)
    src, dst = columns[0], columns[1]
    if statistic == "edge-count":
        return E.EdgeCount(source=src, target=dst, alpha=alpha)
    if statistic == "degree-histogram":
        return E.DegreeHistogram(source=src, target=dst, alpha=alpha)
    return E.TriangleCount(source=src, target=dst)


def _show(result: Any, statistic: str, as_json: bool) -> None:
    from ..estimators import Estimate

    if isinstance(result, Estimate):
        if as_json:
            print_json(result.as_dict())
            return
        emit(str(result))
        return
    out = {"statistic": statistic, "coef": [float(c) for c in result.coef_],
           "intercept": float(result.intercept_), "features": list(result.features_),
           "cost": str(result.cost_)}
    if as_json:
        print_json(out)
        return
    print_table(("feature", "coefficient"),
                [*((f, f"{c:.6g}") for f, c in zip(out["features"], out["coef"], strict=True)),
                 ("(intercept)", f"{out['intercept']:.6g}")],
                title=f"{statistic} ({out['cost']})")
