"""``statcurator experiment composition``: the composition experiment of Ganta,
Kasiviswanathan & Smith (KDD 2008) — two publishers, overlapping populations, independent
anonymizations, the intersection attack on the overlap — with its DP contrast.

    statcurator experiment composition adult --sensitive occupation --overlap 5000 \\
        --k 5,10,20,30,40,50,100 --algorithm mondrian,optimal --l 3,5 --t 0.2,0.4 \\
        --epsilon 0.1 --seeds 5 --report composition.html
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    JSON_OPTION,
    emit,
    exact_option,
    handle_errors,
    output_path,
    print_json,
    print_table,
    writing,
)


def _list(text: str | None, flag: str, kind: type = int) -> list:
    from ..core.errors import InvalidParameterError

    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(kind(part) if kind is int else exact_option(part, flag.lstrip("-"),
                                                                   allow_zero=True))
        except ValueError:
            raise InvalidParameterError(f"{flag} {text!r} is not a comma-separated list of "
                                        "numbers", remedy=f"pass e.g. {flag} 5,10,30") from None
    return out


def register(app: typer.Typer) -> None:
    experiment_app = typer.Typer(help="Reproduce the literature's experiments.",
                                 no_args_is_help=True)
    app.add_typer(experiment_app, name="experiment")

    @experiment_app.command("composition")
    @handle_errors
    def composition_command(
        data: Annotated[str, typer.Argument(help="'adult' or a data file with metadata.")] =
            "adult",
        sensitive: Annotated[str, typer.Option("--sensitive", "-s",
                                               help="The sensitive column.")] = "occupation",
        qi: Annotated[str | None, typer.Option(
            "--qi", help="Comma-separated QIs (default: the other declared QIs).")] = None,
        metadata: Annotated[Path | None, typer.Option("--metadata", "-m",
                                                      help="Metadata TOML.")] = None,
        overlap: Annotated[int, typer.Option("--overlap", help="Records in both releases.")] =
            5000,
        k: Annotated[str, typer.Option("--k", help="The k grid.")] = "5,10,20,30,40,50,100",
        algorithm: Annotated[str, typer.Option(
            "--algorithm", help="mondrian | optimal | mondrian,optimal")] = "mondrian,optimal",
        l: Annotated[str | None, typer.Option(  # noqa: E741
            "--l", help="Distinct l-diversity variants (at --variants-k).")] = None,
        t: Annotated[str | None, typer.Option(
            "--t", help="t-closeness variants (equal distance, at --variants-k).")] = None,
        variants_k: Annotated[int, typer.Option(
            "--variants-k", help="The k of the l and t variants.")] = 10,
        epsilon: Annotated[str | None, typer.Option(
            "--epsilon", "-e", help="DP contrast: ε per release (comma-separated).")] = None,
        seeds: Annotated[int, typer.Option("--seeds", help="Random splits (seeds 0..n-1).")] = 5,
        suppression: Annotated[str, typer.Option(
            "--suppression", help="Suppression limit of the optimal algorithm.")] = "0",
        threshold: Annotated[float, typer.Option(
            "--threshold", help="Confidence of the reported partial breach.")] = 0.5,
        workers: Annotated[int, typer.Option("--workers", help="Processes.")] = 2,
        report: Annotated[Path | None, typer.Option("--report", help="Write an HTML report.")] =
            None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Two publishers release independent anonymizations of overlapping populations; the
        attacker intersects each overlap person's sensitive values. Perfect and partial breach
        per (algorithm, k, l, t), mean and spread over the splits, with the DP contrast."""
        from ..attacks.experiments import composition
        from ..cli.attack import _dataset
        from ._common import fraction_option

        output_path(report, "--report", (".html", ".htm"))
        ds = _dataset(data, metadata)
        exp = composition(
            ds, sensitive=sensitive, qi=[q.strip() for q in qi.split(",")] if qi else None,
            overlap=overlap, k=_list(k, "--k"),
            algorithms=[a.strip() for a in algorithm.split(",") if a.strip()],
            l=_list(l, "--l"), t=_list(t, "--t", kind=float), variants_k=variants_k,
            epsilon=_list(epsilon, "--epsilon", kind=float), seeds=seeds,
            suppression=fraction_option(suppression, "--suppression", "0.02"),
            threshold=threshold, workers=workers, progress=True)
        written = None
        if report is not None:
            from ..report.attacks import write_report

            written = writing(report, "--report", lambda: write_report(exp, report))
        if json_output:
            doc = exp.to_dict()
            doc["report"] = str(written) if written else None
            print_json(doc)
            return
        cols = ("model", "release", "algorithm", "k", "l", "t", "ε", "perfect", "±sd",
                "without target", "partial", "values left", "class size", "classes")
        print_table(cols, [
            (r["model"], r["release"], r["algorithm"], r["k"], r["l"] or "",
             "" if r["t"] is None else f"{r['t']:g}",
             "" if r["epsilon"] is None else f"{r['epsilon']:g}", f"{r['perfect']:.1%}",
             f"{r['perfect_sd']:.1%}", f"{r['perfect_without_target']:.1%}",
             f"{r['partial']:.1%}", f"{r['values_left']:.2f}", f"{r['class_size']:.1f}",
             f"{r['classes']:.0f}") for r in exp.rows],
            title=f"Composition experiment on {ds.name}: {seeds} splits, overlap {overlap:,}, "
                  f"{exp.seconds:.1f} s")
        if written:
            emit(("report written to ", "green"), str(written))
