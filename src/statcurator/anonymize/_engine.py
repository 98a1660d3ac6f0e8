"""The integer-coded data the algorithms work on, and fast equivalence-class computation.

Every quasi-identifier is coded once as the row index of each record's value in the column's
hierarchy; generalizing a column to a level is then one gather through ``Hierarchy.codes``.
Records with identical codes form the *bottom* class table (class sizes plus, per sensitive
attribute, a class × value count matrix). The classes of any generalization are computed by
rolling up an already computed class table of a more specific generalization: combine the
generalized codes into mixed-radix integer keys, number the keys densely (a ``bincount``
over the key space when it is small, ``np.unique`` otherwise), and add up sizes and
sensitive counts per new class. Rows are never rescanned.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import DataError
from .criteria import ClassSummary, Criterion, SensitiveDomain
from .hierarchy import Hierarchy

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ClassTable", "Encoded", "encode", "group_ids", "groupify", "NodeResult",
           "NodeEvaluator"]

_KEY_LIMIT = 2**62


def group_ids(columns: Sequence[np.ndarray], cardinalities: Sequence[int]
              ) -> tuple[np.ndarray, int, np.ndarray]:
    """Dense group ids of the rows of several integer columns.

    Returns ``(ids, groups, representative)``: ``ids[r]`` in ``0..groups-1`` and, for each
    group, the index of one row in it.

    >>> ids, n, rep = group_ids([np.array([0, 1, 0, 1]), np.array([2, 2, 2, 0])], [2, 3])
    >>> ids.tolist(), n
    ([0, 2, 0, 1], 3)
    """
    rows = len(columns[0]) if columns else 0
    if rows == 0:
        return np.zeros(0, dtype=np.int64), 0, np.zeros(0, dtype=np.int64)
    key = None
    space = 1
    for col, card in zip(columns, cardinalities, strict=True):
        card = int(card)
        if card == 1:
            continue  # a column with one value (e.g. fully generalized) splits nothing
        if key is None:
            key = col.astype(np.int64)
        else:
            if space * card >= _KEY_LIMIT:
                key, space, _ = _dense(key, space)
            key = key * card + col
        space *= card
    if key is None:
        return np.zeros(rows, dtype=np.int64), 1, np.zeros(1, dtype=np.int64)
    return _dense(key, space)


def _dense(key: np.ndarray, space: int) -> tuple[np.ndarray, int, np.ndarray]:
    n = len(key)
    if space <= 4 * n + 1024:
        present = np.zeros(space, dtype=np.int64)
        present[key] = 1
        remap = np.cumsum(present) - 1
        ids = remap[key]
        groups = int(remap[-1]) + 1
        rep = np.empty(groups, dtype=np.int64)
        rep[ids] = np.arange(n, dtype=np.int64)  # any member represents its class
        return ids, groups, rep
    if space < 2**31:
        key = key.astype(np.int32)  # sorts faster
    order = np.argsort(key)
    ordered = key[order]
    start = np.empty(n, dtype=bool)
    start[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=start[1:])
    ids = np.empty(n, dtype=np.int64)
    ids[order] = np.cumsum(start) - 1
    return ids, int(start.sum()), order[start]


@dataclass
class ClassTable:
    """Equivalence classes of one generalization.

    ``rep[:, i]`` holds the raw codes (hierarchy row indices) of one record of class ``i``: all
    records of a class generalize alike, so the class's label at any coarser generalization
    can be read from it. ``count`` counts research-sample records, ``pcount`` (δ-presence)
    population records, ``sens[j]`` is the class × value count matrix of sensitive column j.
    """

    rep: np.ndarray          # (D, C): one row per QI, so each QI's codes are contiguous
    count: np.ndarray
    sens: tuple[np.ndarray, ...]
    pcount: np.ndarray | None = None

    @property
    def size(self) -> int:
        return len(self.count)

    def rows(self, index: np.ndarray) -> ClassTable:
        """The classes selected by ``index``, in that order."""
        return ClassTable(self.rep.take(index, axis=1), self.count[index],
                          tuple(s[index] for s in self.sens),
                          None if self.pcount is None else self.pcount[index])

    @property
    def nbytes(self) -> int:
        return int(self.rep.nbytes + self.count.nbytes + sum(s.nbytes for s in self.sens)
                   + (self.pcount.nbytes if self.pcount is not None else 0))


@dataclass
class Encoded:
    """The research sample (and population) coded against the QI hierarchies."""

    qi: tuple[str, ...]
    hierarchies: tuple[Hierarchy, ...]
    raw: np.ndarray                      # (n, D) hierarchy row index of each record's value
    sensitive: tuple[str, ...]
    domains: dict[str, SensitiveDomain]
    sens_codes: tuple[np.ndarray, ...]   # (n,) value index per sensitive column
    bottom: ClassTable
    record_class: np.ndarray             # (n,) bottom class of each record
    present: tuple[np.ndarray, ...]      # per QI: hierarchy rows whose value occurs in the data
    value_counts: tuple[np.ndarray, ...]  # per QI: records per hierarchy row
    population_raw: np.ndarray | None = None  # (P, D) codes of the δ-presence population

    def __post_init__(self) -> None:
        # intp copies of the hierarchies' codes: numpy gathers fastest with native indices
        self.codes = tuple(h.codes.astype(np.intp) for h in self.hierarchies)
        self.group_sizes = tuple(h.group_sizes for h in self.hierarchies)
        self._bottom_codes: dict[tuple[int, int], np.ndarray] = {}
        self._marginals: dict[tuple[int, int], int] = {}
        #: per-data memo for derived values (e.g. the search strategy, normalized shares)
        self.memo: dict[str, Any] = {}

    def marginal_share_sum(self, d: int, level: int) -> int:
        """Σ over records of the rows under the record's label of QI ``d`` at ``level``:
        |dom_d| times the loss sum L_d when nothing is suppressed (an exact integer)."""
        key = (d, level)
        out = self._marginals.get(key)
        if out is None:
            out = int(np.dot(self.value_counts[d], self.group_sizes[d][level]))
            self._marginals[key] = out
        return out

    def bottom_codes(self, d: int, level: int) -> np.ndarray:
        """The bottom classes' label codes of QI ``d`` at ``level`` (computed once)."""
        key = (d, level)
        out = self._bottom_codes.get(key)
        if out is None:
            out = self.codes[d][level].take(self.bottom.rep[d])
            self._bottom_codes[key] = out
        return out

    @property
    def n(self) -> int:
        return len(self.raw)

    @property
    def dims(self) -> int:
        return len(self.qi)

    def distinct_per_level(self, d: int) -> list[int]:
        """Distinct labels per level among the values present in the data (Flash's strategy)."""
        h = self.hierarchies[d]
        rows = self.present[d]
        return [len(np.unique(h.codes[lv][rows])) for lv in range(h.levels)]

    def label_counts(self, d: int, level: int) -> np.ndarray:
        """Records per label of QI ``d`` at ``level`` (indexed by label code)."""
        h = self.hierarchies[d]
        return np.bincount(h.codes[level], weights=self.value_counts[d],
                           minlength=h.cardinalities[level]).astype(np.int64)

    def summary(self, table: ClassTable) -> ClassSummary:
        return ClassSummary(table.count, dict(zip(self.sensitive, table.sens, strict=True)),
                            self.domains, table.pcount)


