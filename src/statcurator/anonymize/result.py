"""The result of an anonymization run: the release, its generalization, utility, risk and
the outcome of its independent verification.

>>> import statcurator as sc
>>> from statcurator.anonymize import anonymize, KAnonymity
>>> res = anonymize(sc.datasets.adult(), KAnonymity(5), suppression=0.02)
>>> res.levels["age"], res.suppressed, res.classes
(3, 506, 222)
>>> all(res.verified.values())
True
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import DataError
from .criteria import Criterion
from .hierarchy import format_number
from .lattice import Lattice
from .verify import check_verified, verify

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["AnonymizationResult"]

_ALGORITHMS = {"optimal": "optimal full-domain generalization (Flash)",
               "mondrian": "Mondrian multidimensional partitioning"}


@dataclass(frozen=True)
class AnonymizationResult:
    """A verified anonymized release.

    ``levels`` maps each quasi-identifier to its generalization level (full-domain results;
    ``None`` for Mondrian). ``suppressed`` counts suppressed records, ``classes`` the released
    equivalence classes (suppressed records excluded) and ``min_class_size`` the smallest.
    ``metrics`` holds the utility figures (see :mod:`statcurator.anonymize.metrics`), ``risk``
    the prosecutor re-identification risk, ``verified`` the outcome of the independent
    re-check of every criterion. ``table`` is the release (pyarrow); ``lattice`` what the
    optimal search learned; ``minimal`` the minimal acceptable generalizations.
    ``sensitive`` lists every sensitive attribute of the run, ``unprotected`` those that no
    criterion protects (released as they are); ``automatic`` the hierarchies statcurator
    built for quasi-identifiers that had none declared (column -> what was built).
    """

    algorithm: str
    criteria: tuple[Criterion, ...]
    levels: dict[str, int] | None
    suppressed: int
    classes: int
    min_class_size: int
    metrics: dict[str, Any]
    risk: dict[str, Any]
    verified: dict[str, bool]
    table: pa.Table
    lattice: Lattice | None
    metric: str
    suppression: Fraction
    records: int
    qi: tuple[str, ...]
    sensitive: tuple[str, ...]
    suppressed_rows: str
    dataset: str = "data"
    elapsed: float = 0.0
    class_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64),
                                    repr=False, compare=False)
    automatic: dict[str, str] = field(default_factory=dict)
    _check: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # -- derived ----------------------------------------------------------------------------
    @property
    def suppression_limit(self) -> int:
        """The largest number of records that could have been suppressed."""
        return int(self.suppression * self.records)

    @property
    def unprotected(self) -> tuple[str, ...]:
        """Sensitive attributes that no criterion (l-diversity, t-closeness) protects."""
        guarded = {c.sensitive_column for c in self.criteria}
        return tuple(s for s in self.sensitive if s not in guarded)

    @property
    def minimal(self) -> list[dict[str, int]]:
        """The minimal acceptable generalizations (k-minimal), as QI → level mappings.

        Computed on first access from the lattice (checking the nodes the search skipped).
        """
        if self.lattice is None:
            return []
        return [dict(zip(self.qi, node, strict=True)) for node in self.lattice.minimal]

    def to_pandas(self) -> Any:
        """The release as a pandas DataFrame."""
        return self.table.to_pandas()

    def to_polars(self) -> Any:
        """The release as a Polars DataFrame (needs the ``polars`` extra)."""
        try:
            import polars as pl
        except ImportError:
            raise DataError("to_polars() needs the polars package, which is not installed",
                            remedy="pip install 'statcurator[polars]' (or use to_pandas() or "
                                   "the Arrow table .table)") from None
        return pl.from_arrow(self.table)

    @property
    def verification_inputs(self) -> Mapping[str, Any]:
        """What the independent verification reads besides the release: the hierarchies,
        the original table (for δ-presence and t-closeness's distribution), the QIs."""
        return self._check

    def verify(self) -> dict[str, bool]:
        """Re-run the independent verification on the released table."""
        return verify(self.table, self.criteria, **self._check)

    def write(self, path: str | Path, *, separator: str = ",", format: str | None = None) -> Path:
        """Write the release (CSV with any separator, Parquet, or Arrow/Feather).

        The release is verified again, from the table being written, first; a release that
        fails is not written (:class:`~statcurator.core.errors.VerificationError`).
        """
        check_verified(self.verify())
        p = Path(path)
        fmt = (format or p.suffix.lstrip(".")).lower()
        p.parent.mkdir(parents=True, exist_ok=True)
        if fmt in ("csv", "tsv", "txt", "psv", "dat"):
            sep = "\t" if fmt == "tsv" and separator == "," else separator
            _write_csv(self.table, p, sep)
        elif fmt in ("parquet", "pq"):
            import pyarrow.parquet as pq

            pq.write_table(self.table, p)
        elif fmt in ("arrow", "feather", "ipc"):
            import pyarrow.feather as feather

            feather.write_feather(self.table, p)
        else:
            raise DataError(f"cannot write a release as {fmt!r} ({str(p)!r})",
                            remedy="use .csv, .tsv, .parquet or .arrow, or write result.table "
                                   "with statcurator.io.write_table (e.g. to DuckDB)")
        return p

    # -- rendering --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (what ``statcurator anonymize --json`` prints)."""
        return {
            "dataset": self.dataset,
            "algorithm": self.algorithm,
            "criteria": [str(c) for c in self.criteria],
            "quasi_identifiers": list(self.qi),
            "sensitive": list(self.sensitive),
            "unprotected_sensitive": list(self.unprotected),
            "automatic_hierarchies": dict(self.automatic),
            "suppression": float(self.suppression),
            "suppression_limit": self.suppression_limit,
            "metric": self.metric,
            "levels": self.levels,
            "records": self.records,
            "suppressed": self.suppressed,
            "suppressed_rows": self.suppressed_rows,
            "classes": self.classes,
            "min_class_size": self.min_class_size,
            "metrics": {k: _plain(v) for k, v in self.metrics.items()},
            "risk": {k: _plain(v) for k, v in self.risk.items()},
            "verified": dict(self.verified),
            "lattice": self.lattice.counts() if self.lattice is not None else None,
            "elapsed_seconds": round(self.elapsed, 4),
        }

    def _lines(self) -> list[tuple[str, str]]:
        m = self.metrics
        rows = [
            ("algorithm", _ALGORITHMS.get(self.algorithm, self.algorithm)),
            ("criteria", "; ".join(str(c) for c in self.criteria)),
            ("records", f"{self.records:,}"),
            ("quasi-identifiers", ", ".join(self.qi)),
            ("sensitive", self._sensitive_text()),
            ("suppression limit", f"{format_number(self.suppression * 100)}% "
                                  f"({self.suppression_limit:,} records)"),
        ]
        rows += [(f"hierarchy of {col}", text) for col, text in self.automatic.items()]
        if self.levels is not None:
            rows.append(("levels", ", ".join(f"{q}={lv}" for q, lv in self.levels.items())))
        rows += [
            ("suppressed", f"{self.suppressed:,} records "
                           f"({'kept as * rows' if self.suppressed_rows == 'keep' else 'dropped'})"),
            ("classes", f"{self.classes:,} (smallest {self.min_class_size}, "
                        f"average {m['aecs']:.2f})"),
            ("utility", f"loss {m['loss']:.4f}, ncp {m['ncp']:.4f}, DM {m['dm']:,}, "
                        f"DM* {m['dmstar']:,}, entropy {m['entropy']:,.1f} bits"
                        + (f", precision {m['precision']:.4f}" if m.get('precision') is not None
                           else "")),
            ("risk (prosecutor)", f"max {self.risk['max']:.4f}, average {self.risk['average']:.4f}, "
                                  f"{self.risk['records_at_risk']:.2%} of records above "
                                  f"{self.risk['threshold']:g}"),
            ("verified", ", ".join(f"{k} {'✓' if ok else '✗'}" for k, ok in self.verified.items())),
        ]
        if self.lattice is not None:
            c = self.lattice.counts()
            rows.append(("lattice", f"{c['nodes']:,} nodes: {c['checked']:,} checked, "
                                    f"{c['tagged']:,} tagged, {c['pruned']:,} pruned"))
        return rows

    def _sensitive_text(self) -> str:
        if not self.sensitive:
            return "none"
        free = set(self.unprotected)
        return ", ".join(f"{s} (no criterion protects it: released as is)" if s in free else s
                         for s in self.sensitive)

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self._lines())
        # Mondrian optimizes no metric: only the optimal search names the one it minimized
        head = f"Anonymization of {self.dataset}" + \
            (f" ({self.metric} metric)" if self.algorithm == "optimal" else "")
        return "\n".join([head] + [f"  {k.ljust(width)}  {v}" for k, v in self._lines()])

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self._lines())
        preview = self.table.slice(0, 5).to_pylist()
        cols = self.table.column_names
        head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in cols)
                       + "</tr>" for r in preview)
        return (f"<div><b>Anonymization of {html.escape(self.dataset)}</b>"
                f"<table>{rows}</table><p>First rows of the release "
                f"({self.table.num_rows:,} rows):</p><table><tr>{head}</tr>{body}</table></div>")

    def __repr__(self) -> str:
        return (f"AnonymizationResult({self.algorithm}, levels={self.levels}, "
                f"suppressed={self.suppressed}, classes={self.classes}, "
                f"loss={self.metrics.get('loss', float('nan')):.4f}, "
                f"verified={all(self.verified.values())})")


def _write_csv(table: pa.Table, path: Path, separator: str) -> None:
    # quote only where needed (ARX and spreadsheets read the file as is); batch by batch
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter=separator, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        w.writerow(table.column_names)
        for batch in table.to_batches(max_chunksize=65536):
            cols = [c.to_pylist() for c in batch.columns]
            w.writerows(zip(*cols, strict=True))


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Fraction):
        return float(v)
    return v
