"""A dataset: an Arrow table together with its declared metadata.

>>> import pyarrow as pa
>>> from statcurator.core.schema import Column, TableMeta
>>> meta = TableMeta("people", (Column("age", type="integer", role="qi"),))
>>> ds = Dataset("people", pa.table({"age": [30, 41], "note": ["a", "b"]}), meta)
>>> ds.num_rows, ds.meta.quasi_identifiers
(2, ('age',))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import MetadataError
from ..core.schema import Column, ColumnType, TableMeta
from .metadata import load_metadata
from .tables import read_table, to_format

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Dataset", "load_dataset", "infer_meta"]


@dataclass(frozen=True)
class Dataset:
    """A table (``pyarrow.Table``) and the metadata that declares what is public about it."""

    name: str
    table: pa.Table
    meta: TableMeta
    path: Path | None = None

    def __post_init__(self) -> None:
        missing = [c for c in self.meta.names if c not in self.table.column_names]
        if missing:
            raise MetadataError(
                f"metadata of {self.name!r} declares column(s) {missing} that the data lacks",
                remedy="data columns are: " + ", ".join(self.table.column_names))

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def to_pandas(self) -> Any:
        return to_format(self.table, "pandas")

    def to_polars(self) -> Any:
        """The table as a Polars DataFrame (needs the ``polars`` extra)."""
        return to_format(self.table, "polars")

    def with_meta(self, meta: TableMeta) -> Dataset:
        return Dataset(self.name, self.table, meta, self.path)

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, {self.num_rows} rows, columns={list(self.meta.names)}, "
                f"quasi_identifiers={list(self.meta.quasi_identifiers)})")


def infer_meta(table: pa.Table, name: str = "data") -> TableMeta:
    """Metadata for undeclared data: every column insensitive, types from the Arrow schema.

    Nothing public (bounds, categories, QIs) is inferred: those must be declared.
    """
    return TableMeta(name, tuple(Column(f.name, type=_column_type(f.type)) for f in table.schema))


def _column_type(t: Any) -> ColumnType:
    import pyarrow.types as pt

    if pt.is_boolean(t):
        return ColumnType.BOOLEAN
    if pt.is_integer(t):
        return ColumnType.INTEGER
    if pt.is_floating(t) or pt.is_decimal(t):
        return ColumnType.REAL
    return ColumnType.STRING


def load_dataset(data: Any, metadata: str | Path | TableMeta | None = None, *,
                 name: str | None = None, separator: str | None = None) -> Dataset:
    """Load data and metadata into a :class:`Dataset`.

    ``data`` is a path (CSV, Parquet, DuckDB), a metadata TOML whose ``source`` names the data,
    or an in-memory table (pandas, Polars, Arrow, a DuckDB relation). ``metadata`` is a TOML
    path or a :class:`TableMeta`; when it is omitted for a file ``x.csv``, a sibling ``x.toml``
    is used if present, otherwise every column is declared insensitive (no QIs, no bounds).
    Data columns the metadata does not mention are kept as insensitive columns. (Bundled
    names such as ``"adult"`` are :func:`statcurator.datasets.load_dataset`'s job.)

    >>> import pyarrow as pa
    >>> load_dataset(pa.table({"age": [30, 41]})).meta["age"].type
    <ColumnType.INTEGER: 'integer'>
    """
    path: Path | None = None
    if isinstance(data, str | Path):
        path = Path(data)
        if path.suffix.lower() == ".toml" and metadata is None:
            data, metadata, path = None, path, None  # the metadata names its data
        elif metadata is None and path.with_suffix(".toml").exists():
            metadata = path.with_suffix(".toml")
    meta: TableMeta | None
    if isinstance(metadata, TableMeta) or metadata is None:
        meta = metadata
    else:
        meta = load_metadata(metadata)
    if data is None:
        if meta is None or meta.source is None:
            raise MetadataError("no data given and the metadata names no source",
                                remedy="pass the data path, or add source = \"file.csv\" to [table]")
        path = Path(meta.source)
        data = path
    table = read_table(data, meta=meta, separator=separator)
    if meta is None:
        meta = infer_meta(table, name or (path.stem if path else "data"))
    else:
        extra = [f for f in table.schema if f.name not in meta]
        if extra:
            meta = meta.replace(columns=meta.columns + tuple(
                Column(f.name, type=_column_type(f.type)) for f in extra))
    return Dataset(name or meta.name, table, meta, path)
