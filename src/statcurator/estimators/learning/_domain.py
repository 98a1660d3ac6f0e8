"""Public attribute domains: declared categories and public bins, never read from the data.

A DP learner or synthesizer works on integer codes ``0 .. size-1`` per attribute. The codes
come from what is *declared* public (DESIGN.md): a column's categories, or equal-width bins
of its declared bounds. Nothing about the domain is read from the private data, so the
domain itself (and the shape of every count vector) leaks nothing.

>>> from statcurator import datasets
>>> adult = datasets.adult()
>>> dom = domain_from_meta(adult.meta, ["sex", "age"], bins={"age": 12})
>>> [(a.name, a.size) for a in dom]
[('sex', 2), ('age', 12)]
>>> dom[1].labels[:3]
('0-9', '10-19', '20-29')
>>> encode(adult, dom)[:2].tolist()
[[0, 3], [0, 5]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import DataError, InvalidParameterError, MetadataError, UnsupportedQueryError
from ...core.numbers import ceil_fraction, exact, floor_fraction
from ...core.relations import AddRemove, ChangeOne, Relation
from .._common import as_floats

__all__ = ["Attribute", "categorical", "binned", "domain_from_meta", "columns_of", "encode",
           "decode", "relation_of", "row_steps", "as_floats"]


@dataclass(frozen=True)
class Attribute:
    """One attribute's public domain: ``labels`` (categories, or bin labels) and, for a
    binned numeric column, the bin ``edges`` (``size + 1`` exact values) and whether the
    column holds integers. ``fallback``: the code of values outside the domain (NULL, an
    undeclared category; default :attr:`fallback_code`).

    >>> a = categorical("sex", ["Female", "Male"])
    >>> a.size, a.encode(np.array(["Male", "Female"])).tolist()
    (2, [1, 0])
    >>> b = binned("age", 0, 99, 10, integer=True)
    >>> b.encode(np.array([0, 9, 10, 150])).tolist()      # clamped to the declared bounds
    [0, 0, 1, 9]
    >>> a.encode(np.array(["Male", None, "Other"], dtype=object)).tolist()  # code 0 (Female)
    [1, 0, 0]
    """

    name: str
    labels: tuple[Any, ...]
    edges: tuple[Fraction, ...] | None = None
    integer: bool = False
    fallback: int | None = None

    def __post_init__(self) -> None:
        if len(self.labels) < 1:
            raise MetadataError(f"attribute {self.name!r} has an empty domain",
                                remedy="declare at least one category (or bounds) for it")
        fb = self.fallback
        if fb is not None and (isinstance(fb, bool) or not isinstance(fb, int)
                               or not 0 <= fb < len(self.labels)):
            raise MetadataError(f"attribute {self.name!r}: fallback must be a code in "
                                f"0..{len(self.labels) - 1}, got {fb!r}",
                                remedy="pass fallback=0 (the first declared category)")
        if self.edges is not None and len(self.edges) != len(self.labels) + 1:
            raise MetadataError(f"attribute {self.name!r}: {len(self.edges)} bin edges for "
                                f"{len(self.labels)} bins", remedy="give size + 1 edges")

    @property
    def size(self) -> int:
        """The number of codes."""
        return len(self.labels)

    @property
    def numeric(self) -> bool:
        """True for a binned numeric attribute."""
        return self.edges is not None

    @property
    def fallback_code(self) -> int:
        """The public code of a value outside the domain (NULL, NaN, an undeclared category,
        a non-number in a numeric column): ``fallback`` when given, else the first declared
        category (code 0) of a categorical attribute, or the bin holding the midpoint of the
        declared bounds of a numeric one (as :func:`~statcurator.estimators._common.clamp`
        imputes the midpoint).

        >>> categorical("sex", ["F", "M"]).fallback_code, binned("x", 0, 1, 4).fallback_code
        (0, 2)
        """
        if self.fallback is not None:
            return self.fallback
        if self.edges is None:
            return 0
        mid = float((self.edges[0] + self.edges[-1]) / 2)
        return int(np.searchsorted(self._inner(), mid, side="right"))

    def _inner(self) -> np.ndarray:
        assert self.edges is not None
        return np.array([float(e) for e in self.edges[1:-1]])

    def encode(self, values: Any) -> np.ndarray:
        """Codes of a column of values (int64), row by row and never refusing a value.

        Numeric values are clamped to the declared bounds (±∞ to the end bins). A value the
        domain cannot place — NULL, NaN, an undeclared category, a non-number in a numeric
        column — gets the public :attr:`fallback_code`. Each row's code depends on that row
        alone, so the map is 1-stable: the sensitivities of what is computed from the codes
        are unchanged, and no error can reveal a private value (an error raised after the
        charge, on one neighbour only, would be an unbounded leak).

        >>> categorical("sex", ["F", "M"]).encode(np.array(["M", None, "X"], dtype=object))
        array([1, 0, 0])
        >>> binned("x", 0, 1, 4).encode(np.array([0.1, None, "?", np.inf], dtype=object))
        array([0, 2, 2, 3])
        """
        arr = np.asarray(values)
        if arr.ndim != 1:
            arr = arr.reshape(-1)
        if self.edges is not None:
            return self._encode_numeric(arr)
        lookup: dict[Any, int] = {v: i for i, v in enumerate(self.labels)}
        lookup.update({str(v): i for i, v in enumerate(self.labels) if str(v) not in lookup})
        fallback = self.fallback_code
        if arr.dtype.kind == "O":
            # row by row, each value by its type and value: np.unique would merge 1, 1.0
            # and True (equal in Python), making a row's code depend on the other rows
            seen: dict[Any, int] = {}
            out = np.empty(arr.size, dtype=np.int64)
            for i, v in enumerate(arr.tolist()):
                try:
                    key = (type(v), v)
                    code = seen.get(key)
                    if code is None:
                        code = seen[key] = self._code(v, lookup, fallback)
                except TypeError:  # unhashable: outside the domain
                    code = fallback
                out[i] = code
            return out
        # one numpy type: one lookup per distinct value
        uniq, inverse = np.unique(arr, return_inverse=True)
        codes = np.array([self._code(v, lookup, fallback) for v in uniq.tolist()],
                         dtype=np.int64)
        return codes[inverse.reshape(-1)]

    @staticmethod
    def _code(v: Any, lookup: Mapping[Any, int], fallback: int) -> int:
        if v is None:
            return lookup.get(None, fallback)
        try:
            code = lookup.get(v)
            return code if code is not None else lookup.get(str(v), fallback)
        except TypeError:  # unhashable: outside the domain
            return fallback

    def _encode_numeric(self, arr: np.ndarray) -> np.ndarray:
        x = as_floats(arr)
        codes = np.searchsorted(self._inner(), x, side="right").astype(np.int64)
        # code i covers [edge_i, edge_{i+1}); clamping to the bounds is implicit, and NaN
        # (sorted last by searchsorted) gets the public fallback bin instead of the top one
        codes[np.isnan(x)] = self.fallback_code
        return codes

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Values for codes: the category, or (numeric) a uniform value in the bin drawn with
        statcurator's secure generator (post-processing: it costs no privacy)."""
        codes = np.asarray(codes, dtype=np.int64)
        if self.edges is None:
            return np.asarray(self.labels, dtype=object)[codes]
        from ...mechanisms import rng, samplers

        lo = np.array([float(e) for e in self.edges[:-1]])[codes]
        hi = np.array([float(e) for e in self.edges[1:]])[codes]
        if self.integer:
            width = np.maximum((hi - lo).astype(np.int64), 1)
            out = np.empty(codes.size, dtype=np.int64)
            for w in np.unique(width):
                sel = width == w
                out[sel] = lo[sel].astype(np.int64) + samplers.uniform_int(int(w), int(sel.sum()))
            return out
        u = (rng.words64(codes.size) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        return lo + (hi - lo) * u

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able description (exact edges as "n/d" strings).

        >>> Attribute.from_dict(binned("x", 0, 1, 2).to_dict()) == binned("x", 0, 1, 2)
        True
        """
        out: dict[str, Any] = {"name": self.name, "labels": [_plain(v) for v in self.labels],
                               "edges": None if self.edges is None
                               else [str(e) for e in self.edges],
                               "integer": self.integer}
        if self.fallback is not None:
            out["fallback"] = self.fallback
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attribute:
        """The attribute described by :meth:`to_dict`."""
        edges = d.get("edges")
        return cls(d["name"], tuple(d["labels"]),
                   None if edges is None else tuple(Fraction(e) for e in edges),
                   bool(d.get("integer", False)), d.get("fallback"))

    def midpoints(self) -> np.ndarray:
        """Bin centres (numeric) as floats."""
        if self.edges is None:
            raise InvalidParameterError(f"{self.name!r} is categorical: it has no midpoints",
                                        remedy="use a numeric attribute")
        e = np.array([float(v) for v in self.edges])
        return (e[:-1] + e[1:]) / 2


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def categorical(name: str, categories: Sequence[Any]) -> Attribute:
    """A categorical attribute over declared categories.

    >>> categorical("race", ["a", "b", "c"]).size
    3
    """
    cats = tuple(categories)
    if len(set(cats)) != len(cats):
        raise MetadataError(f"attribute {name!r} lists a category twice",
                            remedy="list each public category once")
    return Attribute(name, cats)


def binned(name: str, lower: object, upper: object, bins: int, *,
           integer: bool = False) -> Attribute:
    """A numeric attribute cut into ``bins`` equal-width bins of its declared bounds.

    Integer columns get integer-aligned bins covering ``lower .. upper`` (the last bin may
    be narrower); real ones ``bins`` bins of ``[lower, upper]``.

    >>> binned("x", 0, 1, 4).labels
    ('[0, 0.25)', '[0.25, 0.5)', '[0.5, 0.75)', '[0.75, 1]')
    >>> binned("age", 0, 120, 12, integer=True).labels[-1]
    '110-120'
    >>> binned("age", 0, 120, 12, integer=True).labels[:2]
    ('0-9', '10-19')
    """
    lo = exact(lower, f"{name} lower bound", positive=False)
    hi = exact(upper, f"{name} upper bound", positive=False)
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1 or bins > 10_000:
        raise InvalidParameterError(f"bins must be an integer in 1..10000, got {bins!r}",
                                    remedy="pass bins=10")
    if not lo < hi:
        raise MetadataError(f"attribute {name!r}: bounds [{lo}, {hi}] are empty",
                            remedy="declare bounds with low < high")
    if integer:
        a, b = ceil_fraction(lo), floor_fraction(hi)
        count = b - a + 1
        starts = sorted({a + (i * count) // bins for i in range(min(bins, count))})
        ends = [*(s - 1 for s in starts[1:]), b]
        edges = [Fraction(s) for s in starts] + [Fraction(b + 1)]
        labels = [f"{s}-{e}" if e > s else f"{s}" for s, e in zip(starts, ends, strict=True)]
        return Attribute(name, tuple(labels), tuple(edges), integer=True)
    step = (hi - lo) / bins
    edges = [lo + i * step for i in range(bins)] + [hi]
    labels = [f"[{_fmt(edges[i])}, {_fmt(edges[i + 1])})" for i in range(bins - 1)]
    labels.append(f"[{_fmt(edges[-2])}, {_fmt(edges[-1])}]")
    return Attribute(name, tuple(labels), tuple(edges))


def _fmt(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


def domain_from_meta(meta: Any, columns: Sequence[str] | None = None, *,
                     bins: int | Mapping[str, int] = 16) -> tuple[Attribute, ...]:
    """The public domain of ``columns`` (default: every declared column) from metadata.

    A column with declared ``categories`` is categorical; a numeric column with declared
    ``bounds`` is cut into ``bins`` bins (an int, or a mapping column -> bins). Anything
    else has no public domain and is refused with a remedy.
    """
    names = list(columns) if columns is not None else list(meta.names)
    out = []
    for name in names:
        if name not in meta:
            raise MetadataError(f"column {name!r} is not declared in the metadata of "
                                f"{meta.name!r}", remedy="declared columns are: "
                                + ", ".join(meta.names))
        col = meta[name]
        if col.categories is not None:
            out.append(categorical(name, col.categories))
        elif col.bounds is not None:
            k = bins.get(name, 16) if isinstance(bins, Mapping) else bins
            out.append(binned(name, col.bounds[0], col.bounds[1], k,
                              integer=col.type.value == "integer"))
        else:
            raise MetadataError(
                f"column {name!r} has no declared categories or bounds: its domain is not "
                "public", remedy=f"declare categories = [...] or bounds = [low, high] for "
                f"{name!r} in the metadata, or leave it out")
    return tuple(out)


def columns_of(data: Any, names: Sequence[str | int]) -> dict[str | int, np.ndarray]:
    """The named columns of a table as numpy arrays (statcurator Dataset, pyarrow table,
    pandas data frame, mapping of columns, or a 2-d array addressed by position).

    >>> columns_of({"a": [1, 2]}, ["a"])["a"].tolist()
    [1, 2]
    >>> columns_of(np.array([[1, 2], [3, 4]]), [1])[1].tolist()
    [2, 4]
    """
    table = getattr(data, "table", None)
    if table is not None and hasattr(table, "column_names"):
        data = table
    out: dict[str | int, np.ndarray] = {}
    if hasattr(data, "column_names") and hasattr(data, "column"):  # pyarrow
        for n in names:
            out[n] = data.column(n).to_numpy(zero_copy_only=False)
        return out
    if isinstance(data, Mapping) or (hasattr(data, "columns") and hasattr(data, "iloc")):
        for n in names:
            try:
                out[n] = np.asarray(data[n])
            except KeyError:
                raise DataError(f"the data have no column {n!r}",
                                remedy="pass a table with the declared columns") from None
        return out
    arr = np.asarray(data, dtype=object if not isinstance(data, np.ndarray) else None)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise DataError("cannot read columns from the data",
                        remedy="pass a table (Dataset, pyarrow, pandas) or a 2-d array")
    for i, n in enumerate(names):
        out[n] = arr[:, n if isinstance(n, int) else i]
    return out


def encode(data: Any, domain: Sequence[Attribute]) -> np.ndarray:
    """The (rows × attributes) int64 matrix of codes of ``data`` over ``domain``."""
    cols = columns_of(data, [a.name for a in domain]) if not _positional(data) else \
        columns_of(data, list(range(len(domain))))
    arrays = list(cols.values())
    if not arrays:
        return np.zeros((0, 0), dtype=np.int64)
    return np.stack([a.encode(c) for a, c in zip(domain, arrays, strict=True)], axis=1)


def decode(codes: np.ndarray, domain: Sequence[Attribute]) -> dict[str, np.ndarray]:
    """Columns of values for a code matrix (numeric bins become uniform values in the bin)."""
    return {a.name: a.decode(codes[:, j]) for j, a in enumerate(domain)}


def _positional(data: Any) -> bool:
    return isinstance(data, np.ndarray) or (isinstance(data, list | tuple) and data
                                            and isinstance(data[0], list | tuple | np.ndarray))


def relation_of(meta: Any) -> Relation:
    """The neighbour relation a table's metadata declares (row-level units only).

    >>> from statcurator.core.schema import TableMeta, Column
    >>> relation_of(TableMeta("t", (Column("x"),), neighbours="bounded"))
    ChangeOne()
    """
    if meta is None:
        return AddRemove()
    unit = getattr(meta, "privacy_unit", None)
    if unit is not None and not unit.is_row:
        raise UnsupportedQueryError(
            "the learners and synthesizers protect one row; this table's privacy unit is a "
            "person with several rows", remedy="keep one row per person (or aggregate each "
            "person's rows) and declare privacy_unit = \"row\"")
    return ChangeOne() if str(getattr(meta, "neighbours", "unbounded")) == "bounded" \
        else AddRemove()


def row_steps(relation: Relation) -> Fraction:
    """Rows added or removed in one neighbour step of ``relation`` (1, or 2 for change-one).

    >>> row_steps(ChangeOne())
    Fraction(2, 1)
    """
    return relation.add_remove_distance(1)
