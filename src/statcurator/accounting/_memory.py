"""The in-memory ledger backend: ``Ledger()`` without a path (notebooks, tests, the demo).

The rows live in a Python list, with the indexes :meth:`MemoryBackend.state` reads (the
latest grant-or-charge row of each (analyst, dataset), the latest dataset-budget-or-charge
row of each dataset, the charge and answer rows of each (analyst, request id)), so a charge
reads and appends without a database in between. The ledger above it is the same — the hash
chain, the running totals, the optimistic append at ``head + 1`` — and so are the backend's
rules: a ``seq`` is taken once, and an (analyst, request id) has at most one charge and one
answer (:class:`~statcurator.accounting.ChainConflict` otherwise; as in SQL, rows with a NULL
analyst or request id never collide, and the Ledger never writes one); a row that would
leave a gap in the numbering is refused outright (SQL would store it, and the chain's check
would find the gap later). Appends are atomic whoever shares the backend, and values come
back as plain ``str`` and ``int``, as from a database. Nothing
outlives the process, and a forked child cannot use it (its copy would diverge unseen).

>>> b = MemoryBackend()
>>> b.append(LedgerEntry(1, "genesis", at="t", prev_hash="0" * 64, hash="h1"))
>>> b.state(None, None, None)["head"].seq, b.persistent
(1, False)
>>> b.append(LedgerEntry(1, "grant", at="t", prev_hash="0" * 64, hash="h"))
Traceback (most recent call last):
...
statcurator.accounting._backend.ChainConflict: row 1 is taken
"""

from __future__ import annotations

import numbers
import os
import threading
from collections import Counter
from collections.abc import Iterator

from ..core.errors import LedgerError
from ._backend import (
    ENTRY_TYPES,
    PLAIN_TYPES,
    ChainConflict,
    LedgerBackend,
    LedgerEntry,
    check_timeout,
    links_after,
)

__all__ = ["MemoryBackend"]


