"""Tables in and out: CSV (any separator), Parquet, pandas, Polars, Arrow and DuckDB.

Inside statcurator a table is a :class:`pyarrow.Table`; these functions convert at the edges.

>>> import pyarrow as pa
>>> t = read_table(pa.table({"a": [1, 2]}))
>>> t.num_rows
2
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import DataError, MetadataError
from ..core.schema import ColumnType, TableMeta

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["read_table", "write_table", "to_format", "sniff_separator", "polars", "FORMATS"]

FORMATS = ("csv", "parquet", "duckdb", "arrow", "pandas", "polars")
_CSV_SUFFIXES = {".csv", ".tsv", ".txt", ".psv", ".dat"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
_DUCKDB_SUFFIXES = {".duckdb", ".ddb", ".db"}


def _arrow_type(t: ColumnType) -> Any:
    import pyarrow as pa

    return {ColumnType.INTEGER: pa.int64(), ColumnType.REAL: pa.float64(),
            ColumnType.STRING: pa.string(), ColumnType.BOOLEAN: pa.bool_()}[t]


def sniff_separator(path: str | Path) -> str:
    """Guess a CSV separator from the header line (one of ``,`` ``;`` tab ``|``)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        head = f.readline()
    counts = {sep: head.count(sep) for sep in (",", ";", "\t", "|")}
    best = max(counts, key=counts.__getitem__)
    return best if counts[best] > 0 else ","


def read_table(source: Any, *, meta: TableMeta | None = None, separator: str | None = None,
               table: str | None = None) -> pa.Table:
    """Read ``source`` into an Arrow table.

    ``source`` may be a path (``.csv``/``.tsv``/``.txt``: CSV with ``separator`` or a sniffed
    one; ``.parquet``; ``.duckdb``/``.db``: a DuckDB database, with ``table`` naming the table,
    or ``file.duckdb:table``), a pyarrow Table, a pandas or Polars DataFrame, or a DuckDB
    relation. With ``meta``, CSV columns are read with their declared types, so that
    ``"007"`` stays a string when it is declared one.
    """
    import pyarrow as pa

    if isinstance(source, pa.Table):
        return source
    if isinstance(source, pa.RecordBatchReader):
        return source.read_all()
    mod = type(source).__module__.split(".")[0]
    if mod == "pandas":
        return pa.Table.from_pandas(source, preserve_index=False)
    if mod == "polars":
        return source.to_arrow()
    if mod in ("duckdb", "_duckdb"):
        return source.to_arrow_table()
    if isinstance(source, str | Path):
        return _read_path(Path(source), meta=meta, separator=separator, table=table)
    if hasattr(source, "__arrow_c_stream__"):
        return pa.table(source)
    raise DataError(f"cannot read data from a {type(source).__name__}",
                    remedy="pass a CSV/Parquet/DuckDB path, a pandas or Polars DataFrame, "
                           "or a pyarrow Table")


def _read_path(path: Path, *, meta: TableMeta | None, separator: str | None,
               table: str | None) -> pa.Table:
    if not path.exists() and ":" in path.name:
        db, _, name = str(path).rpartition(":")
        if Path(db).suffix.lower() in _DUCKDB_SUFFIXES:
            return _read_duckdb(Path(db), name)
    if not path.exists():
        raise DataError(f"data file {str(path)!r} does not exist",
                        remedy="check the path, or use the bundled demo name 'adult'")
    if path.is_dir():
        raise DataError(f"{str(path)!r} is a directory, not a data file",
                        remedy="name a CSV, Parquet or DuckDB file inside it")
    suffix = path.suffix.lower()
    if suffix in _PARQUET_SUFFIXES:
        import pyarrow.parquet as pq

        return pq.read_table(path)
    if suffix in _DUCKDB_SUFFIXES:
        return _read_duckdb(path, table)
    if suffix in _CSV_SUFFIXES or suffix == "":
        return _read_csv(path, meta=meta, separator=separator)
    raise DataError(f"unknown data format {suffix!r} for {str(path)!r}",
                    remedy="use .csv, .tsv, .parquet or .duckdb files")


