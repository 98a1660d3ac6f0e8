"""Where the DuckDB engine lets private data touch the disk.

DuckDB moves tables and query intermediates out of memory when it runs short, by default
into ``.tmp`` in the working directory, where the files outlive a crash. The engine's own
connection spills instead into a directory only its user can read, removed on close; a frame
is copied into a temporary table (faster scans) only on that connection and only when it is
small beside DuckDB's memory limit; a connection passed in keeps its owner's settings and
gets no copies. Each test has its control: DuckDB left to its defaults spills into ``.tmp``.
"""

from __future__ import annotations

import os
import secrets
import stat

import duckdb
import pyarrow as pa
import pytest

from statcurator.engines.base import TableSource
from statcurator.engines.duckdb import DuckDBEngine

#: a GROUP BY over this many distinct 32-character strings spills under a 24 MB limit
ROWS = 400_000
SPILLING_QUERY = "SELECT s, COUNT(*) FROM p GROUP BY s ORDER BY s"


def _private_strings() -> pa.Table:
    return pa.table({"s": [secrets.token_hex(16) for _ in range(ROWS)]})


def _files(folder: str) -> list[str]:
    return [os.path.join(r, f) for r, _, fs in os.walk(folder) for f in fs]


def test_an_engine_spills_only_into_its_private_directory_and_removes_it(tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    engine = DuckDBEngine(threads=1)
    spill = engine._spill
    assert spill is not None and not os.path.exists(spill)  # made only when needed
    parent = os.stat(os.path.dirname(spill))
    assert parent.st_uid == os.getuid() and stat.S_IMODE(parent.st_mode) == 0o700
    engine.con.execute("SET memory_limit = '24MB'")
    engine.register("p", TableSource.from_arrow(_private_strings()))
    assert "p" not in engine._copied  # too big beside a 24 MB limit: read in place
    assert len(engine.con.execute(SPILLING_QUERY).fetchall()) == ROWS
    assert _files(spill), "the query was meant to spill"
    assert not os.path.exists(tmp_path / ".tmp")
    engine.close()
    assert not os.path.exists(spill)


def test_control_duckdb_left_to_its_defaults_spills_into_the_working_directory(tmp_path,
                                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute("SET memory_limit = '24MB'")
    con.register("p", _private_strings())
    assert len(con.execute(SPILLING_QUERY).fetchall()) == ROWS
    assert _files(str(tmp_path / ".tmp"))
    con.close()


def test_a_small_frame_is_copied_and_dropped_with_its_table() -> None:
    engine = DuckDBEngine()
    engine.register("t", TableSource.from_arrow(pa.table({"x": [1, 2, 3]})))
    assert engine._copied == {"t"}
    assert engine.con.execute("SELECT temporary FROM duckdb_tables() WHERE table_name = 't'"
                              ).fetchall() == [(True,)]
    engine.unregister("t")
    assert engine._copied == set()
    assert engine.con.execute("SELECT count(*) FROM duckdb_tables()").fetchall() == [(0,)]
    engine.close()


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_a_file_read_in_place_is_typed_only_when_its_view_fixes_the_types(tmp_path,
                                                                          kind) -> None:
    """A Parquet file's schema is read again by every query (the file may change under a
    registered view): its plans are still bound before each charge. A CSV view declares its
    columns' types: typed."""
    from statcurator.core.schema import Column, TableMeta

    path = tmp_path / f"t.{kind}"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 1::BIGINT AS x) TO '{path}' (FORMAT {kind})")
    con.close()
    engine = DuckDBEngine()
    engine.register("t", TableSource.from_path(path, column_types={"x": pa.int64()})
                    if kind == "csv" else TableSource.from_path(path))
    assert engine.declare_types("t", TableMeta("t", (Column("x", type="integer"),))) == []
    assert ("t" in engine._typed) is (kind == "csv")
    engine.close()


def test_only_the_process_that_made_the_spill_directory_removes_it(tmp_path) -> None:
    """A forked worker inherits the engine's exit hook; its exit must not remove the parent's
    directory (DuckDB would recreate it without the owner-only permissions)."""
    from statcurator.engines.duckdb import _remove_dir

    folder = tmp_path / "spill"
    folder.mkdir()
    _remove_dir(str(folder), os.getpid() + 1)  # as in a forked child
    assert folder.exists()
    _remove_dir(str(folder), os.getpid())
    assert not folder.exists()


def test_a_parent_directory_that_is_not_private_is_not_used(tmp_path, monkeypatch) -> None:
    """Another user could plant statcurator-<uid> in the shared temporary folder, open to
    all: it is then not trusted, and a new private directory is made instead."""
    from statcurator.engines.duckdb import _private_parent

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    planted = tmp_path / f"statcurator-{os.getuid()}"
    planted.mkdir(mode=0o777)
    os.chmod(planted, 0o777)
    chosen = _private_parent()
    assert chosen != str(planted) and stat.S_IMODE(os.stat(chosen).st_mode) == 0o700
    os.chmod(planted, 0o700)  # the control: the same directory, private, is reused
    assert _private_parent() == str(planted)
