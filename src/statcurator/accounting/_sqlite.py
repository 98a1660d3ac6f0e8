"""The SQLite ledger backend: one file in WAL mode (or a private in-memory database).

Why these settings:

* ``journal_mode=WAL`` lets analysts read budgets while another process charges;
* ``BEGIN IMMEDIATE`` takes the single writer lock *before* reading what is spent, so two
  processes can never both see the same remaining budget and both spend it;
* ``synchronous=FULL`` makes every committed charge survive a power cut, not only a crash of
  the process: a charge lost after its answer was released would be privacy spent unrecorded;
* triggers refuse ``UPDATE`` and ``DELETE`` on every table: the ledger is append-only, an
  audit trail rather than a balance;
* ``CHECK`` constraints keep privacy amounts as exact ``numerator/denominator`` text, so
  not even another program writing to the file can slip a float in.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..core.errors import InvalidParameterError, LedgerError
from ._backend import BudgetRecord, ChargeRecord, LedgerBackend

__all__ = ["SQLiteBackend", "APPLICATION_ID", "SCHEMA_VERSION"]

#: ``PRAGMA application_id`` of a statcurator ledger ("ScLg"), so that another program's
#: SQLite file is never mistaken for (or silently turned into) a ledger.
APPLICATION_ID = 0x53634C67
SCHEMA_VERSION = 1

_RATIONAL = ("({c} IS NULL OR (typeof({c}) = 'text' AND {c} GLOB '[0-9]*/[1-9]*' "
             "AND {c} NOT GLOB '*[^0-9/]*'))")
_LOSS_CHECKS = ", ".join(f"CHECK {_RATIONAL.format(c=c)}" for c in ("epsilon", "delta", "rho")) + (
    ", CHECK ((kind = 'pure' AND epsilon IS NOT NULL AND delta IS NULL AND rho IS NULL)"
    " OR (kind = 'approx' AND epsilon IS NOT NULL AND delta IS NOT NULL AND rho IS NULL)"
    " OR (kind = 'zcdp' AND epsilon IS NULL AND delta IS NULL AND rho IS NOT NULL))")

_SCHEMA = [
    f"""CREATE TABLE IF NOT EXISTS budgets (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        analyst TEXT NOT NULL CHECK (length(analyst) > 0),
        dataset TEXT NOT NULL CHECK (length(dataset) > 0),
        kind TEXT NOT NULL,
        epsilon TEXT, delta TEXT, rho TEXT,
        set_at TEXT NOT NULL,
        {_LOSS_CHECKS})""",
    "CREATE INDEX IF NOT EXISTS budgets_by_pair ON budgets (analyst, dataset, seq)",
    f"""CREATE TABLE IF NOT EXISTS charges (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        request_id TEXT NOT NULL UNIQUE CHECK (length(request_id) > 0),
        analyst TEXT NOT NULL CHECK (length(analyst) > 0),
        dataset TEXT NOT NULL CHECK (length(dataset) > 0),
        kind TEXT NOT NULL,
        epsilon TEXT, delta TEXT, rho TEXT,
        query TEXT NOT NULL,
        mechanism TEXT NOT NULL,
        charged_at TEXT NOT NULL,
        {_LOSS_CHECKS})""",
    "CREATE INDEX IF NOT EXISTS charges_by_pair ON charges (analyst, dataset, seq)",
    """CREATE TABLE IF NOT EXISTS answers (
        request_id TEXT PRIMARY KEY REFERENCES charges (request_id),
        payload TEXT NOT NULL CHECK (typeof(payload) = 'text'),
        stored_at TEXT NOT NULL)""",
    *(f"CREATE TRIGGER IF NOT EXISTS {table}_append_only_{op.lower()} BEFORE {op} ON {table} "
      f"BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only: {table} cannot be "
      f"{'changed' if op == 'UPDATE' else 'deleted'}'); END"
      for table in ("budgets", "charges", "answers") for op in ("UPDATE", "DELETE")),
]

_CHARGE_COLUMNS = ("c.seq, c.request_id, c.analyst, c.dataset, c.kind, c.epsilon, c.delta, "
                   "c.rho, c.query, c.mechanism, c.charged_at, a.request_id IS NOT NULL")


@contextmanager
def _translated(location: str, timeout: float) -> Iterator[None]:
    """Turn sqlite3's errors into :class:`LedgerError` with a remedy."""
    try:
        yield
    except sqlite3.IntegrityError as e:
        raise LedgerError(f"the ledger {location} refused a write ({e})",
                          remedy="the ledger is append-only; record a new entry instead") from e
    except sqlite3.OperationalError as e:
        text = str(e).lower()
        if "locked" in text or "busy" in text:
            raise LedgerError(
                f"the ledger {location} stayed locked by another process for {timeout:g} s",
                remedy="retry, or open the Ledger with a longer timeout=") from e
        raise LedgerError(f"the ledger {location} cannot be used ({e})",
                          remedy="check that the file and its folder are writable") from e
    except sqlite3.DatabaseError as e:
        raise LedgerError(f"{location} cannot be read as a ledger ({e})",
                          remedy="pass the path of a statcurator ledger, or a new file name") from e


