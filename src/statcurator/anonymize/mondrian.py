"""Mondrian multidimensional partitioning (LeFevre, DeWitt & Ramakrishnan, ICDE 2006).

Strict top-down partitioning: starting from the whole table, a partition is cut along the
quasi-identifier with the widest normalized range; a numeric QI at its median (values ≤
median to one side), a categorical QI along its hierarchy (one part per child of the
partition's lowest common ancestor). A cut is *allowable* when every part satisfies every
criterion; partitions with no allowable cut are the equivalence classes of the release. Each
released record carries its partition's cell: the range ``[min, max]`` of the values in the
partition (or the value itself) for numeric QIs, the hierarchy label of the lowest common
ancestor (the set of values under it) for categorical QIs. Nothing is suppressed.

Every QI is coded once as a *rank*: numeric values by their numeric order, categorical values
in the depth-first order of the hierarchy, in which every subtree is a contiguous run; so one
``min``/``max`` over a partition's ranks gives each numeric range and each categorical lowest
common ancestor at once.

>>> import pyarrow as pa
>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.anonymize.search import prepare
>>> from statcurator.anonymize.criteria import KAnonymity
>>> meta = TableMeta("t", (Column("age", type="integer", role="qi"),))
>>> table = pa.table({"age": [21, 23, 25, 34, 35, 38]})
>>> p = prepare(table, meta, [KAnonymity(3)], need_hierarchies=False)
>>> mondrian_release(p).table.column("age").to_pylist()
['[21, 25]', '[21, 25]', '[21, 25]', '[34, 38]', '[34, 38]', '[34, 38]']
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from ..core.errors import UnsatisfiableError
from ..core.schema import ColumnType
from .criteria import ClassSummary, KAnonymity
from .metrics import ReleaseStructure
from .release import Release, assemble, labels_array

if TYPE_CHECKING:
    from .hierarchy import Hierarchy
    from .search import Problem

__all__ = ["mondrian_release", "partition"]


class _Dim:
    """One QI as Mondrian sees it: ranks, and how to read ranges / ancestors back."""

    def __init__(self, h: Hierarchy, numeric: bool) -> None:
        self.h = h
        self.numeric = numeric
        rows = len(h)
        if numeric:
            vals = [Fraction(v) for v in h.values]
            order = sorted(range(rows), key=lambda i: vals[i])
            self.values = np.array([float(vals[i]) for i in order])
            self.span = float(self.values[-1] - self.values[0]) if rows > 1 else 0.0
        else:
            codes = h.codes
            order = sorted(range(rows), key=lambda i: tuple(int(codes[lv, i])
                                                            for lv in range(h.height, -1, -1)))
        self.row_of_rank = np.asarray(order, dtype=np.intp)
        self.rank_of_row = np.empty(rows, dtype=np.int32)
        self.rank_of_row[self.row_of_rank] = np.arange(rows, dtype=np.int32)
        # label code of each rank at each level (categorical ancestors)
        self.codes_by_rank = h.codes[:, self.row_of_rank]
        if not numeric:
            self._spans()

    def lca_level(self, lo: int, hi: int) -> int:
        """Lowest level where the leaves of ranks lo..hi share one label."""
        c = self.codes_by_rank
        for lv in range(self.h.levels):
            if c[lv, lo] == c[lv, hi]:
                return lv
        return self.h.height  # pragma: no cover - the top level is shared by construction

    def width(self, lo: int, hi: int) -> float:
        if lo == hi:
            return 0.0
        if self.numeric:
            return float(self.values[hi] - self.values[lo]) / self.span if self.span else 0.0
        lv = self.lca_level(lo, hi)
        under = int(self.h.group_sizes[lv, self.row_of_rank[lo]])
        return (under - 1) / (len(self.h) - 1)

    def leaves_covered(self, lo: int, hi: int) -> int:
        if self.numeric:
            return hi - lo + 1
        lv = self.lca_level(lo, hi)
        return int(self.h.group_sizes[lv, self.row_of_rank[lo]])

    def cell(self, lo: int, hi: int) -> str:
        h = self.h
        if lo == hi:
            return h.values[self.row_of_rank[lo]]
        if self.numeric:
            return f"[{h.values[self.row_of_rank[lo]]}, {h.values[self.row_of_rank[hi]]}]"
        lv = self.lca_level(lo, hi)
        return h.labels(lv)[int(self.codes_by_rank[lv, lo])]

    def covered_range(self, lo: int, hi: int) -> tuple[int, int]:
        """The rank interval of the released cell (the whole subtree for categorical QIs)."""
        if self.numeric or lo == hi:
            return lo, hi
        lv = self.lca_level(lo, hi)
        label = int(self.codes_by_rank[lv, lo])
        return int(self._first[lv][label]), int(self._last[lv][label])

    def _spans(self) -> None:
        # subtrees are contiguous in rank order: the first and last rank under every label
        n = len(self.row_of_rank)
        self._first, self._last = [], []
        for lv in range(self.h.levels):
            c = self.codes_by_rank[lv]
            first = np.full(self.h.cardinalities[lv], n, dtype=np.int64)
            last = np.full(self.h.cardinalities[lv], -1, dtype=np.int64)
            np.minimum.at(first, c, np.arange(n))
            np.maximum.at(last, c, np.arange(n))
            self._first.append(first)
            self._last.append(last)


def partition(problem: Problem, progress: Callable[[float], None] | None = None
              ) -> tuple[list[np.ndarray], list[_Dim], np.ndarray]:
    """Partition the records; returns the partitions (record indices), the QI views and the
    records' ranks."""
    enc = problem.encoded
    dims = []
    for d, h in enumerate(enc.hierarchies):
        col = problem.meta[enc.qi[d]]
        numeric = col.type in (ColumnType.INTEGER, ColumnType.REAL) and _all_numbers(h)
        dims.append(_Dim(h, numeric))
    X = np.empty((enc.n, enc.dims), dtype=np.int32)
    for d, dim in enumerate(dims):
        X[:, d] = dim.rank_of_row[enc.raw[:, d]]
    sens = [c.astype(np.int64) for c in enc.sens_codes]
    sizes_s = [enc.domains[c].size for c in enc.sensitive]
    only_k = all(isinstance(c, KAnonymity) for c in problem.criteria)
    k = max((c.k for c in problem.criteria if isinstance(c, KAnonymity)), default=1)

    def allowable(idx: np.ndarray, labels: np.ndarray, parts: int) -> bool:
        sizes = np.bincount(labels, minlength=parts)
        if (sizes < k).any():
            return False
        if only_k:
            return True
        counts = {col: np.bincount(labels * s + sc[idx], minlength=parts * s).reshape(parts, s)
                  for col, s, sc in zip(enc.sensitive, sizes_s, sens, strict=True)}
        summary = ClassSummary(sizes.astype(np.int64), counts, enc.domains)
        return all(bool(c.check(summary).all()) for c in problem.criteria)

    root = np.arange(enc.n, dtype=np.int64)
    if not allowable(root, np.zeros(enc.n, dtype=np.int64), 1):
        raise UnsatisfiableError(
            "the whole table does not satisfy " + " and ".join(str(c) for c in problem.criteria)
            + ", so no Mondrian partition can",
            remedy="weaken the criteria (Mondrian does not suppress records)")
    widths_of = _width_function(dims)
    done: list[np.ndarray] = []
    finished = 0
    stack = [root]
    while stack:
        idx = stack.pop()
        sub = X[idx]
        lo = sub.min(axis=0)
        hi = sub.max(axis=0)
        widths = widths_of(lo, hi)
        split = None
        for d in np.argsort(-widths, kind="stable").tolist():
            if widths[d] <= 0:
                break
            labels, parts = _cut(dims[d], sub[:, d], int(lo[d]), int(hi[d]))
            if parts > 1 and allowable(idx, labels, parts):
                split = (labels, parts)
                break
        if split is None:
            done.append(idx)
            finished += len(idx)
            if progress is not None and len(done) % 256 == 0:
                progress(finished / enc.n)
            continue
        labels, parts = split
        if parts == 2:
            right = labels.astype(bool)
            stack.append(idx[right])
            stack.append(idx[~right])
            continue
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(parts + 1))
        for j in range(parts - 1, -1, -1):
            stack.append(idx[order[bounds[j]:bounds[j + 1]]])
    if progress is not None:
        progress(1.0)
    return done, dims, X


