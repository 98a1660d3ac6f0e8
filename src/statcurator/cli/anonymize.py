"""``statcurator anonymize``: anonymize a table under k-anonymity, l-diversity, t-closeness
(and δ-presence), write the verified release and an HTML report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import JSON_OPTION, console, exact_option, handle_errors, print_json


def register(app: typer.Typer) -> None:
    @app.command("anonymize")
    @handle_errors
    def anonymize_command(
        data: Annotated[str, typer.Argument(
            help="CSV/Parquet/DuckDB file, or 'adult' (the bundled demo data).")],
        metadata: Annotated[Path | None, typer.Option(
            "--metadata", "-m", help="Metadata TOML (roles, hierarchies).")] = None,
        k: Annotated[int | None, typer.Option(
            "--k", help="k-anonymity: every class has at least k records.")] = None,
        l: Annotated[str | None, typer.Option(  # noqa: E741 - the literature's name
            "--l", help="l-diversity of each sensitive column.")] = None,
        l_variant: Annotated[str, typer.Option(
            "--l-variant", help="distinct | entropy | recursive")] = "distinct",
        c: Annotated[str | None, typer.Option(
            "--c", help="c of recursive (c,l)-diversity.")] = None,
        t: Annotated[str | None, typer.Option(
            "--t", help="t-closeness of each sensitive column.")] = None,
        t_distance: Annotated[str, typer.Option(
            "--t-distance", help="equal | ordered | hierarchical")] = "equal",
        sensitive: Annotated[list[str] | None, typer.Option(
            "--sensitive", help="Make a declared column sensitive for this run (it stops "
                                "being a QI). Repeatable.")] = None,
        qi: Annotated[str | None, typer.Option(
            "--qi", help="Comma-separated QIs to use (the others become insensitive).")] = None,
        suppression: Annotated[str, typer.Option(
            "--suppression", help="Largest fraction of records to suppress.")] = "0",
        algorithm: Annotated[str, typer.Option(
            "--algorithm", help="optimal | mondrian")] = "optimal",
        metric: Annotated[str, typer.Option(
            "--metric", help="loss | dm | dmstar | aecs | entropy | precision")] = "loss",
        out: Annotated[Path | None, typer.Option(
            "--out", "-o", help="Write the release (.csv, .parquet, .duckdb, .arrow).")] = None,
        report: Annotated[Path | None, typer.Option(
            "--report", help="Write an HTML report.")] = None,
        suppressed: Annotated[str, typer.Option(
            "--suppressed", help="keep (rows of '*', as ARX) | drop")] = "keep",
        population: Annotated[Path | None, typer.Option(
            "--population", help="δ-presence: the population table.")] = None,
        dmin: Annotated[str | None, typer.Option("--dmin", help="δ-presence lower bound.")] = None,
        dmax: Annotated[str | None, typer.Option("--dmax", help="δ-presence upper bound.")] = None,
        separator: Annotated[str, typer.Option(
            "--separator", help="Field separator of a CSV --out.")] = ",",
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Anonymize DATA and verify the release independently before writing it.

        Example: statcurator anonymize adult --k 5 --suppression 0.02 --report adult-k5.html
        """
        from ..anonymize import DeltaPresence, KAnonymity, LDiversity, TCloseness, anonymize
        from ..core.errors import InvalidParameterError
        from ..io.dataset import load_dataset
        from ..io.tables import read_table, write_table

        ds = load_dataset(data, metadata)
        meta = ds.meta
        sensitive = sensitive or []
        if sensitive:
            meta = meta.with_roles({s: "sensitive" for s in sensitive})
        qis = [q.strip() for q in qi.split(",") if q.strip()] if qi else None
        criteria: list[Any] = []
        if k is not None:
            criteria.append(KAnonymity(k))
        targets = [col for col in meta.sensitive if qis is None or col not in qis]
        if (l is not None or t is not None) and not targets:
            raise InvalidParameterError(
                "--l and --t protect sensitive columns, and this run has none",
                remedy="name one with --sensitive COL (e.g. --sensitive occupation)")
        for col in targets:
            if l is not None:
                lv: Any = exact_option(l, "l") if l_variant == "entropy" else _integer(l, "l")
                criteria.append(LDiversity(col, lv, l_variant,
                                           exact_option(c, "c") if c is not None else None))
            if t is not None:
                criteria.append(TCloseness(col, exact_option(t, "t", allow_zero=True),
                                           t_distance))
        if population is not None or dmin is not None or dmax is not None:
            if population is None:
                raise InvalidParameterError("--dmin/--dmax need the population table",
                                            remedy="pass --population FILE")
            criteria.append(DeltaPresence(
                exact_option(dmin or "0", "dmin", allow_zero=True),
                exact_option(dmax or "1", "dmax", allow_zero=True),
                read_table(population, meta=ds.meta)))
        if not criteria:
            raise InvalidParameterError("no privacy criterion given",
                                        remedy="pass at least --k (e.g. --k 5)")
        result = anonymize(ds.with_meta(meta), criteria, qi=qis,
                           suppression=exact_option(suppression, "suppression", allow_zero=True),
                           algorithm=algorithm, metric=metric, suppressed=suppressed,
                           progress=True)
        written = None
        if out is not None:
            from ..anonymize.verify import check_verified

            check_verified(result.verify())  # re-check the table that is about to be written
            if out.suffix.lower() in (".arrow", ".feather"):
                written = result.write(out)
            else:
                written = write_table(result.table, out, separator=separator)
        report_path = None
        if report is not None:
            from ..report.anonymization import write_report

            report_path = write_report(result, report)
        if json_output:
            doc = result.to_dict()
            doc["output"] = str(written) if written else None
            doc["report"] = str(report_path) if report_path else None
            print_json(doc)
            return
        con = console()
        con.print(str(result), highlight=False)
        if written:
            con.print(f"[green]release written to[/] {written}")
        if report_path:
            con.print(f"[green]report written to[/] {report_path}")


def _integer(text: str, name: str) -> int:
    from ..core.errors import InvalidParameterError

    try:
        value = int(text)
    except ValueError:
        raise InvalidParameterError(f"{name} must be a whole number, got {text!r}",
                                    remedy=f"pass e.g. --{name} 5 (or --l-variant entropy for a "
                                           f"real l)") from None
    return value
