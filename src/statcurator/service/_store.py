"""The service's own store: analysts with their token hashes, and datasets registered
through the API (so that every service process serves them).

API tokens are random, shown once, stored only as hashes; the analyst is what a token says.

A token is ``sct_`` followed by 32 random bytes (``secrets.token_urlsafe``): 256 bits that no
one can guess, so a plain SHA-256 of it is enough to store — a slow password hash protects
guessable secrets, and these are not guessable; a stolen copy of the store gives hashes that
cannot be turned back into tokens. Each analyst has one live token; rotating replaces its hash
(the old token stops working at once, in every process), while the analyst's *identity* — the
normalized name the ledger charges — stays, so no spent budget is lost or refunded.

Where the hashes live. Not in the ledger: the ledger is an append-only, exported, audited
record of privacy spending, while tokens are credentials that change (rotation) and that no
auditor should receive. They live beside it, in the same kind of store so that every service
process sees the same tokens: a SQLite file next to a SQLite ledger (``ledger.tokens.db``, mode
0600), or the table ``statcurator_tokens`` in the PostgreSQL database of a PostgreSQL ledger.

>>> import tempfile, pathlib
>>> store = ServiceStore.sqlite(pathlib.Path(tempfile.mkdtemp()) / "t.db")
>>> who, token = store.add("Alice")
>>> who, token.startswith("sct_")
(Principal(name='alice', role='analyst'), True)
>>> store.authenticate(token)
Principal(name='alice', role='analyst')
>>> new = store.rotate("alice")
>>> store.authenticate(token) is None, store.authenticate(new).name
(True, 'alice')

Revoking an analyst removes its token's hash (no token opens it any more, in every process) and
keeps its identity, so its spent budget stays spent; rotating it later issues a new token.

>>> store.revoke("alice")
'revoked'
>>> store.authenticate(new) is None, store.list()[0]["revoked"]
(True, True)
>>> again = store.rotate("alice")
>>> store.authenticate(again).name, store.list()[0]["revoked"]
('alice', False)
>>> store.close()
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.errors import InvalidParameterError, LedgerError

__all__ = ["ServiceStore", "Principal", "StoreError", "StoreRefusal", "ROLES",
           "TOKEN_PREFIX", "token_hash"]

TOKEN_PREFIX = "sct_"
ROLES = ("admin", "analyst")
_TABLE = "statcurator_tokens"
#: what a revoked analyst's ``token_hash`` starts with: no SHA-256 (hex) of a token does
_REVOKED = "revoked:"
_DATASETS = "statcurator_datasets"
#: the PostgreSQL advisory lock that serializes the token store's guarded changes
_LOCK_KEY = 0x5C70_4B5E


@dataclass(frozen=True)
class Principal:
    """Who a request comes from: the normalized analyst identity and its role (and, for a
    request, the hash of the token it came with: a rotation of one's own token replaces
    that token only)."""

    name: str
    role: str
    token_digest: str | None = field(default=None, repr=False, compare=False)

    @property
    def admin(self) -> bool:
        return self.role == "admin"


def token_hash(token: str) -> str:
    """SHA-256 of a token (hex): what the store keeps."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ServiceStore:
    """The analysts and the hashes of their tokens (SQLite file or PostgreSQL table)."""

    def __init__(self, connect: Any, placeholder: str, location: str) -> None:
        self._connect = connect
        self._ph = placeholder
        self.location = location
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = -1
        with self._lock:
            self._ensure()

    @classmethod
    def sqlite(cls, path: str | os.PathLike[str], *, read_only: bool = False) -> ServiceStore:
        """The store in a SQLite file (created private); ``read_only``: an existing one,
        opened without writing anything (no table, no journal mode)."""
        p = Path(path).expanduser()
        if str(p) != ":memory:" and not read_only:  # (":memory:": a throwaway store)
            p.parent.mkdir(parents=True, exist_ok=True)
            if not p.exists():  # created private: hashes are not secrets, nobody needs them
                p.touch(mode=0o600)

        def connect() -> Any:
            target = f"file:{p}?mode=ro" if read_only else str(p)
            conn = sqlite3.connect(target, timeout=_BUSY_SECONDS, isolation_level=None,
                                   check_same_thread=False, uri=read_only)
            conn.execute(f"PRAGMA busy_timeout={_BUSY_SECONDS * 1000}")
            if not read_only:
                conn.execute("PRAGMA journal_mode=WAL")
                for ddl in _DDL:
                    conn.execute(ddl)
            return conn

        return cls(connect, "?", str(p))

    @classmethod
    def postgres(cls, dsn: str, schema: str = "public", *,
                 read_only: bool = False) -> ServiceStore:
        """The store in a PostgreSQL schema (its tables created if missing; ``read_only``:
        nothing created, for a role that may only read)."""
        def connect() -> Any:
            import psycopg

            conn = psycopg.connect(dsn, autocommit=True, connect_timeout=_BUSY_SECONDS)
            if read_only:
                conn.execute(f'SET search_path TO "{schema}"')
                return conn
            # the guarded statements read the rows other sessions committed while they
            # waited for the advisory lock: a REPEATABLE READ default would hide them
            conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
            races = (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject,
                     psycopg.errors.DuplicateTable, psycopg.errors.DuplicateSchema)
            for ddl in (f'CREATE SCHEMA IF NOT EXISTS "{schema}"',
                        f'SET search_path TO "{schema}"',
                        *_DDL):
                with contextlib.suppress(*races):  # another process created it meanwhile
                    conn.execute(ddl)
            return conn

        return cls(connect, "%s", f"PostgreSQL table {schema}.{_TABLE}")

    # -- operations ---------------------------------------------------------------------
    def add(self, name: str, role: str = "analyst", *,
            by: str | None = None) -> tuple[Principal, str]:
        """Create an analyst (or the admin) and return it with its token, shown only now.

        ``by`` (the hash of the token of the admin asking) makes the creation conditional on
        that token still being a working admin token, in the same guarded statement: a
        request authenticated just before its admin token was revoked cannot mint a new
        identity (:class:`StoreRefusal`)."""
        from ..accounting import analyst_id

        if role not in ROLES:
            raise InvalidParameterError(f"unknown role {role!r}", remedy="use admin or analyst")
        who = analyst_id(name)
        if not who.strip("."):
            raise InvalidParameterError(f"the analyst name {who!r} is only dots, which a URL "
                                        "path cannot carry (browsers resolve them)",
                                        remedy="choose a name with a letter or digit")
        token = _new_token()
        if self.get(who) is not None:
            raise InvalidParameterError(
                f"analyst {who!r} already exists",
                remedy=f"rotate the token instead (statcurator analysts rotate {who})")
        digest = token_hash(token)
        if not self._insert(_TABLE, "analyst, role, token_hash, hint, created_at, generation",
                            (who, role, digest, token[:8], _now(), 1), by,
                            lambda: self._holds(who, digest)):
            raise StoreRefusal("your admin token was revoked or rotated meanwhile: nothing was "
                               "created")
        return Principal(who, role), token

    def rotate(self, name: str, *, replacing: str | None = None,
               by: str | None = None) -> str:
        """A new token for ``name``; the old one stops working. Budgets are untouched (they
        belong to the identity, not to the token).

        Both conditions below are checked in the same guarded statement as the change; when
        one fails nothing changes and :class:`StoreRefusal` is raised:

        - ``replacing`` (the hash of the token a request came with): one's own rotation, a
          compare-and-swap on that token, so that a request authenticated just before its
          token was revoked or rotated by the curator cannot undo that;
        - ``by`` (the hash of the token of the admin asking): that token must still be a
          working admin token, so that a revoked admin's request in flight cannot take
          another analyst's (or admin's) identity over.

        Without either (the operator at the command line) a revoked analyst gets a working
        token again. A statement retried after a dropped connection finds its own new hash
        and succeeds again instead of refusing a rotation it made."""
        from ..accounting import analyst_id

        who = analyst_id(name)
        token = _new_token()
        new = token_hash(token)
        ph = self._ph
        conditions, params = [f"analyst = {ph}"], [who]
        if replacing is not None:
            conditions.append(f"token_hash IN ({ph}, {ph})")
            params += [replacing, new]
        if by is not None:
            conditions.append(self._working_admin())
            params.append(by)
        # (a retry of an applied change counts its token once)
        count = self._run(f"UPDATE {_TABLE} SET token_hash = {ph}, hint = {ph}, rotated_at = "
                          f"{ph}, generation = generation + CASE WHEN token_hash = {ph} THEN 0 "
                          f"ELSE 1 END WHERE {' AND '.join(conditions)}",
                          (new, token[:8], _now(), new, *params), rowcount=True,
                          serialized=by is not None)
        if not count and self._holds(who, new):
            count = 1  # applied by an attempt whose reply was lost (the guard then failed)
        if not count:
            if self.get(who) is None:
                raise InvalidParameterError(f"there is no analyst {who!r}",
                                            remedy="create it first: statcurator analysts add "
                                                   f"{who}")
            raise StoreRefusal("this token was rotated or revoked meanwhile: nothing was "
                               "changed" if by is None else
                               "your admin token was revoked or rotated meanwhile: nothing "
                               "was changed")
        return token

    def revoke(self, name: str, *, by: str | None = None) -> str:
        """Revoke ``name``'s token: it stops working at once, in every process. The identity
        and its spent budget stay; :meth:`rotate` issues it a new token. Returns
        ``"revoked"``, ``"missing"`` (no such analyst) or ``"last admin"`` (refused: the
        last admin with a working token would leave no one able to manage the service);
        ``by`` (the asking admin's token hash) must still be a working admin token
        (:class:`StoreRefusal` otherwise).

        The check and the change are one statement in a transaction that holds the store's
        write lock (SQLite) or advisory lock (PostgreSQL) from before it reads: two curators
        revoking each other at once cannot leave no admin."""
        from ..accounting import analyst_id

        who = analyst_id(name)
        ph = self._ph
        live = f"substr(token_hash, 1, {len(_REVOKED)}) <> '{_REVOKED}'"
        # a unique marker in place of the hash (the column is unique and not null), which
        # no token hashes to; an admin only while another admin keeps a working token
        asker = "" if by is None else f" AND {self._working_admin()}"
        marker = _REVOKED + secrets.token_hex(16)
        count = self._run(
            f"UPDATE {_TABLE} SET token_hash = {ph}, hint = {ph}, rotated_at = {ph} "
            f"WHERE analyst = {ph} AND (role <> 'admin' OR (SELECT count(*) FROM {_TABLE} "
            f"WHERE role = 'admin' AND {live} AND analyst <> {ph}) > 0){asker}",
            (marker, "revoked", _now(), who, who, *(() if by is None else (by,))),
            rowcount=True, serialized=True)
        if count or self._holds(who, marker):  # (a retry after a lost reply: its own marker)
            return "revoked"
        if by is not None and not self.is_working_admin(by):
            raise StoreRefusal("your admin token was revoked or rotated meanwhile: nothing was "
                               "changed")
        return "missing" if self.get(who) is None else "last admin"

    def is_working_admin(self, digest: str) -> bool:
        """Whether the token with this hash is a working admin token now."""
        return bool(self._run(f"SELECT 1 FROM {_TABLE} WHERE token_hash = {self._ph} AND "
                              "role = 'admin'", (digest,), fetch=True))

    def _holds(self, who: str, digest: str) -> bool:
        return bool(self._run(f"SELECT 1 FROM {_TABLE} WHERE analyst = {self._ph} AND "
                              f"token_hash = {self._ph}", (who, digest), fetch=True))

    def _insert(self, table: str, columns: str, values: tuple[Any, ...], by: str | None,
                own: Callable[[], bool]) -> bool:
        """Insert one row; with ``by`` (an admin's token hash) only while that token is a
        working admin token, in the same guarded statement. False when that guard refused.
        A unique key refusing the row is re-raised unless ``own()`` says the row in place is
        this call's own (written by an attempt whose reply was lost, then retried)."""
        marks = self._marks(len(values))
        try:
            if by is None:
                return bool(self._run(f"INSERT INTO {table} ({columns}) VALUES ({marks})",
                                      values, rowcount=True))
            return bool(self._run(f"INSERT INTO {table} ({columns}) SELECT {marks} WHERE "
                                  f"{self._working_admin()}", (*values, by), rowcount=True,
                                  serialized=True))
        except InvalidParameterError:
            if not own():
                raise
            return True

    def _working_admin(self) -> str:
        """The condition "the token hash given as the next parameter is a working admin
        token" (a revoked or rotated token's hash is in no row)."""
        return (f"EXISTS (SELECT 1 FROM {_TABLE} WHERE token_hash = {self._ph} AND "
                "role = 'admin')")

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal a token stands for, or None (unknown, malformed, rotated away)."""
        if not token or not token.startswith(TOKEN_PREFIX) or len(token) > 128:
            return None
        digest = token_hash(token)
        rows = self._run(f"SELECT analyst, role FROM {_TABLE} WHERE token_hash = {self._ph}",
                         (digest,), fetch=True)
        return Principal(rows[0][0], rows[0][1], digest) if rows else None

    def get(self, name: str) -> Principal | None:
        rows = self._run(f"SELECT analyst, role FROM {_TABLE} WHERE analyst = {self._ph}",
                         (name,), fetch=True)
        return Principal(rows[0][0], rows[0][1]) if rows else None

    def list(self) -> list[dict[str, Any]]:
        """Every analyst: name, role, token hint (its first 8 characters; ``revoked``
        for a revoked one), dates, tokens issued, and whether it is revoked."""
        rows = self._run(f"SELECT analyst, role, hint, created_at, rotated_at, generation, "
                         f"substr(token_hash, 1, {len(_REVOKED)}) = '{_REVOKED}' "
                         f"FROM {_TABLE} ORDER BY analyst", (), fetch=True)
        keys = ("analyst", "role", "token_hint", "created_at", "rotated_at", "tokens_issued",
                "revoked")
        return [{**dict(zip(keys, r, strict=True)), "revoked": bool(r[-1])} for r in rows]

    def add_dataset(self, name: str, data: str, metadata: str | None, *,
                    by: str | None = None) -> None:
        """Remember a dataset registered through the API (every process registers it).

        ``by`` (the asking admin's token hash) must still be a working admin token, in the
        same guarded statement (:class:`StoreRefusal`). A row equal to this one, written by
        an attempt whose reply was lost, is this call's own."""
        if not self._insert(_DATASETS, "name, data, metadata, created_at",
                            (name, data, metadata, _now()), by,
                            lambda: (name, data, metadata) in self.datasets()):
            raise StoreRefusal("your admin token was revoked or rotated meanwhile: nothing was "
                               "registered")

    def datasets(self) -> list[tuple[str, str, str | None]]:
        """The datasets registered through the API: (name, data, metadata), oldest first."""
        return [tuple(r) for r in self._run(
            f"SELECT name, data, metadata FROM {_DATASETS} ORDER BY created_at, name", (),
            fetch=True)]

    def has_admin(self) -> bool:
        return bool(self._run(f"SELECT 1 FROM {_TABLE} WHERE role = 'admin'", (), fetch=True))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # -- plumbing -----------------------------------------------------------------------
    def _marks(self, n: int) -> str:
        return ", ".join([self._ph] * n)

    def _ensure(self) -> Any:
        if self._conn is None or self._pid != os.getpid():  # a forked child reconnects
            try:
                self._conn = self._connect()
            except Exception as e:  # sqlite3/psycopg errors: the store cannot be reached
                # the class only: a driver's message may quote the DSN, password included
                raise StoreError(f"cannot open the token store ({self.location}): "
                                  f"{_described(e)}",
                                  remedy="check ledger.path / ledger.dsn and permissions"
                                  ) from None
            self._pid = os.getpid()
        return self._conn

    def _run(self, sql: str, params: tuple[Any, ...], *, fetch: bool = False,
             rowcount: bool = False, serialized: bool = False) -> Any:
        """Run one statement (reconnecting once after a dropped connection). ``serialized``:
        a statement whose condition reads other rows, run one at a time across processes —
        on SQLite in a transaction that takes the write lock before it reads (``BEGIN
        IMMEDIATE``), on PostgreSQL in one holding the store's advisory lock. A transaction
        that fails is rolled back, and a connection given up is closed (its locks with it).
        Errors are :class:`LedgerError` naming the store (a locked store at once, without a
        second wait), except a unique key's :class:`InvalidParameterError`."""
        with self._lock:
            for attempt in (0, 1):
                conn = self._ensure()
                try:
                    if serialized and self._ph == "%s":
                        with conn.transaction():
                            conn.execute(f"SET LOCAL lock_timeout = '{_BUSY_SECONDS}s'")
                            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                            cur = conn.execute(sql, params)
                    elif serialized:
                        conn.execute("BEGIN IMMEDIATE")
                        try:
                            cur = conn.execute(sql, params)
                            conn.execute("COMMIT")
                        except BaseException:
                            if conn.in_transaction:
                                with contextlib.suppress(Exception):
                                    conn.execute("ROLLBACK")
                            raise
                    else:
                        cur = conn.execute(sql, params)
                    if fetch:
                        return cur.fetchall()
                    return cur.rowcount if rowcount else None
                except (sqlite3.IntegrityError, _pg_integrity()) as e:
                    raise InvalidParameterError(f"the token store refused the change: "
                                                f"{_described(e)}",
                                                remedy="retry; the name may be taken") from None
                except Exception as e:
                    if _busy(e):  # another writer holds the store: waiting again helps nobody
                        raise StoreError(f"the token store ({self.location}) stayed locked "
                                          f"by another writer for {_BUSY_SECONDS} s",
                                          remedy="retry; if it persists, look for a stuck "
                                                 "process holding the store") from None
                    if self.location == ":memory:" or attempt or not _dropped(e):
                        raise StoreError(f"the token store ({self.location}) failed: "
                                          f"{_described(e)}",
                                          remedy="check the store's file or database "
                                                 "permissions and that it is a statcurator "
                                                 "store (ledger.path / ledger.dsn)") from None
                    # a dropped connection (PostgreSQL restarted): a fresh one, once
                    with contextlib.suppress(Exception):
                        conn.close()
                    self._conn = None
        return None  # pragma: no cover


class StoreError(LedgerError):
    """The token store failed or stayed locked (an operator's problem: the service answers
    503 without the store's location)."""


class StoreRefusal(InvalidParameterError):
    """A guarded change to the token store was refused: the token that asked for it was
    revoked or rotated meanwhile (the service answers 401)."""


#: how long a guarded change waits for the store's lock (SQLite's busy timeout, PostgreSQL's
#: lock timeout)
_BUSY_SECONDS = 30


def _busy(e: BaseException) -> bool:
    """Whether ``e`` says the store is locked by another writer (not a dropped connection)."""
    if isinstance(e, sqlite3.OperationalError):
        return "locked" in str(e) or "busy" in str(e)
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite only
        return False
    return isinstance(e, psycopg.errors.LockNotAvailable)


def _dropped(e: BaseException) -> bool:
    """Whether ``e`` says the connection was lost (worth one reconnection), not that the
    statement or the store is wrong."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite only
        return False
    return isinstance(e, psycopg.OperationalError) and not isinstance(
        e, psycopg.errors.LockNotAvailable)


def _described(e: BaseException) -> str:
    """An error for a message: its class and, from PostgreSQL, its SQLSTATE — never the
    driver's text, which may quote the DSN (password included) or a row's values."""
    state = getattr(getattr(e, "diag", None), "sqlstate", None) or getattr(e, "sqlstate", None)
    if isinstance(e, sqlite3.Error):
        name = getattr(e, "sqlite_errorname", None)
        return f"{type(e).__name__}" + (f" {name}" if name else "")
    return type(e).__name__ + (f" (SQLSTATE {state})" if state else "")


def _pg_integrity() -> type[BaseException]:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite only
        return sqlite3.IntegrityError
    return psycopg.errors.IntegrityError


_TOKEN_COLUMNS = ("analyst TEXT PRIMARY KEY, role TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE, "
            "hint TEXT NOT NULL, created_at TEXT NOT NULL, rotated_at TEXT, "
            "generation INTEGER NOT NULL")
_DDL = (f"CREATE TABLE IF NOT EXISTS {_TABLE} ({_TOKEN_COLUMNS})",
        f"CREATE TABLE IF NOT EXISTS {_DATASETS} (name TEXT PRIMARY KEY, data TEXT NOT NULL, "
        "metadata TEXT, created_at TEXT NOT NULL)")