class SQLiteBackend(LedgerBackend):
    """A ledger in one SQLite file (WAL mode), or in memory when ``path`` is ``None``.

    Several processes may open the same file: writers are serialized by SQLite's lock and
    wait up to ``timeout`` seconds for it. An in-memory ledger is private to this object.

    >>> b = SQLiteBackend()
    >>> b.location, b.persistent
    (':memory:', False)
    >>> b.counts()
    {'budgets': 0, 'charges': 0, 'answers': 0}
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 timeout: float = 30.0) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
                or not math.isfinite(timeout) or timeout <= 0:
            raise InvalidParameterError(f"timeout must be a positive number of seconds, got "
                                        f"{timeout!r}", remedy="pass timeout=30")
        memory = path is None or str(path) == ":memory:"
        self._path = None if memory else Path(path).expanduser()  # type: ignore[arg-type]
        self.location = ":memory:" if memory else str(self._path)
        self._timeout = float(timeout)
        self._orphans: list[sqlite3.Connection] = []
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._conn = self._connect()

    @property
    def persistent(self) -> bool:
        return self._path is not None

    @property
    def path(self) -> Path | None:
        """The ledger file, or ``None`` in memory."""
        return self._path

    # -- connection ---------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._path is not None and not self._path.parent.is_dir():
            raise LedgerError(f"the folder of the ledger {self.location} does not exist",
                              remedy=f"create {self._path.parent} first, or choose another path")
        with _translated(self.location, self._timeout):
            conn = sqlite3.connect(self.location, timeout=self._timeout, isolation_level=None,
                                   check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
                if self._path is not None:
                    self._enable_wal(conn)
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = ON")
                self._migrate(conn)
            except BaseException:
                conn.close()
                raise
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL needs a moment of exclusive access; a process opening the same
        # new file at the same instant can make it report "locked" even with a busy timeout.
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        if str(mode).lower() != "wal":
            raise LedgerError(f"the ledger {self.location} cannot use SQLite's WAL journal "
                              f"(got {mode!r})",
                              remedy="put the ledger on a local disk (WAL needs shared memory, "
                                     "which network file systems lack)")

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            objects = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if objects and app != APPLICATION_ID:
                raise LedgerError(f"{self.location} is an SQLite database but not a statcurator "
                                  "ledger", remedy="choose a new file name for the ledger")
            if version > SCHEMA_VERSION:
                raise LedgerError(f"the ledger {self.location} was written by a newer statcurator "
                                  f"(schema {version} > {SCHEMA_VERSION})",
                                  remedy="upgrade statcurator to open it")
            if version < SCHEMA_VERSION:
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LedgerError(f"the ledger {self.location} is closed", remedy="open a new Ledger")
        if os.getpid() != self._pid:
            # A connection must not cross fork(): the child opens its own. The inherited one
            # is kept referenced, never closed, so that its destructor cannot disturb the
            # parent's locks or WAL files.
            if self._path is None:
                raise LedgerError("an in-memory ledger cannot be shared with a child process",
                                  remedy="open the Ledger on a file to share it between processes")
            self._orphans.append(self._conn)
            self._pid = os.getpid()
            self._conn = self._connect()
        return self._conn

    def close(self) -> None:
        if self._conn is not None and os.getpid() == self._pid:
            self._conn.close()
        self._conn = None

    # -- transactions ---------------------------------------------------------------------------
    @contextmanager
    def _transaction(self, begin: str) -> Iterator[None]:
        conn = self._connection()
        with _translated(self.location, self._timeout):
            conn.execute(begin)
        try:
            with _translated(self.location, self._timeout):
                yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        try:
            with _translated(self.location, self._timeout):
                conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def write(self) -> Iterator[None]:  # type: ignore[override]
        """``BEGIN IMMEDIATE``: the writer lock is held from the first read to the commit."""
        return self._transaction("BEGIN IMMEDIATE")

    def read(self) -> Iterator[None]:  # type: ignore[override]
        """``BEGIN`` (deferred): one snapshot for every read until the commit."""
        return self._transaction("BEGIN")

    # -- queries --------------------------------------------------------------------------------
    def _rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        return self._connection().execute(sql, params).fetchall()

    def latest_budget(self, analyst: str, dataset: str) -> BudgetRecord | None:
        rows = self._rows("SELECT seq, analyst, dataset, kind, epsilon, delta, rho, set_at "
                          "FROM budgets WHERE analyst = ? AND dataset = ? "
                          "ORDER BY seq DESC LIMIT 1", (analyst, dataset))
        return BudgetRecord(*rows[0]) if rows else None  # type: ignore[arg-type]

    def budget_keys(self) -> list[tuple[str, str]]:
        return [(str(a), str(d)) for a, d in
                self._rows("SELECT DISTINCT analyst, dataset FROM budgets ORDER BY 1, 2")]

    def insert_budget(self, analyst: str, dataset: str, kind: str, epsilon: str | None,
                      delta: str | None, rho: str | None, set_at: str) -> int:
        cur = self._connection().execute(
            "INSERT INTO budgets (analyst, dataset, kind, epsilon, delta, rho, set_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", (analyst, dataset, kind, epsilon, delta, rho, set_at))
        return int(cur.lastrowid)  # type: ignore[arg-type]

    def charges(self, analyst: str | None = None, dataset: str | None = None,
                after: int = 0) -> list[ChargeRecord]:
        where, params = ["c.seq > ?"], [after]
        if analyst is not None:
            where.append("c.analyst = ?")
            params.append(analyst)  # type: ignore[arg-type]
        if dataset is not None:
            where.append("c.dataset = ?")
            params.append(dataset)  # type: ignore[arg-type]
        rows = self._rows(f"SELECT {_CHARGE_COLUMNS} FROM charges c LEFT JOIN answers a "
                          f"ON a.request_id = c.request_id WHERE {' AND '.join(where)} "
                          "ORDER BY c.seq", tuple(params))
        return [_charge(r) for r in rows]

    def charge_for(self, request_id: str) -> ChargeRecord | None:
        rows = self._rows(f"SELECT {_CHARGE_COLUMNS} FROM charges c LEFT JOIN answers a "
                          "ON a.request_id = c.request_id WHERE c.request_id = ?", (request_id,))
        return _charge(rows[0]) if rows else None

    def insert_charge(self, request_id: str, analyst: str, dataset: str, kind: str,
                      epsilon: str | None, delta: str | None, rho: str | None, query: str,
                      mechanism: str, charged_at: str) -> int:
        cur = self._connection().execute(
            "INSERT INTO charges (request_id, analyst, dataset, kind, epsilon, delta, rho, query, "
            "mechanism, charged_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (request_id, analyst, dataset, kind, epsilon, delta, rho, query, mechanism,
             charged_at))
        return int(cur.lastrowid)  # type: ignore[arg-type]

    def answer(self, request_id: str) -> str | None:
        rows = self._rows("SELECT payload FROM answers WHERE request_id = ?", (request_id,))
        return str(rows[0][0]) if rows else None

    def insert_answer(self, request_id: str, payload: str, stored_at: str) -> None:
        self._connection().execute(
            "INSERT INTO answers (request_id, payload, stored_at) VALUES (?, ?, ?)",
            (request_id, payload, stored_at))

    def counts(self) -> dict[str, int]:
        with self.read():
            return {t: int(self._rows(f"SELECT count(*) FROM {t}")[0][0])  # type: ignore[arg-type]
                    for t in ("budgets", "charges", "answers")}

    def __repr__(self) -> str:
        return f"SQLiteBackend({self.location!r})"


def _charge(row: tuple[object, ...]) -> ChargeRecord:
    *head, answered = row
    return ChargeRecord(*head, answered=bool(answered))  # type: ignore[arg-type]
