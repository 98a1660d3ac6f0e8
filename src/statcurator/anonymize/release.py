"""Building the released table of a solution (record-level output).

A release has one row per input record that is kept; identifier columns are removed,
quasi-identifiers replaced by their generalized values (text), and every other column kept
as it is. Suppressed records are either kept as rows whose quasi-identifiers are all ``*``
and whose other columns are empty (``suppressed="keep"``, the default) or left out
(``suppressed="drop"``).

A kept suppressed row says only that a record exists. It must say nothing more: the starred
rows are a group that no criterion checks (there may be one), and an attacker who knows the
levels finds whose records they are — the people who fall in no released class. ARX keeps
their other columns; a starred row ``*, *, cancer`` then tells the one person in no class
their diagnosis. So their sensitive and other columns are emptied (NULL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.schema import Role, TableMeta
from ._engine import record_classes
from .metrics import ReleaseStructure

if TYPE_CHECKING:
    import pyarrow as pa

    from .search import Problem

__all__ = ["Release", "full_domain_release", "assemble", "SUPPRESSED_MODES", "MARKER"]

SUPPRESSED_MODES = ("keep", "drop")
MARKER = "*"


@dataclass(frozen=True)
class Release:
    """A released table and what the metrics need to know about it."""

    table: pa.Table
    kept: np.ndarray            # input row of each released record that is not suppressed
    suppressed: np.ndarray      # input rows that were suppressed
    structure: ReleaseStructure
    class_sizes: np.ndarray     # sizes of the released classes


def check_mode(mode: str) -> str:
    if mode not in SUPPRESSED_MODES:
        raise InvalidParameterError(f"unknown handling of suppressed records {mode!r}",
                                    remedy="use suppressed='keep' (rows of '*', as ARX) or "
                                           "suppressed='drop'")
    return mode


def assemble(table: pa.Table, meta: TableMeta, generalized: Mapping[str, pa.Array],
             suppressed: np.ndarray, mode: str, marker: str = MARKER) -> pa.Table:
    """The release: identifiers removed, QIs replaced, suppressed rows starred or dropped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    check_mode(mode)
    drop = set(meta.identifiers)
    keep_rows = None
    if mode == "drop" and suppressed.any():
        keep_rows = pa.array(np.flatnonzero(~suppressed))
    star_mask = pa.array(suppressed) if mode == "keep" and suppressed.any() else None
    cols, names = [], []
    for name in table.column_names:
        if name in drop:
            continue
        if name in generalized:
            col = generalized[name]
            if star_mask is not None:
                col = pc.if_else(star_mask, pa.scalar(marker, pa.string()), col)
        else:
            col = table.column(name)
            if star_mask is not None:  # a suppressed record's other values: withheld
                col = pc.if_else(star_mask, pa.scalar(None, col.type), col)
        if keep_rows is not None:
            col = col.take(keep_rows)
        cols.append(col)
        names.append(name)
    return pa.table(cols, names=names)


def labels_array(labels: Sequence[str], codes: np.ndarray) -> pa.Array:
    """A string array of ``labels[codes]`` built through a dictionary (no Python loop)."""
    import pyarrow as pa

    dictionary = pa.array(list(labels), pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), dictionary) \
        .cast(pa.string())


def full_domain_release(problem: Problem, levels: Sequence[int], mode: str = "keep") -> Release:
    """The release of the full-domain generalization ``levels`` (one level per QI)."""
    enc = problem.encoded
    levels = tuple(int(x) for x in levels)
    ids, table = record_classes(enc, levels)
    fail = problem.evaluator.failing(table)
    outlier = fail & (table.count > 0)
    suppressed = outlier[ids]
    generalized = {}
    for d, (col, lv) in enumerate(zip(enc.qi, levels, strict=True)):
        h = enc.hierarchies[d]
        generalized[col] = labels_array(h.labels(lv), enc.codes[d][lv].take(enc.raw[:, d]))
    released = assemble(problem.table, problem.meta, generalized, suppressed, mode)
    kept_classes = (table.count > 0) & ~outlier
    structure = full_domain_structure(problem, levels, table.rep[:, kept_classes],
                                      table.count[kept_classes], table.count[outlier])
    return Release(released, np.flatnonzero(~suppressed), np.flatnonzero(suppressed), structure,
                   table.count[kept_classes])


def full_domain_structure(problem: Problem, levels: Sequence[int], rep: np.ndarray,
                          sizes: np.ndarray, suppressed_sizes: np.ndarray) -> ReleaseStructure:
    enc = problem.encoded
    D = enc.dims
    shares = np.empty((len(sizes), D))
    cells = np.empty((len(sizes), D), dtype=np.int64)
    ratios = np.empty((len(sizes), D))
    value_entropy = np.empty(D)
    for d, lv in enumerate(levels):
        h = enc.hierarchies[d]
        shares[:, d] = h.group_sizes[lv].take(rep[d]) / len(h)
        cells[:, d] = enc.label_counts(d, lv)[h.codes[lv].take(rep[d])]
        ratios[:, d] = lv / h.height if h.height else 0.0
        vc = enc.value_counts[d].astype(np.float64)
        value_entropy[d] = float(np.dot(vc, np.log2(np.maximum(vc, 1))))
    return ReleaseStructure(enc.n, np.asarray(sizes, dtype=np.int64),
                            np.asarray(suppressed_sizes, dtype=np.int64), shares, cells,
                            value_entropy, np.array([len(h) for h in enc.hierarchies]), ratios)


def identifiers_removed(meta: TableMeta) -> tuple[str, ...]:
    return tuple(c.name for c in meta.columns if c.role == Role.IDENTIFIER)
