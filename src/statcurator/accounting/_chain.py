"""The hash chain of the ledger, and the audit that re-derives every running total.

Each row stores ``hash = H(prev_hash ‖ content)`` where ``content`` is the canonical JSON of
every other field (its ``seq`` included, so rows cannot be reordered) and ``H`` is SHA-256,
or HMAC-SHA-256 under a secret key. Changing, deleting or inserting a row breaks the link
of the row after it; without the key, whoever can write the file can recompute the whole
chain, which is what the key is for (see docs/ledger.md, "Threat model").

>>> from statcurator.accounting._backend import LedgerEntry
>>> e = LedgerEntry(1, "genesis", payload="{}", at="2024-01-01T00:00:00+00:00", prev_hash=ZERO)
>>> len(digest(e, None)), digest(e, None) == digest(e, b"k" * 32)
(64, False)
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from fractions import Fraction

import orjson

from ..core.errors import InvalidParameterError
from ._backend import PLAIN_TYPES, LedgerEntry
from ._errors import LedgerTamperedError
from ._identity import analyst_id
from ._losses import KINDS, convert, decode, pack, unpack

__all__ = ["ZERO", "FORMAT", "digest", "Verification", "Audit"]

#: The ``prev_hash`` of the first row.
ZERO = "0" * 64
#: The ledger format written in the genesis row.
FORMAT = 2


def canonical(content: tuple[object, ...]) -> bytes:
    r"""A row's content as canonical JSON in UTF-8: compact, non-ASCII characters as they
    are, the standard library's escapes. orjson writes the same bytes for the text, integers
    and NULLs of a row (tests/accounting/test_tamper.py holds the two to each other) in a
    third of the time; a row with any other type of value (a float read back from a tampered
    store, say), or an integer beyond 64 bits, goes through :mod:`json`.

    >>> canonical((1, "genesis", None, 'a "b"\n'))
    b'[1,"genesis",null,"a \\"b\\"\\n"]'
    """
    # orjson writes exactly these types as json does (not bool, not float, no subclass)
    if PLAIN_TYPES.issuperset(map(type, content)):
        try:
            return orjson.dumps(content)
        except orjson.JSONEncodeError:  # an integer beyond 64 bits
            pass
    # anything else a tampered store may hand back (a REAL where an integer belongs: orjson
    # would write ±inf and NaN as null, and floats unlike json) goes through json
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def digest(entry: LedgerEntry, key: bytes | None) -> str:
    """The hash of a row: over its previous hash and its canonical content."""
    message = entry.prev_hash.encode("ascii", "replace") + b"\x1e" + canonical(entry.content())
    if key is None:
        return hashlib.sha256(message).hexdigest()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Verification:
    """The result of verifying a ledger: how many rows, the chain's head, and how it is
    protected. ``anchor`` (``"rows:head"``) is what to keep elsewhere to detect later that
    rows were cut off the end or the file was replaced by an older copy.

    >>> v = Verification("l.db", 3, "ab" * 32, keyed=False, ledger_id="x", audited=True)
    >>> v.anchor
    '3:abababababababababababababababababababababababababababababababab'
    """

    location: str
    rows: int
    head: str
    keyed: bool
    ledger_id: str
    audited: bool

    @property
    def anchor(self) -> str:
        """``rows:head``: a short commitment to everything in the ledger up to now."""
        return f"{self.rows}:{self.head}"

    def __str__(self) -> str:
        how = "HMAC-SHA-256 (keyed)" if self.keyed else "SHA-256 (no key)"
        what = "chain and running totals" if self.audited else "chain"
        return (f"{self.location}: {self.rows} rows verified ({what}, {how}); "
                f"head {self.head[:16]}…")


class _Scope:
    """A budget (a grant or a dataset-wide budget) as the audit re-derives it."""

    __slots__ = ("kind", "total", "sums", "count")

    def __init__(self) -> None:
        self.kind: str | None = None
        self.total: tuple[Fraction, ...] = ()
        # What every charge so far sums to in each currency (None: some charge cannot
        # convert to it), so that a change of currency can be checked exactly.
        self.sums: dict[str, tuple[Fraction, ...] | None] = {
            k: (Fraction(0),) * _arity(k) for k in KINDS}
        self.count = 0

    def add(self, cost: object) -> None:
        for k, s in self.sums.items():
            if s is None:
                continue
            try:
                price = convert(cost, k)  # type: ignore[arg-type]
            except InvalidParameterError:
                self.sums[k] = None
                continue
            self.sums[k] = tuple(a + b for a, b in zip(s, price, strict=True))
        self.count += 1

    def state(self) -> tuple[str, str | None, int]:
        assert self.kind is not None
        spent = self.sums[self.kind]
        return (pack(self.kind, self.total), None if spent is None else pack(self.kind, spent),
                self.count)


def _arity(kind: str) -> int:
    return 2 if kind == "approx" else 1


class Audit:
    """Replays rows in order and checks every stored running total against the exact sum
    of the charges, that nothing is ever overspent, and that every row is well formed.

    Feed it every row from the first; :meth:`feed` raises
    :class:`~statcurator.accounting.LedgerTamperedError` at the first row that is wrong.
    """

    def __init__(self, location: str) -> None:
        self.location = location
        self.grants: dict[tuple[str, str], _Scope] = {}
        self.datasets: dict[str, _Scope] = {}
        self.charged: dict[tuple[str, str], str] = {}
        self.answered: set[tuple[str, str]] = set()

    def _bad(self, e: LedgerEntry, why: str) -> LedgerTamperedError:
        return LedgerTamperedError(
            f"the ledger {self.location} is inconsistent at row {e.seq} ({e.type}): {why}",
            row=e.seq, remedy="the ledger was altered outside statcurator; restore it from a "
                              "trusted backup")

    def feed(self, e: LedgerEntry) -> None:
        try:
            getattr(self, f"_{e.type}")(e)
        except LedgerTamperedError:
            raise
        except Exception as exc:  # malformed text, wrong types: all mean a forged row
            raise self._bad(e, f"malformed row ({exc})") from None

    def _genesis(self, e: LedgerEntry) -> None:
        if e.seq != 1:
            raise self._bad(e, "a second genesis row")

    def _identity(self, e: LedgerEntry) -> str:
        if e.analyst is None or analyst_id(e.analyst) != e.analyst:
            raise self._bad(e, f"analyst {e.analyst!r} is not a normalized identity")
        return e.analyst

    def _set_total(self, e: LedgerEntry, scope: _Scope, stored: tuple[object, ...]) -> None:
        total = decode(e.kind, e.epsilon, e.delta, e.rho)  # type: ignore[arg-type]
        kind = e.kind
        assert kind is not None
        if scope.sums[kind] is None:
            raise self._bad(e, f"a past charge cannot be spent from a {kind} budget")
        scope.kind, scope.total = kind, convert(total, kind)
        self._compare(e, scope, stored)

    def _compare(self, e: LedgerEntry, scope: _Scope, stored: tuple[object, ...]) -> None:
        total, spent, count = scope.state()
        if (total, spent, count) != stored:
            raise self._bad(e, f"stored totals {stored} differ from the re-derived "
                               f"{(total, spent, count)}")
        _, values = unpack(spent)
        if any(s > t for s, t in zip(values, scope.total, strict=True)):
            raise self._bad(e, f"spent {spent} exceeds the total {total}")

    def _dataset_budget(self, e: LedgerEntry) -> None:
        if e.analyst is not None or not e.dataset:
            raise self._bad(e, "a dataset budget names an analyst or no dataset")
        scope = self.datasets.setdefault(e.dataset, _Scope())
        self._set_total(e, scope, (e.dataset_total, e.dataset_spent, e.dataset_charges))

    def _grant(self, e: LedgerEntry) -> None:
        analyst = self._identity(e)
        if not e.dataset:
            raise self._bad(e, "a grant names no dataset")
        scope = self.grants.setdefault((analyst, e.dataset), _Scope())
        self._set_total(e, scope, (e.grant_total, e.grant_spent, e.grant_charges))

    def _charge(self, e: LedgerEntry) -> None:
        analyst = self._identity(e)
        key = (analyst, str(e.request_id))
        if not e.request_id or key in self.charged:
            raise self._bad(e, f"request id {e.request_id!r} is missing or charged twice")
        grant = self.grants.get((analyst, str(e.dataset)))
        data = self.datasets.get(str(e.dataset))
        if grant is None or data is None:
            raise self._bad(e, "a charge without a grant or a dataset-wide budget")
        cost = decode(e.kind, e.epsilon, e.delta, e.rho)  # type: ignore[arg-type]
        grant.add(cost)
        data.add(cost)
        self._compare(e, grant, (e.grant_total, e.grant_spent, e.grant_charges))
        self._compare(e, data, (e.dataset_total, e.dataset_spent, e.dataset_charges))
        self.charged[key] = str(e.dataset)

    def _answer(self, e: LedgerEntry) -> None:
        key = (str(e.analyst), str(e.request_id))
        if self.charged.get(key) != e.dataset or key in self.answered \
                or not isinstance(e.payload, str):
            raise self._bad(e, "an answer without its charge, or a second answer")
        self.answered.add(key)
