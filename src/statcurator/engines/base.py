"""What every engine shares: table sources, the engine protocol, and the hashing used for
contribution bounding.

An engine runs a compiled :class:`~statcurator.query.relational.EnginePlan` and returns an
:class:`~statcurator.query.relational.ExactResult`: exact aggregates only, never noise, never
rows. Three engines implement it: ``duckdb`` (default), ``spark`` and ``memory`` (the pure
Python reference used as the oracle in tests). The same plan gives identical results on all
three.

>>> import pyarrow as pa
>>> src = TableSource.from_arrow(pa.table({"a": [1, 2]}))
>>> src.kind, src.schema.names
('arrow', ['a'])
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..core.errors import DataError
from ..query.relational import EnginePlan, ExactResult, Term

if TYPE_CHECKING:
    from ..core.schema import TableMeta

__all__ = ["TableSource", "Engine", "row_hash", "result_from_rows", "term_columns", "sql_text",
           "encode_field"]


@dataclass(frozen=True)
class TableSource:
    """Where a registered table's rows live, read in place by the engines.

    ``kind`` is ``arrow`` (``data`` a ``pyarrow.Table``, also used for pandas/Polars input),
    ``parquet``, ``csv`` or ``duckdb`` (``path``; ``table`` names the table inside a DuckDB
    database). ``schema`` is the Arrow schema the engines must read the data with (for CSV:
    declared types for declared columns, inferred for the rest), so every engine sees the same
    types.
    """

    kind: str
    schema: Any
    data: Any = None
    path: str | None = None
    separator: str = ","
    table: str | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @classmethod
    def from_arrow(cls, table: Any) -> TableSource:
        """An in-memory Arrow table (the curator converts pandas and Polars frames to it)."""
        return cls("arrow", table.schema, data=table)

    @classmethod
    def from_path(cls, path: str | Path, *, column_types: dict[str, Any] | None = None,
                  separator: str = ",", prefer_table: str | None = None) -> TableSource:
        """A file read in place: Parquet, CSV (read with ``column_types`` for the declared
        columns) or a DuckDB database (``FILE.duckdb:TABLE``, or its only table, or the one
        named ``prefer_table``). Only the schema is read here.
        """
        import pyarrow as pa

        table = None
        p = Path(path)
        if not p.exists() and ":" in p.name:
            db, _, table = str(p).rpartition(":")
            p = Path(db)
        if not p.exists():
            raise DataError(f"data file {str(p)!r} does not exist",
                            remedy="check the path, or use the bundled demo name 'adult'")
        suffix = p.suffix.lower()
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return cls("parquet", pq.read_schema(p), path=str(p.resolve()))
        if suffix in (".duckdb", ".ddb", ".db"):
            import duckdb

            con = duckdb.connect(str(p), read_only=True)
            try:
                names = [r[0] for r in con.execute(
                    "SELECT table_name FROM information_schema.tables").fetchall()]
                if table is None:
                    if prefer_table in names:
                        table = prefer_table
                    elif len(names) == 1:
                        table = names[0]
                    else:
                        raise DataError(f"DuckDB file {str(p)!r} holds tables {names}",
                                        remedy="name one: FILE.duckdb:TABLE")
                if table not in names:
                    raise DataError(f"DuckDB file {str(p)!r} has no table {table!r}",
                                    remedy=f"tables there: {names}")
                schema = con.sql(f'SELECT * FROM "{table}" LIMIT 0').to_arrow_table().schema
            finally:
                con.close()
            return cls("duckdb", schema, path=str(p.resolve()), table=table)
        if suffix in (".csv", ".tsv", ".txt", ".psv", ".dat", ""):
            import pyarrow.csv as pacsv

            try:
                reader = pacsv.open_csv(
                    p, parse_options=pacsv.ParseOptions(delimiter=separator),
                    convert_options=pacsv.ConvertOptions(column_types=column_types or {},
                                                         strings_can_be_null=False))
                schema = reader.schema
                reader.close()
            except pa.ArrowInvalid as e:
                raise DataError(f"cannot read {str(p)!r} as CSV with separator {separator!r}: {e}",
                                remedy="check the separator and the declared column types"
                                ) from None
            schema = pa.schema([pa.field(f.name, pa.string() if pa.types.is_null(f.type)
                                         else f.type) for f in schema])
            return cls("csv", schema, path=str(p.resolve()), separator=separator)
        raise DataError(f"unknown data format {suffix!r} for {str(p)!r}",
                        remedy="use .csv, .tsv, .parquet or .duckdb files")

    def to_arrow(self) -> Any:
        """Read the whole table into Arrow (the memory engine and Spark's local path)."""
        import pyarrow as pa

        if self.kind == "arrow":
            return self.data
        if self.kind == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(self.path, schema=self.schema)
        if self.kind == "csv":
            import pyarrow.csv as pacsv

            types = {f.name: f.type for f in self.schema}
            return pacsv.read_csv(
                self.path, parse_options=pacsv.ParseOptions(delimiter=self.separator),
                convert_options=pacsv.ConvertOptions(column_types=types,
                                                     strings_can_be_null=False))
        if self.kind == "duckdb":
            import duckdb

            con = duckdb.connect(self.path, read_only=True)
            try:
                t = con.sql(f'SELECT * FROM "{self.table}"').to_arrow_table()
            finally:
                con.close()
            return t.cast(pa.schema(self.schema)) if t.schema != self.schema else t
        raise DataError(f"unknown source kind {self.kind!r}", remedy="use arrow, parquet, csv or duckdb")


class Engine(Protocol):
    """The engine interface — everything the curator calls: register tables, check a plan
    against them without reading rows, show the statements it would run, run compiled plans
    and return exact aggregates, release resources.

    ``declare_types`` (optional) is told a registered table's metadata and returns the type
    mismatches it finds (``[]`` if it does not check). ``validate`` must refuse (with
    :class:`~statcurator.core.errors.EngineError`) any plan the registered data cannot run for
    reasons of names and types, reading no row: the curator calls it before charging, so that
    such a query costs nothing (an engine may skip the check for tables whose types it has
    found to match their metadata).
    """

    name: str

    def register(self, name: str, source: TableSource) -> None: ...

    def declare_types(self, name: str, meta: TableMeta) -> list[str]: ...

    def unregister(self, name: str) -> None: ...

    def validate(self, plan: EnginePlan) -> None: ...

    def sql(self, plan: EnginePlan, salt: str = "0") -> tuple[str, list[str]]: ...

    def execute(self, plan: EnginePlan, *, salt: str) -> ExactResult: ...

    def close(self) -> None: ...


def sql_text(value: Any, real: bool = False) -> str | None:
    """The text an SQL engine gives ``CAST(value AS VARCHAR)`` (None for NULL); with
    ``real``, the text of the DOUBLE ``value + 0.0`` (so -0.0 prints as 0.0).

    Integers, strings and booleans print identically in DuckDB, Spark and Python; floats
    print alike for ordinary values (DuckDB and Python use the shortest round-trip form;
    Spark writes large exponents as ``1.0E20``).

    >>> sql_text(None), sql_text(True), sql_text(42), sql_text(2.5), sql_text(-0.0, real=True)
    (None, 'true', '42', '2.5', '0.0')
    """
    if value is None:
        return None
    if real and not isinstance(value, bool):
        value = float(value) + 0.0
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


def encode_field(text: str | None) -> str:
    """One hashed field, unambiguously: ``N`` for NULL, else ``V<length>:<text>`` (the
    encoding :func:`~statcurator.engines.sqlgen.encoded` writes in SQL).

    >>> encode_field(None), encode_field("~"), encode_field("x|y")
    ('N', 'V1:~', 'V3:x|y')
    """
    return "N" if text is None else f"V{len(text)}:{text}"


def row_hash(salt: str, parts: list[Any], real: list[bool] | None = None) -> str:
    """MD5 (hex) of the salt and the encoded fields, exactly as the SQL engines compute it.

    >>> row_hash("s", [1, "a"]) == hashlib.md5(b"sV1:1V1:a").hexdigest()
    True
    """
    flags = real or [False] * len(parts)
    text = salt + "".join(encode_field(sql_text(p, r)) for p, r in zip(parts, flags, strict=True))
    return hashlib.md5(text.encode("utf-8")).hexdigest()


#: the raw moments a SQL engine returns for a centred term, in this order:
#: ``centered`` COUNT(q), SUM(q); ``centered_sq`` COUNT(q), SUM(q), SUM(q*q)
RAW_MOMENTS = {"centered": 2, "centered_sq": 3}
#: the columns of the terms over one quantized input (raw moments: COUNT(q), SUM(q), SUM(q*q))
_MOMENT_COLUMNS = {"valid": ("count",), "sum": ("sum",), "centered": ("count", "sum"),
                   "centered_sq": ("count", "sum", "sum_sq")}


def term_columns(terms: tuple[Term, ...]) -> tuple[tuple[Any, ...], tuple[tuple[int, ...], ...]]:
    """The aggregate columns that the SQL engines compute for ``terms``, each once, and the
    positions of each term's columns among them. A mean's count and the count among its
    centred sum's raw moments (:data:`RAW_MOMENTS`) are one ``COUNT(q)`` (DuckDB would
    compute it once per mention).

    >>> from statcurator.query.expr import Col
    >>> from statcurator.query.relational import Quantized
    >>> q = Quantized(Col("x", "t"), 0, 0, 10, integral=True, real=False)
    >>> columns, where = term_columns((Term("valid", q), Term("centered", q)))
    >>> [c[0] for c in columns], where
    (['count', 'sum'], ((0,), (0, 1)))
    """
    if len(terms) == 1:  # nothing to share (the common case: the input is not hashed)
        (t,) = terms
        keys = _column_keys(t)
        return keys, (tuple(range(len(keys))),)
    cols: dict[tuple[Any, ...], int] = {}
    where = tuple(tuple(cols.setdefault(k, len(cols)) for k in _column_keys(t)) for t in terms)
    return tuple(cols), where


def _column_keys(t: Term) -> tuple[tuple[Any, ...], ...]:
    """What each column of a term computes (equal keys: the same aggregate)."""
    moments = _MOMENT_COLUMNS.get(t.kind)
    if moments is not None:
        return tuple((m, t.input) for m in moments)
    return ((t.kind, t.input, t.input2),)


def from_moments(kind: str, center: int, m: list[int]) -> int:
    """A centred term from its raw moments, with exact integer algebra: with n = COUNT(q),
    s = SUM(q) and ss = SUM(q*q), SUM(2q - c) = 2s - cn and SUM((2q - c)^2) = 4ss - 4cs +
    c^2 n.

    >>> qs, c = [0, 3, 7], 10
    >>> m = [len(qs), sum(qs), sum(q * q for q in qs)]
    >>> from_moments("centered", c, m[:2]) == sum(2 * q - c for q in qs)
    True
    >>> from_moments("centered_sq", c, m) == sum((2 * q - c) ** 2 for q in qs)
    True
    """
    if kind == "centered":
        return 2 * m[1] - center * m[0]
    return 4 * m[2] - 4 * center * m[1] + center * center * m[0]


def result_from_rows(plan: EnginePlan, rows: list, hist_rows: list) -> ExactResult:
    """Assemble an :class:`ExactResult` from SQL result rows (keys first, then the terms'
    columns, :data:`RAW_MOMENTS` for a centred term; histogram rows are keys, bin, count).
    SQL sums over no rows are NULL, i.e. 0."""
    nk, nt = len(plan.keys), len(plan.terms)
    checks = [(i, _key_set(v)) for i, v in enumerate(plan.key_values) if v is not None]

    def keep(key: tuple) -> bool:  # a plain loop: no generator per group on this hot path
        for i, a in checks:  # noqa: SIM110
            if not a.has(key[i]):
                return False
        return True

    groups: dict[tuple, tuple[int, ...]] = {}
    if (nk == 1 and nt == 1 and plan.terms[0].kind not in RAW_MOMENTS and len(checks) == 1
            and checks[0][1].plain is not None):
        # one key with a public set of non-numbers (the common GROUP BY category): plain
        # set membership is SQL equality there (see _KeySet)
        listed = checks[0][1].plain
        groups = {(k,): (0 if v is None else int(v),) for k, v in rows if k in listed}
    else:
        columns, where = term_columns(plan.terms)
        ncols = len(columns)
        # one column per term, in order: read as they are; else combined (shared, moments)
        direct = ncols == nt and all(len(at) == 1 for at in where)
        for r in rows:
            key = tuple(r[:nk])
            if not checks or keep(key):
                vals = [0 if v is None else int(v) for v in r[nk:nk + ncols]]
                if not direct:
                    vals = _combined(plan, where, vals)
                groups[key] = tuple(vals)
    hists = []
    for hr in hist_rows:
        h: dict[tuple, dict[int, int]] = {}
        for r in hr:
            key = tuple(r[:nk])
            if keep(key):
                h.setdefault(key, {})[int(r[nk])] = int(r[nk + 1])
        hists.append(h)
    return ExactResult(plan.key_names, groups, tuple(hists))


def _combined(plan: EnginePlan, where: tuple[tuple[int, ...], ...],
              vals: list[int]) -> list[int]:
    """One group's term values from its columns (at the positions :func:`term_columns`
    gives; raw moments combined)."""
    out = []
    for t, at in zip(plan.terms, where, strict=True):
        if t.kind in RAW_MOMENTS:
            out.append(from_moments(t.kind, t.input.center, [vals[p] for p in at]))
        else:
            out.append(vals[at[0]])
    return out


def _key_set(values: tuple[Any, ...]) -> _KeySet:
    """The membership test of one public key set, built once per key-set object (a compiled
    plan keeps its tuple). Cached by identity, not equality: (1,) == (True,) in Python."""
    hit = _KEY_SETS.get(id(values))
    if hit is not None and hit[0] is values:
        return hit[1]
    if len(_KEY_SETS) >= 64:
        _KEY_SETS.clear()
    made = _KeySet(values)
    _KEY_SETS[id(values)] = (values, made)  # the tuple is kept alive, so its id is not reused
    return made


_KEY_SETS: dict[int, tuple[tuple[Any, ...], _KeySet]] = {}


class _KeySet:
    """Membership in a public key set with SQL equality (NULL matches only a listed NULL,
    booleans never equal numbers)."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.null = any(v is None for v in values)
        self.values = {(isinstance(v, bool), v) for v in values if v is not None}
        #: the listed values as a plain set when all are text (or NULL): then no engine
        #: value equals a listed one in Python unless it does in SQL (numbers would not do:
        #: True == 1 == 1.0 in Python)
        self.plain: frozenset[Any] | None = None
        if all(v is None or isinstance(v, str) for v in values):
            self.plain = frozenset(values)

    def has(self, x: Any) -> bool:
        if x is None:
            return self.null
        return (isinstance(x, bool), x) in self.values
