"""What the compiler may know about tables: declared metadata, physical column kinds, and
(for public tables only) the public data itself.

The compiler never reads private data. For a private table it sees the declared
:class:`~statcurator.core.schema.TableMeta` and the physical kind of each column (integer,
real, string, boolean; from the file or frame *schema*, needed to emit a NaN test for float
columns). For a public table it may also read values: its distinct values are a public key
set, its min and max are public bounds, and its most repeated join key is the stability of a
join.

>>> from statcurator.core.schema import Column, TableMeta
>>> meta = TableMeta("t", (Column("age", type="integer", bounds=(0, 120)),))
>>> info = TableInfo.from_meta(meta)
>>> info.kind("age"), info.public
('integer', False)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from ..core.errors import MetadataError, UnsupportedQueryError
from ..core.schema import Column, ColumnType, TableMeta

__all__ = ["TableInfo", "Catalog", "DictCatalog", "arrow_kind", "MAX_PUBLIC_KEYS"]

#: A public table column with more distinct values than this is not used as a key set.
MAX_PUBLIC_KEYS = 100_000


def arrow_kind(arrow_type: Any) -> str:
    """The kind (``integer``, ``real``, ``string``, ``boolean`` or ``other``) of an Arrow type.

    A dictionary-encoded column (a pandas Categorical) has the kind of its values, as the
    engines read it: categories of integers are integers, not text.

    >>> import pyarrow as pa
    >>> arrow_kind(pa.dictionary(pa.int8(), pa.int64())), arrow_kind(pa.dictionary(pa.int8(), pa.string()))
    ('integer', 'string')
    >>> arrow_kind(pa.date32())
    'other'
    """
    import pyarrow.types as pt

    if pt.is_dictionary(arrow_type):
        return arrow_kind(arrow_type.value_type)
    if pt.is_boolean(arrow_type):
        return "boolean"
    if pt.is_integer(arrow_type):
        return "integer"
    if pt.is_floating(arrow_type) or pt.is_decimal(arrow_type):
        return "real"
    if (pt.is_string(arrow_type) or pt.is_large_string(arrow_type)
            or getattr(pt, "is_string_view", lambda _: False)(arrow_type)):
        return "string"
    return "other"


@dataclass(frozen=True)
class TableInfo:
    """One registered table as the compiler sees it.

    ``kinds`` maps every physical column to its kind. ``data`` is set only for public
    tables (a ``pyarrow.Table``); for private tables it is always None.
    """

    name: str
    meta: TableMeta
    kinds: Mapping[str, str]
    public: bool = False
    data: Any = None
    _cache: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_meta(cls, meta: TableMeta, name: str | None = None) -> TableInfo:
        """A private table known only by its metadata (enough for dry runs)."""
        kinds = {c.name: str(c.type) for c in meta.columns}
        return cls(name or meta.name, meta, kinds)

    @classmethod
    def from_schema(cls, name: str, meta: TableMeta, schema: Any, *, public: bool = False,
                    data: Any = None) -> TableInfo:
        """From an Arrow schema (the data's physical types) and the declared metadata."""
        kinds = {f.name: arrow_kind(f.type) for f in schema}
        return cls(name, meta, kinds, public=public, data=data if public else None)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.kinds)

    def has(self, column: str) -> bool:
        return column in self.kinds

    def kind(self, column: str) -> str:
        if column not in self.kinds:
            raise UnsupportedQueryError(
                f"table {self.name!r} has no column {column!r}",
                remedy="its columns are: " + ", ".join(self.kinds))
        return self.kinds[column]

    def column(self, column: str) -> Column:
        """The declared metadata of a column (undeclared columns: a bare Column of its kind)."""
        if column in self.meta:
            return self.meta[column]
        kind = self.kind(column)
        return Column(column, type=kind if kind in ColumnType._value2member_map_ else "string")

    # -- public tables only: facts read from the (public) data -----------------------------
    def _require_public(self, what: str) -> None:
        if not self.public:  # pragma: no cover - the compiler never asks
            raise MetadataError(f"{what} of the private table {self.name!r} is not public",
                                remedy="declare it in the metadata")

    def public_values(self, column: str) -> tuple[Any, ...]:
        """The distinct values of a public column, sorted (a public key set)."""
        self._require_public("the values")
        key = ("values", column)
        if key not in self._cache:
            import pyarrow.compute as pc

            values = pc.unique(self.data.column(column)).to_pylist()
            if len(values) > MAX_PUBLIC_KEYS:
                raise UnsupportedQueryError(
                    f"public column {self.name}.{column} has {len(values)} distinct values",
                    remedy=f"group by a coarser column (at most {MAX_PUBLIC_KEYS} keys)")
            self._cache[key] = tuple(sorted(values, key=_sort_key))
        found: tuple[Any, ...] = self._cache[key]
        return found

    def public_bounds(self, column: str) -> tuple[Fraction, Fraction] | None:
        """Min and max of a public numeric column (public bounds), or None if it is empty."""
        self._require_public("the range")
        key = ("bounds", column)
        if key not in self._cache:
            import math

            import pyarrow.compute as pc

            mm = pc.min_max(self.data.column(column)).as_py()
            lo, hi = mm["min"], mm["max"]
            if lo is None or (isinstance(lo, float) and not (math.isfinite(lo) and math.isfinite(hi))):
                self._cache[key] = None
            else:
                self._cache[key] = (Fraction(lo), Fraction(hi))
        bounds: tuple[Fraction, Fraction] | None = self._cache[key]
        return bounds

    def max_multiplicity(self, columns: tuple[str, ...],
                         as_double: tuple[bool, ...] | None = None) -> int:
        """How many rows of this public table share the most frequent value of ``columns``:
        the stability of a join on them (each outside row meets at most this many rows).

        Values are grouped by the equality the SQL engines join with, not by their bits:
        floating-point and decimal keys, and every key compared with a real column
        (``as_double``), are compared as doubles, where ``-0.0`` equals ``0.0`` and distinct
        integers beyond 2^53 can be equal. Grouping by bits would under-count the rows one
        private row meets, and so the sensitivity.

        >>> import pyarrow as pa
        >>> from statcurator.core.schema import TableMeta
        >>> t = pa.table({"k": [0.0, -0.0], "n": [2**53, 2**53 + 1]})
        >>> info = TableInfo.from_schema("p", TableMeta("p", ()), t.schema, public=True, data=t)
        >>> info.max_multiplicity(("k",)), info.max_multiplicity(("n",), (True,))
        (2, 2)
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        self._require_public("the key multiplicity")
        doubles = tuple(as_double) if as_double is not None else (False,) * len(columns)
        key = ("mult", columns, doubles)
        if key not in self._cache:
            arrays = []
            for name, dbl in zip(columns, doubles, strict=True):
                col = self.data.column(name)
                if dbl or pa.types.is_floating(col.type) or pa.types.is_decimal(col.type):
                    # x + 0.0 turns -0.0 into 0.0; NaNs group together, as NaN = NaN in SQL
                    col = pc.add(pc.cast(col, pa.float64(), safe=False), 0.0)
                arrays.append(col)
            names = [f"k{i}" for i in range(len(arrays))]
            t = pa.table(arrays, names=names)
            if t.num_rows == 0:
                self._cache[key] = 0
            else:
                counts = t.group_by(names).aggregate([([], "count_all")])
                self._cache[key] = int(max(counts.column("count_all").to_pylist()))
        return int(self._cache[key])


def _sort_key(v: Any) -> tuple[Any, ...]:
    return (v is None, type(v).__name__, v if v is not None else 0)


class Catalog(Protocol):
    """Anything that can describe registered tables by name."""

    def table_info(self, name: str) -> TableInfo: ...


class DictCatalog:
    """A catalog over a dict of :class:`TableInfo` (the curator keeps one).

    >>> from statcurator.core.schema import Column, TableMeta
    >>> cat = DictCatalog({"t": TableInfo.from_meta(TableMeta("t", (Column("a"),)))})
    >>> cat.table_info("u")
    Traceback (most recent call last):
    ...
    statcurator.core.errors.UnsupportedQueryError: there is no registered table 'u'; registered tables: t
    """

    def __init__(self, tables: Mapping[str, TableInfo] | None = None) -> None:
        self.tables: dict[str, TableInfo] = dict(tables or {})

    def table_info(self, name: str) -> TableInfo:
        if name in self.tables:
            return self.tables[name]
        lowered = {k.lower(): k for k in self.tables}
        if name.lower() in lowered:
            return self.tables[lowered[name.lower()]]
        raise UnsupportedQueryError(
            f"there is no registered table {name!r}",
            remedy=("registered tables: " + ", ".join(self.tables)) if self.tables
            else "register one first: curator.register(name, data, metadata)")
