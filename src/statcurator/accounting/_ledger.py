"""The persistent, append-only privacy ledger.

The ledger is the curator's memory of privacy spent: one budget per (analyst, dataset), every
charge with its request id, query, mechanism, time and exact cost, and the answer released
for it. The rules it enforces:

* **Debit before release.** :meth:`Ledger.charge` checks the remaining budget and records the
  charge in one exclusive transaction; concurrent processes can never both spend the last of
  a budget. A refused charge records nothing.
* **Exact.** Costs are stored as ``numerator/denominator`` text and summed as ``Fraction``;
  10 charges of 0.1 and 1,000 of 0.001 spend exactly 2.
* **Append-only.** Nothing is updated or deleted; a budget change is a new record.
* **Replays are free, fresh noise never is.** A request id that was already charged is not
  charged again: :meth:`Ledger.charge` returns the stored charge with ``replayed=True``, and
  :meth:`Ledger.replay` returns the answer stored for it. If the curator stopped between the
  charge and storing the answer, the answer is lost: :meth:`Ledger.replay` raises
  :class:`AnswerLostError`, the budget stays spent, and :meth:`Ledger.store_answer` refuses
  to record a *new* answer under that id (only the ledger object that made the charge may
  store its answer, once). A new answer needs a new request id, which is charged again.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from ..core.errors import InvalidParameterError, LedgerError
from ..core.measures import PrivacyLoss
from ._accountant import Accountant, BudgetStatus
from ._backend import BudgetRecord, ChargeRecord, LedgerBackend
from ._errors import AnswerLostError, NoBudgetError
from ._losses import convert, decode, describe, encode, kind_of, validate_loss
from ._sqlite import SQLiteBackend

__all__ = ["Ledger", "Charge"]


@dataclass(frozen=True, slots=True)
class Charge:
    """One recorded charge.

    ``cost`` is the loss as charged (before any conversion into the budget's currency);
    ``seq`` orders the charges of the ledger; ``replayed`` is True when :meth:`Ledger.charge`
    found this request id already charged (nothing was spent this time); ``answered`` says
    whether an answer is stored for it.

    >>> from statcurator.core.measures import PureDP
    >>> led = Ledger()
    >>> _ = led.set_budget("alice", "adult", PureDP(1))
    >>> c = led.charge("alice", "adult", PureDP(0.1), request_id="r1",
    ...                query="SELECT COUNT(*) FROM adult", mechanism="Laplace(scale=10)")
    >>> c.cost, c.replayed, c.answered
    (PureDP(epsilon=Fraction(1, 10)), False, False)
    """

    request_id: str
    analyst: str
    dataset: str
    cost: PrivacyLoss
    query: str
    mechanism: str
    timestamp: datetime
    seq: int
    replayed: bool = False
    answered: bool = False


@dataclass(frozen=True, slots=True)
class _Spent:
    """What this process already summed for one pair: charges up to ``seq``, in ``kind``."""

    kind: str
    seq: int
    spent: tuple[Fraction, ...]
    charges: int


class Ledger:
    """Privacy budgets and the append-only ledger of charges (SQLite; WAL mode on a file).

    ``Ledger()`` keeps everything in memory (for tests and notebooks); ``Ledger(path)`` opens
    or creates a persistent ledger that several processes may share. ``backend=`` plugs in
    another :class:`~statcurator.accounting.LedgerBackend`. Thread-safe.

    Costs and totals are :class:`~statcurator.core.measures.PureDP`,
    :class:`~statcurator.core.measures.ApproxDP` or :class:`~statcurator.core.measures.ZCDP`
    values (a bare number means pure ε); see :class:`~statcurator.accounting.Accountant` for
    which charges each kind of budget accepts.

    The intended use by a curator::

        c = ledger.charge(analyst, dataset, cost, request_id=rid, query=sql, mechanism=desc)
        if c.replayed:
            return ledger.replay(rid)        # the stored answer, or AnswerLostError
        answer = run_the_mechanism()         # only after the debit
        ledger.store_answer(rid, answer)
        return answer

    >>> from statcurator.core.measures import PureDP
    >>> led = Ledger()
    >>> led.set_budget("alice", "adult", PureDP(1))
    BudgetStatus(total=PureDP(epsilon=Fraction(1, 1)), spent=PureDP(epsilon=Fraction(0, 1)), remaining=PureDP(epsilon=Fraction(1, 1)), charges=0)
    >>> _ = led.charge("alice", "adult", PureDP(0.25), request_id="q1",
    ...                query="SELECT COUNT(*) FROM adult", mechanism="Laplace(scale=4)")
    >>> led.store_answer("q1", "30157")
    >>> led.status("alice", "adult").remaining
    PureDP(epsilon=Fraction(3, 4))
    >>> led.charge("alice", "adult", PureDP(0.25), request_id="q1",
    ...            query="SELECT COUNT(*) FROM adult", mechanism="Laplace(scale=4)").replayed
    True
    >>> led.replay("q1"), led.status("alice", "adult").charges
    ('30157', 1)
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0,
                 backend: LedgerBackend | None = None) -> None:
        if backend is not None:
            if path is not None:
                raise InvalidParameterError("give either a path or a backend, not both",
                                            remedy="open the backend on the path yourself")
            if not isinstance(backend, LedgerBackend):
                raise InvalidParameterError(
                    f"backend must be a LedgerBackend, got {type(backend).__name__}",
                    remedy="pass SQLiteBackend(path) or leave backend out")
            self._backend = backend
        else:
            self._backend = SQLiteBackend(path, timeout=timeout)
        self._lock = threading.RLock()
        self._summed: dict[tuple[str, str], _Spent] = {}
        self._pending: set[str] = set()

    # -- properties ---------------------------------------------------------------------------
    @property
    def backend(self) -> LedgerBackend:
        """The storage backend."""
        return self._backend

    @property
    def location(self) -> str:
        """Where the ledger lives (a path, or ``':memory:'``)."""
        return self._backend.location

    @property
    def path(self) -> Path | None:
        """The ledger file, or ``None`` when the ledger is not a local file."""
        return getattr(self._backend, "path", None)

    @property
    def persistent(self) -> bool:
        """True when charges outlive this process."""
        return self._backend.persistent

    # -- budgets ------------------------------------------------------------------------------
    def set_budget(self, analyst: str, dataset: str,
                   total: PrivacyLoss | Fraction | int | float) -> BudgetStatus:
        """Give ``analyst`` a total privacy budget on ``dataset`` (or change it).

        A change is recorded as a new budget record (the ledger is append-only). It may raise
        or lower the total, and even change its kind, as long as everything already spent
        still fits and converts (pure ε → (ε, δ) or zCDP; never the other way).

        >>> from statcurator.core.measures import PureDP, ZCDP
        >>> led = Ledger()
        >>> _ = led.set_budget("bob", "adult", PureDP(1))
        >>> _ = led.charge("bob", "adult", PureDP(1), request_id="b1", query="q", mechanism="m")
        >>> led.set_budget("bob", "adult", ZCDP(1)).spent      # ε=1 ⇒ ρ=1/2
        ZCDP(rho=Fraction(1, 2))
        >>> led.set_budget("bob", "adult", ZCDP(Fraction(1, 4)))
        Traceback (most recent call last):
        ...
        statcurator.core.errors.InvalidParameterError: the new total ρ=0.25 is below what analyst 'bob' on dataset 'adult' has already spent (ρ=0.5); set a total of at least ρ=0.5: spent budget is never refunded
        """
        analyst, dataset = _name(analyst, "analyst"), _name(dataset, "dataset")
        loss = validate_loss(total, "total")
        kind = kind_of(loss)
        key = (analyst, dataset)
        label = _label(analyst, dataset)
        with self._lock:
            with self._backend.write():
                records = self._backend.charges(analyst, dataset)
                spent = [Fraction(0)] * len(convert(loss, kind))
                for rec in records:
                    stored = _decode_charge(rec)
                    try:
                        price = convert(stored, kind)
                    except InvalidParameterError as e:
                        raise InvalidParameterError(
                            f"the budget of {label} cannot become {describe(kind, convert(loss, kind))}: "
                            f"charge {rec.request_id!r} ({stored}) cannot be spent from it "
                            f"({e.problem})",
                            remedy="keep a budget of a kind that every past charge converts to"
                        ) from None
                    spent = [s + p for s, p in zip(spent, price, strict=True)]
                limit = convert(loss, kind)
                if any(s > t for s, t in zip(spent, limit, strict=True)):
                    shown = describe(kind, tuple(spent))
                    raise InvalidParameterError(
                        f"the new total {describe(kind, limit)} is below what {label} has "
                        f"already spent ({shown})",
                        remedy=f"set a total of at least {shown}: spent budget is never refunded")
                previous = self._backend.latest_budget(analyst, dataset)
                if previous is None or _budget_text(previous) != encode(loss):
                    self._backend.insert_budget(analyst, dataset, *encode(loss), set_at=_now())
            acc = Accountant._restore(loss, tuple(spent), len(records), label=label)
            self._summed[key] = _Spent(kind, records[-1].seq if records else 0, tuple(spent),
                                       len(records))
        return acc.status()

    def status(self, analyst: str, dataset: str) -> BudgetStatus:
        """The budget of ``analyst`` on ``dataset``: total, spent and remaining, exactly.

        Raises :class:`NoBudgetError` when no budget was set.

        >>> from statcurator.core.measures import ApproxDP
        >>> led = Ledger()
        >>> _ = led.set_budget("carol", "adult", ApproxDP(1, 1e-6))
        >>> print(led.status("carol", "adult"))
        spent ε=0, δ=0 of ε=1, δ=1e-06 in 0 charges; remaining ε=1, δ=1e-06
        """
        analyst, dataset = _name(analyst, "analyst"), _name(dataset, "dataset")
        with self._lock:
            with self._backend.read():
                acc = self._accountant(analyst, dataset)
            return acc.status()

    def budgets(self) -> dict[tuple[str, str], BudgetStatus]:
        """Every budget in the ledger, by (analyst, dataset), from one snapshot.

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_budget("alice", "adult", PureDP(1))
        >>> list(led.budgets())
        [('alice', 'adult')]
        """
        with self._lock, self._backend.read():
            return {key: self._accountant(*key).status()
                    for key in self._backend.budget_keys()}

    def can_spend(self, analyst: str, dataset: str,
                  cost: PrivacyLoss | Fraction | int | float) -> bool:
        """True when ``cost`` fits in what remains (False when there is no budget at all).

        Invalid or incompatible costs raise :class:`~statcurator.core.errors.InvalidParameterError`
        rather than answer False, so that the remedy is not lost. The answer is advisory:
        only :meth:`charge` decides, atomically.

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> led.can_spend("alice", "adult", PureDP(1))
        False
        >>> _ = led.set_budget("alice", "adult", PureDP(1))
        >>> led.can_spend("alice", "adult", PureDP(1)), led.can_spend("alice", "adult", 1.5)
        (True, False)
        """
        analyst, dataset = _name(analyst, "analyst"), _name(dataset, "dataset")
        loss = validate_loss(cost)
        with self._lock:
            try:
                with self._backend.read():
                    acc = self._accountant(analyst, dataset)
            except NoBudgetError:
                return False
        return acc.can_spend(loss)

    # -- charging -----------------------------------------------------------------------------
    def charge(self, analyst: str, dataset: str, cost: PrivacyLoss | Fraction | int | float, *,
               request_id: str, query: str, mechanism: str) -> Charge:
        """Spend ``cost`` from the budget of ``analyst`` on ``dataset``, recording the charge.

        One exclusive transaction reads what is spent, checks that ``cost`` fits and records
        the charge, so no interleaving of processes can overspend. Raises
        :class:`~statcurator.core.errors.BudgetExceededError` (a :class:`NoBudgetError` when
        there is no budget) and records nothing when the charge does not fit.

        A ``request_id`` that was already charged is not charged again: the stored charge
        comes back with ``replayed=True`` (see :meth:`replay` for its answer). Reusing a
        request id for another analyst, dataset, query or cost is an error.

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_budget("alice", "adult", PureDP(0.5))
        >>> led.charge("alice", "adult", PureDP(1), request_id="big", query="q", mechanism="m")
        Traceback (most recent call last):
        ...
        statcurator.core.errors.BudgetExceededError: a charge of ε=1 exceeds the privacy budget of analyst 'alice' on dataset 'adult': ε=0.5 remains of ε=0.5; ask for at most ε=0.5 (less privacy loss means more noise), or ask the data owner to raise the budget
        >>> led.charges()
        []
        """
        analyst, dataset = _name(analyst, "analyst"), _name(dataset, "dataset")
        request_id = _name(request_id, "request_id")
        query, mechanism = _text(query, "query"), _text(mechanism, "mechanism")
        loss = validate_loss(cost)
        stored = encode(loss)
        key = (analyst, dataset)
        with self._lock:
            with self._backend.write():
                prior = self._backend.charge_for(request_id)
                if prior is None:
                    acc = self._accountant(analyst, dataset)
                    acc.spend(loss)
                    seq = self._backend.insert_charge(request_id, analyst, dataset, *stored,
                                                      query=query, mechanism=mechanism,
                                                      charged_at=(now := _now()))
            if prior is not None:
                _check_replay(prior, analyst, dataset, stored, query)
                return _to_charge(prior, replayed=True)
            # Committed: every charge of the pair up to ``seq`` is now summed in ``acc``.
            self._summed[key] = _Spent(acc.kind, seq, tuple(convert(acc.spent, acc.kind)),
                                       acc.charges)
            self._pending.add(request_id)
        return Charge(request_id, analyst, dataset, loss, query, mechanism,
                      datetime.fromisoformat(now), seq)

    def charges(self, analyst: str | None = None, dataset: str | None = None) -> list[Charge]:
        """The recorded charges, oldest first, optionally of one analyst and/or dataset.

        >>> Ledger().charges("alice")
        []
        """
        analyst = None if analyst is None else _name(analyst, "analyst")
        dataset = None if dataset is None else _name(dataset, "dataset")
        with self._lock, self._backend.read():
            records = self._backend.charges(analyst, dataset)
        return [_to_charge(r) for r in records]

    # -- answers ------------------------------------------------------------------------------
    def store_answer(self, request_id: str, payload: str) -> None:
        """Record the answer released for a charged request, so that a replay returns it.

        Allowed once per request id, and only by the ledger object that made the (fresh)
        charge: an answer cannot be stored before its charge (debit before release), and a
        request whose answer was lost in a crash cannot get a new, free answer. Storing the
        same payload again is a no-op.

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> led.store_answer("nope", "42")
        Traceback (most recent call last):
        ...
        statcurator.core.errors.LedgerError: no charge is recorded for request 'nope'; charge the request before storing its answer: the ledger debits before anything is released
        """
        request_id = _name(request_id, "request_id")
        if not isinstance(payload, str):
            raise InvalidParameterError(
                f"an answer must be stored as text, got {type(payload).__name__}",
                remedy="serialize it first (for example with json.dumps)")
        with self._lock:
            with self._backend.write():
                prior = self._backend.charge_for(request_id)
                if prior is None:
                    raise LedgerError(f"no charge is recorded for request {request_id!r}",
                                      remedy="charge the request before storing its answer: "
                                             "the ledger debits before anything is released")
                existing = self._backend.answer(request_id)
                if existing is not None:
                    if existing == payload:
                        return
                    raise LedgerError(
                        f"request {request_id!r} already has a stored answer, and answers are "
                        "append-only",
                        remedy="a replay returns the first answer; a new answer needs a new "
                               "request id (charged again)")
                if request_id not in self._pending:
                    raise AnswerLostError(
                        f"request {request_id!r} was charged by another process or an earlier "
                        "run, and its answer was never stored; a fresh answer cannot be stored "
                        "under it",
                        remedy="fresh noise under an already charged request id would be free; "
                               "submit the query under a new request id, which is charged again")
                self._backend.insert_answer(request_id, payload, _now())
            self._pending.discard(request_id)

    def answer(self, request_id: str) -> str | None:
        """The answer stored for ``request_id``, or ``None`` (never charged, or never stored).

        >>> Ledger().answer("r1") is None
        True
        """
        request_id = _name(request_id, "request_id")
        with self._lock, self._backend.read():
            return self._backend.answer(request_id)

    def replay(self, request_id: str) -> str:
        """The answer stored for an already charged request, for free.

        Raises :class:`AnswerLostError` when the request was charged but no answer was stored
        (the curator stopped between the charge and the release, or the answer is still being
        computed): the budget stays spent and nothing fresh is released under that id. Raises
        :class:`~statcurator.core.errors.LedgerError` for a request id that was never charged.

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_budget("alice", "adult", PureDP(1))
        >>> _ = led.charge("alice", "adult", PureDP(0.5), request_id="r", query="q", mechanism="m")
        >>> led.replay("r")
        Traceback (most recent call last):
        ...
        statcurator.accounting.AnswerLostError: request 'r' is charged (ε=0.5) but no answer is stored: its first submission is still being computed in this process; retry when it has returned
        """
        request_id = _name(request_id, "request_id")
        with self._lock:
            with self._backend.read():
                prior = self._backend.charge_for(request_id)
                stored = None if prior is None else self._backend.answer(request_id)
            pending = request_id in self._pending
        if prior is None:
            raise LedgerError(f"no charge is recorded for request {request_id!r}",
                              remedy="submit the query with charge() first")
        if stored is not None:
            return stored
        cost = _decode_charge(prior)
        problem = f"request {request_id!r} is charged ({cost}) but no answer is stored"
        if pending:
            raise AnswerLostError(f"{problem}: its first submission is still being computed in "
                                  "this process", remedy="retry when it has returned")
        raise AnswerLostError(
            f"{problem}: the curator stopped between the charge ({prior.charged_at}) and the "
            "release, or another process is still computing it",
            remedy="the budget stays spent and fresh noise is never released for free under a "
                   "charged request id; submit the query under a new request id, which is "
                   "charged again")

    # -- housekeeping -------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Row counts of the ledger's tables (for audits and tests).

        >>> Ledger().counts()
        {'budgets': 0, 'charges': 0, 'answers': 0}
        """
        with self._lock:
            return self._backend.counts()

    def close(self) -> None:
        """Close the ledger (an in-memory ledger is gone). Idempotent."""
        with self._lock:
            self._backend.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({self.location!r})"

    # -- internals ----------------------------------------------------------------------------
    def _accountant(self, analyst: str, dataset: str) -> Accountant:
        """The pair's budget with everything spent so far; call inside a transaction.

        Charges are append-only and their ``seq`` grows in commit order, so only the charges
        after the last one summed by this process need reading.
        """
        label = _label(analyst, dataset)
        budget = self._backend.latest_budget(analyst, dataset)
        if budget is None:
            raise NoBudgetError(f"{label} has no privacy budget",
                                remedy=f"the data owner sets one first, e.g. "
                                       f"ledger.set_budget({analyst!r}, {dataset!r}, PureDP(1))")
        total = decode(budget.kind, budget.epsilon, budget.delta, budget.rho)
        known = self._summed.get((analyst, dataset))
        if known is None or known.kind != budget.kind:
            known = _Spent(budget.kind, 0, tuple(Fraction(0) for _ in convert(total, budget.kind)), 0)
        spent, count, seq = list(known.spent), known.charges, known.seq
        for rec in self._backend.charges(analyst, dataset, after=known.seq):
            try:
                price = convert(_decode_charge(rec), budget.kind)
            except InvalidParameterError as e:
                raise LedgerError(f"the ledger holds a charge {rec.request_id!r} that the budget "
                                  f"of {label} cannot hold ({e.problem})",
                                  remedy="the ledger file was altered; restore it from a backup"
                                  ) from None
            spent = [s + p for s, p in zip(spent, price, strict=True)]
            count, seq = count + 1, rec.seq
        limit = convert(total, budget.kind)
        if any(s > t for s, t in zip(spent, limit, strict=True)):
            raise LedgerError(f"the ledger records more spent by {label} than its total",
                              remedy="the ledger file was altered; restore it from a backup")
        self._summed[(analyst, dataset)] = _Spent(budget.kind, seq, tuple(spent), count)
        return Accountant._restore(total, tuple(spent), count, label=label)


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameterError(f"{what} must be a non-empty string, got {value!r}",
                                    remedy=f"pass the {what} as text, such as {what}='alice'"
                                    if what == "analyst" else f"pass the {what} as text")
    return value


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameterError(f"{what} must be a non-empty string, got {value!r}",
                                    remedy=f"record the {what} of the charge as text, for audits")
    return value


def _label(analyst: str, dataset: str) -> str:
    return f"analyst {analyst!r} on dataset {dataset!r}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _budget_text(rec: BudgetRecord) -> tuple[str, str | None, str | None, str | None]:
    return (rec.kind, rec.epsilon, rec.delta, rec.rho)


def _decode_charge(rec: ChargeRecord) -> PrivacyLoss:
    return decode(rec.kind, rec.epsilon, rec.delta, rec.rho)


def _to_charge(rec: ChargeRecord, *, replayed: bool = False) -> Charge:
    try:
        when = datetime.fromisoformat(rec.charged_at)
    except (TypeError, ValueError):
        raise LedgerError(f"the ledger holds a malformed time {rec.charged_at!r}",
                          remedy="the ledger file was altered; restore it from a backup") from None
    return Charge(rec.request_id, rec.analyst, rec.dataset, _decode_charge(rec), rec.query,
                  rec.mechanism, when, rec.seq, replayed=replayed, answered=rec.answered)


def _check_replay(prior: ChargeRecord, analyst: str, dataset: str,
                  stored: tuple[str, str | None, str | None, str | None], query: str) -> None:
    remedy = "give every new query a fresh, unique request id (such as uuid.uuid4().hex)"
    if (prior.analyst, prior.dataset) != (analyst, dataset):
        raise LedgerError(f"request id {prior.request_id!r} was already used by "
                          f"{_label(prior.analyst, prior.dataset)}", remedy=remedy)
    if prior.query != query or (prior.kind, prior.epsilon, prior.delta, prior.rho) != stored:
        raise LedgerError(f"request id {prior.request_id!r} was already charged for another "
                          f"query or cost ({_decode_charge(prior)} for {prior.query!r})",
                          remedy=remedy)
