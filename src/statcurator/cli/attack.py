"""``statcurator attack ...``: the attack lab on the command line.

Attacks on published tables take a RELEASE in one of two forms:

* a released table (CSV/Parquet) with ``--qi`` and ``--sensitive``, the attacker's knowledge
  ``--targets FILE`` (the targets' quasi-identifiers; a sensitive column there is the truth,
  used for scoring only) and the public hierarchies ``--hierarchy COL=FILE``;

      statcurator attack homogeneity release.csv --qi Zipcode,Age --sensitive Disease \\
          --targets bob.csv

* a dataset to anonymize first (``adult`` or a file with metadata) with ``--k`` (and ``--l``,
  ``--t``, ``--algorithm``); every record (or ``--sample N`` of them) is then a target;

      statcurator attack background adult --k 5 --sensitive occupation --b 2 --epsilon 1

``--epsilon E`` also attacks the ε-DP counterpart (noisy histograms per cell); ``--detail``
keeps per-target rows; ``--report out.html`` writes the HTML report; ``--json`` prints one
object. ``membership`` and ``reconstruction`` attack statistics and query interfaces.
"""

from __future__ import annotations

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
    print_table,
    writing,
)

QI = typer.Option("--qi", help="Comma-separated quasi-identifiers of the release.")
SENSITIVE = typer.Option("--sensitive", "-s", help="The sensitive column.")
TARGETS = typer.Option("--targets", "-t", help="The attacker's knowledge: a table of the "
                                              "targets' QIs (its sensitive column, if any, is "
                                              "the truth for scoring).")
HIERARCHY = typer.Option("--hierarchy", help="COL=FILE: a public generalization hierarchy "
                                             "(ARX CSV). Repeatable.")
METADATA = typer.Option("--metadata", "-m", help="Metadata TOML of a dataset to anonymize.")
K = typer.Option("--k", help="Anonymize the dataset first: k-anonymity.")
L = typer.Option("--l", help="... and distinct l-diversity of the sensitive column.")
T = typer.Option("--t", help="... and t-closeness (equal distance) of the sensitive column.")
ALGORITHM = typer.Option("--algorithm", help="optimal | mondrian (when anonymizing).")
SUPPRESSION = typer.Option("--suppression", help="Suppression limit (when anonymizing).")
SAMPLE = typer.Option("--sample", help="Attack a random sample of N records (dataset mode).")
SEED = typer.Option("--seed", help="Seed of the sample / simulation (the design, not noise).")
EPSILON = typer.Option("--epsilon", "-e", help="Also attack the ε-DP counterpart.")
DETAIL = typer.Option("--detail", help="Keep per-target detail (JSON and report).")
REPORT = typer.Option("--report", help="Write an HTML report.")

# the options shared by the commands, as annotated types
Qi = Annotated[str | None, QI]
Sensitive = Annotated[str | None, SENSITIVE]
Targets = Annotated[Path | None, TARGETS]
Hierarchies = Annotated[list[str] | None, HIERARCHY]
Metadata = Annotated[Path | None, METADATA]
KOpt = Annotated[int | None, K]
LOpt = Annotated[int | None, L]
TOpt = Annotated[str | None, T]
Algorithm = Annotated[str, ALGORITHM]
Suppression = Annotated[str, SUPPRESSION]
Sample = Annotated[int | None, SAMPLE]
Seed = Annotated[int, SEED]
Epsilon = Annotated[str | None, EPSILON]
Detail = Annotated[bool, DETAIL]
Report = Annotated[Path | None, REPORT]


