"""The SQLite ledger backend: one file in WAL mode (or a private in-memory database).

Why these settings:

* ``journal_mode=WAL`` lets analysts read budgets while another process charges;
* every write is one autocommit INSERT whose ``seq`` primary key is the chain position it
  read (see :mod:`statcurator.accounting._backend`): two processes that read the same
  remaining budget cannot both append after it, so a durable charge is two statements (the
  read and the INSERT) instead of a locked multi-statement transaction;
* ``synchronous=FULL`` makes every committed charge survive a power cut, not only a crash of
  the process: a charge lost after its answer was released would be privacy spent unrecorded;
* triggers refuse ``UPDATE`` and ``DELETE``: the ledger is append-only, an audit trail
  rather than a balance (and the hash chain detects whoever drops the triggers);
* ``CHECK`` constraints keep privacy amounts as exact ``numerator/denominator`` text, so
  not even another program writing to the file can slip a float in.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..core.errors import LedgerError
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

__all__ = ["SQLiteBackend", "APPLICATION_ID", "SCHEMA_VERSION"]

#: ``PRAGMA application_id`` of a statcurator ledger ("ScLg"), so that another program's
#: SQLite file is never mistaken for (or silently turned into) a ledger.
APPLICATION_ID = 0x53634C67
#: 2: one hash-chained table with running totals and dataset-wide budgets (1: three tables).
SCHEMA_VERSION = 2

_RATIONAL = ("({c} IS NULL OR (typeof({c}) = 'text' AND {c} GLOB '[0-9]*/[1-9]*' "
             "AND {c} NOT GLOB '*[^0-9/]*'))")
_AMOUNT = ("({c} IS NULL OR (typeof({c}) = 'text' AND ({c} GLOB 'pure:[0-9]*/[1-9]*' "
           "OR {c} GLOB 'approx:[0-9]*/[1-9]*,[0-9]*/[1-9]*' OR {c} GLOB 'zcdp:[0-9]*/[1-9]*')"
           " AND {c} NOT GLOB '*:*[^0-9/,]*'))")
_CHECKS = ", ".join([*(f"CHECK {_RATIONAL.format(c=c)}" for c in ("epsilon", "delta", "rho")),
                     *(f"CHECK {_AMOUNT.format(c=c)}" for c in (
                         "grant_total", "grant_spent", "dataset_total", "dataset_spent"))])
_TYPES = ", ".join(f"'{t}'" for t in ENTRY_TYPES)

# The ledger is one table. AUTOINCREMENT is not needed for numbering (the ledger sets seq)
# but keeps the highest seq ever written in sqlite_sequence, so that deleting the newest
# rows (after dropping the triggers) leaves a visible gap; see problems().
_SCHEMA = [
    f"""CREATE TABLE IF NOT EXISTS ledger (
        seq INTEGER PRIMARY KEY AUTOINCREMENT CHECK (seq > 0),
        type TEXT NOT NULL CHECK (type IN ({_TYPES})),
        analyst TEXT, dataset TEXT, request_id TEXT,
        kind TEXT CHECK (kind IS NULL OR kind IN ('pure', 'approx', 'zcdp')),
        epsilon TEXT, delta TEXT, rho TEXT,
        query TEXT, mechanism TEXT, payload TEXT,
        grant_total TEXT, grant_spent TEXT, grant_charges INTEGER,
        dataset_total TEXT, dataset_spent TEXT, dataset_charges INTEGER,
        at TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL,
        {_CHECKS})""",
    "CREATE INDEX IF NOT EXISTS ledger_grants ON ledger (analyst, dataset, seq) "
    "WHERE type IN ('grant', 'charge')",
    "CREATE INDEX IF NOT EXISTS ledger_datasets ON ledger (dataset, seq) "
    "WHERE type IN ('dataset_budget', 'charge')",
    "CREATE UNIQUE INDEX IF NOT EXISTS ledger_charge_ids ON ledger (analyst, request_id) "
    "WHERE type = 'charge'",
    "CREATE UNIQUE INDEX IF NOT EXISTS ledger_answer_ids ON ledger (analyst, request_id) "
    "WHERE type = 'answer'",
    *(f"CREATE TRIGGER IF NOT EXISTS ledger_append_only_{op.lower()} BEFORE {op} ON ledger "
      f"BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only: rows cannot be "
      f"{'changed' if op == 'UPDATE' else 'deleted'}'); END" for op in ("UPDATE", "DELETE")),
    # Read-only views for auditors who query the file with other tools.
    "CREATE VIEW IF NOT EXISTS dataset_budgets AS SELECT seq, dataset, kind, epsilon, delta, "
    "rho, at FROM ledger WHERE type = 'dataset_budget'",
    "CREATE VIEW IF NOT EXISTS budgets AS SELECT seq, analyst, dataset, kind, epsilon, delta, "
    "rho, at FROM ledger WHERE type = 'grant'",
    "CREATE VIEW IF NOT EXISTS charges AS SELECT seq, request_id, analyst, dataset, kind, "
    "epsilon, delta, rho, query, mechanism, at FROM ledger WHERE type = 'charge'",
    "CREATE VIEW IF NOT EXISTS answers AS SELECT seq, analyst, request_id, payload, at "
    "FROM ledger WHERE type = 'answer'",
]
_TRIGGERS = {"ledger_append_only_update", "ledger_append_only_delete"}
#: the unique indexes' definitions as sqlite_master keeps them (see problems())
_UNIQUE_SQL = {" ".join(s.split())[len("CREATE UNIQUE INDEX IF NOT EXISTS "):].split(" ")[0]:
               " ".join(s.replace("IF NOT EXISTS ", "").split())
               for s in _SCHEMA if s.startswith("CREATE UNIQUE INDEX")}

_COLS = ", ".join(COLUMNS)
_INSERT = f"INSERT INTO ledger ({_COLS}) VALUES ({', '.join('?' * len(COLUMNS))})"
# A row right after the row its ledger object knows as the head: inserted only if that
# row is still the last, unchanged in every column, and, for an answer, the answer's charge
# exists (see append_after). ?1..?N are the new row's values, ?N+1..?2N the head's
# (NULL-safe: IS).
_N = len(COLUMNS)
_AT = {c: f"?{i}" for i, c in enumerate(COLUMNS, 1)}  # the new row's values by column
_INSERT_AFTER_HEAD = (
    f"INSERT INTO ledger ({_COLS}) SELECT {', '.join(_AT.values())} "
    f"WHERE (SELECT max(seq) FROM ledger) = ?{_N + 1} "
    f"AND (SELECT {_COLS} FROM ledger WHERE seq = ?{_N + 1}) "
    f"IS ({', '.join(f'?{i}' for i in range(_N + 1, 2 * _N + 1))})")
_INSERT_AFTER = {
    "charge": _INSERT_AFTER_HEAD,
    "answer": f"{_INSERT_AFTER_HEAD} AND EXISTS (SELECT 1 FROM ledger WHERE type = 'charge' "
              f"AND analyst = {_AT['analyst']} AND request_id = {_AT['request_id']} "
              f"AND dataset = {_AT['dataset']})",
}
# The state of a charge in one statement; ?1 analyst, ?2 dataset, ?3 request id.
_STATE = " UNION ALL ".join([
    f"SELECT * FROM (SELECT 'head', {_COLS} FROM ledger ORDER BY seq DESC LIMIT 1)",
    f"SELECT * FROM (SELECT 'grant', {_COLS} FROM ledger WHERE analyst = ?1 AND dataset = ?2 "
    "AND type IN ('grant', 'charge') ORDER BY seq DESC LIMIT 1)",
    f"SELECT * FROM (SELECT 'dataset', {_COLS} FROM ledger WHERE dataset = ?2 "
    "AND type IN ('dataset_budget', 'charge') ORDER BY seq DESC LIMIT 1)",
    f"SELECT 'charge', {_COLS} FROM ledger WHERE analyst = ?1 AND request_id = ?3 "
    "AND type = 'charge'",
    f"SELECT 'answer', {_COLS} FROM ledger WHERE analyst = ?1 AND request_id = ?3 "
    "AND type = 'answer'",
])
# The head and whether a charge holds the request id; ?1 analyst, ?2 request id.
_HEAD = ("SELECT seq, hash, EXISTS (SELECT 1 FROM ledger WHERE type = 'charge' "
         "AND analyst = ?1 AND request_id = ?2) FROM ledger ORDER BY seq DESC LIMIT 1")
_LATEST = {
    "grant": f"SELECT {_COLS} FROM ledger WHERE seq IN (SELECT max(seq) FROM ledger WHERE "
             "type IN ('grant', 'charge') GROUP BY analyst, dataset) ORDER BY analyst, dataset",
    "dataset": f"SELECT {_COLS} FROM ledger WHERE seq IN (SELECT max(seq) FROM ledger WHERE "
               "type IN ('dataset_budget', 'charge') GROUP BY dataset) ORDER BY dataset",
}


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
    {'genesis': 0, 'dataset_budget': 0, 'grant': 0, 'charge': 0, 'answer': 0}
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 timeout: float = 30.0) -> None:
        timeout = check_timeout(timeout)
        memory = path is None or str(path) == ":memory:"
        self._path = None if memory else Path(path).expanduser()  # type: ignore[arg-type]
        self.location = ":memory:" if memory else str(self._path)
        self._timeout = float(timeout)
        #: Seconds a writer waits for another process's lock (and the ledger for its turn).
        self.timeout = self._timeout
        self._orphans: list[sqlite3.Connection] = []
        #: held by an INSERT with its PRAGMA synchronous switches: an answer's NORMAL (on the
        #: writer thread) never brackets a charge another thread inserts on the connection
        self._inserting = threading.Lock()
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
        if self._path is not None:
            # a new ledger is readable by its owner only (queries, answers, analysts' names):
            # SQLite gives its -wal and -shm files the database file's permissions
            # (an existing file is left as it is; one that cannot be made here is reported by
            # sqlite3 below, with the remedy)
            with contextlib.suppress(OSError):
                os.close(os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
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
            if 0 < version < SCHEMA_VERSION:
                raise LedgerError(
                    f"the ledger {self.location} was written by an older statcurator (schema "
                    f"{version}, without a hash chain or dataset-wide budgets)",
                    remedy="keep it as an audit record and start a new ledger file; grant the "
                           "budgets again, reduced by what the old ledger shows as spent")
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
            self._inserting = threading.Lock()  # (maybe held by a thread the child lacks)
            self._conn = self._connect()
            self._pid = os.getpid()  # only once connected: a failed attempt is tried again
        return self._conn

    def close(self) -> None:
        if self._conn is not None and os.getpid() == self._pid:
            self._conn.close()
        self._conn = None

    # -- reading and appending -------------------------------------------------------------
    def _rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        with _translated(self.location, self._timeout):
            return self._connection().execute(sql, params).fetchall()

    def state(self, analyst: str | None, dataset: str | None,
              request_id: str | None) -> dict[str, LedgerEntry]:
        found: dict[str, LedgerEntry] = {}
        last: tuple[list[object], LedgerEntry] | None = None
        for tag, *row in self._rows(_STATE, (analyst, dataset, request_id)):
            # a charge is usually both the grant's and the dataset's latest row: one entry
            if last is None or row != last[0]:
                last = row, LedgerEntry(*row)  # type: ignore[arg-type]
            found[str(tag)] = last[1]
        return found

    def head(self, analyst: str, request_id: str) -> tuple[int, str, bool] | None:
        return head_of(self._rows(_HEAD, (analyst, request_id)))

    @property
    def overlaps_appends(self) -> bool:  # type: ignore[override]
        """A file's appends wait on fsync (the connection is shared across threads)."""
        return self._path is not None

    def append(self, entry: LedgerEntry) -> None:
        self._insert(entry, _INSERT, entry.values())

    def append_after(self, entry: LedgerEntry, head: LedgerEntry) -> bool:
        if not links_after(entry, head):
            return False
        return self._insert(entry, _INSERT_AFTER[entry.type],
                            (*entry.values(), *head.values())) == 1

    def _insert(self, entry: LedgerEntry, sql: str, params: tuple[object, ...]) -> int:
        """Run one INSERT statement (autocommit: its own transaction); the rows inserted."""
        conn = self._connection()
        # An answer is written without waiting for the disk (synchronous=NORMAL): losing it
        # in a power cut costs no privacy (its charge is durable; the replay then says the
        # answer was lost and never releases fresh noise for free), and the next durable
        # write flushes it with everything before it in the WAL. Charges and budgets are
        # FULL: one fsync each.
        relaxed = entry.type == "answer" and self._path is not None
        try:
            with self._inserting, _translated(self.location, self._timeout):
                try:  # (the switch inside: Ctrl-C raised as it returns is undone too)
                    if relaxed:
                        conn.execute("PRAGMA synchronous = NORMAL")
                    return int(conn.execute(sql, params).rowcount)
                finally:
                    if relaxed:
                        conn.execute("PRAGMA synchronous = FULL")
        except LedgerError as e:
            cause = e.__cause__
            if isinstance(cause, sqlite3.IntegrityError) and "UNIQUE" in str(cause):
                raise ChainConflict(str(cause)) from None
            raise

    def entries(self, *, after: int = 0, upto: int | None = None, analyst: str | None = None,
                dataset: str | None = None,
                types: tuple[str, ...] | None = None) -> Iterator[LedgerEntry]:
        where, params = entry_filter("?", after=after, upto=upto, analyst=analyst,
                                     dataset=dataset, types=types)
        sql = f"SELECT {_COLS} FROM ledger WHERE {where} ORDER BY seq"
        conn = self._connection()
        with _translated(self.location, self._timeout):
            cursor = conn.execute(sql, tuple(params))
            while batch := cursor.fetchmany(1000):
                yield from (LedgerEntry(*row) for row in batch)

    def latest(self, scope: str) -> list[LedgerEntry]:
        return [LedgerEntry(*row) for row in self._rows(_LATEST[scope])]  # type: ignore[arg-type]

    def counts(self) -> dict[str, int]:
        found: dict[object, object] = {r[0]: r[1] for r in self._rows(
            "SELECT type, count(*) FROM ledger GROUP BY type")}
        return {t: int(str(found.get(t, 0))) for t in ENTRY_TYPES}

    def problems(self) -> list[str]:
        found = []
        names = {str(n) for (n,) in self._rows(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'ledger'")}
        if missing := _TRIGGERS - names:
            found.append(f"the append-only trigger(s) {sorted(missing)} were dropped")
        unique = {str(n) for n, sql in self._rows(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger'")
            if " ".join(str(sql).split()) == _UNIQUE_SQL.get(str(n))}
        if dropped := set(UNIQUE_INDEXES) - unique:
            found.append(f"the unique index(es) {sorted(dropped)} were dropped")
        top = self._rows("SELECT (SELECT max(seq) FROM ledger), "
                         "(SELECT seq FROM sqlite_sequence WHERE name = 'ledger')")[0]
        if top[1] is not None and int(str(top[0] or 0)) < int(str(top[1])):
            found.append(f"rows up to {top[1]} were written but the last row is "
                         f"{top[0] or 0}: the newest rows were deleted")
        return found

    def __repr__(self) -> str:
        return f"SQLiteBackend({self.location!r})"