class MemoryBackend(LedgerBackend):
    """Ledger rows in this process's memory (see the module docs)."""

    location = ":memory:"

    def __init__(self, *, timeout: float = 30.0) -> None:
        self.timeout = check_timeout(timeout)
        #: appends are atomic (check and insert) whoever shares this backend
        self._lock = threading.Lock()
        self._rows: list[LedgerEntry] = []
        self._grants: dict[tuple[str | None, str | None], LedgerEntry] = {}
        self._datasets: dict[str | None, LedgerEntry] = {}
        self._ids: dict[tuple[str, str | None, str | None], LedgerEntry] = {}
        self._pid = os.getpid()
        self._closed = False

    @property
    def persistent(self) -> bool:
        return False

    def _check(self) -> None:
        if self._closed:
            raise LedgerError(f"the ledger {self.location} is closed",
                              remedy="open a new Ledger")
        if os.getpid() != self._pid:
            raise LedgerError("an in-memory ledger cannot be shared with a child process",
                              remedy="open the Ledger on a file to share it between processes")

    def state(self, analyst: str | None, dataset: str | None,
              request_id: str | None) -> dict[str, LedgerEntry]:
        with self._lock:
            return self._state(analyst, dataset, request_id)

    def _state(self, analyst: str | None, dataset: str | None,
               request_id: str | None) -> dict[str, LedgerEntry]:
        self._check()
        out: dict[str, LedgerEntry] = {}
        if self._rows:
            out["head"] = self._rows[-1]
        if analyst is not None and dataset is not None:
            row = self._grants.get((analyst, dataset))
            if row is not None:
                out["grant"] = row
        if dataset is not None:
            row = self._datasets.get(dataset)
            if row is not None:
                out["dataset"] = row
        if analyst is not None and request_id is not None:
            for kind in ("charge", "answer"):
                row = self._ids.get((kind, analyst, request_id))
                if row is not None:
                    out[kind] = row
        return out

    def append(self, entry: LedgerEntry) -> None:
        with self._lock:
            self._append(_exact(entry))

    def append_after(self, entry: LedgerEntry, head: LedgerEntry) -> bool:
        with self._lock:
            self._check()
            rows = self._rows
            charge = self._ids.get(("charge", entry.analyst, entry.request_id))
            # the last row: the very object the ledger remembered, or one equal to it
            if (not links_after(entry, head) or not rows
                    or (rows[-1] is not head and rows[-1] != _exact(head))
                    or (entry.type == "answer"
                        and (charge is None or charge.dataset != entry.dataset))):
                return False
            self._append(_exact(entry))
            return True

    def _append(self, entry: LedgerEntry) -> None:
        self._check()
        if entry.seq <= len(self._rows):
            raise ChainConflict(f"row {entry.seq} is taken")
        if entry.seq != len(self._rows) + 1:  # stricter than SQL, which would store the gap
            raise LedgerError(f"row {entry.seq} would leave a gap after row {len(self._rows)}",
                              remedy="append at the head's seq + 1 (the Ledger always does)")
        key = (entry.type, entry.analyst, entry.request_id)
        # SQL's unique index: rows with a NULL analyst or request id never collide
        indexed = (entry.type in ("charge", "answer") and entry.analyst is not None
                   and entry.request_id is not None)
        if indexed and key in self._ids:
            raise ChainConflict(f"analyst {entry.analyst!r} already has a {entry.type} under "
                                f"request id {entry.request_id!r}")
        self._rows.append(entry)
        if entry.type in ("grant", "charge"):
            self._grants[(entry.analyst, entry.dataset)] = entry
        if entry.type in ("dataset_budget", "charge"):
            self._datasets[entry.dataset] = entry
        if indexed:
            self._ids[key] = entry

    def entries(self, *, after: int = 0, upto: int | None = None, analyst: str | None = None,
                dataset: str | None = None,
                types: tuple[str, ...] | None = None) -> Iterator[LedgerEntry]:
        with self._lock:
            self._check()
            stop = len(self._rows) if upto is None else max(0, min(upto, len(self._rows)))
            rows = self._rows[max(after, 0):stop]  # a snapshot: appends go on meanwhile
        for row in rows:
            if ((analyst is None or row.analyst == analyst)
                    and (dataset is None or row.dataset == dataset)
                    and (types is None or row.type in types)):
                yield row

    def latest(self, scope: str) -> list[LedgerEntry]:
        with self._lock:
            self._check()
            if scope == "grant":
                return [self._grants[k] for k in sorted(self._grants, key=_text_key)]
            return [self._datasets[k] for k in sorted(self._datasets, key=_text_key)]

    def counts(self) -> dict[str, int]:
        with self._lock:
            self._check()
            found = Counter(row.type for row in self._rows)
        return {t: found.get(t, 0) for t in ENTRY_TYPES}

    def problems(self) -> list[str]:
        self._check()
        return []

    def close(self) -> None:
        self._closed = True
        self._rows, self._grants, self._datasets, self._ids = [], {}, {}, {}


def _exact(entry: LedgerEntry) -> LedgerEntry:
    """The row with plain ``str`` and ``int`` values, as a database hands them back (a
    ``numpy.str_`` request id, say, would otherwise come back as itself)."""
    values = entry.values()
    if PLAIN_TYPES.issuperset(map(type, values)):
        return entry
    plain = [v if type(v) in PLAIN_TYPES else
             str(v) if isinstance(v, str) else int(v) if isinstance(v, numbers.Integral) else v
             for v in values]
    return LedgerEntry(*plain)  # type: ignore[arg-type]


def _text_key(key: object) -> tuple[object, ...]:
    """Keys sorted as SQL sorts text (NULL first)."""
    parts = key if isinstance(key, tuple) else (key,)
    return tuple((p is not None, p or "") for p in parts)
