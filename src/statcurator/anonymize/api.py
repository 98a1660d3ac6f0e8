"""``anonymize()``: one call from data and criteria to a verified release.

>>> import statcurator as sc
>>> from statcurator.anonymize import anonymize, KAnonymity, LDiversity
>>> res = anonymize(sc.datasets.adult(), KAnonymity(10), LDiversity("occupation", 5),
...                 sensitive=["occupation"])
>>> res.levels
{'sex': 0, 'age': 4, 'race': 1, 'marital-status': 1, 'education': 3, 'native-country': 2, 'workclass': 2, 'salary-class': 0}
>>> res.classes, res.min_class_size >= 10
(8, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..core.errors import InvalidParameterError, UnsatisfiableError
from .criteria import Criterion, DeltaPresence
from .metrics import METRICS, prosecutor_risk, utility
from .optimal import flash
from .release import check_mode, full_domain_release
from .result import AnonymizationResult
from .search import Problem, prepare
from .verify import check_verified, verify

__all__ = ["anonymize", "ALGORITHMS"]

ALGORITHMS = ("optimal", "mondrian")


def _flatten(items: Iterable[Any]) -> list[Criterion]:
    out: list[Criterion] = []
    for c in items:
        if isinstance(c, list | tuple):
            out.extend(_flatten(c))
        else:
            out.append(c)
    return out


@contextmanager
def _progress(enabled: bool, label: str) -> Iterator[Callable[[float], None] | None]:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    # on stderr, so that machine-readable output on stdout (--json) stays clean; and only on
    # a terminal (in a pipe or a log a transient bar leaves nothing but blank lines)
    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(label, total=1.0)

        def update(fraction: float) -> None:
            bar.update(task, completed=min(max(fraction, 0.0), 1.0))

        yield update
        bar.update(task, completed=1.0)


def anonymize(data: Any, *criteria: Criterion | Sequence[Criterion], suppression: Any = 0,
              algorithm: str = "optimal", metric: str = "loss",
              qi: Sequence[str] | str | None = None, sensitive: Sequence[str] | str | None = None,
              meta: Any = None, suppressed: str = "keep", risk_threshold: float = 0.2,
              progress: bool = False) -> AnonymizationResult:
    """Anonymize ``data`` so that it satisfies every criterion, and verify the release.

    ``data`` is a :class:`~statcurator.io.Dataset` (anything with ``.table`` and ``.meta``,
    e.g. ``statcurator.datasets.adult()``), or a pyarrow / pandas / Polars table together with
    ``meta=`` (a :class:`~statcurator.core.schema.TableMeta`). Quasi-identifiers, sensitive
    attributes and hierarchies come from the metadata; ``sensitive=[col]`` makes declared
    columns sensitive for this run (they stop being QIs) and ``qi=[...]`` restricts the QIs.

    ``algorithm="optimal"`` searches all full-domain generalizations for the one with the
    lowest ``metric`` (one of ``loss``, ``dm``, ``dmstar``, ``aecs``, ``entropy``,
    ``precision``) while suppressing at most ``suppression`` (a fraction) of the records;
    ``algorithm="mondrian"`` partitions the records multidimensionally (it never suppresses).

    Suppressed records are kept as rows whose quasi-identifiers are ``*`` (``suppressed="keep"``,
    as ARX does, so that the release still has one row per input record) or left out
    (``suppressed="drop"``). Identifier columns are always removed.

    The release is re-checked independently before it is returned; if that fails a
    :class:`~statcurator.core.errors.VerificationError` is raised and nothing is returned.
    """
    started = time.perf_counter()
    crits = _flatten(criteria)
    if algorithm not in ALGORITHMS:
        raise InvalidParameterError(f"unknown algorithm {algorithm!r}",
                                    remedy="use algorithm='optimal' or algorithm='mondrian'")
    if str(metric).lower() not in METRICS and str(metric).lower() not in ("dm*",):
        raise InvalidParameterError(f"unknown utility metric {metric!r}",
                                    remedy="use one of: " + ", ".join(METRICS))
    check_mode(suppressed)
    mondrian = algorithm == "mondrian"
    if mondrian and any(isinstance(c, DeltaPresence) for c in crits):
        raise InvalidParameterError(
            "δ-presence is defined here for full-domain generalizations only (population "
            "classes must be generalized the same way as the sample)",
            remedy="use algorithm='optimal' with DeltaPresence")
    problem = prepare(data, meta, crits, suppression=suppression, metric=metric, qi=qi,
                      sensitive=sensitive, need_hierarchies=not mondrian)
    levels = None
    lattice = None
    if mondrian:
        from .mondrian import mondrian_release

        with _progress(progress, "Mondrian partitioning") as bar:
            release = mondrian_release(problem, suppressed, progress=bar)
    else:
        with _progress(progress, "Searching the generalization lattice") as bar:
            best, lattice = flash(problem, progress=bar)
        if best is None:
            raise UnsatisfiableError(
                "no generalization satisfies " + " and ".join(str(c) for c in problem.criteria)
                + f" while suppressing at most {problem.limit} record(s), not even the most "
                  "general one",
                remedy="raise the suppression limit, weaken the criteria, or add hierarchy levels")
        levels = dict(zip(problem.qi, best.levels, strict=True))
        release = full_domain_release(problem, best.levels, suppressed)
    check = _verification_inputs(problem, levels, release, suppressed)
    with _progress(progress, "Verifying the release independently") as bar:
        verified = verify(release.table, problem.criteria, **check)
        if bar is not None:
            bar(1.0)
    check_verified(verified)
    table, check = _shuffled(release.table, check)
    rs = release.structure
    sizes = release.class_sizes
    return AnonymizationResult(
        algorithm=algorithm,
        criteria=problem.criteria,
        levels=levels,
        suppressed=rs.suppressed,
        classes=rs.classes,
        min_class_size=int(sizes.min()) if len(sizes) else 0,
        metrics=utility(rs),
        risk=prosecutor_risk(sizes, risk_threshold),
        verified=verified,
        table=table,
        lattice=lattice,
        metric=problem.metric,
        suppression=problem.suppression,
        records=problem.encoded.n,
        qi=problem.qi,
        sensitive=problem.meta.sensitive,  # protected by a criterion or not: all are reported
        suppressed_rows=suppressed,
        dataset=str(getattr(data, "name", None) or problem.meta.name),
        elapsed=time.perf_counter() - started,
        class_sizes=sizes,
        automatic=dict(problem.automatic),
        _check=check,
    )


def _shuffled(table: Any, check: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The release's rows in a random order (the OS's CSPRNG), and the verification's row map
    to match. The input's order would otherwise survive: records sorted by a removed
    identifier, or by anything an attacker knows, line up with the released rows, whatever
    the generalization hides (a class [23, 29] listing its ages' diagnoses in age order)."""
    import random

    import pyarrow as pa

    n = table.num_rows
    order = list(range(n))
    random.SystemRandom().shuffle(order)  # os.urandom: unpredictable
    rows = check["kept"] if check["kept"] is not None else range(n)
    take = pa.array(order, pa.int64())
    columns = [(c.cast(pa.string()) if getattr(pa.types, "is_string_view", bool)(c.type)
                else c).take(take) for c in table.columns]  # (Arrow cannot take a view)
    return (pa.table(columns, names=table.column_names),
            {**check, "kept": [int(rows[i]) for i in order]})


def _verification_inputs(problem: Problem, levels: dict[str, int] | None, release: Any,
                         mode: str) -> dict[str, Any]:
    doms = problem.encoded.domains
    return {
        "original": problem.table,
        "qi": problem.qi,
        "hierarchies": problem.hierarchies,
        "levels": levels,
        "suppression": problem.suppression,
        "kept": None if mode == "keep" else [int(i) for i in release.kept],
        "suppressed_rows": [int(i) for i in release.suppressed],
        "sensitive_hierarchies": {c: d.hierarchy for c, d in doms.items() if d.hierarchy},
        "sensitive_orders": {c: [str(v) for v in problem.meta[c].categories]
                             for c in doms if problem.meta[c].categories},
    }