def _read_csv(path: Path, *, meta: TableMeta | None, separator: str | None) -> pa.Table:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    sep = separator or (meta.separator if meta is not None and meta.separator else None) \
        or sniff_separator(path)
    column_types = {}
    if meta is not None:
        column_types = {c.name: _arrow_type(c.type) for c in meta.columns}  # type: ignore[arg-type]
    try:
        return pacsv.read_csv(
            path,
            parse_options=pacsv.ParseOptions(delimiter=sep),
            convert_options=pacsv.ConvertOptions(column_types=column_types,
                                                 strings_can_be_null=False),
        )
    except pa.ArrowInvalid as e:
        raise DataError(f"cannot read {str(path)!r} as CSV with separator {sep!r}: {e}",
                        remedy=f"check the separator (separator=\"{';' if sep != ';' else ','}\" "
                               "when reading, or separator under [table] in the metadata) and "
                               "the declared column types") from None
    except OSError as e:
        raise DataError(f"cannot read {str(path)!r}: {e.strerror or e}",
                        remedy="check that the file is readable") from None


def _read_duckdb(path: Path, table: str | None) -> pa.Table:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()]
        if table is None:
            if len(names) != 1:
                raise DataError(f"DuckDB file {str(path)!r} holds {len(names)} tables {names}",
                                remedy="name one: FILE.duckdb:TABLE")
            table = names[0]
        if table not in names:
            raise DataError(f"DuckDB file {str(path)!r} has no table {table!r}",
                            remedy=f"tables there: {names}")
        return con.table(table).to_arrow_table()
    finally:
        con.close()


def write_table(table: pa.Table, dest: str | Path, *, separator: str = ",",
                format: str | None = None, table_name: str = "data") -> Path:
    """Write ``table`` to ``dest``; the format comes from ``format`` or the file suffix.

    CSV is written with a header and the given separator; ``.duckdb`` creates (or replaces)
    ``table_name`` in that database.
    """
    path = Path(dest)
    fmt = (format or _format_of(path)).lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        _write_csv(table, path, separator)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    elif fmt == "duckdb":
        import duckdb

        con = duckdb.connect(str(path))
        try:
            con.register("__statcurator_out", table)
            con.execute(f'CREATE OR REPLACE TABLE "{table_name}" AS SELECT * FROM __statcurator_out')
        finally:
            con.close()
    else:
        raise DataError(f"cannot write format {fmt!r}", remedy="use csv, parquet or duckdb")
    return path


def _format_of(path: Path) -> str:
    s = path.suffix.lower()
    if s in _CSV_SUFFIXES:
        return "csv"
    if s in _PARQUET_SUFFIXES:
        return "parquet"
    if s in _DUCKDB_SUFFIXES:
        return "duckdb"
    raise DataError(f"cannot tell the output format of {str(path)!r}",
                    remedy="end the file name in .csv, .parquet or .duckdb")


def _write_csv(table: pa.Table, path: Path, separator: str) -> None:
    # DuckDB's writer (about 4x faster than the csv module on 1M rows, BENCHMARKS.md): any
    # one-character separator, a header, and quotes only where needed, so that ARX and
    # spreadsheet tools read the result as is; "" (empty text) and NULL (nothing) differ.
    import duckdb

    if len(separator) != 1:
        raise DataError(f"the CSV separator must be one character, got {separator!r}",
                        remedy="use e.g. ',' or ';' or a tab")
    con = duckdb.connect()
    try:
        con.register("__statcurator_out", table)
        con.execute("COPY __statcurator_out TO ? (FORMAT csv, HEADER true, DELIMITER ?, "
                    "QUOTE '\"', ESCAPE '\"', NEW_LINE '\\n')", [str(path), separator])
    finally:
        con.close()


def to_format(table: pa.Table, fmt: str) -> Any:
    """Convert an Arrow table to ``"arrow"``, ``"pandas"``, ``"polars"`` or CSV text (``"csv"``)."""
    if fmt == "arrow":
        return table
    if fmt == "pandas":
        return table.to_pandas()
    if fmt == "polars":
        return polars().from_arrow(table)
    if fmt == "csv":
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "table.csv"
            _write_csv(table, out, ",")
            return out.read_text(encoding="utf-8")
    raise MetadataError(f"unknown format {fmt!r}", remedy="use arrow, pandas, polars or csv")


def polars() -> Any:
    """The polars module, an optional extra: a clear error when it is not installed."""
    try:
        import polars as pl
    except ImportError:
        raise DataError("Polars output needs the polars package, which is not installed",
                        remedy="pip install 'statcurator[polars]' (or use to_pandas() or the "
                               "Arrow table)") from None
    return pl
