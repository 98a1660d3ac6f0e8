"""The storage interface behind :class:`~statcurator.accounting.Ledger`.

A ledger is one append-only table of :class:`LedgerEntry` rows — the genesis row, dataset
budgets, per-analyst grants, charges and answers — numbered ``seq = 1, 2, 3, ...`` and
chained by hashes (the ledger computes and checks the hashes; a backend stores text and
integers and never parses privacy amounts).

Concurrency is *optimistic*: a writer reads the chain's head and the running totals it needs
in one statement, decides, and appends the next row with ``seq = head.seq + 1`` in one
atomic INSERT. ``seq`` is the primary key, so when two writers read the same head only one
INSERT succeeds; the other gets :class:`ChainConflict`, reads again and re-decides. A
durable charge is therefore two statements (the read and the INSERT, each its own
transaction) and no interleaving of processes can spend the same remaining budget twice:
the check and the row it depends on are linked by ``seq``. This is the compare-and-swap on
the chain's head that a transaction-scoped lock would otherwise provide.

Every charge row carries the running totals after it, for its (analyst, dataset) grant and
for its dataset, so the state of a budget is *one* row: the latest grant-or-charge row of the
pair, and the latest dataset-budget-or-charge row of the dataset.

>>> issubclass(ChainConflict, Exception)
True
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterator
from dataclasses import dataclass, fields
from operator import attrgetter

from ..core.errors import InvalidParameterError

__all__ = ["LedgerBackend", "LedgerEntry", "ChainConflict", "ENTRY_TYPES", "COLUMNS",
           "entry_filter", "check_timeout", "PLAIN_TYPES"]

#: The kinds of rows, in the order a ledger usually grows.
ENTRY_TYPES = ("genesis", "dataset_budget", "grant", "charge", "answer")


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One row of the ledger, as stored.

    ``type`` is one of :data:`ENTRY_TYPES`. ``kind``/``epsilon``/``delta``/``rho`` are a
    charge's cost as charged, or a budget row's new total (exact ``p/q`` text).
    ``grant_*`` are the (analyst, dataset) budget after this row (total, spent — in the
    budget's currency, as ``kind:p/q[,p/q]`` text — and the number of charges); ``dataset_*``
    the same for the dataset-wide budget. ``prev_hash`` is the previous row's ``hash``, and
    ``hash`` is SHA-256 (HMAC-SHA-256 with a key) over ``prev_hash`` and this row's content.

    >>> e = LedgerEntry(1, "genesis", at="2024-01-01T00:00:00+00:00", prev_hash="0" * 64,
    ...                 hash="ab")
    >>> e.type, e.analyst
    ('genesis', None)
    """

    seq: int
    type: str
    analyst: str | None = None
    dataset: str | None = None
    request_id: str | None = None
    kind: str | None = None
    epsilon: str | None = None
    delta: str | None = None
    rho: str | None = None
    query: str | None = None
    mechanism: str | None = None
    payload: str | None = None
    grant_total: str | None = None
    grant_spent: str | None = None
    grant_charges: int | None = None
    dataset_total: str | None = None
    dataset_spent: str | None = None
    dataset_charges: int | None = None
    at: str = ""
    prev_hash: str = ""
    hash: str = ""

    def content(self) -> tuple[object, ...]:
        """Every field but the two hashes, in column order: what the hash covers."""
        return _CONTENT(self)

    def values(self) -> tuple[object, ...]:
        """Every field, in column order (what a backend stores)."""
        return _VALUES(self)

    @property
    def amount(self) -> object:
        """The charge's cost or the budget row's new total as a loss value (else None).

        >>> LedgerEntry(2, "dataset_budget", dataset="adult", kind="pure", epsilon="10/1").amount
        PureDP(epsilon=Fraction(10, 1))
        """
        if self.kind is None:
            return None
        from ._losses import decode

        return decode(self.kind, self.epsilon, self.delta, self.rho)

    def as_dict(self) -> dict[str, object]:
        """The row as a plain dict (for exports)."""
        return dict(zip(COLUMNS, _VALUES(self), strict=True))


#: Column names, in the order of :class:`LedgerEntry`'s fields.
COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(LedgerEntry))
_VALUES = attrgetter(*COLUMNS)
_CONTENT = attrgetter(*COLUMNS[:-2])


#: the unique indexes that refuse a second charge, or a second answer, under one (analyst,
#: request id), and the row type each covers: a charge decided without a read relies on the
#: first (see Ledger._ahead)
UNIQUE_INDEXES = {"ledger_charge_ids": "charge", "ledger_answer_ids": "answer"}


def links_after(entry: LedgerEntry, head: LedgerEntry) -> bool:
    """Whether ``entry`` is an answer or a charge that links to ``head`` as the row before
    it (what :meth:`LedgerBackend.append_after` requires before it compares ``head`` with the
    stored last row)."""
    return entry.type in ("answer", "charge") and entry.seq == head.seq + 1 \
        and entry.prev_hash == head.hash


def head_of(rows: list[tuple[object, ...]]) -> tuple[int, str, bool] | None:
    """What :meth:`LedgerBackend.head` returns from its statement's rows (seq, hash, charged).

    >>> head_of([(7, "ab", 0)]), head_of([])
    ((7, 'ab', False), None)
    """
    if not rows:
        return None
    seq, hash_, charged = rows[0]
    return int(seq), str(hash_), bool(charged)  # type: ignore[call-overload]