def _width_function(dims: list[_Dim]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Normalized widths of all QIs of a partition from its rank ranges, vectorized with one
    precomputed (rank × rank) table per QI when the domains are small."""
    sizes = [len(d.row_of_rank) for d in dims]
    if max(sizes) <= 2048:
        tables, offsets, off = [], [], 0
        for dim, m in zip(dims, sizes, strict=True):
            t = np.zeros((m, m))
            for a in range(m):
                for b in range(a + 1, m):
                    t[a, b] = dim.width(a, b)
            tables.append(t.ravel())
            offsets.append(off)
            off += m * m
        flat = np.concatenate(tables)
        offs = np.asarray(offsets, dtype=np.int64)
        stride = np.asarray(sizes, dtype=np.int64)
        return lambda lo, hi: flat[offs + lo.astype(np.int64) * stride + hi]
    return lambda lo, hi: np.array([dims[d].width(int(lo[d]), int(hi[d]))
                                    for d in range(len(dims))])


def _cut(dim: _Dim, ranks: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, int]:
    """Part labels (0..parts-1) of a cut along one QI."""
    if dim.numeric:
        m = len(ranks)
        median = int(np.partition(ranks, (m - 1) // 2)[(m - 1) // 2])
        left = ranks <= median
        if left.all():
            left = ranks < median
            if not left.any():
                return np.zeros(m, dtype=np.int64), 1
        return (~left).astype(np.int64), 2
    lv = dim.lca_level(lo, hi)
    child = dim.codes_by_rank[lv - 1].take(ranks)
    present = np.bincount(child, minlength=dim.h.cardinalities[lv - 1]) > 0
    remap = np.cumsum(present) - 1
    return remap.take(child), int(present.sum())


def _all_numbers(h: Hierarchy) -> bool:
    try:
        for v in h.values:
            Fraction(v)
    except (ValueError, ZeroDivisionError):
        return False
    return True


def mondrian_release(problem: Problem, mode: str = "keep",
                     progress: Callable[[float], None] | None = None) -> Release:
    """Partition with Mondrian and build the release (nothing is suppressed)."""
    enc = problem.encoded
    parts, dims, X = partition(problem, progress)
    n_parts = len(parts)
    part_of = np.empty(enc.n, dtype=np.int64)
    sizes = np.empty(n_parts, dtype=np.int64)
    lo = np.empty((n_parts, enc.dims), dtype=np.int64)
    hi = np.empty((n_parts, enc.dims), dtype=np.int64)
    for i, idx in enumerate(parts):
        part_of[idx] = i
        sizes[i] = len(idx)
        sub = X[idx]
        lo[i] = sub.min(axis=0)
        hi[i] = sub.max(axis=0)
    generalized = {}
    shares = np.empty((n_parts, enc.dims))
    cells = np.empty((n_parts, enc.dims), dtype=np.int64)
    value_entropy = np.empty(enc.dims)
    for d, dim in enumerate(dims):
        texts = [dim.cell(int(a), int(b)) for a, b in zip(lo[:, d], hi[:, d], strict=True)]
        uniq = {t: i for i, t in enumerate(dict.fromkeys(texts))}
        codes = np.array([uniq[t] for t in texts], dtype=np.int64)
        generalized[enc.qi[d]] = labels_array(list(uniq), codes[part_of])
        counts_by_rank = enc.value_counts[d][dim.row_of_rank]
        cum = np.concatenate([[0], np.cumsum(counts_by_rank)])
        for i in range(n_parts):
            a, b = dim.covered_range(int(lo[i, d]), int(hi[i, d]))
            shares[i, d] = (b - a + 1) / len(dim.h)
            cells[i, d] = cum[b + 1] - cum[a]
        vc = enc.value_counts[d].astype(np.float64)
        value_entropy[d] = float(np.dot(vc, np.log2(np.maximum(vc, 1))))
    suppressed = np.zeros(enc.n, dtype=bool)
    table = assemble(problem.table, problem.meta, generalized, suppressed, mode)
    structure = ReleaseStructure(enc.n, sizes, np.zeros(0, dtype=np.int64), shares, cells,
                                 value_entropy, np.array([len(h) for h in enc.hierarchies]))
    return Release(table, np.arange(enc.n), np.zeros(0, dtype=np.int64), structure, sizes)
