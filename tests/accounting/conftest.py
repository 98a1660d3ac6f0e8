"""Ledger fixtures: the same tests run on an in-memory ledger, an SQLite file and PostgreSQL.

The PostgreSQL server is a throwaway one on loopback (see ``_postgres.py``), started once per
test process and stopped at the end; each test gets its own schema. Without the PostgreSQL
binaries (or the psycopg driver) the PostgreSQL cases are skipped, saying what installs them.
"""

from __future__ import annotations

import sqlite3
import uuid
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from statcurator.accounting import Ledger

from . import _postgres


@pytest.fixture(scope="session")
def pg_dsn():
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    if _postgres.binaries() is None:
        pytest.skip(_postgres.INSTALL_HINT)
    with _postgres.throwaway_server() as dsn:
        yield dsn


class Store:
    """Where a test's ledger lives, with raw access for the tampering tests."""

    def __init__(self, kind: str, tmp_path: Path, dsn: str | None = None) -> None:
        self.kind = kind
        self.path = tmp_path / "l.db"
        self.dsn = dsn
        self.schema = f"t{uuid.uuid4().hex[:12]}"
        self._memory: Ledger | None = None

    @property
    def persistent(self) -> bool:
        return self.kind != "memory"

    def open(self, **kw: Any) -> Ledger:
        if self.kind == "memory":
            if self._memory is None:
                self._memory = Ledger(**kw)
            return self._memory
        if self.kind == "sqlite":
            return Ledger(self.path, **kw)
        from statcurator.accounting import PostgresBackend

        timeout = kw.pop("timeout", 30.0)
        return Ledger(backend=PostgresBackend(self.dsn, schema=self.schema, timeout=timeout),
                      **kw)

    def target(self) -> str:
        """What a worker process passes to open_ledger() to reach the same ledger."""
        return str(self.path) if self.kind == "sqlite" else f"{self.dsn}#{self.schema}"

    # -- raw access, bypassing the ledger -------------------------------------------------
    def sql(self, statement: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            with sqlite3.connect(self.path, isolation_level=None) as raw:
                rows = raw.execute(statement, params).fetchall()
            raw.close()
            return rows
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as raw:
            raw.execute(f"SET search_path TO {self.schema}")
            cur = raw.execute(statement.replace("?", "%s"), params)
            return cur.fetchall() if cur.description is not None else []

    def drop_triggers(self) -> None:
        if self.kind == "sqlite":
            for op in ("update", "delete"):
                self.sql(f"DROP TRIGGER ledger_append_only_{op}")
        else:
            self.sql("DROP TRIGGER ledger_append_only ON ledger")
            self.sql("DROP TRIGGER ledger_no_truncate ON ledger")

    def restore_triggers(self) -> None:
        """Put the triggers back, as an attacker covering their tracks would."""
        if self.kind == "sqlite":
            from statcurator.accounting._sqlite import _SCHEMA

            for statement in _SCHEMA:
                if "TRIGGER" in statement:
                    self.sql(statement)
        else:
            from statcurator.accounting._postgres import _schema

            for statement in _schema(self.schema):
                if statement.startswith("CREATE TRIGGER"):
                    self.sql(statement)

    def rewrite(self, *statements: str | tuple[str, tuple[object, ...]]) -> None:
        """Change rows behind the ledger's back, as an attacker with write access to the
        store would: drop the append-only triggers, run ``statements`` (text, or (text,
        parameters)), and put the triggers back."""
        self.drop_triggers()
        for statement in statements:
            if isinstance(statement, tuple):
                self.sql(*statement)
            else:
                self.sql(statement)
        self.restore_triggers()

    def spent(self, dataset: str = "adult") -> Fraction:
        """What the rows say was charged, summed here independently of the ledger's code."""
        rows = self.sql("SELECT epsilon FROM ledger WHERE type = 'charge' AND dataset = ?",
                        (dataset,))
        return sum((Fraction(e) for (e,) in rows), Fraction(0))


def _store(request, tmp_path: Path) -> Store:
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None
    return Store(request.param, tmp_path, dsn)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request, tmp_path: Path) -> Store:
    return _store(request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def persistent_store(request, tmp_path: Path) -> Store:
    return _store(request, tmp_path)


@pytest.fixture
def led(store: Store):
    ledger = store.open()
    yield ledger
    ledger.close()
