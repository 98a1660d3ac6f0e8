"""The PostgreSQL ledger backend, for several curator processes on several machines.

Install the driver with ``pip install 'statcurator[postgres]'`` (psycopg 3). The semantics are
those of the SQLite backend, statement for statement:

* one table, ``ledger``, whose primary key ``seq`` is the chain position: every write is one
  autocommit INSERT at ``head + 1`` after one read, and a writer that read a stale head gets
  a unique violation and reads again (see :mod:`statcurator.accounting._backend`). This is
  the compare-and-swap a transaction-scoped advisory lock or a SERIALIZABLE transaction would
  otherwise give, in two statements per charge and without holding a lock across a round
  trip;
* append-only: a trigger refuses ``UPDATE``, ``DELETE`` and ``TRUNCATE`` and ``PUBLIC`` is
  revoked those rights. The owner of a table can drop its triggers, so for real separation
  run the curator under a role that was granted only ``SELECT, INSERT`` on a ledger created
  by another role (docs/ledger.md shows the statements); the hash chain detects the rest;
* exact amounts are text (``p/q``) with ``CHECK`` constraints, as in SQLite.

>>> PostgresBackend.__mro__[1].__name__
'LedgerBackend'
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from typing import Any

from ..core.errors import InvalidParameterError, LedgerError
from ._backend import (
    COLUMNS,
    ENTRY_TYPES,
    UNIQUE_INDEXES,
    ChainConflict,
    LedgerBackend,
    LedgerEntry,
    check_timeout,
    entry_filter,
    head_of,
    links_after,
)

__all__ = ["PostgresBackend"]

_VERSION_COMMENT = "statcurator privacy ledger, schema 2"
_COLS = ", ".join(COLUMNS)
_RATIONAL = r"^[0-9]+/[0-9]*[1-9][0-9]*$"
_AMOUNT = (r"^(pure:[0-9]+/[0-9]+|approx:[0-9]+/[0-9]+,[0-9]+/[0-9]+|zcdp:[0-9]+/[0-9]+)$")
_TYPES = ", ".join(f"'{t}'" for t in ENTRY_TYPES)
_BIGINT = {"seq", "grant_charges", "dataset_charges"}  # the other columns are text


def _schema(s: str) -> list[str]:
    checks = ",\n".join([*(f"CHECK ({c} IS NULL OR {c} ~ '{_RATIONAL}')"
                           for c in ("epsilon", "delta", "rho")),
                         *(f"CHECK ({c} IS NULL OR {c} ~ '{_AMOUNT}')"
                           for c in ("grant_total", "grant_spent", "dataset_total",
                                     "dataset_spent"))])
    return [
        f"CREATE SCHEMA IF NOT EXISTS {s}",
        f"""CREATE TABLE {s}.ledger (
            seq bigint PRIMARY KEY CHECK (seq > 0),
            type text NOT NULL CHECK (type IN ({_TYPES})),
            analyst text, dataset text, request_id text,
            kind text CHECK (kind IS NULL OR kind IN ('pure', 'approx', 'zcdp')),
            epsilon text, delta text, rho text,
            query text, mechanism text, payload text,
            grant_total text, grant_spent text, grant_charges bigint,
            dataset_total text, dataset_spent text, dataset_charges bigint,
            at text NOT NULL,
            prev_hash text NOT NULL,
            hash text NOT NULL,
            {checks})""",
        f"COMMENT ON TABLE {s}.ledger IS '{_VERSION_COMMENT}'",
        f"CREATE INDEX ledger_grants ON {s}.ledger (analyst, dataset, seq) "
        "WHERE type IN ('grant', 'charge')",
        f"CREATE INDEX ledger_datasets ON {s}.ledger (dataset, seq) "
        "WHERE type IN ('dataset_budget', 'charge')",
        f"CREATE UNIQUE INDEX ledger_charge_ids ON {s}.ledger (analyst, request_id) "
        "WHERE type = 'charge'",
        f"CREATE UNIQUE INDEX ledger_answer_ids ON {s}.ledger (analyst, request_id) "
        "WHERE type = 'answer'",
        f"""CREATE OR REPLACE FUNCTION {s}.ledger_append_only() RETURNS trigger
            LANGUAGE plpgsql AS $$ BEGIN
            RAISE EXCEPTION 'the privacy ledger is append-only: rows cannot be %',
                CASE TG_OP WHEN 'UPDATE' THEN 'changed' ELSE 'deleted' END;
            END $$""",
        f"CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON {s}.ledger "
        f"FOR EACH ROW EXECUTE FUNCTION {s}.ledger_append_only()",
        f"CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON {s}.ledger "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.ledger_append_only()",
        f"REVOKE UPDATE, DELETE, TRUNCATE ON {s}.ledger FROM PUBLIC",
    ]


_TRIGGERS = {"ledger_append_only", "ledger_no_truncate"}


class PostgresBackend(LedgerBackend):
    """A ledger in a PostgreSQL database (``dsn``: a ``postgresql://`` URL or a libpq
    connection string), in the table ``ledger`` of ``schema`` (created when missing).

    Several processes on several machines may share it. ``timeout`` bounds how long a
    connection attempt and a contended write may take, in seconds.
    ``Ledger(backend=PostgresBackend(dsn))`` is the ledger on it.
    """

    def __init__(self, dsn: str, *, schema: str = "public", timeout: float = 30.0) -> None:
        try:
            import psycopg
        except ImportError:  # pragma: no cover - depends on the installation
            raise LedgerError("the PostgreSQL ledger needs the psycopg driver",
                              remedy="pip install 'statcurator[postgres]'") from None
        if not isinstance(dsn, str) or not dsn.strip():
            raise InvalidParameterError(f"dsn must be a PostgreSQL connection string, got "
                                        f"{dsn!r}", remedy="pass postgresql://user@host/db")
        if not isinstance(schema, str) or not schema.isidentifier():
            raise InvalidParameterError(f"schema must be a plain identifier, got {schema!r}",
                                        remedy="pass schema='statcurator'")
        timeout = check_timeout(timeout)
        self._psycopg = psycopg
        self._dsn = dsn
        self._schema = schema
        self.timeout = float(timeout)
        self.location = _redacted(dsn, schema)
        self._q = f'"{schema}".ledger'
        self._conn: Any = None
        self._pid = os.getpid()
        self._conn = self._connect()
        self._migrate()

    # -- connection ---------------------------------------------------------------------------
    def _connect(self) -> Any:
        try:
            conn = self._psycopg.connect(self._dsn, autocommit=True,
                                         connect_timeout=max(1, int(self.timeout)))
            try:
                # a write that waits on another session's lock (its open transaction) gives
                # up after the timeout too, instead of holding the ledger and its writer
                conn.execute(f"SET lock_timeout = {max(1, int(self.timeout * 1000))}")
            except BaseException:
                conn.close()
                raise
            return conn
        except self._psycopg.Error as e:
            raise LedgerError(f"cannot connect to the ledger database {self.location} "
                              f"({_what(e)})",
                              remedy="check that PostgreSQL runs and the connection string "
                                     "(host, port, user, password, database) is right"
                              ) from None

    def _connection(self) -> Any:
        if self._conn is None:
            raise LedgerError(f"the ledger {self.location} is closed", remedy="open a new Ledger")
        if os.getpid() != self._pid:  # a connection must not cross fork(): reconnect
            self._conn = self._connect()
            self._pid = os.getpid()  # only once connected: a failed attempt is tried again
        return self._conn

    def _run(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        try:
            cur = self._connection().execute(sql, params)
            return cur.fetchall() if cur.description is not None else []
        except self._psycopg.errors.UniqueViolation as e:
            raise ChainConflict(str(e)) from None
        except self._psycopg.errors.LockNotAvailable:
            raise LedgerError(f"the ledger {self.location} stayed locked by another session "
                              f"for {self.timeout:g} s",
                              remedy="retry; if it lasts, look for a session holding a "
                                     "transaction open on the ledger's table") from None
        except self._psycopg.Error as e:
            raise LedgerError(f"the ledger {self.location} refused a statement ({_what(e)})",
                              remedy="the ledger is append-only; check the database and "
                                     "the role's rights") from None

    def _migrate(self) -> None:
        s = f'"{self._schema}"'
        conn = self._connection()
        try:
            with conn.transaction():
                # One creator at a time, across processes: a transaction-scoped lock.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                             (f"statcurator ledger {self._schema}",))
                row = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class'), "
                                   "to_regclass(%s) IS NOT NULL",
                                   (self._q, self._q)).fetchone()
                comment, exists = row
                if exists and comment != _VERSION_COMMENT:
                    raise LedgerError(f"{self.location} has a table 'ledger' that is not a "
                                      "statcurator ledger of this version",
                                      remedy="use another schema= for the ledger")
                if not exists:
                    for statement in _schema(s):
                        conn.execute(statement)
        except self._psycopg.errors.LockNotAvailable:
            raise LedgerError(f"the ledger {self.location} stayed locked by another session "
                              f"(creating it) for {self.timeout:g} s",
                              remedy="retry; if it lasts, look for a session holding a "
                                     "transaction open on the ledger") from None
        except self._psycopg.Error as e:
            raise LedgerError(f"cannot create the ledger in {self.location} ({_what(e)})",
                              remedy="check the role's rights to create tables") from None

    def close(self) -> None:
        if self._conn is not None and os.getpid() == self._pid:
            self._conn.close()
        self._conn = None

    # -- reading and appending ------------------------------------------------------------------
    def state(self, analyst: str | None, dataset: str | None,
              request_id: str | None) -> dict[str, LedgerEntry]:
        q = self._q
        sql = " UNION ALL ".join([
            f"(SELECT 'head', {_COLS} FROM {q} ORDER BY seq DESC LIMIT 1)",
            f"(SELECT 'grant', {_COLS} FROM {q} WHERE analyst = %(a)s AND dataset = %(d)s "
            "AND type IN ('grant', 'charge') ORDER BY seq DESC LIMIT 1)",
            f"(SELECT 'dataset', {_COLS} FROM {q} WHERE dataset = %(d)s "
            "AND type IN ('dataset_budget', 'charge') ORDER BY seq DESC LIMIT 1)",
            f"(SELECT 'charge', {_COLS} FROM {q} WHERE analyst = %(a)s AND request_id = %(r)s "
            "AND type = 'charge')",
            f"(SELECT 'answer', {_COLS} FROM {q} WHERE analyst = %(a)s AND request_id = %(r)s "
            "AND type = 'answer')",
        ])
        rows = self._run(sql, {"a": analyst, "d": dataset, "r": request_id})
        return {str(tag): LedgerEntry(*row) for tag, *row in rows}

    def head(self, analyst: str, request_id: str) -> tuple[int, str, bool] | None:
        q = self._q
        return head_of(self._run(
            f"SELECT seq, hash, EXISTS (SELECT 1 FROM {q} WHERE type = 'charge' "
            "AND analyst = %(a)s AND request_id = %(r)s) "
            f"FROM {q} ORDER BY seq DESC LIMIT 1", {"a": analyst, "r": request_id}))

    #: an append is a round trip to the server (and its commit): it runs beside the engine
    overlaps_appends = True

    def append(self, entry: LedgerEntry) -> None:
        placeholders = ", ".join(["%s"] * len(COLUMNS))
        self._run(f"INSERT INTO {self._q} ({_COLS}) VALUES ({placeholders})", entry.values())

    def append_after(self, entry: LedgerEntry, head: LedgerEntry) -> bool:
        if not links_after(entry, head):
            return False
        params = {f"c{i}": v for i, v in enumerate(entry.values())}
        params.update({f"h{i}": v for i, v in enumerate(head.values())})
        return bool(self._run(self._insert_after[entry.type], params))

    @functools.cached_property
    def _insert_after(self) -> dict[str, str]:
        """append_after's statements by the new row's type (this ledger's table is fixed:
        written once): the new row's values are %(c0)s.., the expected head's %(h0)s..
        (compared NULL-safely); an answer also needs its charge."""
        q = self._q

        def typed(mark: str) -> str:
            return ", ".join(f"%({mark}{i})s::{'bigint' if c in _BIGINT else 'text'}"
                             for i, c in enumerate(COLUMNS))

        at = {c: f"%(c{i})s" for i, c in enumerate(COLUMNS)}
        after_head = (f"INSERT INTO {q} ({_COLS}) SELECT {typed('c')} "
                      f"WHERE (SELECT max(seq) FROM {q}) = %(h0)s "
                      f"AND EXISTS (SELECT 1 FROM {q} WHERE seq = %(h0)s "
                      f"AND ({_COLS}) IS NOT DISTINCT FROM ({typed('h')}))")
        charged = (f" AND EXISTS (SELECT 1 FROM {q} WHERE type = 'charge' AND analyst = "
                   f"{at['analyst']} AND request_id = {at['request_id']} AND dataset = "
                   f"{at['dataset']})")
        return {"charge": f"{after_head} RETURNING seq",
                "answer": f"{after_head}{charged} RETURNING seq"}

    def entries(self, *, after: int = 0, upto: int | None = None, analyst: str | None = None,
                dataset: str | None = None,
                types: tuple[str, ...] | None = None) -> Iterator[LedgerEntry]:
        where, params = entry_filter("%s", after=after, upto=upto, analyst=analyst,
                                     dataset=dataset, types=types)
        sql = f"SELECT {_COLS} FROM {self._q} WHERE {where} ORDER BY seq LIMIT 5000"
        while True:  # pages by seq: a ledger of millions of rows is never held at once
            rows = self._run(sql, params)
            yield from (LedgerEntry(*row) for row in rows)
            if len(rows) < 5000:
                return
            params[0] = rows[-1][0]

    def latest(self, scope: str) -> list[LedgerEntry]:
        types, keys = {"grant": ("('grant', 'charge')", "analyst, dataset"),
                       "dataset": ("('dataset_budget', 'charge')", "dataset")}[scope]
        return [LedgerEntry(*row) for row in self._run(
            f"SELECT {_COLS} FROM {self._q} WHERE seq IN (SELECT max(seq) FROM {self._q} "
            f"WHERE type IN {types} GROUP BY {keys}) ORDER BY {keys}")]

    def counts(self) -> dict[str, int]:
        found = dict(self._run(f"SELECT type, count(*) FROM {self._q} GROUP BY type"))
        return {t: int(found.get(t, 0)) for t in ENTRY_TYPES}

    def problems(self) -> list[str]:
        rows = self._run("SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = "
                         "to_regclass(%s) AND NOT tgisinternal", (self._q,))
        enabled = {str(name) for name, state in rows if state != "D"}
        found = []
        if missing := _TRIGGERS - enabled:
            found.append(f"the append-only trigger(s) {sorted(missing)} were dropped or "
                         "disabled")
        unique = {str(name) for name, definition in self._run(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid, 0, true) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indisvalid",
            (self._q,))
            if str(name) in UNIQUE_INDEXES and str(definition).endswith(
                " USING btree (analyst, request_id) WHERE type = "
                f"'{UNIQUE_INDEXES[str(name)]}'::text")}
        if dropped := set(UNIQUE_INDEXES) - unique:
            found.append(f"the unique index(es) {sorted(dropped)} were dropped")
        return found

    def __repr__(self) -> str:
        return f"PostgresBackend({self.location!r})"


def table_exists(dsn: str, schema: str, table: str) -> bool:
    """Whether ``schema.table`` exists in the database of ``dsn``, read only (nothing is
    created: a reading command must not make a mistyped schema)."""
    try:
        import psycopg
    except ImportError:
        raise LedgerError("the PostgreSQL ledger needs the psycopg driver",
                          remedy="pip install 'statcurator[postgres]'") from None
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."{table}"',)).fetchone()
    except psycopg.Error as e:
        what, state = _what(e), getattr(getattr(e, "diag", None), "sqlstate", None)
        if isinstance(e, psycopg.OperationalError) and not state:
            raise LedgerError(f"cannot connect to the database {_redacted(dsn, schema)} "
                              f"({what})",
                              remedy="check the DSN (user, host, port, database, password) and "
                                     "that the database is running") from None
        raise LedgerError(f"the database {_redacted(dsn, schema)} refused to say whether "
                          f"{schema}.{table} exists ({what})",
                          remedy="check the role's permissions on the database and the "
                                 "schema") from None
    return row is not None and row[0] is not None


def _what(e: BaseException) -> str:
    """A driver error for a message: its class and SQLSTATE only — the driver's text may
    quote the connection string, password included (a malformed one is echoed whole)."""
    state = getattr(getattr(e, "diag", None), "sqlstate", None)
    return type(e).__name__ + (f", SQLSTATE {state}" if state else "")


def _redacted(dsn: str, schema: str) -> str:
    """The connection target for messages, never with its password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - only for display
        return "postgresql://?"
    user = f"{info['user']}@" if info.get("user") else ""
    host = info.get("host") or "localhost"
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{host}{port}/{info.get('dbname', '')}#{schema}"
