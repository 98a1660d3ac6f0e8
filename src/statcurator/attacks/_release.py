"""What an attacker sees of a release, and how targets are matched to it.

Every attack on a published table works on :class:`Classes`: the released equivalence classes
(their generalized cells, one label per quasi-identifier) with the released count of each
sensitive value per class — exact for an anonymized table, noisy for its DP counterpart.

A target is matched to a class from *public text only*: the target's raw QI values (what the
attacker knows) against the released cells, read with the published generalization
hierarchies (Kerckhoffs: the rules are public). A cell contains a value when it is the value,
a label of one of its ancestors in the hierarchy, only ``*``, a range ``[lo, hi]`` (or ``lo-hi``,
``[lo, hi[``) holding it, a comparison (``<30``, ``>=40``, ``≤40``) it satisfies, or a mask
(``476**``, ``2*``) it fits. Nothing in the matching reads which released row belongs to whom.

>>> import pyarrow as pa
>>> t = pa.table({"zip": ["476**", "476**", "4790*"], "age": ["2*", "2*", ">=40"],
...               "disease": ["flu", "flu", "cancer"]})
>>> c = classes_of(published(t, qi=["zip", "age"], sensitive="disease"))
>>> c.labels, c.cells.tolist(), c.counts.tolist()
((('476**', '4790*'), ('2*', '>=40')), [[0, 0], [1, 1]], [[0.0, 2.0], [1.0, 0.0]])
>>> c.values
('cancer', 'flu')
>>> indptr, indices = match(c, {"zip": ["47678", "47905", "99999"], "age": ["27", "52", "30"]})
>>> indptr.tolist(), indices.tolist()
([0, 1, 2, 2], [0, 1])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ..anonymize._engine import group_ids
from ..anonymize.hierarchy import Hierarchy, text_values
from ..core.errors import InvalidParameterError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Published", "Classes", "published", "classes_of", "match", "candidate_counts",
           "containment", "target_knowledge", "Knowledge"]


@dataclass(frozen=True, eq=False)
class Published:
    """A released (generalized) table: its rows, quasi-identifiers and sensitive attribute, and
    the public generalization hierarchies.

    ``source`` is the anonymization result it came from (if any) and ``original`` the private
    input table, kept for the *evaluator* only: default targets and their true values. The
    attacks' inference never reads them.
    """

    table: pa.Table
    qi: tuple[str, ...]
    sensitive: str | None
    hierarchies: Mapping[str, Hierarchy] = field(default_factory=dict)
    name: str = "release"
    levels: Mapping[str, int] | None = None
    source: Any = None
    original: pa.Table | None = None
    rows: np.ndarray | None = None  # input row of each released row (evaluator only)
    cache: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, eq=False)
class Classes:
    """The equivalence classes of a release as an attacker reads them.

    ``cells[c, d]`` indexes ``labels[d]``: the label of class ``c`` on quasi-identifier ``d``.
    ``counts[c, j]`` is the released number of records of class ``c`` with sensitive value
    ``values[j]`` (a noisy release's counts are clamped at 0, as the attacker would); ``sizes``
    are the released class sizes. ``row_class`` (the class of each input record) is for the
    evaluator's scoring only.
    """

    qi: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    cells: np.ndarray
    values: tuple[str, ...]
    counts: np.ndarray
    sizes: np.ndarray
    hierarchies: Mapping[str, Hierarchy] = field(default_factory=dict)
    noisy: bool = False
    description: str = "release"
    row_class: np.ndarray | None = field(default=None, repr=False)
    source: Published | None = field(default=None, repr=False)
    #: matches of target sets, shared by releases with the same cells (a DP counterpart)
    matches: dict[int, Any] = field(default_factory=dict, repr=False)
    #: a noisy release's counts before clamping (evaluator only: leave-one-out baselines)
    unclamped: np.ndarray | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        """Number of classes."""
        return len(self.cells)

    @property
    def prior(self) -> np.ndarray:
        """The overall distribution of the sensitive value in the release (belief B1)."""
        total = self.counts.sum(axis=0)
        s = total.sum()
        return total / s if s > 0 else np.full(len(self.values), 1 / max(len(self.values), 1))


def published(release: Any, *, qi: Sequence[str] | None = None, sensitive: str | None = None,
              hierarchies: Mapping[str, Hierarchy] | None = None) -> Published:
    """A :class:`Published` view of an anonymization result or of a plain released table.

    A plain table (pyarrow, pandas, Polars, or a dict of columns) needs ``qi`` and, for attacks
    on a sensitive attribute, ``sensitive``.
    """
    from ..anonymize.result import AnonymizationResult
    from ..anonymize.search import as_table

    if isinstance(release, Published):
        return release
    if isinstance(release, AnonymizationResult):
        check = release.verification_inputs
        sens = sensitive or (release.sensitive[0] if release.sensitive else None)
        kept = check.get("kept")
        rows = np.arange(release.table.num_rows) if kept is None else np.asarray(kept)
        return Published(release.table, tuple(qi or release.qi), sens,
                         dict(check.get("hierarchies") or {}) | dict(hierarchies or {}),
                         f"{release.dataset}: " + "; ".join(str(c) for c in release.criteria)
                         + f" ({release.algorithm})", release.levels, release,
                         check.get("original"), rows)
    if isinstance(release, dict):
        import pyarrow as pa

        release = pa.table(release)
    table = as_table(release)
    if not qi:
        raise InvalidParameterError("the quasi-identifiers of a plain released table are unknown",
                                    remedy="pass qi=[...] (CLI: --qi a,b,c)")
    missing = [c for c in list(qi) + ([sensitive] if sensitive else [])
               if c not in table.column_names]
    if missing:
        raise InvalidParameterError(f"the release has no column(s) {missing}",
                                    remedy="its columns are: " + ", ".join(table.column_names))
    return Published(table, tuple(qi), sensitive, dict(hierarchies or {}),
                     rows=np.arange(table.num_rows, dtype=np.int64))


def classes_of(pub: Published) -> Classes:
    """Group the released rows into equivalence classes (equal generalized QIs); computed
    once per published table."""
    hit = pub.cache.get("classes")
    if hit is None:
        hit = pub.cache["classes"] = _classes_of(pub)
    return hit


def _classes_of(pub: Published) -> Classes:
    table = pub.table
    n = table.num_rows
    labels, codes = [], []
    for q in pub.qi:
        lab, code = _encode_column(table.column(q))
        labels.append(tuple(lab))
        codes.append(code)
    ids, groups, rep = group_ids(codes, [len(x) for x in labels]) if codes else \
        (np.zeros(n, dtype=np.int64), 1 if n else 0, np.zeros(1 if n else 0, dtype=np.int64))
    cells = np.stack([c[rep] for c in codes], axis=1) if codes else np.zeros((groups, 0), int)
    if pub.sensitive is not None:
        vals, scode = _encode_column(table.column(pub.sensitive), sort=True)
        m = len(vals)
        counts = np.bincount(ids * m + scode, minlength=groups * m).reshape(groups, m)
    else:
        vals, counts = [], np.zeros((groups, 0), dtype=np.int64)
    sizes = np.bincount(ids, minlength=groups).astype(np.float64)
    row_class = None
    if pub.rows is not None:
        n_in = pub.original.num_rows if pub.original is not None else n
        row_class = np.full(n_in, -1, dtype=np.int64)
        row_class[pub.rows] = ids
    return Classes(pub.qi, tuple(labels), cells.astype(np.int64), tuple(vals),
                   counts.astype(np.float64), sizes, pub.hierarchies, False, pub.name,
                   row_class, pub)


def _encode_text(values: Sequence[str | None], sort: bool = False) -> tuple[list[str], np.ndarray]:
    """Distinct texts (nulls as '') and each value's code."""
    import pyarrow as pa

    return _encode_column(pa.array(["" if v is None else v for v in values], pa.string()), sort)


def _encode_column(column: Any, sort: bool = False) -> tuple[list[str], np.ndarray]:
    """Distinct texts of an Arrow column (nulls as '') and each value's code, with Arrow's
    dictionary encoding."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = pc.cast(column, pa.string())
    enc = pc.dictionary_encode(pc.fill_null(column, ""))
    uniq = enc.dictionary.to_pylist()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    if sort:
        order = sorted(range(len(uniq)), key=uniq.__getitem__)
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[order] = np.arange(len(uniq))
        return [uniq[i] for i in order], rank[codes]
    return uniq, codes


# -- containment of a raw value in a released cell ---------------------------------------------

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_INTERVAL = re.compile(rf"^\s*([\[(])\s*({_NUM})\s*[,;]\s*({_NUM})\s*([\])\[])\s*$")
_DASH = re.compile(rf"^\s*({_NUM})\s*-\s*({_NUM})\s*$")
_COMPARE = re.compile(rf"^\s*(<=|>=|<|>|≤|≥)\s*({_NUM})\s*$")


def _number(text: str) -> float:
    try:
        return float(Fraction(text.strip()))
    except (ValueError, ZeroDivisionError):
        return float("nan")


def _leaves(h: Hierarchy) -> dict[str, np.ndarray]:
    """For each label of the hierarchy (any level), the raw-value rows under it."""
    out: dict[str, np.ndarray] = {}
    for lv in range(h.levels):
        codes = h.codes[lv]
        for code, label in enumerate(h.labels(lv)):
            mask = codes == code
            out[label] = out[label] | mask if label in out else mask
    return out


_LEAF_CACHE: dict[int, tuple[Hierarchy, dict[str, np.ndarray], dict[str, int]]] = {}


def _cached_leaves(h: Hierarchy) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The hierarchy's label → rows map and raw value → row index (computed once)."""
    hit = _LEAF_CACHE.get(id(h))
    if hit is None or hit[0] is not h:
        if len(_LEAF_CACHE) > 64:
            _LEAF_CACHE.clear()
        hit = (h, _leaves(h), {v: i for i, v in enumerate(h.values)})
        _LEAF_CACHE[id(h)] = hit
    return hit[1], hit[2]


def containment(labels: Sequence[str], values: Sequence[str],
                hierarchy: Hierarchy | None = None) -> np.ndarray:
    """``out[i, j]``: does the released cell ``labels[j]`` contain the raw value ``values[i]``?

    >>> containment(["2*", "[20, 29]", ">=40", "*", "35-39"], ["27", "45", "37"]).astype(int).tolist()
    [[1, 1, 0, 1, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]
    """
    vals = list(values)
    nums = np.array([_number(v) for v in vals])
    leaves, index = _cached_leaves(hierarchy) if hierarchy is not None else ({}, {})
    row = np.array([index.get(v, -1) for v in vals], dtype=np.int64)
    known = row >= 0
    out = np.zeros((len(vals), len(labels)), dtype=bool)
    text = np.array(vals, dtype=object)
    for j, label in enumerate(labels):
        col = text == label
        under = leaves.get(label)
        if under is not None:
            col[known] |= under[row[known]]
            rest = ~known
        else:
            rest = np.ones(len(vals), dtype=bool)
        if rest.any():
            col[rest] |= _parsed(label, text[rest], nums[rest])
        out[:, j] = col
    return out


def _parsed(label: str, text: np.ndarray, nums: np.ndarray) -> np.ndarray:
    """Containment by reading the label (ranges, comparisons, masks, numbers)."""
    if label and set(label) == {"*"}:
        return np.ones(len(text), dtype=bool)
    with np.errstate(invalid="ignore"):
        m = _INTERVAL.match(label)
        if m:
            lo, hi = float(Fraction(m.group(2))), float(Fraction(m.group(3)))
            low = nums >= lo if m.group(1) == "[" else nums > lo
            high = nums <= hi if m.group(4) == "]" else nums < hi
            return low & high
        m = _DASH.match(label)
        if m:
            lo, hi = float(Fraction(m.group(1))), float(Fraction(m.group(2)))
            return (nums >= lo) & (nums <= hi)
        m = _COMPARE.match(label)
        if m:
            op, x = m.group(1), float(Fraction(m.group(2)))
            return {"<": nums < x, ">": nums > x, "<=": nums <= x, "≤": nums <= x,
                    ">=": nums >= x, "≥": nums >= x}[op]
    if "*" in label:
        return np.array([len(v) == len(label) and all(a == "*" or a == b
                                                      for a, b in zip(label, v, strict=True))
                         for v in text], dtype=bool)
    x = _number(label)
    return nums == x if x == x else np.zeros(len(text), dtype=bool)


# -- matching targets to classes ---------------------------------------------------------------

def match(classes: Classes, targets: Mapping[str, Sequence[str | None]]
          ) -> tuple[np.ndarray, np.ndarray]:
    """The classes whose cells contain each target's QI values, as CSR arrays
    ``(indptr, indices)``: target ``i`` matches ``indices[indptr[i]:indptr[i+1]]``.

    Per quasi-identifier, each distinct target value gets a bitset of the classes whose cell
    contains it; a target's matches are the AND of its values' bitsets.
    """
    qi = classes.qi
    missing = [q for q in qi if q not in targets]
    if missing:
        raise InvalidParameterError(f"the attacker's knowledge lacks the quasi-identifier(s) "
                                    f"{missing}", remedy="give the targets' value of every QI")
    n_t = len(targets[qi[0]]) if qi else 0
    C = classes.size
    if not qi:  # no quasi-identifier: every target matches every class
        indptr = np.arange(n_t + 1, dtype=np.int64) * C
        return indptr, np.tile(np.arange(C, dtype=np.int64), n_t)
    words = (C + 63) // 64
    acc: np.ndarray | None = None
    for d, q in enumerate(qi):
        uniq, inv = _encode_text(list(targets[q]))
        inside = containment(classes.labels[d], uniq, classes.hierarchies.get(q))
        bits = inside[:, classes.cells[:, d]]                      # (distinct values, C)
        packed = np.zeros((len(uniq), words * 8), dtype=np.uint8)
        # little bit order: class c is bit c % 64 of 64-bit word c // 64
        packed[:, :(C + 7) // 8] = np.packbits(bits, axis=1, bitorder="little")
        packed = packed.view("<u8")
        acc = packed[inv] if acc is None else acc & packed[inv]
    assert acc is not None
    rows, cols = [], []
    r, w = np.nonzero(acc)
    vals = acc[r, w]
    while len(vals):
        low = vals & (~vals + np.uint64(1))           # the lowest set bit of each word
        bit = np.log2(low.astype(np.float64)).astype(np.int64)  # exact for powers of two
        rows.append(r)
        cols.append(w.astype(np.int64) * 64 + bit)
        vals = vals ^ low
        keep = vals != 0
        r, w, vals = r[keep], w[keep], vals[keep]
    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    order = np.lexsort((c, r))
    r, c = r[order], c[order]
    indptr = np.zeros(n_t + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n_t), out=indptr[1:])
    return indptr, c.astype(np.int64)


def candidate_counts(classes: Classes, indptr: np.ndarray, indices: np.ndarray,
                     matrix: np.ndarray | None = None) -> np.ndarray:
    """Per target, the sum of ``matrix`` (default: the sensitive counts) over its matched
    classes: the released records that could be the target."""
    m = classes.counts if matrix is None else matrix
    n_t = len(indptr) - 1
    rows = np.repeat(np.arange(n_t), np.diff(indptr))
    picked = m[indices]
    out = np.empty((n_t, m.shape[1]))
    for j in range(m.shape[1]):
        out[:, j] = np.bincount(rows, weights=picked[:, j], minlength=n_t)
    return out


# -- the attacker's knowledge of the targets ---------------------------------------------------

@dataclass(frozen=True)
class Knowledge:
    """Targets as the attacker knows them (``qi``: text values per QI) and, for the evaluator,
    their true sensitive values (``truth``) and input rows (``rows``, -1 when not in the data)."""

    qi: Mapping[str, list[str | None]]
    truth: list[str | None] | None = None
    rows: np.ndarray | None = None
    ids: list[str] | None = None

    @property
    def size(self) -> int:
        first = next(iter(self.qi.values()), [])
        return len(first)


def target_knowledge(pub: Published, targets: Any = None, *, truth: Any = None,
                     id_column: str | None = None, qi: Sequence[str] | None = None
                     ) -> Knowledge:
    """The targets' QIs (and, for scoring, their true values and rows).

    Without ``targets`` every input record of an anonymization result is a target (the
    prosecutor scenario: the attacker knows each target is in the release). A target table's
    sensitive column, if present, is used as the truth for scoring only.
    """
    from ..anonymize.search import as_table

    qi = tuple(qi or pub.qi)
    if targets is None:
        if pub.original is None:
            raise InvalidParameterError("no targets: the attacker's knowledge is unknown",
                                        remedy="pass targets= (a table of the targets' "
                                               "quasi-identifiers; CLI --targets FILE)")
        table = pub.original
        rows = np.arange(table.num_rows, dtype=np.int64)
    else:
        if isinstance(targets, dict):
            import pyarrow as pa

            targets = pa.table(targets)
        table = as_table(targets)
        rows = None
    missing = [q for q in qi if q not in table.column_names]
    if missing:
        raise InvalidParameterError(f"the targets table has no column(s) {missing}",
                                    remedy="its columns are: " + ", ".join(table.column_names))
    known = {q: text_values(table.column(q)) for q in qi}
    if truth is None and pub.sensitive is not None and pub.sensitive in table.column_names:
        truth = table.column(pub.sensitive)
    truth_list = None if truth is None else text_values(truth)
    ids = text_values(table.column(id_column)) if id_column else None
    return Knowledge(known, truth_list, rows, ids)