def _text_table(path: Path) -> Any:
    """A table file with every CSV column read as text (so 02134 stays 02134)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from ..io.tables import read_table, sniff_separator

    if path.suffix.lower() not in (".csv", ".tsv", ".txt", ""):
        return read_table(path)
    from ..core.errors import DataError

    if not path.is_file():
        raise DataError(f"data file {str(path)!r} does not exist", remedy="check the path")
    sep = sniff_separator(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline().rstrip("\r\n").split(sep)
    return pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter=sep),
                          convert_options=pacsv.ConvertOptions(
                              column_types={h: pa.string() for h in header},
                              strings_can_be_null=False))


def _hierarchies(specs: list[str] | None) -> dict[str, Any]:
    from ..anonymize.hierarchy import Hierarchy
    from ..core.errors import InvalidParameterError

    out = {}
    for spec in specs or []:
        col, sep, file = spec.partition("=")
        if not sep or not col or not file:
            raise InvalidParameterError(f"--hierarchy {spec!r} is not COL=FILE",
                                        remedy="pass e.g. --hierarchy Zipcode=zip.csv")
        out[col] = Hierarchy.from_csv(col, file)
    return out


def _columns(text: str | None) -> list[str] | None:
    return [c.strip() for c in text.split(",") if c.strip()] if text else None


def _is_dataset(k: int | None, l: int | None, t: str | None) -> bool:  # noqa: E741
    """Dataset mode: a criterion is given, so RELEASE is data to anonymize first."""
    return k is not None or l is not None or t is not None


def _anonymized(release: str, metadata: Path | None, sensitive: str | None, k: int | None,
                l: int | None, t: str | None, algorithm: str, suppression: str,  # noqa: E741
                qi: list[str] | None) -> Any:
    from ..anonymize import KAnonymity, LDiversity, TCloseness, anonymize
    from ..core.errors import InvalidParameterError
    from ._common import fraction_option

    ds = _dataset(release, metadata)
    crits: list[Any] = []
    if k is not None:
        crits.append(KAnonymity(k))
    if (l is not None or t is not None) and sensitive is None:
        raise InvalidParameterError("--l and --t protect the sensitive column",
                                    remedy="name it with --sensitive COL")
    if l is not None:
        crits.append(LDiversity(sensitive, l))
    if t is not None:
        crits.append(TCloseness(sensitive, exact_option(t, "t", allow_zero=True)))
    return anonymize(ds, *crits, sensitive=[sensitive] if sensitive else None, qi=qi,
                     algorithm=algorithm,
                     suppression=fraction_option(suppression, "--suppression", "0.02"),
                     progress=True)


def _dataset(release: str, metadata: Path | None) -> Any:
    from .. import datasets
    from ..io.dataset import load_dataset

    if metadata is None and release in datasets.names():
        return datasets.load(release)
    return load_dataset(release, metadata)


def _sample_targets(result: Any, sample: int | None, seed: int) -> Any:
    """The records attacked in dataset mode: all, or a seeded random sample."""
    import numpy as np

    original = result.verification_inputs["original"]
    if sample is None or sample >= original.num_rows:
        return None
    rows = np.sort(np.random.default_rng(seed).choice(original.num_rows, sample, replace=False))
    return original.take(rows)


def _finish(risk: Any, report: Path | None, json_output: bool, detail: bool) -> None:
    written = None
    if report is not None:
        from ..report.attacks import write_report

        written = writing(report, "--report", lambda: write_report(risk, report))
    if json_output:
        doc = risk.to_dict(detail=detail)
        doc["report"] = str(written) if written else None
        print_json(doc)
        return
    _show(risk)
    if written:
        emit(("report written to ", "green"), str(written))


def _show(risk: Any, title: str | None = None) -> None:
    print_table(("", ""), risk.rows(), title=title or f"{risk.attack} attack",
                show_header=False)
    if risk.contrast is not None:
        _show(risk.contrast, f"{risk.attack} attack on the DP counterpart")


def _release_and_targets(release: str, *, qi: str | None, sensitive: str | None,
                         targets: Path | None, hierarchy: list[str] | None,
                         metadata: Path | None, k: int | None, l: int | None,  # noqa: E741
                         t: str | None, algorithm: str, suppression: str, sample: int | None,
                         seed: int) -> tuple[Any, Any, dict[str, Any]]:
    """(release, targets, run options) for a table attack, in file or dataset mode."""
    from ..core.errors import InvalidParameterError

    cols = _columns(qi)
    if _is_dataset(k, l, t):
        res = _anonymized(release, metadata, sensitive, k, l, t, algorithm, suppression, cols)
        tg = _text_table(targets) if targets is not None else _sample_targets(res, sample, seed)
        return res, tg, {}
    if targets is None:
        raise InvalidParameterError("no targets: the attacker's knowledge is unknown",
                                    remedy="pass --targets FILE (or anonymize a dataset with "
                                           "--k to attack its records)")
    if cols is None:
        raise InvalidParameterError("the quasi-identifiers of the release are unknown",
                                    remedy="pass --qi a,b,c")
    return _text_table(Path(release)), _text_table(targets), {
        "qi": cols, "sensitive": sensitive, "hierarchies": _hierarchies(hierarchy)}


def register(app: typer.Typer) -> None:  # noqa: C901 - one command per attack
    attack_app = typer.Typer(help="Attack releases and query interfaces; every attack "
                                  "returns a measured risk.", no_args_is_help=True)
    app.add_typer(attack_app, name="attack")

    def table_command(name: str, make: Any, extra_help: str) -> None:
        @attack_app.command(name, help=extra_help)
        @handle_errors
        def command(
            release: Annotated[str, typer.Argument(help="A released table, or a dataset to "
                                                        "anonymize with --k.")],
            qi: Qi = None,
            sensitive: Sensitive = None,
            targets: Targets = None,
            hierarchy: Hierarchies = None,
            metadata: Metadata = None,
            k: KOpt = None,
            l: LOpt = None,  # noqa: E741
            t: TOpt = None,
            algorithm: Algorithm = "optimal",
            suppression: Suppression = "0",
            sample: Sample = None,
            seed: Seed = 0,
            b: Annotated[int, typer.Option("--b", help="background: values ruled out.")] = 1,
            gain: Annotated[float, typer.Option("--gain", help="skewness: gain threshold.")] = 2.0,
            categories: Annotated[Path | None, typer.Option(
                "--categories", help="similarity: ARX hierarchy of the sensitive values.")] = None,
            level: Annotated[int, typer.Option("--level", help="similarity: level of the "
                                                               "categories.")] = 1,
            threshold: Annotated[float, typer.Option(
                "--threshold", help="similarity: share of the true category.")] = 1.0,
            epsilon: Epsilon = None,
            detail: Detail = False,
            report: Report = None,
            json_output: bool = JSON_OPTION,
        ) -> None:
            output_path(report, "--report", (".html", ".htm"))
            rel, tg, kw = _release_and_targets(
                release, qi=qi, sensitive=sensitive, targets=targets, hierarchy=hierarchy,
                metadata=metadata, k=k, l=l, t=t, algorithm=algorithm, suppression=suppression,
                sample=sample, seed=seed)
            attack = make(b=b, gain=gain, categories=categories, level=level,
                          threshold=threshold, sensitive=sensitive or getattr(rel, "sensitive",
                                                                              (None,))[0])
            risk = attack.run(rel, tg, detail=detail, epsilon=exact_option(epsilon, "epsilon"),
                              **kw)
            _finish(risk, report, json_output, detail)

    from .. import attacks as A

    def similarity(**o: Any) -> Any:
        from ..anonymize.hierarchy import Hierarchy
        from ..core.errors import InvalidParameterError

        if o["categories"] is None:
            raise InvalidParameterError("the similarity attack needs the categories of the "
                                        "sensitive values",
                                        remedy="pass --categories FILE (an ARX hierarchy)")
        return A.Similarity(Hierarchy.from_csv(o["sensitive"] or "sensitive", o["categories"]),
                            level=o["level"], threshold=o["threshold"])

    table_command("homogeneity", lambda **o: A.Homogeneity(),
                  "Homogeneity: targets whose matching records share one sensitive value.")
    table_command("background", lambda **o: A.BackgroundKnowledge(b=o["b"]),
                  "Background knowledge: the attacker rules out b values (curve over b).")
    table_command("skewness", lambda **o: A.Skewness(gain=o["gain"]),
                  "Skewness: the posterior of the most likely value against the prior.")
    table_command("similarity", similarity,
                  "Similarity: the target's category of sensitive values is disclosed.")

    @attack_app.command("linkage")
    @handle_errors
    def linkage_command(
        release: Annotated[str, typer.Argument(help="A released table, or a dataset to "
                                                    "anonymize with --k.")],
        external: Annotated[Path | None, typer.Option(
            "--external", help="The identified external table (names and QIs).")] = None,
        id: Annotated[str | None, typer.Option(  # noqa: A002
            "--id", help="The identifier column of --external (and --truth).")] = None,
        truth: Annotated[Path | None, typer.Option(
            "--truth", help="The identified original table, row i = released row i (scoring "
                            "only).")] = None,
        population: Annotated[Path | None, typer.Option(
            "--population", help="The population table (journalist and marketer risk).")] = None,
        qi: Qi = None,
        hierarchy: Hierarchies = None,
        metadata: Metadata = None,
        k: KOpt = None,
        algorithm: Algorithm = "optimal",
        suppression: Suppression = "0",
        sample: Annotated[float, typer.Option(
            "--sample", help="Dataset mode: the share of records released.")] = 0.5,
        size: Annotated[int, typer.Option(
            "--size", help="Dataset mode: people on the external list (half released).")] = 1000,
        seed: Seed = 0,
        epsilon: Epsilon = None,
        detail: Detail = False,
        report: Report = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Linkage / re-identification: join the release with an identified table on the
        QIs; prosecutor, journalist and marketer risk, sample and population uniques.

        Example: statcurator attack linkage patients.csv --external voters.csv --id Name
        --truth patients_named.csv --qi Age,Sex,Zipcode --population voters.csv
        """
        from ..core.errors import InvalidParameterError

        output_path(report, "--report", (".html", ".htm"))
        eps = exact_option(epsilon, "epsilon")
        if k is not None:
            from ..attacks.experiments import linkage

            risks = linkage(_dataset(release, metadata), k=[k], sample=sample, external=size,
                            algorithm=algorithm, seed=seed,
                            suppression=exact_option(suppression, "suppression",
                                                     allow_zero=True), epsilon=eps)
            _finish(risks[0], report, json_output, detail)
            return
        if external is None or qi is None:
            raise InvalidParameterError("linkage needs the external table and the QIs",
                                        remedy="pass --external FILE --qi a,b,c (or a dataset "
                                               "with --k)")
        ext = _text_table(external)
        rel = _text_table(Path(release))
        rows = None
        if truth is not None:
            if id is None:
                raise InvalidParameterError("--truth needs --id to pair people with records",
                                            remedy="pass --id COL")
            names = _text_table(truth).column(id).to_pylist()
            pos = {n: i for i, n in enumerate(names)}
            rows = [pos.get(n, -1) for n in ext.column(id).to_pylist()]
        risk = A.Linkage(population=_text_table(population) if population else None).run(
            rel, ext, truth=rows, qi=_columns(qi), hierarchies=_hierarchies(hierarchy),
            id=id, detail=detail, epsilon=eps)
        _finish(risk, report, json_output, detail)

    @attack_app.command("composition")
    @handle_errors
    def composition_command(
        releases: Annotated[list[str], typer.Argument(
            help="Two or more released tables, or one dataset to anonymize once per "
                 "--algorithm.")],
        qi: Qi = None,
        sensitive: Sensitive = None,
        targets: Targets = None,
        hierarchy: Hierarchies = None,
        metadata: Metadata = None,
        k: KOpt = None,
        l: LOpt = None,  # noqa: E741
        t: TOpt = None,
        algorithm: Annotated[str, typer.Option(
            "--algorithm", help="Dataset mode: one release per algorithm, e.g. "
                                "optimal,mondrian.")] = "optimal,mondrian",
        suppression: Suppression = "0",
        sample: Sample = None,
        seed: Seed = 0,
        threshold: Annotated[float, typer.Option(
            "--threshold", help="Confidence of the reported partial breach.")] = 0.5,
        epsilon: Epsilon = None,
        detail: Detail = False,
        report: Report = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Composition: intersect the target's sensitive values across independent releases
        (perfect and partial breach). For the two-publisher experiment on Adult see
        `statcurator experiment composition`.

        Example: statcurator attack composition a.csv b.csv --qi ZIP,Age --sensitive
        Condition --targets people.csv
        """
        from ..core.errors import InvalidParameterError

        output_path(report, "--report", (".html", ".htm"))
        attack = A.Composition(threshold=threshold)
        eps = exact_option(epsilon, "epsilon")
        if _is_dataset(k, l, t):
            algs = _columns(algorithm) or ["optimal"]
            res = [_anonymized(releases[0], metadata, sensitive, k, l, t, a, suppression,
                               _columns(qi)) for a in algs]
            if len(res) < 2:
                raise InvalidParameterError("composition needs two releases",
                                            remedy="pass --algorithm optimal,mondrian")
            tg = _text_table(targets) if targets else _sample_targets(res[0], sample, seed)
            risk = attack.run(res, tg, detail=detail, epsilon=eps)
        else:
            if len(releases) < 2 or targets is None or qi is None:
                raise InvalidParameterError("composition needs two releases, --targets and --qi",
                                            remedy="pass A.csv B.csv --targets T.csv --qi a,b")
            risk = attack.run([_text_table(Path(r)) for r in releases], _text_table(targets),
                              qi=_columns(qi), sensitive=sensitive,
                              hierarchies=_hierarchies(hierarchy), detail=detail, epsilon=eps)
        _finish(risk, report, json_output, detail)

    @attack_app.command("minimality")
    @handle_errors
    def minimality_command(
        release: Annotated[str, typer.Argument(help="A released table (with --people and the "
                                                    "criteria) or a dataset to anonymize.")],
        people: Annotated[Path | None, typer.Option(
            "--people", help="Everyone's QIs (the attacker's knowledge; a sensitive column is "
                             "the truth).")] = None,
        qi: Qi = None,
        sensitive: Sensitive = None,
        hierarchy: Hierarchies = None,
        metadata: Metadata = None,
        k: KOpt = None,
        l: LOpt = None,  # noqa: E741
        suppression: Suppression = "0",
        detail: Detail = False,
        report: Report = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Minimality: an attacker who knows the algorithm returns a minimal generalization
        infers more than the table shows.

        Example: statcurator attack minimality adult --k 10 --l 5 --sensitive occupation
        """
        from ..anonymize import KAnonymity, LDiversity
        from ..core.errors import InvalidParameterError

        output_path(report, "--report", (".html", ".htm"))
        if people is None:
            res = _anonymized(release, metadata, sensitive, k, l, None, "optimal", suppression,
                              _columns(qi))
            risk = A.Minimality.of(res).run(res, detail=detail)
        else:
            crits: list[Any] = [KAnonymity(k)] if k is not None else []
            if l is not None:
                if sensitive is None:
                    raise InvalidParameterError("--l needs --sensitive COL",
                                                remedy="pass --sensitive COL")
                crits.append(LDiversity(sensitive, l))
            if not crits:
                raise InvalidParameterError("the release's criteria are unknown",
                                            remedy="pass --k and/or --l")
            risk = A.Minimality(*crits, suppression=exact_option(
                suppression, "suppression", allow_zero=True)).run(
                _text_table(Path(release)), _text_table(people), qi=_columns(qi),
                sensitive=sensitive, hierarchies=_hierarchies(hierarchy), detail=detail)
        _finish(risk, report, json_output, detail)

    @attack_app.command("update")
    @handle_errors
    def update_command(
        versions: Annotated[list[str], typer.Argument(
            help="The versions in publication order, or one dataset (with --k) to publish "
                 "twice after inserts and deletes.")],
        targets: Annotated[list[Path] | None, typer.Option(
            "--targets", "-t", help="The targets' QIs, one file per version (or one).")] = None,
        qi: Qi = None,
        sensitive: Sensitive = None,
        hierarchy: Hierarchies = None,
        k: KOpt = None,
        inserts: Annotated[float, typer.Option("--inserts", help="Share inserted.")] = 0.1,
        deletes: Annotated[float, typer.Option("--deletes", help="Share deleted.")] = 0.1,
        algorithm: Algorithm = "mondrian",
        seed: Seed = 0,
        epsilon: Epsilon = None,
        detail: Detail = False,
        report: Report = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Update / re-publication: intersecting the versions of a table breaks k.

        Example: statcurator attack update adult --k 10 --sensitive occupation
        """
        from ..core.errors import InvalidParameterError

        output_path(report, "--report", (".html", ".htm"))
        eps = exact_option(epsilon, "epsilon")
        if k is not None and len(versions) == 1:
            from ..attacks.experiments import republication

            risk = republication(_dataset(versions[0], None), k=k, inserts=inserts,
                                 deletes=deletes, algorithm=algorithm,
                                 sensitive=sensitive or "occupation", seed=seed, epsilon=eps)
        else:
            if len(versions) < 2 or not targets or qi is None:
                raise InvalidParameterError("update needs two versions, --targets and --qi",
                                            remedy="pass V1.csv V2.csv --targets T.csv --qi a,b")
            tg = [_text_table(p) for p in targets]
            risk = A.Update(k=k).run([_text_table(Path(v)) for v in versions],
                                     tg if len(tg) > 1 else tg[0], qi=_columns(qi),
                                     sensitive=sensitive, hierarchies=_hierarchies(hierarchy),
                                     detail=detail, epsilon=eps)
        _finish(risk, report, json_output, detail)

    @attack_app.command("membership")
    @handle_errors
    def membership_command(
        data: Annotated[str, typer.Argument(help="gwas (simulated genotypes) or a dataset "
                                                 "such as adult (one-hot means).")] = "gwas",
        snps: Annotated[int, typer.Option("--snps", help="gwas: SNPs published.")] = 20000,
        pool: Annotated[int, typer.Option("--pool", help="gwas: people in the study.")] = 1000,
        group_size: Annotated[int, typer.Option(
            "--group-size", help="dataset: people in the published group.")] = 100,
        targets: Annotated[int, typer.Option("--targets", help="People attacked.")] = 200,
        statistics: Annotated[str, typer.Option(
            "--statistics", help="Grid of the number of published statistics.")] =
            "10,100,1000,10000",
        seed: Seed = 0,
        epsilon: Epsilon = None,
        detail: Detail = False,
        report: Report = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Membership inference from published frequencies (Homer et al. 2008): ROC and
        advantage as the number of statistics grows.

        Example: statcurator attack membership gwas --snps 20000 --epsilon 1
        """
        from ..core.errors import InvalidParameterError

        output_path(report, "--report", (".html", ".htm"))
        grid = []
        for x in _columns(statistics) or []:
            try:
                grid.append(int(x))
            except ValueError:
                raise InvalidParameterError(f"--statistics {statistics!r} is not a list of "
                                            "whole numbers",
                                            remedy="pass e.g. --statistics 10,100,1000") from None
        if data == "gwas":
            agg = A.simulate_gwas(pool=pool, reference=pool, targets=targets, snps=snps,
                                  seed=seed)
        else:
            agg = A.one_hot_aggregates(_dataset(data, None), group_size=group_size,
                                       targets=targets, seed=seed)
        risk = A.MembershipInference(statistics=tuple(grid)).run(
            agg, detail=detail, epsilon=exact_option(epsilon, "epsilon"))
        _finish(risk, report, json_output, detail)

    @attack_app.command("reconstruction")
    @handle_errors
    def reconstruction_command(
        rows: Annotated[int, typer.Option("--rows", "-n", help="Rows of the secret column.")] =
            500,
        queries: Annotated[int, typer.Option("--queries", "-q", help="Subset-sum queries.")] =
            2000,
        interface: Annotated[str, typer.Option(
            "--interface", help="exact | bounded | laplace (fresh noise, no budget) | curator "
                                "(DP, under --budget).")] = "exact",
        bound: Annotated[int, typer.Option("--bound", help="bounded: the noise bound E.")] = 0,
        epsilon: Annotated[str | None, typer.Option(
            "--epsilon", "-e", help="laplace: ε per query.")] = None,
        budget: Annotated[str, typer.Option(
            "--budget", help="curator: the attacker's total ε, spread over the queries.")] = "1",
        decoder: Annotated[str, typer.Option("--decoder", help="linf | l1")] = "linf",
        seed: Seed = 0,
        detail: Detail = False,
        report: Report = None,
        json_output: bool = JSON_OPTION,
    ) -> None:
        """Reconstruction (Dinur–Nissim): random subset-sum queries and an LP decoder (HiGHS)
        recover a secret column; through the curator a budget stops it.

        Example: statcurator attack reconstruction --rows 500 --queries 2000 --interface
        bounded --bound 10
        """
        import numpy as np

        from ..core.errors import InvalidParameterError

        output_path(report, "--report", (".html", ".htm"))
        secret = np.random.default_rng(seed).integers(0, 2, rows)  # the simulated secret
        # with a report, also decode from the first quarter and half of the answers (the curve)
        attack = A.Reconstruction(queries=queries, norm=decoder, seed=seed + 1,
                                  steps=(0.25, 0.5) if report is not None else ())
        if interface in ("exact", "bounded", "laplace"):
            iface = A.NaiveInterface(secret, interface, bound=bound,
                                     epsilon=exact_option(epsilon, "epsilon"))
            risk = attack.run(iface, rows, truth=secret, detail=detail,
                              noise=f"{interface} answers" + (f", E={bound}" if bound else ""))
        elif interface == "curator":
            oracle, cost, close = curator_oracle(secret, exact_option(budget, "budget"),
                                                 queries)
            try:
                risk = attack.run(oracle, rows, truth=secret, detail=detail,
                                  noise=f"the DP curator, total ε={budget} over {queries} "
                                        "queries", cost=cost)
            finally:
                close()
        else:
            raise InvalidParameterError(f"unknown interface {interface!r}",
                                        remedy="use exact, bounded, laplace or curator")
        _finish(risk, report, json_output, detail)


def curator_oracle(secret: Any, budget: Any, queries: int) -> tuple[Any, Any, Any]:
    """A subset-sum oracle answered by a :class:`~statcurator.Curator` with a DuckDB table of
    the secret column: each query releases ``SUM(secret) WHERE id IN (...)`` at ε =
    budget/queries, charged to the attacker's grant. Returns (oracle, total cost, close)."""
    from fractions import Fraction

    import pyarrow as pa

    from ..core.measures import PureDP
    from ..core.schema import Column, TableMeta
    from ..curator import Curator

    cur = Curator()
    meta = TableMeta("secrets", (Column("id", type="integer"),
                                 Column("secret", type="integer", bounds=(0, 1))))
    cur.register("secrets", pa.table({"id": list(range(len(secret))),
                                      "secret": [int(x) for x in secret]}), meta,
                 budget=PureDP(budget))
    cur.set_budget("attacker", "secrets", epsilon=budget)
    eps = Fraction(budget) / queries

    def oracle(subset: Any) -> float:
        ids = ",".join(str(int(i)) for i in subset) or "-1"
        rel = cur.sql(f"SELECT SUM(secret) AS s FROM secrets WHERE id IN ({ids})").release(
            epsilon=eps, analyst="attacker")
        return float(rel.rows()[0]["s"])

    return oracle, PureDP(budget), cur.close
