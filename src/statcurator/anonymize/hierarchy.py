"""Generalization hierarchies: build them, validate them, and encode them for speed.

A hierarchy of a quasi-identifier has one *row* per raw value; column ``i`` of the row is the
value's label at generalization level ``i`` and the last column is the most general label
(normally ``*``). This is the ARX CSV convention, and every builder here produces it:

* :meth:`Hierarchy.from_csv` reads an ARX-format file;
* :meth:`Hierarchy.from_intervals` groups numbers into aligned intervals of growing width;
* :meth:`Hierarchy.from_masking` masks fixed-length codes (zip codes) from the right;
* :meth:`Hierarchy.from_tree` flattens an inline tree whose root ``*`` is implicit.

Values are matched on their *text* form: an integer column holding 39 matches the row ``39``.
A validated hierarchy also carries integer codes per level (``codes[level, row]``) so that the
search generalizes whole columns with one ``numpy`` gather.

>>> h = Hierarchy.from_masking("zip", ["47677", "47602", "47905"], length=5)
>>> h.levels, h.generalize("47677", 2)
(6, '476**')
>>> h.group_sizes[1].tolist()        # rows sharing each row's label at level 1
[1, 1, 1]
>>> h.index(["47905", "47677"]).tolist()      # rows are sorted codes
[2, 1]
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import DataError, HierarchyError
from ..core.schema import HierarchySpec

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Hierarchy", "text_values", "format_number"]


def format_number(x: Fraction | int) -> str:
    """The shortest exact text of a number: ``5``, ``2.5``, or ``1/3`` if no decimal is exact.

    >>> format_number(Fraction(5, 2)), format_number(Fraction(10)), format_number(Fraction(1, 3))
    ('2.5', '10', '1/3')
    """
    x = Fraction(x)
    if x.denominator == 1:
        return str(x.numerator)
    d = x.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d != 1:
        return f"{x.numerator}/{x.denominator}"
    digits = 0
    while (x * 10**digits).denominator != 1:
        digits += 1
    return f"{float(x):.{digits}f}" if digits <= 15 else str(x)


def text_values(column: pa.ChunkedArray | pa.Array | Sequence[Any]) -> list[str | None]:
    """The text form of a column's values (how hierarchies are matched); nulls stay ``None``.

    >>> import pyarrow as pa
    >>> text_values(pa.array([39, 40, None]))
    ['39', '40', None]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray | pa.Array):
        if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
            column = pc.cast(column, pa.string())
        return column.to_pylist()
    return [None if v is None else str(v) for v in column]


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A validated generalization hierarchy of one column.

    ``rows[i][h]`` is the label of raw value ``rows[i][0]`` at level ``h``. Construction checks
    that every row has the same number of levels, that no raw value is listed twice, and that
    each label has exactly one parent (otherwise generalization would not be a function).

    Derived, read-only arrays:

    * ``codes[h, i]`` — integer code of row ``i``'s label at level ``h`` (codes count from 0 in
      order of first appearance);
    * ``group_sizes[h, i]`` — how many rows share row ``i``'s label at level ``h``; divided by
      ``len(hierarchy)`` this is the label's *domain share* used by the loss metric;
    * ``cardinalities[h]`` — number of distinct labels at level ``h``.

    >>> h = Hierarchy.from_rows("sex", [["Male", "*"], ["Female", "*"]])
    >>> len(h), h.levels, h.height, h.labels(1)
    (2, 2, 1, ('*',))
    >>> Hierarchy.from_rows("x", [["a", "g"], ["b"]])
    Traceback (most recent call last):
    ...
    statcurator.core.errors.HierarchyError: hierarchy of column 'x': the row of value 'b' has 1 level(s) but the first row has 2; give every row the same number of columns (ARX format: column i = level i)
    """

    column: str
    rows: tuple[tuple[str, ...], ...]
    source: str = ""
    codes: np.ndarray = field(init=False, repr=False)
    group_sizes: np.ndarray = field(init=False, repr=False)
    cardinalities: tuple[int, ...] = field(init=False, repr=False)
    _labels: tuple[tuple[str, ...], ...] = field(init=False, repr=False)
    _index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rows = tuple(tuple(str(v) for v in r) for r in self.rows)
        object.__setattr__(self, "rows", rows)
        where = f"hierarchy of column {self.column!r}" + (f" ({self.source})" if self.source else "")
        if not rows:
            raise HierarchyError(f"{where} is empty",
                                 remedy="list one row per raw value, e.g. 'Male;*'")
        width = len(rows[0])
        index: dict[str, int] = {}
        for i, r in enumerate(rows):
            if len(r) != width:
                raise HierarchyError(
                    f"{where}: the row of value {r[0] if r else ''!r} has {len(r)} level(s) but the "
                    f"first row has {width}",
                    remedy="give every row the same number of columns (ARX format: column i = level i)")
            if r[0] in index:
                raise HierarchyError(f"{where} lists the value {r[0]!r} twice",
                                     remedy="list each raw value in exactly one row")
            index[r[0]] = i
        codes = np.empty((width, len(rows)), dtype=np.int32)
        sizes = np.empty((width, len(rows)), dtype=np.int64)
        labels: list[tuple[str, ...]] = []
        for h in range(width):
            seen: dict[str, int] = {}
            for i, r in enumerate(rows):
                codes[h, i] = seen.setdefault(r[h], len(seen))
            labels.append(tuple(seen))
            counts = np.bincount(codes[h], minlength=len(seen))
            sizes[h] = counts[codes[h]]
        for h in range(width - 1):
            parent: dict[int, int] = {}
            for i in range(len(rows)):
                c, p = int(codes[h, i]), int(codes[h + 1, i])
                if parent.setdefault(c, p) != p:
                    raise HierarchyError(
                        f"{where}: the label {labels[h][c]!r} at level {h} generalizes to both "
                        f"{labels[h + 1][parent[c]]!r} and {labels[h + 1][p]!r} at level {h + 1}",
                        remedy="every label must have exactly one parent; rename one of the groups")
        codes.setflags(write=False)
        sizes.setflags(write=False)
        object.__setattr__(self, "codes", codes)
        object.__setattr__(self, "group_sizes", sizes)
        object.__setattr__(self, "cardinalities", tuple(len(x) for x in labels))
        object.__setattr__(self, "_labels", tuple(labels))
        object.__setattr__(self, "_index", index)

    # -- shape ------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of rows, i.e. the size of the raw domain ``|dom|``."""
        return len(self.rows)

    @property
    def levels(self) -> int:
        """Number of generalization levels including level 0 (the raw value)."""
        return len(self.rows[0])

    @property
    def height(self) -> int:
        """The highest level (``levels - 1``)."""
        return self.levels - 1

    @property
    def values(self) -> tuple[str, ...]:
        """The raw values (level 0), in row order."""
        return self._labels[0]

    def labels(self, level: int) -> tuple[str, ...]:
        """The distinct labels of ``level``, indexed by their code."""
        return self._labels[self._level(level)]

    def _level(self, level: int) -> int:
        if isinstance(level, bool) or not isinstance(level, int | np.integer) \
                or not 0 <= level < self.levels:
            raise HierarchyError(
                f"hierarchy of column {self.column!r} has levels 0..{self.height}, not {level!r}",
                remedy=f"choose a level between 0 and {self.height}")
        return int(level)

    # -- lookups ----------------------------------------------------------------------------
    def index(self, values: Iterable[str | None]) -> np.ndarray:
        """Row index of each value; a value the hierarchy lacks raises a :class:`DataError`."""
        idx = self._index
        out = []
        for v in values:
            i = idx.get("" if v is None else v)
            if i is None:
                raise self.missing(v)
            out.append(i)
        return np.asarray(out, dtype=np.int32)

    def missing(self, value: str | None) -> DataError:
        """The error for a value the hierarchy does not cover (names column, value, remedy)."""
        src = f" ({self.source})" if self.source else ""
        if value is None:
            return DataError(
                f"column {self.column!r} has missing values (null) that its hierarchy{src} "
                f"does not cover",
                remedy="add a row for the empty value '' to the hierarchy, or drop those records")
        return DataError(f"column {self.column!r} has the value {value!r} that its hierarchy{src} "
                         f"does not list",
                         remedy=f"add a row for {value!r} to the hierarchy, or correct the data")

    def __contains__(self, value: object) -> bool:
        return value in self._index

    def generalize(self, value: str, level: int) -> str:
        """The label of ``value`` at ``level``."""
        i = self._index.get(value)
        if i is None:
            raise self.missing(value)
        return self.rows[i][self._level(level)]

    def share(self, level: int) -> np.ndarray:
        """Per row, the domain share of its label at ``level`` (rows under it / ``len(self)``)."""
        return self.group_sizes[self._level(level)] / len(self.rows)

    def children(self, level: int) -> list[list[int]]:
        """For each label code of ``level`` (≥ 1), the codes at ``level - 1`` under it."""
        lv = self._level(level)
        if lv == 0:
            raise HierarchyError("level 0 has no children", remedy="ask for a level >= 1")
        out: list[list[int]] = [[] for _ in range(self.cardinalities[lv])]
        seen: set[int] = set()
        for i in range(len(self.rows)):
            c = int(self.codes[lv - 1, i])
            if c not in seen:
                seen.add(c)
                out[int(self.codes[lv, i])].append(c)
        return out

    def restricted(self, values: Iterable[str]) -> Hierarchy:
        """The hierarchy restricted to the rows of ``values`` (used for domain statistics)."""
        keep = set(values)
        return Hierarchy(self.column, tuple(r for r in self.rows if r[0] in keep), self.source)

    def __repr__(self) -> str:
        return (f"Hierarchy({self.column!r}, {len(self)} values, levels={self.levels}, "
                f"labels per level={list(self.cardinalities)})")

    # -- builders ---------------------------------------------------------------------------
    @classmethod
    def from_rows(cls, column: str, rows: Iterable[Sequence[Any]], source: str = "") -> Hierarchy:
        """A hierarchy from rows given in memory (ARX layout)."""
        return cls(column, tuple(tuple(str(v) for v in r) for r in rows), source)

    @classmethod
    def from_csv(cls, column: str, path: str | Path, separator: str = ";") -> Hierarchy:
        """Read an ARX-format hierarchy file: ``separator``-separated, no header, one row per value.

        >>> import tempfile, os
        >>> with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        ...     _ = f.write("Male;*\\nFemale;*\\n")
        >>> Hierarchy.from_csv("sex", f.name).values
        ('Male', 'Female')
        >>> os.unlink(f.name)
        """
        p = Path(path)
        try:
            with open(p, newline="", encoding="utf-8") as f:
                rows = [r for r in csv.reader(f, delimiter=separator) if r]
        except FileNotFoundError:
            raise HierarchyError(f"the hierarchy file {str(p)!r} of column {column!r} does not exist",
                                 remedy="fix the path (relative paths are read from the metadata "
                                        "file's folder)") from None
        except UnicodeDecodeError:
            raise HierarchyError(f"the hierarchy file {str(p)!r} of column {column!r} is not UTF-8",
                                 remedy="save it as UTF-8 text") from None
        return cls(column, tuple(tuple(r) for r in rows), p.name)

    @classmethod
    def from_intervals(cls, column: str, values: Iterable[Any], widths: Sequence[Any],
                       origin: Any = 0) -> Hierarchy:
        """Aligned intervals ``[lo, lo+w)`` of each width in ``widths``, then ``*``.

        Each width must be a multiple of the previous one, so that every interval lies inside
        exactly one interval of the next level. ``values`` are the raw values to cover (their
        text must parse as numbers).

        >>> h = Hierarchy.from_intervals("age", [17, 23, 39], widths=[10, 20])
        >>> [h.generalize("23", lvl) for lvl in range(h.levels)]
        ['23', '[20, 30)', '[20, 40)', '*']
        """
        ws = [_number(w, column, "interval width") for w in widths]
        if not ws:
            raise HierarchyError(f"column {column!r}: intervals need at least one width",
                                 remedy="write hierarchy = { intervals = [5, 10, 20] }")
        for w in ws:
            if w <= 0:
                raise HierarchyError(f"column {column!r}: interval width {format_number(w)} is not "
                                     f"positive", remedy="use positive widths such as [5, 10, 20]")
        for a, b in zip(ws, ws[1:], strict=False):
            if b % a != 0:
                raise HierarchyError(
                    f"column {column!r}: interval width {format_number(b)} is not a multiple of the "
                    f"previous width {format_number(a)}",
                    remedy="make each width a multiple of the one before, e.g. [5, 10, 20]")
        o = _number(origin, column, "interval origin")
        rows = []
        for text in sorted({str(v) for v in values if v is not None}, key=lambda t: _sort_key(t)):
            try:
                x = Fraction(text)
            except (ValueError, ZeroDivisionError):
                raise DataError(f"column {column!r} has the value {text!r}, which is not a number, "
                                f"but its hierarchy is numeric intervals",
                                remedy="declare another hierarchy or correct the data") from None
            row = [text]
            for w in ws:
                lo = o + math.floor((x - o) / w) * w
                row.append(f"[{format_number(lo)}, {format_number(lo + w)})")
            row.append("*")
            rows.append(row)
        return cls.from_rows(column, rows, "intervals " + str([format_number(w) for w in ws]))

    @classmethod
    def from_masking(cls, column: str, values: Iterable[Any], length: int,
                     mask: str = "*") -> Hierarchy:
        """Right-to-left masking of ``length``-character codes: level i masks the last i characters.

        >>> Hierarchy.from_masking("zip", ["1305"], length=5)
        Traceback (most recent call last):
        ...
        statcurator.core.errors.DataError: column 'zip' has the value '1305' of 4 characters, but its masking hierarchy expects 5; pad the codes to 5 characters (e.g. leading zeros, and declare the column type = "string") or declare masking = 4
        """
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise HierarchyError(f"column {column!r}: masking needs a positive code length",
                                 remedy="write hierarchy = { masking = 5 } for 5-digit codes")
        if len(mask) != 1:
            raise HierarchyError(f"column {column!r}: the mask {mask!r} must be one character",
                                 remedy='use mask = "*"')
        rows = []
        for text in sorted({str(v) for v in values if v is not None}):
            if len(text) != length:
                raise DataError(
                    f"column {column!r} has the value {text!r} of {len(text)} characters, but its "
                    f"masking hierarchy expects {length}",
                    remedy=f"pad the codes to {length} characters (e.g. leading zeros, and declare "
                           f"the column type = \"string\") or declare masking = {len(text)}")
            rows.append([text[: length - i] + mask * i for i in range(length + 1)])
        return cls.from_rows(column, rows, f"masking of {length} characters")

    @classmethod
    def from_tree(cls, column: str, tree: Mapping[str, Any]) -> Hierarchy:
        """Flatten an inline tree ``{group: {subgroup: [values]}}``; the root ``*`` is implicit.

        All leaves must sit at the same depth (every row needs the same number of levels).

        >>> h = Hierarchy.from_tree("disease", {"lung": ["flu", "pneumonia"], "stomach": ["ulcer"]})
        >>> h.rows[2]
        ('ulcer', 'stomach', '*')
        """
        rows: list[list[str]] = []

        def walk(node: Any, path: list[str]) -> None:
            if isinstance(node, Mapping):
                if not node:
                    raise HierarchyError(f"column {column!r}: the group {path[-1] if path else '*'!r} "
                                         f"of the tree is empty", remedy="list its values or remove it")
                for key, child in node.items():
                    walk(child, path + [str(key)])
            elif isinstance(node, list | tuple):
                for leaf in node:
                    if isinstance(leaf, Mapping | list | tuple):
                        raise HierarchyError(
                            f"column {column!r}: the tree mixes values and groups under {path[-1]!r}",
                            remedy="put values only in lists at the bottom of the tree")
                    rows.append([str(leaf)] + path[::-1] + ["*"])
            else:
                rows.append([str(node)] + path[::-1] + ["*"])

        if not isinstance(tree, Mapping):
            raise HierarchyError(f"column {column!r}: a tree hierarchy must be a table of groups",
                                 remedy='write e.g. tree = { "lung" = ["flu"], "stomach" = ["ulcer"] }')
        walk(tree, [])
        depths = {len(r) for r in rows}
        if len(depths) > 1:
            short = min(rows, key=len)
            raise HierarchyError(
                f"column {column!r}: the tree's leaves are at different depths (e.g. {short[0]!r} "
                f"has {len(short) - 1} level(s) above it, others have {max(depths) - 1})",
                remedy="put every value at the same depth, adding an intermediate group if needed")
        return cls.from_rows(column, rows, "inline tree")

    @classmethod
    def automatic(cls, column: str, values: Iterable[Any], numeric: bool) -> Hierarchy:
        """A hierarchy for a quasi-identifier that has none declared, built for ``values``.

        Numbers get aligned intervals of doubling width, starting at about a sixteenth of
        their range (rounded up to 1, 2 or 5 times a power of ten; at least 2 for integers);
        anything else, or numbers too few to group, gets suppression only (the value, then
        ``*``). ``source`` says which.

        >>> Hierarchy.automatic("age", range(17, 91), numeric=True).source
        'automatic: intervals of width 5, 10, 20, 40, then *'
        >>> h = Hierarchy.automatic("sex", ["M", "F"], numeric=False)
        >>> h.rows, h.source
        ((('F', '*'), ('M', '*')), 'automatic: suppression only (the value, then *)')
        """
        texts = sorted({"" if v is None else str(v) for v in values}, key=_sort_key)
        numbers = [_sort_key(t)[1] for t in texts if _sort_key(t)[0] == 0] if numeric else []
        widths: list[Fraction] = []
        if numeric and numbers and len(numbers) == len(texts):
            span = max(numbers) - min(numbers)
            width = _nice_ceiling(span / 16) if span > 0 else Fraction(0)
            if all(x.denominator == 1 for x in numbers):
                width = max(width, Fraction(2))
            while 0 < width < span:
                widths.append(width)
                width *= 2
        if widths:
            h = cls.from_intervals(column, texts, widths)
            return cls.from_rows(column, h.rows, "automatic: intervals of width "
                                 + ", ".join(format_number(w) for w in widths) + ", then *")
        return cls.from_rows(column, [[t, "*"] for t in texts],
                             "automatic: suppression only (the value, then *)")

    @classmethod
    def from_spec(cls, spec: HierarchySpec, column: str,
                  values: Iterable[Any] | None = None) -> Hierarchy:
        """Build a hierarchy from metadata; ``values`` (the data's values) are needed by
        ``intervals`` and ``masking`` hierarchies, which are generated for the values present."""
        if spec.kind == "file":
            if spec.path is None:
                raise HierarchyError(f"column {column!r}: file hierarchy without a path",
                                     remedy='write hierarchy = "file.csv"')
            return cls.from_csv(column, spec.path, spec.separator)
        if spec.kind == "tree":
            return cls.from_tree(column, spec.tree)
        if values is None:
            raise HierarchyError(f"column {column!r}: a {spec.kind} hierarchy is built from the "
                                 f"data's values, and none were given",
                                 remedy="pass the column's values")
        if spec.kind == "intervals":
            return cls.from_intervals(column, values, spec.widths, spec.origin)
        if spec.kind == "masking":
            assert spec.length is not None
            return cls.from_masking(column, values, spec.length, spec.mask)
        raise HierarchyError(f"column {column!r}: unknown hierarchy kind {spec.kind!r}",
                             remedy="use file, intervals, masking or tree")


def _number(value: Any, column: str, what: str) -> Fraction:
    if isinstance(value, bool):
        raise HierarchyError(f"column {column!r}: {what} {value!r} is not a number",
                             remedy="use numbers such as 5 or 2.5")
    try:
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError
            return Fraction(repr(value))
        return Fraction(value)
    except (TypeError, ValueError, ZeroDivisionError):
        raise HierarchyError(f"column {column!r}: {what} {value!r} is not a number",
                             remedy="use numbers such as 5 or 2.5") from None


def _nice_ceiling(x: Fraction) -> Fraction:
    """The smallest of 1, 2 or 5 times a power of ten that is >= ``x`` (> 0)."""
    power = Fraction(10) ** math.floor(math.log10(x))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= x)


def _sort_key(text: str) -> tuple[int, Any]:
    try:
        return (0, Fraction(text))
    except (ValueError, ZeroDivisionError):
        return (1, text)
