"""``statcurator anonymize``: anonymize a table under k-anonymity, l-diversity, t-closeness
(and δ-presence), write the verified release and an HTML report."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

import typer

from ._common import (
    JSON_OPTION,
    TABLE_SUFFIXES,
    emit,
    exact_option,
    fraction_option,
    handle_errors,
    output_path,
    print_json,
    writing,
)

_REPORT_SUFFIXES = (".html", ".htm")
# library keywords this command spells differently
_ALIASES = {"meta": "--metadata", "separator": "--input-separator", "variant": "--l-variant",
            "distance": "--t-distance"}


def register(app: typer.Typer) -> None:
    @app.command("anonymize")
    @handle_errors(aliases=_ALIASES)
    def anonymize_command(
        data: Annotated[str, typer.Argument(
            help="CSV/Parquet/DuckDB file, a metadata TOML whose source names the data, or a "
                 "bundled dataset ('adult').")],
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
            "--sensitive", help="Make a column sensitive for this run (it stops being a QI). "
                                "Repeatable.")] = None,
        qi: Annotated[str | None, typer.Option(
            "--qi", help="Comma-separated QIs of this run (the others become insensitive); a "
                         "QI without a declared hierarchy gets an automatic one.")] = None,
        suppression: Annotated[str, typer.Option(
            "--suppression", help="Largest fraction of records to suppress (0.02 or 2%).")] = "0",
        algorithm: Annotated[str, typer.Option(
            "--algorithm", help="optimal | mondrian")] = "optimal",
        metric: Annotated[str, typer.Option(
            "--metric", help="loss | dm | dmstar | aecs | entropy | precision")] = "loss",
        out: Annotated[Path | None, typer.Option(
            "--out", "-o", help="Write the release (.csv, .tsv, .parquet, .duckdb, "
                                ".arrow).")] = None,
        report: Annotated[Path | None, typer.Option(
            "--report", help="Write an HTML report.")] = None,
        suppressed: Annotated[str, typer.Option(
            "--suppressed", help="keep (rows of '*', as ARX) | drop")] = "keep",
        population: Annotated[Path | None, typer.Option(
            "--population", help="δ-presence: the population table.")] = None,
        dmin: Annotated[str | None, typer.Option("--dmin", help="δ-presence lower bound.")] = None,
        dmax: Annotated[str | None, typer.Option("--dmax", help="δ-presence upper bound.")] = None,
        input_separator: Annotated[str | None, typer.Option(
            "--input-separator", help="Field separator of a CSV DATA (default: the "
                                      "metadata's, else guessed from the header).")] = None,
        separator: Annotated[str, typer.Option(
            "--separator", help="Field separator of a CSV --out.")] = ",",
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Anonymize DATA and verify the release independently before writing it.

        Example: statcurator anonymize adult --k 5 --suppression 0.02 --report adult-k5.html
        """
        from ..anonymize import anonymize
        from ..core.errors import DataError, InvalidParameterError

        # every argument is checked before any data is read or searched
        frac = fraction_option(suppression, "--suppression", "0.02")
        _choice(algorithm, "--algorithm", ("optimal", "mondrian"))
        from ..anonymize import METRICS
        from ..anonymize.criteria import LDiversity, TCloseness
        from ..anonymize.release import SUPPRESSED_MODES

        _choice(metric.lower(), "--metric", METRICS)
        _choice(l_variant, "--l-variant", LDiversity.VARIANTS)
        _choice(t_distance, "--t-distance", TCloseness.DISTANCES)
        _choice(suppressed, "--suppressed", SUPPRESSED_MODES)
        for flag, sep in (("--separator", separator), ("--input-separator", input_separator)):
            if sep is not None and len(sep) != 1:
                raise InvalidParameterError(f"{flag} must be one character, got {sep!r}",
                                            remedy=f"pass e.g. {flag} ';' (or $'\\t' for a tab)")
        out = output_path(out, "--out", TABLE_SUFFIXES)
        report = output_path(report, "--report", _REPORT_SUFFIXES)
        lv: Any = None
        if l is not None:
            lv = exact_option(l, "--l") if l_variant == "entropy" else _integer(l, "--l")
        cv = exact_option(c, "--c") if c is not None else None
        tv = exact_option(t, "--t", allow_zero=True) if t is not None else None
        if (dmin is not None or dmax is not None) and population is None:
            raise InvalidParameterError("--dmin/--dmax need the population table",
                                        remedy="pass --population FILE")
        if population is not None and not population.is_file():
            raise DataError(f"--population {str(population)!r} is not a file",
                            remedy="pass the population table (CSV, Parquet or DuckDB)")
        dmin_v = exact_option(dmin or "0", "--dmin", allow_zero=True)
        dmax_v = exact_option(dmax or "1", "--dmax", allow_zero=True)
        if k is None and l is None and t is None and population is None:
            raise InvalidParameterError("no privacy criterion given",
                                        remedy="pass at least --k (e.g. --k 5)")
        qis = [q.strip() for q in qi.split(",") if q.strip()] if qi else None

        ds = _load(data, metadata, input_separator)
        result = anonymize(ds, _criteria(ds, sensitive or [], qis, k, lv, l_variant, cv, tv,
                                         t_distance, population, dmin_v, dmax_v),
                           qi=qis, sensitive=sensitive or None, suppression=frac,
                           algorithm=algorithm, metric=metric, suppressed=suppressed,
                           progress=True)
        written = _write_release(result, out, separator) if out is not None else None
        report_path = None
        if report is not None:
            from ..report.anonymization import write_report

            report_path = writing(report, "--report", lambda: write_report(result, report))
        if json_output:
            doc = result.to_dict()
            doc["output"] = str(written) if written else None
            doc["report"] = str(report_path) if report_path else None
            print_json(doc)
            return
        for line in str(result).splitlines():
            emit(line)
        if written:
            emit(("release written to", "green"), f" {written}")
        if report_path:
            emit(("report written to", "green"), f" {report_path}")


