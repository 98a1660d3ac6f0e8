"""``statcurator synthesize``: a DP synthetic table (MST or AIM) and a report comparing its
marginals with the real ones."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import (
    JSON_OPTION,
    emit,
    exact_option,
    handle_errors,
    output_path,
    print_json,
    writing,
)

_OUT_SUFFIXES = (".csv", ".tsv", ".txt", ".parquet", ".pq", ".arrow", ".feather")
_ALIASES = {"meta": "--metadata", "rho": "--rho", "epsilon": "--epsilon", "delta": "--delta"}


def register(app: typer.Typer) -> None:
    @app.command("synthesize")
    @handle_errors(aliases=_ALIASES)
    def synthesize_command(
        data: Annotated[str, typer.Argument(
            help="CSV/Parquet file, a metadata TOML whose source names the data, or a "
                 "bundled dataset ('adult').")],
        epsilon: Annotated[str | None, typer.Option(
            "--epsilon", help="Privacy budget ε (with --delta; converted to ρ-zCDP).")] = None,
        delta: Annotated[str, typer.Option(
            "--delta", help="δ of the (ε, δ) budget.")] = "1e-9",
        rho: Annotated[str | None, typer.Option(
            "--rho", help="A ρ-zCDP budget instead of --epsilon.")] = None,
        method: Annotated[str, typer.Option("--method", help="mst | aim")] = "mst",
        out: Annotated[Path | None, typer.Option(
            "--out", "-o", help="Write the synthetic table (.csv, .parquet, .arrow).")] = None,
        report: Annotated[Path | None, typer.Option(
            "--report", help="Write an HTML report comparing real and synthetic marginals "
                             "(it shows the real data: for the data owner only).")] = None,
        metadata: Annotated[Path | None, typer.Option(
            "--metadata", "-m", help="Metadata TOML (categories, bounds).")] = None,
        columns: Annotated[str | None, typer.Option(
            "--columns", help="Comma-separated columns to synthesize (default: all declared "
                              "with categories or bounds).")] = None,
        bins: Annotated[int, typer.Option(
            "--bins", help="Bins of each numeric column's declared bounds.")] = 16,
        rows: Annotated[int | None, typer.Option(
            "--rows", help="Rows to sample (default: the model's noisy estimate).")] = None,
        separator: Annotated[str, typer.Option(
            "--separator", help="Field separator of a CSV --out.")] = ",",
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Fit a DP synthesizer on DATA and sample a synthetic table with its schema.

        Example: statcurator synthesize adult --epsilon 1 --out synth.csv --report synth.html
        """
        from ..core.errors import InvalidParameterError
        from ..synth import AIM, MST

        if method not in ("mst", "aim"):
            raise InvalidParameterError(f"unknown --method {method!r}",
                                        remedy="use --method mst or --method aim")
        if (epsilon is None) == (rho is None):
            raise InvalidParameterError("give a budget: --epsilon (with --delta) or --rho",
                                        remedy="pass --epsilon 1")
        eps = exact_option(epsilon, "--epsilon")
        dlt = exact_option(delta, "--delta")
        r = exact_option(rho, "--rho")
        if rows is not None and not 1 <= rows <= 10**8:
            raise InvalidParameterError("--rows must be between 1 and 10^8",
                                        remedy="pass e.g. --rows 30000")
        if len(separator) != 1:
            raise InvalidParameterError("--separator must be one character",
                                        remedy="pass e.g. --separator ';'")
        out = output_path(out, "--out", _OUT_SUFFIXES)
        report = output_path(report, "--report", (".html", ".htm"))
        cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
        cls = MST if method == "mst" else AIM
        synth = cls(eps, delta=dlt, rho=r, columns=cols, bins=bins)

        from ..datasets import load_dataset

        ds = load_dataset(data, metadata)
        start = time.perf_counter()
        with _progress(not json_output, f"{method.upper()} synthesizer") as update:
            synth.fit(ds, progress=update)
            table = synth.sample(rows)
        seconds = time.perf_counter() - start
        cost = synth.cost_
        rho_used = synth.model_.rho
        written = None
        if out is not None:
            from ..io.tables import write_table

            written = writing(out, "--out", lambda: write_table(table, out, separator=separator))
        report_path = None
        if report is not None:
            report_path = writing(report, "--report",
                                  lambda: _write_report(ds, table, synth, report, seconds))
        doc = {"method": method.upper(), "cost": str(cost), "rho": float(rho_used),
               "rows": table.num_rows, "columns": table.column_names,
               "marginals": [" × ".join(c) for c in synth.model_.cliques],
               "seconds": round(seconds, 2),
               "output": str(written) if written else None,
               "report": str(report_path) if report_path else None}
        if json_output:
            print_json(doc)
            return
        emit((f"{method.upper()} synthetic table", "bold"),
             f": {table.num_rows:,} rows × {len(table.column_names)} columns in {seconds:.1f} s")
        emit("privacy cost: ", (str(cost), "bold"), f" (ρ = {float(rho_used):.6g} zCDP)")
        emit("measured marginals: " + ", ".join(doc["marginals"]))
        if written:
            emit(("synthetic table written to", "green"), f" {written}")
        if report_path:
            emit(("report written to", "green"), f" {report_path}")


def _write_report(ds: Any, table: Any, synth: Any, path: Path, seconds: float) -> Path:
    import numpy as np

    from ..estimators.learning._domain import encode
    from ..report.synth import write_report

    dom = synth.model_.domain
    info = {"Method": type(synth).__name__, "Privacy cost": str(synth.cost_),
            "Budget in zCDP": f"ρ = {float(synth.model_.rho):.6g}",
            "Measured marginals": ", ".join(" × ".join(c) for c in synth.model_.cliques),
            "Time": f"{seconds:.1f} s"}
    errors = [{"marginal": " × ".join(m.clique), "cells": int(np.asarray(m.values).size),
               "sigma": m.stddev} for m in synth.model_.measurements]
    return write_report(encode(ds, dom), encode(table, dom), dom, path, info=info,
                        errors=errors, title=f"Synthetic data report: {ds.name}")


@contextmanager
def _progress(enabled: bool, label: str) -> Iterator[Callable[[str, float], None] | None]:
    """A rich progress bar on stderr (terminal only), updated with (stage, fraction)."""
    from rich.console import Console

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(escape(label), total=1.0)

        def update(stage: str, fraction: float) -> None:
            bar.update(task, completed=min(max(fraction, 0.0), 1.0),
                       description=escape(f"{label}: {stage}"))

        yield update