def entry_filter(mark: str, *, after: int, upto: int | None, analyst: str | None,
                 dataset: str | None, types: tuple[str, ...] | None) -> tuple[str, list[object]]:
    """The WHERE condition and parameters of :meth:`LedgerBackend.entries`, with the
    driver's placeholder ``mark`` (the first parameter is always ``after``).

    >>> entry_filter("?", after=0, upto=None, analyst="a", dataset=None, types=("charge",))
    ('seq > ? AND analyst = ? AND type IN (?)', [0, 'a', 'charge'])
    """
    where: list[str] = [f"seq > {mark}"]
    params: list[object] = [after]
    for column, value in (("seq <=", upto), ("analyst =", analyst), ("dataset =", dataset)):
        if value is not None:
            where.append(f"{column} {mark}")
            params.append(value)
    if types is not None:
        where.append(f"type IN ({', '.join([mark] * len(types))})")
        params.extend(types)
    return " AND ".join(where), params


#: The exact types a store hands back for a row's values (text, integers, NULL).
PLAIN_TYPES = frozenset({str, int, type(None)})


def check_timeout(timeout: object) -> float:
    """A backend's wait for a busy store, in seconds: a positive finite number.

    >>> check_timeout(5)
    5.0
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise InvalidParameterError(f"timeout must be a positive number of seconds, got "
                                    f"{timeout!r}", remedy="pass timeout=30")
    return float(timeout)


class ChainConflict(Exception):
    """The row's ``seq`` (or its (analyst, request id)) was taken by another writer first.

    Raised by :meth:`LedgerBackend.append`; the ledger reads the new head and retries.
    """


class LedgerBackend(abc.ABC):
    """Append-only storage of :class:`LedgerEntry` rows with an atomic single-row append.

    >>> from statcurator.accounting import SQLiteBackend
    >>> isinstance(SQLiteBackend(), LedgerBackend)
    True
    """

    #: Where the ledger lives, for messages (a path, a URL without password, ``":memory:"``).
    location: str = "?"
    #: True when :meth:`append` waits on durable storage (an fsync, a server's round trip)
    #: and may be called from another thread than the other methods: the ledger then writes
    #: a charge on a second thread while the curator's engine runs (``Ledger.charge``'s
    #: ``alongside``). False (the default) writes first, then runs the work.
    overlaps_appends: bool = False

    @abc.abstractmethod
    def state(self, analyst: str | None, dataset: str | None,
              request_id: str | None) -> dict[str, LedgerEntry]:
        """In **one** statement: ``'head'`` (the last row), ``'grant'`` (the latest grant or
        charge row of (analyst, dataset)), ``'dataset'`` (the latest dataset-budget or charge
        row of the dataset), ``'charge'`` and ``'answer'`` (the rows of (analyst,
        request_id)). Missing parts, and parts whose arguments are None, are absent."""

    def head(self, analyst: str, request_id: str) -> tuple[int, str, bool] | None:
        """In one statement: the last row's ``seq`` and ``hash``, and whether ``analyst``
        has a charge under ``request_id``; None from a backend that cannot (this default:
        the ledger then reads :meth:`state`). The ledger decides a charge from rows it
        remembers when the head is the one it last wrote or read (see ``Ledger._viewed``)."""
        return None

    @abc.abstractmethod
    def append(self, entry: LedgerEntry) -> None:
        """Insert one row atomically and durably (its own transaction, committed on return).

        Raises :class:`ChainConflict` when ``entry.seq`` or the (analyst, request id) of a
        charge or answer is already taken."""

    def append_after(self, entry: LedgerEntry, head: LedgerEntry) -> bool:
        """Insert an answer or a charge row, in one statement, only if the last row is
        ``head``, equal in every column (``entry.seq`` is ``head.seq + 1``,
        ``entry.prev_hash`` is ``head.hash``), and, for an answer, the charge of (analyst,
        request id) on the entry's dataset exists; True when inserted, False (nothing
        written) otherwise. Like :meth:`append` otherwise (atomic, committed on return,
        :class:`ChainConflict`, for a charge also when its request id is taken).

        The ledger stores an answer this way without reading first, and charges right after
        an answer it is still storing (see ``Ledger.store_answer``); a backend that cannot
        (this default) returns False, and the ledger reads, decides and appends instead."""
        return False

    @abc.abstractmethod
    def entries(self, *, after: int = 0, upto: int | None = None, analyst: str | None = None,
                dataset: str | None = None,
                types: tuple[str, ...] | None = None) -> Iterator[LedgerEntry]:
        """Rows with ``after < seq <= upto`` matching the filters, in ``seq`` order."""

    @abc.abstractmethod
    def latest(self, scope: str) -> list[LedgerEntry]:
        """For ``scope='grant'`` the latest grant-or-charge row of every (analyst, dataset)
        pair; for ``scope='dataset'`` the latest dataset-budget-or-charge row of every
        dataset; sorted by their keys."""

    @abc.abstractmethod
    def counts(self) -> dict[str, int]:
        """Number of rows of each type."""

    @abc.abstractmethod
    def problems(self) -> list[str]:
        """What is wrong with the storage itself (append-only triggers missing, a row
        counter that disagrees with the rows): an empty list when nothing is."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection. Idempotent."""

    @property
    def persistent(self) -> bool:
        """True when the ledger outlives this process."""
        return True
