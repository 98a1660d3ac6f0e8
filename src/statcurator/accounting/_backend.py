"""The storage interface behind :class:`~statcurator.accounting.Ledger`.

A backend stores three append-only tables — budgets, charges, answers — as plain text and
integers; it never parses or compares privacy amounts (the ledger does that, exactly, in
Python). What a backend must guarantee is *isolation*: :meth:`LedgerBackend.write` opens a
transaction that excludes every other writer of the same ledger, in any process, until it
commits, so that the ledger's "read what is spent, check, insert" is atomic. SQLite gets this
from ``BEGIN IMMEDIATE``; a PostgreSQL backend would take a transaction-scoped advisory lock
(``pg_advisory_xact_lock``) on the (analyst, dataset) pair, or run at ``SERIALIZABLE``.

Charge sequence numbers (``seq``) must increase in commit order for the charges of one
(analyst, dataset) pair; the ledger relies on it to sum only the charges it has not seen yet.

>>> issubclass(LedgerBackend, object)
True
"""

from __future__ import annotations

import abc
from contextlib import AbstractContextManager
from dataclasses import dataclass

__all__ = ["LedgerBackend", "BudgetRecord", "ChargeRecord"]


@dataclass(frozen=True, slots=True)
class BudgetRecord:
    """One stored budget total (the latest record for a pair is the budget in force).

    >>> BudgetRecord(1, "alice", "adult", "pure", "1/1", None, None, "2024-01-01T00:00:00+00:00").kind
    'pure'
    """

    seq: int
    analyst: str
    dataset: str
    kind: str
    epsilon: str | None
    delta: str | None
    rho: str | None
    set_at: str


@dataclass(frozen=True, slots=True)
class ChargeRecord:
    """One stored charge, with whether an answer is stored for its request id.

    >>> ChargeRecord(1, "r1", "alice", "adult", "pure", "1/10", None, None, "q", "m",
    ...              "2024-01-01T00:00:00+00:00", False).request_id
    'r1'
    """

    seq: int
    request_id: str
    analyst: str
    dataset: str
    kind: str
    epsilon: str | None
    delta: str | None
    rho: str | None
    query: str
    mechanism: str
    charged_at: str
    answered: bool


class LedgerBackend(abc.ABC):
    """Append-only storage of budgets, charges and answers with exclusive write transactions.

    Every method other than :meth:`write`, :meth:`read` and :meth:`close` is called inside
    one of those two context managers.

    >>> from statcurator.accounting import SQLiteBackend
    >>> isinstance(SQLiteBackend(), LedgerBackend)
    True
    """

    #: Where the ledger lives, for messages (a path, a URL, or ``":memory:"``).
    location: str = "?"

    @abc.abstractmethod
    def write(self) -> AbstractContextManager[None]:
        """An exclusive write transaction: commits on success, rolls back on any exception."""

    @abc.abstractmethod
    def read(self) -> AbstractContextManager[None]:
        """A read transaction over one consistent snapshot."""

    @abc.abstractmethod
    def latest_budget(self, analyst: str, dataset: str) -> BudgetRecord | None:
        """The budget record in force for the pair, or ``None``."""

    @abc.abstractmethod
    def budget_keys(self) -> list[tuple[str, str]]:
        """Every (analyst, dataset) pair that has a budget, sorted."""

    @abc.abstractmethod
    def insert_budget(self, analyst: str, dataset: str, kind: str, epsilon: str | None,
                      delta: str | None, rho: str | None, set_at: str) -> int:
        """Append a budget record; returns its ``seq``."""

    @abc.abstractmethod
    def charges(self, analyst: str | None = None, dataset: str | None = None,
                after: int = 0) -> list[ChargeRecord]:
        """Charges with ``seq > after`` (optionally of one analyst / dataset), in ``seq`` order."""

    @abc.abstractmethod
    def charge_for(self, request_id: str) -> ChargeRecord | None:
        """The charge made under ``request_id``, or ``None``."""

    @abc.abstractmethod
    def insert_charge(self, request_id: str, analyst: str, dataset: str, kind: str,
                      epsilon: str | None, delta: str | None, rho: str | None, query: str,
                      mechanism: str, charged_at: str) -> int:
        """Append a charge; returns its ``seq``. A duplicate ``request_id`` must fail."""

    @abc.abstractmethod
    def answer(self, request_id: str) -> str | None:
        """The answer stored for ``request_id``, or ``None``."""

    @abc.abstractmethod
    def insert_answer(self, request_id: str, payload: str, stored_at: str) -> None:
        """Append the answer of a charged request (at most one per request id)."""

    @abc.abstractmethod
    def counts(self) -> dict[str, int]:
        """Row counts of the three tables (``budgets``, ``charges``, ``answers``)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection. Idempotent."""

    @property
    def persistent(self) -> bool:
        """True when the ledger outlives this process."""
        return True
