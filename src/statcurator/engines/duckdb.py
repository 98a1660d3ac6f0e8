"""The DuckDB engine (default): embedded, reads Arrow/pandas/Polars frames and CSV, Parquet
and DuckDB files in place, and returns exact aggregates (integer sums widen to HUGEINT).

>>> import pyarrow as pa
>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> from statcurator.query.compiler import compile_query
>>> from statcurator.query.sql import parse_sql
>>> from .base import TableSource, result_from_rows
>>> data = pa.table({"age": [30, 40, None, 200], "sex": ["F", "M", "F", "F"]})
>>> meta = TableMeta("t", (Column("age", type="integer", bounds=(0, 120)),
...                        Column("sex", categories=("F", "M"))))
>>> cat = DictCatalog({"t": TableInfo.from_schema("t", meta, data.schema)})
>>> cq = compile_query(parse_sql("SELECT sex, COUNT(*), SUM(age) FROM t GROUP BY sex", cat), cat)
>>> eng = DuckDBEngine()
>>> eng.register("t", TableSource.from_arrow(data))
>>> sorted(eng.execute(cq.engine_plan, salt="00").groups.items())
[(('F',), (3, 150)), (('M',), (1, 40))]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from ..core.errors import EngineError
from ..query.relational import EnginePlan, ExactResult
from .base import TableSource, result_from_rows
from .sqlgen import _check_salt, plan_sql, plan_template, quote

if TYPE_CHECKING:
    from ..core.schema import TableMeta

__all__ = ["DuckDBEngine", "duckdb_type"]


def duckdb_type(arrow_type: Any) -> str:
    """The DuckDB type an Arrow type is read as (for CSV files read in place)."""
    import pyarrow.types as pt

    if pt.is_boolean(arrow_type):
        return "BOOLEAN"
    if pt.is_int8(arrow_type) or pt.is_int16(arrow_type) or pt.is_int32(arrow_type):
        return "INTEGER"
    if pt.is_integer(arrow_type):
        return "BIGINT"
    if pt.is_floating(arrow_type):
        return "DOUBLE"
    if pt.is_date(arrow_type):
        return "DATE"
    if pt.is_timestamp(arrow_type):
        return "TIMESTAMP"
    return "VARCHAR"


class DuckDBEngine:
    """Run compiled plans on an embedded DuckDB connection.

    ``database`` is ``":memory:"`` (default) or a DuckDB file; ``threads`` limits DuckDB's
    worker threads (None: DuckDB's default, all cores). On a connection it makes, the engine
    sends what DuckDB spills under memory pressure to a directory only its user can read
    (removed on :meth:`close` or at exit) and copies small frames into temporary tables; a
    ``connection`` passed in keeps its owner's settings and has its frames read in place.
    """

    name = "duckdb"

    def __init__(self, database: str = ":memory:", *, threads: int | None = None,
                 connection: Any = None) -> None:
        import duckdb

        self.con = connection if connection is not None else duckdb.connect(database)
        #: whether this engine made the connection (then it sets where DuckDB spills, and may
        #: copy frames into it); a connection passed in keeps its owner's settings
        self._owned = connection is None
        self._spill: str | None = None
        if self._owned:
            # what DuckDB moves out of memory under pressure (tables, query intermediates:
            # private data) goes to a directory only this user can read, removed on close,
            # not to DuckDB's default ".tmp" in the working directory
            self._spill = os.path.join(_private_parent(), f"duckdb-{uuid.uuid4().hex}")
            self.con.execute(f"SET temp_directory = {_str(self._spill)}")  # made on first spill
            self._cleanup = weakref.finalize(self, _remove_dir, self._spill, os.getpid())
        if threads is not None:
            self.con.execute(f"SET threads = {int(threads)}")
        self._lock = threading.Lock()
        self._attached: dict[str, str] = {}
        self.tables: dict[str, TableSource] = {}
        #: frames copied into temporary tables (the others are read as Arrow views)
        self._copied: set[str] = set()
        # statement text (salt as parameter $1) -> name of its prepared statement (prepared
        # before the charge for a table that is not typed, or when a statement runs again)
        self._prepared: dict[str, str] = {}
        self._counter = 0
        #: tables whose data types were checked against their metadata at registration:
        #: plans over them only are not prepared before the charge (see :meth:`validate`)
        self._typed: set[str] = set()
        #: statements run once without preparation (prepared if they run again)
        self._ran: set[str] = set()

    def register(self, name: str, source: TableSource) -> None:
        with self._lock:
            self._drop(name)
            q = quote(name)
            if source.kind == "arrow" and self._copies(source.data):
                # copied into DuckDB's own columnar storage, a temporary table (never part of
                # a database file; spilled, if ever, to this engine's private directory):
                # scans run 15-40% faster than over the Arrow view, for about the frame's
                # size in memory
                view = f"__sc_arrow_{uuid.uuid4().hex}"
                self.con.register(view, source.data)
                try:
                    self.con.execute(f"CREATE TEMP TABLE {q} AS SELECT * FROM {quote(view)}")
                finally:
                    self.con.unregister(view)
                self._copied.add(name)
            elif source.kind == "arrow":
                self.con.register(name, source.data)
            elif source.kind == "parquet":
                self.con.execute(f"CREATE VIEW {q} AS SELECT * FROM read_parquet({_str(source.path)})")
            elif source.kind == "csv":
                cols = ", ".join(f"{_str(f.name)}: {_str(duckdb_type(f.type))}" for f in source.schema)
                strings = [f.name for f in source.schema if duckdb_type(f.type) == "VARCHAR"]
                force = (", force_not_null = [" + ", ".join(_str(s) for s in strings) + "]") \
                    if strings else ""
                self.con.execute(
                    f"CREATE VIEW {q} AS SELECT * FROM read_csv({_str(source.path)}, "
                    f"delim = {_str(source.separator)}, header = true, "
                    f"columns = {{{cols}}}{force})")
            elif source.kind == "duckdb":
                alias = f"__src_{len(self._attached)}_{abs(hash(source.path)) % 10**8}"
                self.con.execute(f"ATTACH {_str(source.path)} AS {quote(alias)} (READ_ONLY)")
                self._attached[name] = alias
                self.con.execute(f"CREATE VIEW {q} AS SELECT * FROM {quote(alias)}.{quote(source.table)}")
            else:
                raise EngineError(f"DuckDB cannot read a {source.kind!r} source",
                                  remedy="use arrow, parquet, csv or duckdb sources")
            self.tables[name] = source

    def _drop(self, name: str) -> None:
        self._deallocate_all()
        self._typed.discard(name)
        if name not in self.tables:
            return
        src = self.tables.pop(name)
        if name in self._copied:
            self._copied.discard(name)
            self.con.execute(f"DROP TABLE IF EXISTS temp.main.{quote(name)}")
        elif src.kind == "arrow":
            self.con.unregister(name)
        else:
            self.con.execute(f"DROP VIEW IF EXISTS {quote(name)}")
        alias = self._attached.pop(name, None)
        if alias:
            self.con.execute(f"DETACH {quote(alias)}")

    def unregister(self, name: str) -> None:
        with self._lock:
            self._drop(name)

    def close(self) -> None:
        with self._lock:
            self.con.close()
            if self._spill is not None:
                self._cleanup()

    def _copies(self, data: Any) -> bool:
        """Whether a frame is copied into a temporary table: only on this engine's own
        connection, and only when it takes at most a quarter of DuckDB's memory limit."""
        if not self._owned:
            return False
        ((setting,),) = self.con.execute("SELECT current_setting('memory_limit')").fetchall()
        limit = _bytes(str(setting))
        return limit is not None and int(getattr(data, "nbytes", limit)) * 4 <= limit

    def declare_types(self, name: str, meta: TableMeta) -> list[str]:
        """Check the registered data's column types against ``meta`` (once, at
        registration): the mismatches, as text. A table without mismatches is *typed*: the
        statements compiled from its metadata bind on its data by construction, so
        :meth:`validate` does not prepare them (a second DuckDB planning of every new
        statement); a table with mismatches keeps the preparation before each charge. So
        does a Parquet file, whose schema is read again by every query (the file may have
        changed since); a frame's, a CSV view's (its columns are typed in the view) and a
        read-only DuckDB file's types are fixed at registration.

        >>> import pyarrow as pa
        >>> from statcurator.engines.base import TableSource
        >>> from statcurator.core.schema import Column, TableMeta
        >>> eng = DuckDBEngine()
        >>> eng.register("t", TableSource.from_arrow(pa.table({"x": [1, 2], "s": ["a", "b"]})))
        >>> eng.declare_types("t", TableMeta("t", (Column("x", type="integer"), Column("s"))))
        []
        >>> eng.declare_types("t", TableMeta("t", (Column("x", type="string"),)))
        ["column 'x' is declared string but its data is BIGINT"]
        """
        with self._lock:
            self._typed.discard(name)
            try:
                found = {str(r[0]): str(r[1]).upper()
                         for r in self.con.execute(f"DESCRIBE {quote(name)}").fetchall()}
            except Exception as e:  # duckdb's own exception classes: then not typed
                return [f"the types of {name!r} could not be read ({type(e).__name__})"]
            wrong = []
            for col in meta.columns:
                actual = found.get(col.name)
                if actual is None or not _type_fits(str(col.type), actual):
                    wrong.append(f"column {col.name!r} is declared {col.type} but its data is "
                                 f"{actual or 'missing'}")
            source = self.tables.get(name)
            if not wrong and source is not None and source.kind != "parquet":
                self._typed.add(name)
            return wrong

    def column_kinds(self, name: str) -> dict[str, str]:
        """The kind (``integer``, ``real``, ``string``, ``boolean`` or ``other``) of each
        column of a registered table, as DuckDB reads it: the curator checks at
        registration that the compiler's kinds (from the data's Arrow schema) are these.

        >>> import pyarrow as pa
        >>> from statcurator.engines.base import TableSource
        >>> eng = DuckDBEngine()
        >>> eng.register("t", TableSource.from_arrow(pa.table({"x": [1], "s": ["a"]})))
        >>> eng.column_kinds("t")
        {'x': 'integer', 's': 'string'}
        """
        with self._lock:
            rows = self.con.execute(f"DESCRIBE {quote(name)}").fetchall()
        return {str(r[0]): _duckdb_kind(str(r[1])) for r in rows}

    def sql(self, plan: EnginePlan, salt: str = "0") -> tuple[str, list[str]]:
        """The statements this engine runs for ``plan`` (for ``explain``)."""
        return plan_sql(plan, salt)

    def _deallocate_all(self) -> None:
        for name in self._prepared.values():
            self.con.execute(f"DEALLOCATE {name}")
        self._prepared.clear()
        self._ran.clear()

    def _prepare(self, text: str) -> str:
        """The name of ``text`` prepared on the connection (``PREPARE`` binds names and
        types and plans the statement, reading no row). Call with the lock held."""
        name = self._prepared.get(text)
        if name is None:
            if len(self._prepared) >= _MAX_PREPARED:
                oldest = next(iter(self._prepared))
                self.con.execute(f"DEALLOCATE {self._prepared.pop(oldest)}")
            name = f"__sc_p{self._counter}"
            self._counter += 1
            self.con.execute(f"PREPARE {name} AS {text}")
            self._prepared[text] = name
        return name

    def validate(self, plan: EnginePlan) -> None:
        """Bind the plan's statements against the registered tables without running them.

        DuckDB's ``PREPARE`` resolves names and types and reads no rows, so a query that the
        data's actual types cannot run (metadata that says integer over a DATE column, say)
        is refused here, before any budget is charged, instead of failing after it. The
        prepared statements are what :meth:`execute` then runs with the release's salt.

        A plan that reads only *typed* tables (:meth:`declare_types`: every declared type
        matches the data's) is not prepared: its statements are generated from metadata
        the data was checked against, so binding them cannot fail on the data's types, and
        DuckDB plans each new statement once instead of twice.
        """
        if all(scan.table in self._typed for scan in plan.relation.scans()):
            return
        main, hists, _ = plan_template(plan)
        try:
            with self._lock:
                for stmt in (main, *hists):
                    self._prepare(stmt)
        except Exception as e:
            raise EngineError(
                f"DuckDB cannot run this query on the registered data ({type(e).__name__}); "
                "nothing was charged",
                remedy="the data owner should check that the registered data's column types "
                       "match its metadata (the cause is chained)") from e

    def execute(self, plan: EnginePlan, *, salt: str) -> ExactResult:
        main, hists, salted = plan_template(plan)
        _check_salt(salt)
        try:
            with self._lock:
                rows, *hist_rows = [self._run(s, salt if salted else None)
                                    for s in (main, *hists)]
        except Exception as e:  # duckdb raises its own exception classes
            # the engine's message may quote a private value (a failed conversion): it stays
            # in the chained cause, for the data owner, and out of what analysts see
            raise EngineError(f"DuckDB failed to run the compiled query ({type(e).__name__})",
                              remedy="the data owner should check that the registered data "
                                     "matches its metadata (the cause is chained)") from e
        return result_from_rows(plan, rows, hist_rows)

    def _run(self, statement: str, salt: str | None) -> list[Any]:
        """The rows of one statement: its prepared form when it has one (prepared by
        :meth:`validate`, or on its second run: a query asked again is planned once), else
        the text itself; the salt (hexadecimal) is its parameter. Call with the lock held."""
        name = self._prepared.get(statement)
        if name is None and statement in self._ran:
            name = self._prepare(statement)
        if name is not None:
            args = "" if salt is None else f"('{salt}')"
            return self.con.execute(f"EXECUTE {name}{args}").fetchall()
        if len(self._ran) >= _MAX_PREPARED:
            self._ran.clear()
        self._ran.add(statement)
        if salt is None:
            return self.con.execute(statement).fetchall()
        return self.con.execute(statement, [salt]).fetchall()


#: prepared statements kept per connection (the oldest is deallocated beyond this)
_MAX_PREPARED = 512

#: the DuckDB types that hold each declared column type (see DuckDBEngine.declare_types)
_FITS = {
    "integer": {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"},
    "real": {"FLOAT", "DOUBLE"},
    "string": {"VARCHAR"},
    "boolean": {"BOOLEAN"},
}


def _private_parent() -> str:
    """A directory only this user can enter, for the engines' spill directories (each
    made by DuckDB inside it on its first spill, so an engine that never spills leaves
    nothing): ``statcurator-<uid>`` in the system's temporary folder, reused when it is this
    user's own directory with owner-only permissions, else a new private directory."""
    uid = getattr(os, "getuid", lambda: None)()
    if uid is not None:
        path = os.path.join(tempfile.gettempdir(), f"statcurator-{uid}")
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077:
            return path
    return tempfile.mkdtemp(prefix="statcurator-")  # someone else's, or a link: not trusted


def _remove_dir(path: str, owner: int) -> None:
    """Remove an engine's spill directory, in the process that made it only (a forked child
    exiting must not remove its parent's)."""
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)


_UNITS = {"bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _bytes(text: str) -> int | None:
    """A DuckDB size setting in bytes (None when it reads otherwise).

    >>> _bytes("18.6 GiB") == int(18.6 * 2**30), _bytes("512.0 MiB"), _bytes("n/a")
    (True, 536870912, None)
    """
    parts = text.strip().split()
    if len(parts) != 2 or parts[1].lower() not in _UNITS:
        return None
    try:
        return int(float(parts[0]) * _UNITS[parts[1].lower()])
    except ValueError:
        return None


def _duckdb_kind(actual: str) -> str:
    """The kind of a DuckDB column type (an ENUM compares as its text; a DECIMAL is real)."""
    t = actual.upper()
    for kind, types in _FITS.items():
        if t in types:
            return kind
    if t.startswith("DECIMAL("):
        return "real"
    if t.startswith(("ENUM(", "VARCHAR")):
        return "string"
    return "other"


def _type_fits(declared: str, actual: str) -> bool:
    return actual in _FITS.get(declared, ()) or (declared == "real"
                                                 and actual.startswith("DECIMAL("))


def _str(s: Any) -> str:
    return "'" + str(s).replace("'", "''") + "'"