def _choice(value: str, flag: str, choices: tuple[str, ...]) -> None:
    from ..core.errors import InvalidParameterError

    if value not in choices:
        raise InvalidParameterError(f"unknown {flag} {value!r}",
                                    remedy=f"use {flag} " + " or ".join(choices))


def _integer(text: str, flag: str) -> int:
    from ..core.errors import InvalidParameterError

    try:
        return int(text)
    except ValueError:
        raise InvalidParameterError(f"{flag} must be a whole number, got {text!r}",
                                    remedy=f"pass e.g. {flag} 5 (or --l-variant entropy for a "
                                           f"real l)") from None


def _load(data: str, metadata: Path | None, separator: str | None) -> Any:
    from ..datasets import load_dataset

    return load_dataset(data, metadata, separator=separator)


def _criteria(ds: Any, sensitive: list[str], qis: list[str] | None, k: int | None, lv: Any,
              l_variant: str, c: Fraction | None, t: Fraction | None, t_distance: str,
              population: Path | None, dmin: Any, dmax: Any) -> list[Any]:
    """The criteria of the run: l and t protect every sensitive column of the run."""
    from ..anonymize import DeltaPresence, KAnonymity, LDiversity, TCloseness
    from ..core.errors import InvalidParameterError
    from ..io.tables import read_table

    criteria: list[Any] = [KAnonymity(k)] if k is not None else []
    chosen = set(sensitive) | set(ds.meta.sensitive)
    targets = [col for col in (*ds.meta.names, *sensitive)
               if col in chosen and (qis is None or col not in qis)]
    targets = list(dict.fromkeys(targets))  # metadata order; unknown names are refused later
    if (lv is not None or t is not None) and not targets:
        raise InvalidParameterError(
            "--l and --t protect sensitive columns, and this run has none",
            remedy="name one with --sensitive COL (e.g. --sensitive occupation)")
    for col in targets:
        if lv is not None:
            criteria.append(LDiversity(col, lv, l_variant, c))
        if t is not None:
            criteria.append(TCloseness(col, t, t_distance))
    if population is not None:
        criteria.append(DeltaPresence(dmin, dmax, read_table(population, meta=ds.meta)))
    return criteria


def _write_release(result: Any, out: Path, separator: str) -> Path:
    from ..anonymize.verify import check_verified
    from ..io.tables import write_table

    check_verified(result.verify())  # re-check the table that is about to be written
    if out.suffix.lower() in (".arrow", ".feather"):
        return writing(out, "--out", lambda: result.write(out))
    return writing(out, "--out", lambda: write_table(result.table, out, separator=separator))