def column_codes(table: pa.Table, column: str, index: Any) -> np.ndarray:
    """Code a column by looking up each *distinct* text value once (``index(values)``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = table.column(column)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
            or pa.types.is_dictionary(arr.type)):
        arr = pc.cast(arr, pa.string())
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    uniq = arr.dictionary.to_pylist()
    lookup = np.asarray(index(uniq), dtype=np.int64)
    idx = arr.indices
    if idx.null_count:
        null_code = int(index([None])[0])
        lookup = np.append(lookup, null_code)
        idx = pc.fill_null(idx, len(uniq))
    return lookup[idx.to_numpy(zero_copy_only=False).astype(np.int64)]


_CACHE: OrderedDict[tuple[Any, ...], tuple[weakref.ref[Any], Encoded]] = OrderedDict()
_CACHE_SIZE = 8


def encode(table: pa.Table, qi: Sequence[str], hierarchies: Sequence[Hierarchy],
           domains: dict[str, SensitiveDomain], population: pa.Table | None = None) -> Encoded:
    """Code ``table`` (and the δ-presence ``population``) for the search.

    Arrow tables are immutable, so the coding of a table for the same hierarchies and
    sensitive domains is kept (while the table lives) and reused by later runs.
    """
    if population is not None:
        return _encode(table, qi, hierarchies, domains, population)
    key = (id(table), tuple(qi), tuple(h.rows for h in hierarchies),
           tuple((c, d.values, d.hierarchy.rows if d.hierarchy is not None else None)
                 for c, d in domains.items()))
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is table:
        _CACHE.move_to_end(key)
        return hit[1]
    enc = _encode(table, qi, hierarchies, domains, None)
    _CACHE[key] = (weakref.ref(table), enc)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return enc


def _encode(table: pa.Table, qi: Sequence[str], hierarchies: Sequence[Hierarchy],
            domains: dict[str, SensitiveDomain], population: pa.Table | None) -> Encoded:
    raw = np.empty((table.num_rows, len(qi)), dtype=np.int32)
    for d, (col, h) in enumerate(zip(qi, hierarchies, strict=True)):
        raw[:, d] = column_codes(table, col, h.index)
    sensitive = tuple(domains)
    sens_codes = []
    for col in sensitive:
        pos = {v: i for i, v in enumerate(domains[col].values)}

        def index(values: list[Any], pos: dict[str, int] = pos, col: str = col) -> list[int]:
            try:
                return [pos["" if v is None else v] for v in values]
            except KeyError as e:  # pragma: no cover - domains are built from the same data
                raise DataError(f"column {col!r} has a value {e} outside its domain",
                                remedy="rebuild the sensitive domain from this table") from None

        sens_codes.append(column_codes(table, col, index).astype(np.int32))
    cards = [len(h) for h in hierarchies]
    n = table.num_rows
    if population is None:
        ids, groups, rep = group_ids([raw[:, d] for d in range(len(qi))], cards)
        count = np.bincount(ids, minlength=groups).astype(np.int64)
        pcount = None
        reps = raw[rep].T
    else:
        praw = np.empty((population.num_rows, len(qi)), dtype=np.int32)
        for d, (col, h) in enumerate(zip(qi, hierarchies, strict=True)):
            if col not in population.column_names:
                raise DataError(f"the population table lacks the quasi-identifier {col!r}",
                                remedy="give the population the same quasi-identifier columns")
            praw[:, d] = column_codes(population, col, h.index)
        both = np.concatenate([raw, praw])
        all_ids, groups, rep = group_ids([both[:, d] for d in range(len(qi))], cards)
        ids = all_ids[:n]
        count = np.bincount(ids, minlength=groups).astype(np.int64)
        pcount = np.bincount(all_ids[n:], minlength=groups).astype(np.int64)
        over = np.flatnonzero(count > pcount)
        if len(over):
            i = int(over[0])
            values = {c: hierarchies[d].values[both[rep[i], d]] for d, c in enumerate(qi)}
            raise DataError(
                f"the research sample is not a subset of the population: {int(count[i])} sample "
                f"record(s) but {int(pcount[i])} population record(s) have {values}",
                remedy="pass as population the table the sample was drawn from")
        reps = both[rep].T
    sens = tuple(_counts(ids, codes, groups, domains[col].size)
                 for col, codes in zip(sensitive, sens_codes, strict=True))
    value_counts = tuple(np.bincount(raw[:, d], minlength=cards[d]).astype(np.int64)
                         for d in range(len(qi)))
    present = tuple(np.flatnonzero(vc > 0) for vc in value_counts)
    return Encoded(tuple(qi), tuple(hierarchies), raw, sensitive, domains, tuple(sens_codes),
                   ClassTable(np.ascontiguousarray(reps, dtype=np.intp), count, sens, pcount),
                   ids, present, value_counts, None if population is None else praw)


def _counts(ids: np.ndarray, codes: np.ndarray, groups: int, size: int) -> np.ndarray:
    flat = ids * size + codes
    return np.bincount(flat, minlength=groups * size).reshape(groups, size).astype(np.int64)


def generalized_codes(enc: Encoded, source: ClassTable, levels: Sequence[int]) -> list[np.ndarray]:
    if source is enc.bottom:
        return [enc.bottom_codes(d, lv) for d, lv in enumerate(levels)]
    return [enc.codes[d][lv].take(source.rep[d]) for d, lv in enumerate(levels)]


def groupify(enc: Encoded, source: ClassTable, levels: Sequence[int]) -> tuple[ClassTable, np.ndarray]:
    """Classes of the generalization ``levels``, rolled up from a finer ``source`` table.

    Returns the new table and, for each source class, the new class it falls into.
    """
    cols = generalized_codes(enc, source, levels)
    cards = [enc.hierarchies[d].cardinalities[lv] for d, lv in enumerate(levels)]
    ids, groups, rep = group_ids(cols, cards)
    if groups == source.size:  # nothing merged: the same classes, renumbered
        return source.rows(rep), ids
    count = np.bincount(ids, weights=source.count, minlength=groups).astype(np.int64)
    sens = []
    for s in source.sens:
        size = s.shape[1]
        flat = (ids[:, None] * size + np.arange(size)).ravel()
        sens.append(np.bincount(flat, weights=s.ravel(), minlength=groups * size)
                    .reshape(groups, size).astype(np.int64))
    pcount = None if source.pcount is None else \
        np.bincount(ids, weights=source.pcount, minlength=groups).astype(np.int64)
    return ClassTable(source.rep.take(rep, axis=1), count, tuple(sens), pcount), ids


def record_classes(enc: Encoded, levels: Sequence[int]) -> tuple[np.ndarray, ClassTable]:
    """Each record's class under the generalization ``levels``, and the class table.

    Computed from the records themselves (not from a cached roll-up), for building releases.
    """
    n = enc.n
    raw = enc.raw if enc.population_raw is None else np.concatenate([enc.raw, enc.population_raw])
    cols = [enc.codes[d][lv].take(raw[:, d]) for d, lv in enumerate(levels)]
    cards = [enc.hierarchies[d].cardinalities[lv] for d, lv in enumerate(levels)]
    all_ids, groups, rep = group_ids(cols, cards)
    ids = all_ids[:n]
    count = np.bincount(ids, minlength=groups).astype(np.int64)
    sens = tuple(_counts(ids, codes.astype(np.int64), groups, enc.domains[col].size)
                 for col, codes in zip(enc.sensitive, enc.sens_codes, strict=True))
    pcount = None if enc.population_raw is None else \
        np.bincount(all_ids[n:], minlength=groups).astype(np.int64)
    return ids, ClassTable(np.ascontiguousarray(raw[rep].T, dtype=np.intp), count, sens, pcount)


@dataclass(frozen=True)
class NodeResult:
    """What checking one generalization found."""

    levels: tuple[int, ...]
    anonymous: bool          # the criteria hold with at most `limit` records suppressed
    k_anonymous: bool | None  # the minimal class size holds within the limit (None: no such size)
    suppressed: int          # records in classes that fail a criterion
    classes: int             # classes kept (not suppressed) with at least one record
    min_class_size: int      # smallest kept class (0 if none)
    value: float             # the utility metric (lower is better)
    bound: float             # a lower bound of `value` that is monotone under generalization


class NodeEvaluator:
    """Checks generalizations against the criteria and scores them, caching class tables.

    ``limit`` is the largest number of records that may be suppressed. ``objective`` scores a
    node from its class table (see :mod:`statcurator.anonymize.metrics`).

    A shortcut keeps the results exact: records in classes smaller than the criteria's minimal
    class size must be suppressed, and their number can only fall when generalizing. So if
    the *join* of a node with an already computed, small class table (the levelwise maximum,
    a coarser generalization) has more such records than the limit, the node cannot be
    acceptable, and it is decided from that small table instead of a large roll-up. Such a
    result carries no class counts (``suppressed`` is -1).
    """

    def __init__(self, enc: Encoded, criteria: Sequence[Criterion], limit: int, objective: Any,
                 cache_bytes: int = 256 << 20) -> None:
        self.enc = enc
        self.criteria = tuple(criteria)
        self.limit = int(limit)
        self.objective = objective
        sizes = [c.min_class_size for c in self.criteria if c.min_class_size]
        self.min_size = max(sizes) if sizes else None
        from .criteria import KAnonymity

        self._only_k = self.min_size if all(type(c) is KAnonymity for c in self.criteria) \
            else None
        from .criteria import DeltaPresence

        self._presence = [c for c in self.criteria if isinstance(c, DeltaPresence)]
        #: whether results decided by the shortcut may be used (set by the search: only when
        #: the search needs no class-based lower bound of a node that is not acceptable)
        self.shortcuts = False
        #: sources smaller than this are rolled up directly (the shortcut would not pay)
        self.shortcut_min_source = 512
        self.cache_bytes = cache_bytes
        self._tables: list[ClassTable | None] = []
        self._index: dict[tuple[int, ...], int] = {}
        self._levels = np.zeros((64, enc.dims), dtype=np.int64)
        self._sizes = np.zeros(64, dtype=np.int64)
        self._small = np.zeros(64, dtype=np.int64)  # records in classes below the minimal size
        self._bytes = 0
        self.checks = 0
        self.shortcut_checks = 0

    # -- class tables -----------------------------------------------------------------------
    def _source(self, key: tuple[int, ...]) -> ClassTable:
        """The smallest cached table at or below ``key`` (else the bottom)."""
        source = self.enc.bottom
        k = len(self._tables)
        if k:
            below = (self._levels[:k] <= np.asarray(key)).all(axis=1)
            if below.any():
                sizes = np.where(below, self._sizes[:k], np.iinfo(np.int64).max)
                j = int(sizes.argmin())
                if sizes[j] < source.size:
                    source = self._tables[j]  # type: ignore[assignment]
        return source

    def cached(self, levels: Sequence[int]) -> ClassTable | None:
        i = self._index.get(tuple(int(x) for x in levels))
        return None if i is None else self._tables[i]

    def table(self, levels: Sequence[int]) -> ClassTable:
        """The class table of a generalization, rolled up from the smallest cached table below."""
        key = tuple(int(x) for x in levels)
        hit = self.cached(key)
        if hit is not None:
            return hit
        table, _ = groupify(self.enc, self._source(key), key)
        self._remember(key, table)
        return table

    def _small_records(self, table: ClassTable) -> int:
        if self.min_size is None:
            return 0
        return int(table.count[(table.count > 0) & (table.count < self.min_size)].sum())

    def _remember(self, key: tuple[int, ...], table: ClassTable) -> None:
        k = len(self._tables)
        if k == len(self._sizes):
            self._levels = np.concatenate([self._levels, np.zeros_like(self._levels)])
            self._sizes = np.concatenate([self._sizes, np.zeros_like(self._sizes)])
            self._small = np.concatenate([self._small, np.zeros_like(self._small)])
        self._tables.append(table)
        self._index[key] = k
        self._levels[k] = key
        self._sizes[k] = table.size
        self._small[k] = self._small_records(table)
        self._bytes += table.nbytes
        if self._bytes > self.cache_bytes:
            # forget the largest tables first: small ones are the cheap roll-up sources
            for j in np.argsort(-self._sizes[:k + 1]).tolist():
                t = self._tables[j]
                if t is None or j == k:
                    continue
                self._bytes -= t.nbytes
                self._tables[j] = None
                self._sizes[j] = np.iinfo(np.int64).max
                self._small[j] = 0
                if self._bytes <= self.cache_bytes // 2:
                    break

    def _shortcut(self, key: tuple[int, ...], source: ClassTable) -> bool:
        """Is ``key`` provably unacceptable from the join with a small cached table?"""
        k = len(self._tables)
        if not self.shortcuts or self.min_size is None or k == 0 \
                or source.size < self.shortcut_min_source:
            return False
        node = np.asarray(key)
        raise_ = np.maximum(node[None, :] - self._levels[:k], 0).sum(axis=1)
        usable = (self._small[:k] > self.limit) & (self._sizes[:k] * 2 <= source.size)
        if not usable.any():
            return False
        candidates = np.flatnonzero(usable)
        # most promising first: a join close to the cached node (few levels raised) from a
        # table with many records in small classes, and a small table to roll up
        order = np.lexsort((self._sizes[candidates], -self._small[candidates],
                            raise_[candidates]))
        budget = source.size // 2
        for j in candidates[order[:4]].tolist():
            base = self._tables[j]
            if base is None or base.size > budget:
                continue
            budget -= base.size
            join = tuple(int(x) for x in np.maximum(node, self._levels[j]))
            table = self.cached(join)
            if table is None:
                table, _ = groupify(self.enc, base, join)
                self._remember(join, table)
            if self._small_records(table) > self.limit:
                return True
        return False

    # -- checks -----------------------------------------------------------------------------
    def failing(self, table: ClassTable) -> np.ndarray:
        """Per class: does it fail any criterion (and so must be suppressed)?"""
        if self._only_k is not None:
            return table.count < self._only_k
        summary = self.enc.summary(table)
        ok = np.ones(table.size, dtype=bool)
        for c in self.criteria:
            ok &= c.check(summary)
        return ~ok

    def evaluate(self, levels: Sequence[int]) -> NodeResult:
        self.checks += 1
        key = tuple(int(x) for x in levels)
        table = self.cached(key)
        if table is None:
            source = self._source(key)
            if self._shortcut(key, source):
                self.shortcut_checks += 1
                bound = np.nan if self.objective.bound_needs_classes else \
                    self.objective.bound(self.enc, key, None)
                return NodeResult(key, False, False, -1, -1, -1, np.nan, bound)
            table, _ = groupify(self.enc, source, key)
            self._remember(key, table)
        fail = self.failing(table)
        sample = table.count > 0
        outlier = fail & sample
        suppressed = int(table.count[outlier].sum())
        anonymous = suppressed <= self.limit
        if table.pcount is not None:
            # δ-presence: the suppressed records are one more class, of the population outside
            # every released class (population-only classes included, at δ = 0): its δ must
            # hold too, or the suppression count tells who of them is in the sample
            outside = int(table.pcount[~(sample & ~outlier)].sum())
            for c in self._presence:
                anonymous = anonymous and (
                    suppressed == 0 if outside == 0
                    else c.dmin <= Fraction(suppressed, outside) <= c.dmax)
        k_anon = None
        if self.min_size is not None:
            small = sample & (table.count < self.min_size)
            k_anon = int(table.count[small].sum()) <= self.limit
        kept = sample & ~outlier
        # the metric's value matters only for acceptable nodes; its bound for all of them
        bound = self.objective.bound(self.enc, key, table)
        value = self.objective.value(self.enc, key, table, outlier) if anonymous else np.nan
        sizes = table.count[kept]
        return NodeResult(key, anonymous, k_anon, suppressed, int(kept.sum()),
                          int(sizes.min()) if len(sizes) else 0, value, bound)
