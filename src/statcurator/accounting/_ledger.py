"""The persistent, append-only, tamper-evident privacy ledger.

The ledger is the curator's memory of privacy spent. The rules it enforces:

* **Two budgets per charge.** Every dataset has a *dataset-wide* (lifetime) budget: the data
  owner's bound on the total privacy loss of that data across every analyst, since analysts
  may collude. Every analyst has a *grant* on a dataset. A charge debits both in one atomic
  append, and is refused — recording nothing — if either would be exceeded or is missing.
* **Identities are normalized.** An analyst name is stored as :func:`analyst_id` makes it
  (NFKC, case-folded, no invisible characters, one script); request ids are scoped to the
  analyst, so another analyst's id neither blocks nor reveals anything.
* **Debit before release.** :meth:`Ledger.charge` checks and records in one atomic step; no
  interleaving of processes can overspend. Nothing is updated or deleted.
* **Exact.** Amounts are ``numerator/denominator`` text, summed as ``Fraction``.
* **Tamper-evident.** Every row is chained to the previous one by SHA-256 (HMAC-SHA-256 with
  a key); the chain is verified when the ledger opens, each row a charge relies on is
  re-hashed (or found unchanged since this object checked it), and :meth:`Ledger.verify`
  re-derives every running total.
* **Replays are free, fresh noise never is.** A request id already charged is not charged
  again; :meth:`Ledger.replay` returns its stored answer, and an answer lost in a crash is
  never replaced by a fresh one under the same id.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import random
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..core.errors import InvalidParameterError, LedgerError
from ..core.measures import PrivacyLoss
from ._accountant import Accountant, BudgetStatus
from ._backend import ChainConflict, LedgerBackend, LedgerEntry
from ._chain import FORMAT, ZERO, Audit, Verification, digest
from ._errors import AnswerLostError, LedgerTamperedError, NoBudgetError
from ._identity import analyst_id, check_name
from ._losses import (
    components,
    convert,
    decode,
    describe,
    encode,
    kind_of,
    make,
    pack,
    unpack,
    validate_loss,
)
from ._memory import MemoryBackend
from ._sqlite import SQLiteBackend

__all__ = ["Ledger", "Charge", "KEY_ENV"]

#: The environment variable that holds the ledger's secret key (HMAC-SHA-256), if any.
KEY_ENV = "STATCURATOR_LEDGER_KEY"
_MIN_KEY = 16
_TAMPERED = ("the ledger was altered outside statcurator; it refuses service until it is "
             "restored from a trusted backup (`statcurator ledger verify` names the first bad "
             "row)")

Amount = PrivacyLoss | Fraction | int | float


@dataclass(frozen=True, slots=True)
class Charge:
    """One recorded charge.

    ``analyst`` is the normalized identity; ``cost`` is the loss as charged (before any
    conversion into a budget's currency); ``seq`` is its row in the ledger; ``replayed`` is
    True when :meth:`Ledger.charge` found this request id already charged by this analyst
    (nothing was spent this time); ``answered`` says whether an answer is stored for it.

    >>> from statcurator.core.measures import PureDP
    >>> led = Ledger()
    >>> _ = led.set_dataset_budget("adult", PureDP(10))
    >>> _ = led.set_budget("Alice", "adult", PureDP(1))
    >>> c = led.charge("alice", "adult", PureDP(0.1), request_id="r1",
    ...                query="SELECT COUNT(*) FROM adult", mechanism="Laplace(scale=10)")
    >>> c.analyst, c.cost, c.replayed, c.answered
    ('alice', PureDP(epsilon=Fraction(1, 10)), False, False)
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


class Ledger:
    """Dataset-wide budgets, per-analyst grants and the hash-chained ledger of charges.

    ``Ledger()`` keeps everything in this process's memory (tests, notebooks:
    :class:`~statcurator.accounting.MemoryBackend`); ``Ledger(path)`` opens or
    creates an SQLite file (WAL mode) that several processes may share; ``backend=`` plugs in
    another :class:`~statcurator.accounting.LedgerBackend` (such as
    :class:`~statcurator.accounting.PostgresBackend`). ``key`` (text or bytes, at least 16
    bytes; default: the environment variable ``STATCURATOR_LEDGER_KEY``) makes the chain an
    HMAC-SHA-256 chain that nobody without the key can recompute. Opening verifies the chain
    and raises :class:`~statcurator.accounting.LedgerTamperedError` if it is broken.
    Thread-safe.

    Amounts are :class:`~statcurator.core.measures.PureDP`,
    :class:`~statcurator.core.measures.ApproxDP` or :class:`~statcurator.core.measures.ZCDP`
    values (a bare number means pure ε); see :class:`~statcurator.accounting.Accountant` for
    which charges each kind of budget accepts.

    The intended use by a curator::

        c = ledger.charge(analyst, dataset, cost, request_id=rid, query=sql, mechanism=desc)
        if c.replayed:
            return ledger.replay(analyst, rid)  # the stored answer, or AnswerLostError
        answer = run_the_mechanism()            # only after the debit
        ledger.store_answer(analyst, rid, answer)
        return answer

    >>> from statcurator.core.measures import PureDP
    >>> led = Ledger()
    >>> print(led.set_dataset_budget("adult", PureDP(3)))
    spent ε=0 of ε=3 in 0 charges; remaining ε=3
    >>> print(led.set_budget("alice", "adult", PureDP(1)))
    spent ε=0 of ε=1 in 0 charges; remaining ε=1
    >>> _ = led.charge("alice", "adult", PureDP(0.25), request_id="q1",
    ...                query="SELECT COUNT(*) FROM adult", mechanism="Laplace(scale=4)")
    >>> led.store_answer("alice", "q1", "30157")
    >>> led.status("alice", "adult").remaining, led.dataset_status("adult").remaining
    (PureDP(epsilon=Fraction(3, 4)), PureDP(epsilon=Fraction(11, 4)))
    >>> led.charge("ALICE", "adult", PureDP(0.25), request_id="q1",
    ...            query="SELECT COUNT(*) FROM adult", mechanism="Laplace(scale=4)").replayed
    True
    >>> led.replay("alice", "q1"), led.status("alice", "adult").charges
    ('30157', 1)
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 key: str | bytes | None = None, timeout: float = 30.0,
                 backend: LedgerBackend | None = None, anchor: str | None = None) -> None:
        if backend is not None:
            if path is not None:
                raise InvalidParameterError("give either a path or a backend, not both",
                                            remedy="open the backend on the path yourself")
            if not isinstance(backend, LedgerBackend):
                raise InvalidParameterError(
                    f"backend must be a LedgerBackend, got {type(backend).__name__}",
                    remedy="pass SQLiteBackend(path) or leave backend out")
            self._backend = backend
        elif path is None or str(path) == ":memory:":
            self._backend = MemoryBackend(timeout=timeout)
        else:
            self._backend = SQLiteBackend(path, timeout=timeout)
        self._key = _resolve_key(key)
        self._timeout = float(getattr(self._backend, "timeout", 30.0))
        self._lock = _LedgerLock()
        #: (analyst, request id) -> dataset of the charges this object made whose answer is
        #: not stored yet
        self._pending: dict[tuple[str, str], str] = {}
        self._seen = 0
        #: rows whose hash was checked (or that this object sealed), by position: a row read
        #: again unchanged is not hashed again (a changed one is: it no longer equals this)
        self._checked: dict[int, LedgerEntry] = {}
        #: the budgets after each charge row this object wrote, by position: a grant's or a
        #: dataset's state read back as that row, unchanged, is these (already checked by
        #: the debit that wrote them) instead of its totals' text parsed and checked again
        self._budgets_after: dict[int, tuple[LedgerEntry, _Budget, _Budget]] = {}
        #: the last row this object wrote or read as the head, and (``_view_rows``) the
        #: latest grant and dataset rows as of that row that it wrote or read and checked,
        #: by ("grant", analyst, dataset) and ("dataset", dataset): exact while that row is
        #: still the ledger's head (see _viewed)
        self._view: LedgerEntry | None = None
        self._view_rows: dict[tuple[str, ...], LedgerEntry] = {}
        #: the answer the writer thread is appending, not confirmed yet (see store_answer)
        self._queued: _Queued | None = None
        #: by thread (its _ThreadKey: an ident, and the _DummyThread of a thread the
        #: threading module did not start, outlive the thread): the error that lost an
        #: answer that thread handed over (see flush)
        self._lost: weakref.WeakKeyDictionary[_ThreadKey, BaseException] = (
            weakref.WeakKeyDictionary())
        self._pool: tuple[int, ThreadPoolExecutor] | None = None
        self._closed = False
        try:
            self._opened = self._open(anchor)
        except BaseException:
            self._backend.close()
            raise

    # -- properties ---------------------------------------------------------------------------
    @property
    def backend(self) -> LedgerBackend:
        """The storage backend."""
        return self._backend

    @property
    def location(self) -> str:
        """Where the ledger lives (a path, a database URL, or ``':memory:'``)."""
        return self._backend.location

    @property
    def path(self) -> Path | None:
        """The ledger file, or ``None`` when the ledger is not a local file."""
        return getattr(self._backend, "path", None)

    @property
    def persistent(self) -> bool:
        """True when charges outlive this process."""
        return self._backend.persistent

    @property
    def keyed(self) -> bool:
        """True when the chain is an HMAC chain under a secret key."""
        return self._key is not None

    # -- budgets ------------------------------------------------------------------------------
    def set_dataset_budget(self, dataset: str, total: Amount) -> BudgetStatus:
        """Set the dataset-wide (lifetime) budget of ``dataset``: the bound on the privacy
        loss of its data summed over **every** analyst. Every charge debits it.

        Changing it appends a new record; it may be raised, lowered to no less than what all
        analysts together have spent, or moved to another currency every past charge
        converts to (pure ε → (ε, δ) or zCDP).

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> led.set_dataset_budget("adult", PureDP(10)).total
        PureDP(epsilon=Fraction(10, 1))
        """
        dataset = check_name(dataset, "dataset")
        return self._set_total("dataset", None, dataset, total)

    def set_budget(self, analyst: str, dataset: str, total: Amount) -> BudgetStatus:
        """Grant ``analyst`` a total privacy budget on ``dataset`` (or change the grant).

        The grant is bounded in use by the dataset-wide budget (see
        :meth:`set_dataset_budget`): a charge must fit in both. A change is a new record; it
        may raise or lower the total, and even change its kind, as long as everything already
        spent still fits and converts (pure ε → (ε, δ) or zCDP; never the other way).

        >>> from statcurator.core.measures import PureDP, ZCDP
        >>> led = Ledger()
        >>> _ = led.set_dataset_budget("adult", PureDP(10))
        >>> _ = led.set_budget("bob", "adult", PureDP(1))
        >>> _ = led.charge("bob", "adult", PureDP(1), request_id="b1", query="q", mechanism="m")
        >>> led.set_budget("bob", "adult", ZCDP(1)).spent      # ε=1 ⇒ ρ=1/2
        ZCDP(rho=Fraction(1, 2))
        >>> led.set_budget("bob", "adult", ZCDP(Fraction(1, 4)))
        Traceback (most recent call last):
        ...
        statcurator.core.errors.InvalidParameterError: the new total ρ=0.25 is below what analyst 'bob' on dataset 'adult' has already spent (ρ=0.5); set a total of at least ρ=0.5: spent budget is never refunded
        """
        analyst, dataset = analyst_id(analyst), check_name(dataset, "dataset")
        return self._set_total("grant", analyst, dataset, total)

    def status(self, analyst: str, dataset: str) -> BudgetStatus:
        """The grant of ``analyst`` on ``dataset``: total, spent and remaining, exactly.

        Raises :class:`NoBudgetError` when there is none.

        >>> from statcurator.core.measures import ApproxDP
        >>> led = Ledger()
        >>> _ = led.set_budget("carol", "adult", ApproxDP(1, 1e-6))
        >>> print(led.status("Carol", "adult"))
        spent ε=0, δ=0 of ε=1, δ=1e-06 in 0 charges; remaining ε=1, δ=1e-06
        """
        analyst, dataset = analyst_id(analyst), check_name(dataset, "dataset")
        row = self._state(analyst, dataset, None).get("grant")
        return self._budget("grant", row, analyst, dataset).status()

    def dataset_status(self, dataset: str) -> BudgetStatus:
        """The dataset-wide budget of ``dataset``: total, spent by all analysts, remaining.

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_dataset_budget("adult", PureDP(2))
        >>> led.dataset_status("adult").remaining
        PureDP(epsilon=Fraction(2, 1))
        """
        dataset = check_name(dataset, "dataset")
        row = self._state(None, dataset, None).get("dataset")
        return self._budget("dataset", row, None, dataset).status()

    def budgets(self) -> dict[tuple[str, str], BudgetStatus]:
        """Every grant, by (analyst, dataset).

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_budget("alice", "adult", PureDP(1))
        >>> list(led.budgets())
        [('alice', 'adult')]
        """
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            self._settle()
            rows = self._backend.latest("grant")
        return {(str(r.analyst), str(r.dataset)):
                self._budget("grant", r, r.analyst, str(r.dataset)).status() for r in rows}

    def dataset_budgets(self) -> dict[str, BudgetStatus]:
        """Every dataset-wide budget, by dataset.

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_dataset_budget("adult", PureDP(5))
        >>> {d: str(s.total) for d, s in led.dataset_budgets().items()}
        {'adult': 'ε=5'}
        """
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            self._settle()
            rows = self._backend.latest("dataset")
        return {str(r.dataset): self._budget("dataset", r, None, str(r.dataset)).status()
                for r in rows}

    def can_spend(self, analyst: str, dataset: str, cost: Amount) -> bool:
        """True when ``cost`` fits in both the grant and the dataset-wide budget (False when
        either is missing).

        Invalid or incompatible costs raise :class:`~statcurator.core.errors.InvalidParameterError`
        rather than answer False, so that the remedy is not lost. The answer is advisory:
        only :meth:`charge` decides, atomically.

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_dataset_budget("adult", PureDP(1))
        >>> led.can_spend("alice", "adult", PureDP(1))
        False
        >>> _ = led.set_budget("alice", "adult", PureDP(2))
        >>> led.can_spend("alice", "adult", PureDP(1)), led.can_spend("alice", "adult", 1.5)
        (True, False)
        """
        analyst, dataset = analyst_id(analyst), check_name(dataset, "dataset")
        loss = validate_loss(cost)
        st = self._state(analyst, dataset, None)
        try:
            budgets = [self._budget(scope, st.get(scope), analyst, dataset)
                       for scope in ("dataset", "grant")]
        except NoBudgetError:
            return False
        return all(b.fits(loss) for b in budgets)

    # -- charging -----------------------------------------------------------------------------
    def charge(self, analyst: str, dataset: str, cost: Amount, *, request_id: str, query: str,
               mechanism: str, alongside: Callable[[], object] | None = None,
               new_id: bool = False) -> Charge:
        """Spend ``cost`` from the grant of ``analyst`` on ``dataset`` and from the dataset's
        dataset-wide budget, recording the charge.

        One atomic append after one read (right after an answer this object is still
        storing, after none: the append then requires that answer to be the last row, see
        :meth:`store_answer`), so no interleaving of processes can overspend either budget. Raises :class:`NoBudgetError` when the dataset has no dataset-wide
        budget or the analyst no grant, and
        :class:`~statcurator.core.errors.BudgetExceededError` when the cost does not fit in
        one of them; a refusal records nothing.

        ``request_id`` is scoped to the analyst. A request id the analyst already charged is
        not charged again: the stored charge comes back with ``replayed=True`` (see
        :meth:`replay` for its answer); reusing it for another dataset, query or cost is an
        error. Another analyst's ids are another namespace.

        ``alongside`` (the curator's engine run) is called once, when the charge has been
        decided (it fits and is not a replay), without the ledger's lock: on a backend whose
        appends wait on the disk or a server (:attr:`LedgerBackend.overlaps_appends`)
        *while* the row is written on a second thread, otherwise after it is written.
        ``charge`` returns when both are done, so nothing the caller computed is released
        before the debit is durable. A refusal or a replay never calls it. It has run for
        nothing when the write then fails: another process took the row's place (the charge
        is decided again, and may be refused or, when that process charged the same request
        id at the same instant, replayed, without calling it again), or the write failed
        outright (a busy or lost database: the error is raised, nothing is charged).
        An exception from ``alongside`` propagates once the write has finished; the charge
        is then recorded unless the write lost its place to another process.

        ``new_id=True`` says that ``request_id`` was just drawn at random by the caller (the
        curator's own ids), so the charge cannot be a replay: with ``alongside``, right
        after an answer this object is still storing, it is then decided without any read
        (see :meth:`store_answer`). A caller-given id never is, so a replay never runs
        ``alongside``; a caller that says ``new_id`` of a used id costs an engine run, never
        a second charge (the unique index refuses it, and the read that follows replays).

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_dataset_budget("adult", PureDP(10))
        >>> _ = led.set_budget("alice", "adult", PureDP(0.5))
        >>> led.charge("alice", "adult", PureDP(1), request_id="big", query="q", mechanism="m")
        Traceback (most recent call last):
        ...
        statcurator.core.errors.BudgetExceededError: a charge of ε=1 exceeds the privacy budget of analyst 'alice' on dataset 'adult': ε=0.5 remains of ε=0.5; ask for at most ε=0.5 (less privacy loss means more noise), or ask the data owner to raise the budget
        >>> led.charges()
        []
        """
        analyst, dataset = analyst_id(analyst), check_name(dataset, "dataset")
        request_id = check_name(request_id, "request_id")
        query, mechanism = _text(query, "query"), _text(mechanism, "mechanism")
        loss = validate_loss(cost)
        stored = kind, epsilon, delta, rho = encode(loss)
        after: list[_Budget] = []  # the grant and the dataset-wide budget after the charge

        def build(st: dict[str, LedgerEntry]) -> dict[str, Any] | Charge:
            prior = st.get("charge")
            if prior is not None:
                _check_replay(prior, dataset, stored, query)
                return _to_charge(prior, replayed=True, answered="answer" in st)
            data = self._budget("dataset", st.get("dataset"), analyst, dataset)
            grant = self._budget("grant", st.get("grant"), analyst, dataset)
            grant, data = grant.debit(loss), data.debit(loss)  # the grant's refusal first
            after[:] = grant, data
            return {"type": "charge", "analyst": analyst, "dataset": dataset,
                    "request_id": request_id, "kind": kind, "epsilon": epsilon,
                    "delta": delta, "rho": rho, "query": query, "mechanism": mechanism,
                    "grant_total": grant.total_text, "grant_spent": grant.spent_text,
                    "grant_charges": grant.count, "dataset_total": data.total_text,
                    "dataset_spent": data.spent_text, "dataset_charges": data.count}

        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            # (no settle here: _write's read settles, unless the charge comes right after
            # an answer still being appended, see _ahead)
            outcome = self._write(analyst, dataset, request_id, build, alongside,
                                  ahead=new_id and alongside is not None)
            if isinstance(outcome, Charge):
                return outcome
            if len(self._budgets_after) >= 4096:
                self._budgets_after.clear()
            self._budgets_after[outcome.seq] = (outcome, *after)
            self._pending[(analyst, request_id)] = dataset
        return Charge(request_id, analyst, dataset, loss, query, mechanism,
                      datetime.fromisoformat(outcome.at), outcome.seq)

    def charges(self, analyst: str | None = None, dataset: str | None = None) -> list[Charge]:
        """The recorded charges, oldest first, optionally of one analyst and/or dataset.

        >>> Ledger().charges("alice")
        []
        """
        rows = self.entries(analyst=analyst, dataset=dataset, types=("charge", "answer"))
        answered = {(r.analyst, r.request_id) for r in rows if r.type == "answer"}
        return [_to_charge(r, answered=(r.analyst, r.request_id) in answered)
                for r in rows if r.type == "charge"]

    def entries(self, *, analyst: str | None = None, dataset: str | None = None,
                types: tuple[str, ...] | None = None) -> list[LedgerEntry]:
        """The ledger's rows in order (for audits, ``budget history`` and exports),
        optionally of one analyst and/or dataset and of some types (see
        :data:`~statcurator.accounting.ENTRY_TYPES`).

        >>> [e.type for e in Ledger().entries()]
        ['genesis']
        """
        analyst = None if analyst is None else analyst_id(analyst)
        dataset = None if dataset is None else check_name(dataset, "dataset")
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            self._settle()
            return list(self._backend.entries(analyst=analyst, dataset=dataset, types=types))

    # -- answers ------------------------------------------------------------------------------
    def store_answer(self, analyst: str, request_id: str, payload: str) -> None:
        """Record the answer released for a charged request, so that a replay returns it.

        Allowed once per (analyst, request id), and only by the ledger object that made the
        (fresh) charge: an answer cannot be stored before its charge (debit before release),
        and a request whose answer was lost in a crash cannot get a new, free answer. Storing
        the same payload again is a no-op.

        On a backend whose appends wait on the disk or a server (a file, PostgreSQL), the
        answer is handed to this ledger's writer thread and this returns at once. Later
        calls on this object that read or write first wait for it (a replay finds it;
        :meth:`flush` only waits, and says if it was lost); a charge with a new id
        (``new_id``) right after it is decided without waiting, and appended only if the
        answer is then the last row (see :meth:`LedgerBackend.append_after`). Nothing
        privacy rests on waits: the charge was durable before the answer was computed, and
        an answer that does not reach the ledger (the process killed first, or its write
        failing) is lost, never replaced by fresh noise.

        >>> led = Ledger()
        >>> led.store_answer("alice", "nope", "42")
        Traceback (most recent call last):
        ...
        statcurator.core.errors.LedgerError: analyst 'alice' has no charge under request id 'nope'; charge the request before storing its answer: the ledger debits before anything is released
        """
        analyst, request_id = analyst_id(analyst), check_name(request_id, "request_id")
        if not isinstance(payload, str):
            raise InvalidParameterError(
                f"an answer must be stored as text, got {type(payload).__name__}",
                remedy="serialize it first (for example with json.dumps)")
        key = (analyst, request_id)
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            self._settle()
            if self._queue_answer(key, payload):
                return  # confirmed (and taken off _pending) by the next _settle
            self._store(key, payload)

    def flush(self) -> None:
        """Wait until the answer :meth:`store_answer` handed to the writer thread is in the
        ledger (or was written again after a read, when another process appended first).
        The curator service calls this before it responds, so that an answer it sent is
        replayed even if the process is killed right after. A no-op otherwise.

        Raises :class:`AnswerLostError` when an answer this thread handed over could not be
        written (the budget stays spent; do not send that answer: it cannot be replayed), or
        the :class:`LedgerTamperedError` that stopped it. Losses are told to the thread that
        called :meth:`store_answer`: flush from that thread.

        >>> Ledger().flush()
        """
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            self._settle()  # (interrupted: a loss stays for the next flush)
            lost = self._lost.pop(_this_thread(), None)
        if lost is not None:
            _raise_lost(lost, self.location)

    def _store(self, key: tuple[str, str], payload: str) -> None:
        """Store an answer now (holding the lock, settled): right after the row this object
        knows as the head, else after a read (see :meth:`store_answer`)."""
        analyst, request_id = key

        def build(st: dict[str, LedgerEntry]) -> dict[str, Any] | None:
            charged = st.get("charge")
            if charged is None:
                raise LedgerError(f"analyst {analyst!r} has no charge under request id "
                                  f"{request_id!r}",
                                  remedy="charge the request before storing its answer: "
                                         "the ledger debits before anything is released")
            existing = st.get("answer")
            if existing is not None:
                if existing.payload == payload:
                    return None
                raise LedgerError(
                    f"request {request_id!r} already has a stored answer, and answers are "
                    "append-only",
                    remedy="a replay returns the first answer; a new answer needs a new "
                           "request id (charged again)")
            if key not in self._pending:
                raise AnswerLostError(
                    f"request {request_id!r} was charged by another process or an earlier "
                    "run, and its answer was never stored; a fresh answer cannot be stored "
                    "under it",
                    remedy="fresh noise under an already charged request id would be free; "
                           "submit the query under a new request id, which is charged again")
            return {"type": "answer", "analyst": analyst, "dataset": charged.dataset,
                    "request_id": request_id, "payload": payload}

        if not self._answer_at_head(key, payload):
            self._write(analyst, None, request_id, build)
        self._pending.pop(key, None)

    def abandon(self, analyst: str, request_id: str) -> None:
        """Say that the answer of a charge this object made will never be stored (the
        release failed after its charge): the budget stays spent, and a replay of the
        request says its answer was lost instead of waiting for it. A no-op for a request
        this object has no answer pending for.

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_dataset_budget("adult", PureDP(10))
        >>> _ = led.set_budget("alice", "adult", PureDP(1))
        >>> _ = led.charge("alice", "adult", PureDP(0.5), request_id="r", query="q", mechanism="m")
        >>> led.abandon("alice", "r")
        >>> led.replay("alice", "r")
        Traceback (most recent call last):
        ...
        statcurator.accounting.AnswerLostError: request 'r' is charged (ε=0.5) but no answer is stored: its release failed after the charge, the curator stopped between the charge ... and the release, or another process is still computing it; the budget stays spent and fresh noise is never released for free under a charged request id; submit the query under a new request id, which is charged again
        """
        key = (analyst_id(analyst), check_name(request_id, "request_id"))
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            q = self._queued
            if q is None or q.key != key:  # (an answer handed over is stored, not abandoned)
                self._pending.pop(key, None)

    def answer(self, analyst: str, request_id: str) -> str | None:
        """The answer stored for ``analyst``'s ``request_id``, or ``None``.

        >>> Ledger().answer("alice", "r1") is None
        True
        """
        analyst, request_id = analyst_id(analyst), check_name(request_id, "request_id")
        row = self._state(analyst, None, request_id).get("answer")
        return None if row is None else row.payload

    def replay(self, analyst: str, request_id: str) -> str:
        """The answer stored for ``analyst``'s already charged request, for free.

        Raises :class:`AnswerLostError` when the request was charged but no answer was stored
        (the curator stopped between the charge and the release, or the answer is still being
        computed): the budget stays spent and nothing fresh is released under that id. Raises
        :class:`~statcurator.core.errors.LedgerError` for a request id the analyst never
        charged (whether or not another analyst used it).

        >>> from statcurator.core.measures import PureDP
        >>> led = Ledger()
        >>> _ = led.set_dataset_budget("adult", PureDP(10))
        >>> _ = led.set_budget("alice", "adult", PureDP(1))
        >>> _ = led.charge("alice", "adult", PureDP(0.5), request_id="r", query="q", mechanism="m")
        >>> led.replay("alice", "r")
        Traceback (most recent call last):
        ...
        statcurator.accounting.AnswerLostError: request 'r' is charged (ε=0.5) but no answer is stored: its first submission is still being computed in this process; retry when it has returned
        """
        analyst, request_id = analyst_id(analyst), check_name(request_id, "request_id")
        st = self._state(analyst, None, request_id)
        prior, stored = st.get("charge"), st.get("answer")
        if prior is None:
            raise LedgerError(f"analyst {analyst!r} has no charge under request id "
                              f"{request_id!r}", remedy="submit the query with charge() first")
        if stored is not None:
            return str(stored.payload)
        problem = f"request {request_id!r} is charged ({_cost(prior)}) but no answer is stored"
        if (analyst, request_id) in self._pending:
            raise AnswerLostError(f"{problem}: its first submission is still being computed in "
                                  "this process", remedy="retry when it has returned")
        raise AnswerLostError(
            f"{problem}: its release failed after the charge, the curator stopped between "
            f"the charge ({prior.at}) and the release, or another process is still computing "
            "it",
            remedy="the budget stays spent and fresh noise is never released for free under a "
                   "charged request id; submit the query under a new request id, which is "
                   "charged again")

    # -- verification ---------------------------------------------------------------------------
    def verify(self, anchor: str | None = None) -> Verification:
        """Verify the whole chain and re-derive every running total from the charges.

        Raises :class:`~statcurator.accounting.LedgerTamperedError` naming the first bad
        row. Opening a ledger verifies the chain alone; this also audits the arithmetic.
        ``anchor`` is an earlier :attr:`Verification.anchor` kept elsewhere: the ledger must
        still hold that row with that hash, which detects rows cut off its end and an older
        copy (or a new file) put in its place.

        >>> led = Ledger()
        >>> v = led.verify()
        >>> v.rows, v.keyed, v.audited
        (1, False, True)
        >>> led.verify(anchor=v.anchor).rows
        1
        """
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            self._settle()
            return self._verify(audit=True, anchor=anchor)

    def anchor(self) -> str:
        """``rows:hash`` of the ledger's last row now (one read): keep it somewhere the
        ledger's writers cannot reach, and pass it to :meth:`verify` or ``Ledger(anchor=)``
        later to detect rows cut off the end, an older copy or a new file in its place.

        >>> led = Ledger()
        >>> led.verify(anchor=led.anchor()).rows
        1
        """
        head = self._state(None, None, None)["head"]
        return f"{head.seq}:{head.hash}"

    def counts(self) -> dict[str, int]:
        """Number of dataset budgets, grants, charges and answers recorded.

        >>> Ledger().counts()
        {'dataset_budgets': 0, 'budgets': 0, 'charges': 0, 'answers': 0}
        """
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            self._settle()
            found = self._backend.counts()
        return {"dataset_budgets": found["dataset_budget"], "budgets": found["grant"],
                "charges": found["charge"], "answers": found["answer"]}

    def close(self) -> None:
        """Close the ledger (an in-memory ledger is gone), once the answer handed to the
        writer thread (see :meth:`store_answer`) is in it; an answer of this thread that
        could not be written is raised then, as by :meth:`flush`. Idempotent."""
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            try:
                self._settle()
            finally:
                self._closed = True  # (no writer thread is started again: see _submit)
                pool, self._pool = self._pool, None
                if pool is not None and pool[0] == os.getpid():
                    pool[1].shutdown()
                self._backend.close()
            lost = self._lost.pop(_this_thread(), None)
        if lost is not None:
            _raise_lost(lost, self.location)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({self.location!r})"

    # -- internals ----------------------------------------------------------------------------
    def _open(self, anchor: str | None) -> Verification:
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            self._settle()
            self._refuse_problems()
            if "head" not in self._backend.state(None, None, None):
                mode = "hmac-sha256" if self._key is not None else "sha256"
                payload = json.dumps({"format": FORMAT, "hash": mode,
                                      "ledger": uuid.uuid4().hex}, sort_keys=True)
                genesis = LedgerEntry(1, "genesis", payload=payload, at=_now(), prev_hash=ZERO)
                with contextlib.suppress(ChainConflict):  # another process created it first
                    self._backend.append(_seal(genesis, digest(genesis, self._key)))
            return self._verify(audit=False, anchor=anchor)

    def _refuse_problems(self) -> None:
        problems = self._backend.problems()
        if problems:
            raise LedgerTamperedError(f"the ledger {self.location} was tampered with: "
                                      + "; ".join(problems), remedy=_TAMPERED)

    def _verify(self, *, audit: bool, anchor: str | None = None) -> Verification:
        self._refuse_problems()
        checker = Audit(self.location) if audit else None
        prev, n, ledger_id = ZERO, 0, ""
        at, expected = _parse_anchor(anchor)
        anchored: str | None = None
        for e in self._backend.entries():
            n += 1
            if e.seq != n:
                raise self._tampered(min(e.seq, n), f"row {n} is missing" if e.seq > n
                                     else "rows are out of order")
            if e.prev_hash != prev:
                raise self._tampered(n, "it does not link to the row before it (a row was "
                                        "deleted, inserted or changed)")
            if n == 1:
                ledger_id = self._check_genesis(e)
            if _digest_of_stored(e, self._key) != e.hash:
                raise self._tampered(n, "its content does not match its hash (it was "
                                        "changed, or the ledger's key is not the one "
                                        "configured)")
            if checker is not None:
                checker.feed(e)
            if e.seq == at:
                anchored = e.hash
            prev = e.hash
        if n == 0:
            raise self._tampered(None, "the ledger is empty: its genesis row was deleted")
        if n < self._seen:
            raise self._tampered(n, f"the ledger shrank from {self._seen} rows to {n}")
        if at and anchored != expected:
            why = (f"it has {n} rows, fewer than the {at} of its anchor" if anchored is None
                   else f"row {at} differs from its anchor")
            raise self._tampered(min(at, n), f"{why}: rows were cut off its end, or the file "
                                             "was replaced by an older copy or a new ledger")
        self._seen = n
        return Verification(self.location, n, prev, keyed=self._key is not None,
                            ledger_id=ledger_id, audited=audit)

    def _check_genesis(self, e: LedgerEntry) -> str:
        try:
            info = json.loads(e.payload or "")
            mode, ledger_id, fmt = info["hash"], str(info["ledger"]), info["format"]
        except (ValueError, KeyError, TypeError):
            raise self._tampered(1, "the genesis row is malformed") from None
        if e.type != "genesis" or fmt != FORMAT or mode not in ("sha256", "hmac-sha256"):
            raise self._tampered(1, "the first row is not a genesis row of this format")
        if mode == "hmac-sha256" and self._key is None:
            raise LedgerError(f"the ledger {self.location} is protected by a secret key "
                              "(HMAC-SHA-256) and none is configured",
                              remedy=f"set the environment variable {KEY_ENV} to the "
                                     "ledger's key (or pass key=)")
        if mode == "sha256" and self._key is not None:
            raise LedgerError(f"the ledger {self.location} was created without a key, but a "
                              "key is configured",
                              remedy=f"unset {KEY_ENV} (or drop key=) to open it; a key cannot "
                                     "be added to an existing chain, so start a new ledger "
                                     "to use one")
        return ledger_id

    def _tampered(self, row: int | None, why: str) -> LedgerTamperedError:
        where = f" at row {row}" if row is not None else ""
        return LedgerTamperedError(f"the ledger {self.location} is broken{where}: {why}",
                                   row=row, remedy=_TAMPERED)

    def _state(self, analyst: str | None, dataset: str | None, request_id: str | None,
               ahead: bool = False) -> dict[str, LedgerEntry]:
        """One read; every row it returns is re-hashed (a cheap check of what we rely on),
        unless it equals, field for field, a row this object already checked or wrote (the
        fields are SQLite's and PostgreSQL's typed values: text, integers and NULL). A
        charge's state while the head is still the row this object last wrote or read is
        the rows it remembers, after a read of the head only (:meth:`_viewed`); with
        ``ahead``, right after an answer still being appended, without any read
        (:meth:`_ahead`)."""
        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            if ahead:
                st = self._ahead(analyst, dataset)
                if st is not None:
                    return st
            self._settle()
            viewed = self._viewed(analyst, dataset, request_id)
            if viewed is not None:
                return viewed
            st = self._backend.state(analyst, dataset, request_id)
            head = st.get("head")
            if head is None or head.seq < self._seen:
                raise self._tampered(None if head is None else head.seq,
                                     f"the ledger shrank from {self._seen} rows to "
                                     f"{0 if head is None else head.seq}")
            self._seen = head.seq
            for row in st.values():
                known = self._checked.get(row.seq)
                if known is row or known == row:
                    continue
                if _digest_of_stored(row, self._key) != row.hash:
                    raise self._tampered(row.seq, "its content does not match its hash")
                self._remember(row)
            # the view as of this head: what it knew (if the head is still its head), and
            # the rows just read and checked
            rows = self._view_rows
            if self._view != head or len(rows) >= 4096:
                rows.clear()
            self._view = head
            if analyst is not None and dataset is not None and "grant" in st:
                rows["grant", analyst, dataset] = st["grant"]
            if dataset is not None and "dataset" in st:
                rows["dataset", dataset] = st["dataset"]
            return st

    def _viewed(self, analyst: str | None, dataset: str | None,
                request_id: str | None) -> dict[str, LedgerEntry] | None:
        """The state of a charge without reading its rows: when the ledger's head is still
        the row this object last wrote or read (its ``seq`` and ``hash``: rows are only
        appended after it, so none was), the latest grant and dataset rows are the ones it
        remembers as of that row, and no charge holds the request id (else the replay is
        read in full); and no read of this object went beyond that row (``_seen``: a
        :meth:`verify` counted the rows, and the head must not fall back below them). None
        when any of that is unknown: the caller reads everything."""
        view = self._view
        if (view is None or view.seq != self._seen or analyst is None or dataset is None
                or request_id is None):
            return None  # (_seen beyond the view: a verify() saw rows the view has not)
        grant = self._view_rows.get(("grant", analyst, dataset))
        data = self._view_rows.get(("dataset", dataset))
        if grant is None or data is None:
            return None
        found = self._backend.head(analyst, request_id)
        if found is None or found[0] != view.seq or found[1] != view.hash or found[2]:
            return None
        return {"head": view, "grant": grant, "dataset": data}

    def _advance(self, row: LedgerEntry) -> None:
        """Record in the view a row this object appended (the new head)."""
        view, rows = self._view, self._view_rows
        if view is not None and view.seq >= row.seq:
            return  # another thread read or wrote further meanwhile: its view is newer
        self._view = None  # no view until the rows are as of the new head (an interrupt)
        if view is None or view.seq != row.seq - 1 or len(rows) >= 4096:
            rows.clear()  # rows came between: what it knew may be stale
        if row.type in ("grant", "charge"):
            rows["grant", str(row.analyst), str(row.dataset)] = row
        if row.type in ("dataset_budget", "charge"):
            rows["dataset", str(row.dataset)] = row
        self._view = row

    def _remember(self, row: LedgerEntry) -> None:
        if len(self._checked) >= 4096:
            self._checked.clear()
        self._checked[row.seq] = row

    def _write(self, analyst: str | None, dataset: str | None, request_id: str | None,
               build: Callable[[dict[str, LedgerEntry]], Any],
               alongside: Callable[[], object] | None = None, ahead: bool = False) -> Any:
        """Read, decide, append at ``head + 1``; when another writer took that position
        first, read again and decide again (optimistic concurrency, see ``_backend``).
        ``build`` returns the new row's fields (a dict), or anything else to append nothing;
        returns that, or the appended row. ``alongside`` runs once, when a row is first
        decided (see :meth:`charge`).

        With ``ahead`` (a charge with ``alongside`` work and a new id), it may first be
        decided right after the answer this object is still appending, from the rows it
        remembers (:meth:`_ahead`), and is then
        appended only if that answer is the last row (:meth:`LedgerBackend.append_after`).
        Any other outcome of that first attempt (the row refused, or the decision itself
        refusing the charge: the rows may be stale) is settled by a read, as every other
        attempt."""
        deadline = time.monotonic() + self._timeout
        pause = 0.0005
        ahead = ahead and alongside is not None
        while True:
            st = self._state(analyst, dataset, request_id, ahead=ahead)
            head = st["head"]
            queued = self._queued
            after = head if ahead and queued is not None and head is queued.row else None
            ahead = False  # only the first attempt
            try:
                outcome = build(st)
            except Exception:
                if after is not None:
                    continue  # decided from unconfirmed rows: decide again after a read
                raise
            if not isinstance(outcome, dict):
                return outcome
            row = LedgerEntry(seq=head.seq + 1, at=_now(), prev_hash=head.hash, **outcome)
            row = _seal(row, digest(row, self._key))
            work, alongside = alongside, None
            try:
                self._append(row, work, after)
            except _NotQueued:
                alongside = work  # not run: the next attempt runs it
                continue
            except ChainConflict:
                if time.monotonic() > deadline:
                    raise LedgerError(f"the ledger {self.location} stayed contended by other "
                                      f"writers for {self._timeout:g} s",
                                      remedy="retry, or open the Ledger with a longer "
                                             "timeout=") from None
                if after is None:  # (after an unconfirmed answer: no other writer to wait
                    # for, only the read that settles it)
                    time.sleep(random.uniform(0, pause))  # noqa: S311 - back-off jitter only
                    pause = min(pause * 2, 0.05)
                continue
            self._seen = max(self._seen, row.seq)  # another thread may have read further
            self._remember(row)
            self._advance(row)
            return row

    def _queue_answer(self, key: tuple[str, str], payload: str) -> bool:
        """Hand the answer of a charge this object made (still pending) to the writer
        thread, to be appended right after the row this object knows as the head (as
        :meth:`_answer_at_head` does, without waiting for it); False (nothing handed over)
        when that row is unknown, the backend's appends do not wait on I/O, or the writer
        thread takes no more work. Call holding the lock, settled.

        Until a later :meth:`_settle` confirms it, the answer is the head of the view only
        (a charge may be decided after it, see :meth:`_ahead`): it is not in ``_checked``,
        and ``_seen`` stays at the row before it."""
        if (not self._backend.overlaps_appends
                or type(self._backend).append_after is LedgerBackend.append_after):
            return False  # (a backend that cannot append after a row: written now)
        after = self._answer_after_head(key, payload)
        if after is None:
            return False
        row, head = after
        future = self._submit(self._backend.append_after, row, head)
        if future is None:
            return False
        view = self._view
        exact = view is head or (view is not None and view == head)
        thread = _this_thread()  # (an older loss stays for its flush())
        self._queued = _Queued(os.getpid(), key, payload, row, head, future, exact, thread)
        self._lock.inflight = (os.getpid(), future)  # others wait for it before reading
        _QUEUED.add(self)  # confirmed at exit if nothing else does
        if exact:
            self._advance(row)
        else:
            self._forget_view()
        return True

    def _settle(self) -> None:
        """Holding the lock: wait for the writer thread, and confirm the answer it was
        handed (:meth:`_confirm`)."""
        self._lock.settle()
        if self._queued is not None:
            self._confirm()

    def _confirm(self) -> None:
        """The queued answer's outcome: appended (it becomes a row this object wrote), or
        not (another writer came first, or the append failed): the view is forgotten and
        the answer stored after a read (:meth:`_store`). When that fails too, the answer is
        lost (a replay says so, and its charge stays spent) and the error is kept for the
        thread that stored it, whose :meth:`flush` or :meth:`close` raises it; whichever
        call settled carries on (its own read meets the same trouble, if it is the
        ledger's)."""
        q, self._queued = self._queued, None
        if q is None:
            return
        written = False
        try:  # (from here on: an interrupt anywhere before the answer is written loses it)
            _QUEUED.discard(self)
            if q.pid != os.getpid():  # a forked child: the parent confirms its own answer
                written = True  # (not this process's to report)
                self._forget_view()
                return
            failed = _settled(q.future)
            if failed is None and q.future.result():
                written = True
                self._seen = max(self._seen, q.row.seq)
                self._remember(q.row)
                self._pending.pop(q.key, None)
                return
            self._forget_view()
            self._store(q.key, q.payload)
        except BaseException as e:  # kept for the storing thread (see flush); an
            # interrupt is raised here too
            if not written:
                self._pending.pop(q.key, None)  # nobody tries again: lost
                self._lost[q.thread] = e
            if not isinstance(e, Exception):
                raise

    def _forget_view(self) -> None:
        self._view = None
        self._view_rows.clear()

    def _ahead(self, analyst: str | None, dataset: str | None) -> dict[str, LedgerEntry] | None:
        """A charge's state right after the answer the writer thread is still appending,
        without a read (and without waiting for it): that answer as the head, and the
        grant and dataset rows this object remembers as of the row before it, when it knew
        them exactly. The charge row is then appended only if the answer is the last row
        (see :meth:`_write`): every row appended so is decided on the ledger as it is. The
        charge's id is new (``new_id``), so no read is needed to see a replay; were it used
        after all, the unique index refuses the row (:class:`ChainConflict`) and the next
        attempt reads, and replays it. None when any of that is unknown."""
        q = self._queued
        if (q is None or not q.exact or q.pid != os.getpid() or self._view is not q.row
                or self._seen != q.head.seq or analyst is None or dataset is None):
            return None
        grant = self._view_rows.get(("grant", analyst, dataset))
        data = self._view_rows.get(("dataset", dataset))
        if grant is None or data is None:
            return None
        return {"head": q.row, "grant": grant, "dataset": data}

    def _answer_after_head(self, key: tuple[str, str],
                           payload: str) -> tuple[LedgerEntry, LedgerEntry] | None:
        """The sealed answer row of a charge this object made (still pending), right after
        the row it knows as the head, and that head; None when either is unknown."""
        dataset = self._pending.get(key)
        head = self._checked.get(self._seen)
        if dataset is None or head is None:
            return None
        row = LedgerEntry(seq=head.seq + 1, at=_now(), prev_hash=head.hash, type="answer",
                          analyst=key[0], dataset=dataset, request_id=key[1], payload=payload)
        return _seal(row, digest(row, self._key)), head

    def _answer_at_head(self, key: tuple[str, str], payload: str) -> bool:
        """Append the answer of a charge this object made (still pending) right after the
        last row it wrote or read, in one statement and without reading first; False
        (nothing appended) when that row is unknown, or the backend cannot, or the
        statement found anything else than expected.

        The statement (:meth:`LedgerBackend.append_after`) inserts only if the remembered
        row is still the last one, equal in every column (another writer has not appended
        since; the ledger was not cut back; the row was not edited in place), and the
        charge is there. Only the object that
        made a charge stores its answer, once, so no answer exists yet (a unique index
        refuses a second). Any other outcome falls back to :meth:`_write` (read — with its
        checks that the ledger did not shrink and its rows are intact — decide, append)."""
        after = self._answer_after_head(key, payload)
        if after is None:
            return False
        row, head = after
        try:
            if not self._backend.append_after(row, head):
                return False
        except ChainConflict:
            return False
        self._seen = max(self._seen, row.seq)
        self._remember(row)
        self._advance(row)
        return True

    def _append(self, row: LedgerEntry, work: Callable[[], object] | None,
                after: LedgerEntry | None = None) -> None:
        """Append ``row`` and run ``work`` (if any) without the ledger's lock, so that
        other threads' reads and writes wait only for the row, not for the work: side by
        side on a backend whose appends wait on I/O, else one after the other. Returns (or
        raises the append's error) only when both are done; an error of ``work`` is raised
        once the append has finished (recorded, or lost to another writer).

        With ``after`` (the answer still being appended, and ``work``), the row is appended
        by the writer thread after that answer, only if the answer is then the last row
        (else :class:`ChainConflict`); :class:`_NotQueued` (nothing appended, ``work`` not
        run) when the writer thread takes no more work."""
        if work is None:
            self._backend.append(row)
            return
        if after is not None:
            pending = self._submit(self._append_after, row, after)
            if pending is None:
                raise _NotQueued
        else:
            pending = (self._submit(self._backend.append, row)
                       if self._backend.overlaps_appends else None)
        if pending is None:
            self._backend.append(row)
            with self._lock.released():
                work()
            return
        mine = (os.getpid(), pending)
        self._lock.inflight = mine
        try:
            with self._lock.released():
                work()
        finally:
            try:
                failed = _settled(pending)
            finally:
                # only its own marker: another thread may have charged meanwhile, and its
                # row may still be in flight (clearing that one let others use the
                # connection under it)
                if self._lock.inflight is mine:
                    self._lock.inflight = None
        if failed is not None:
            raise failed

    def _append_after(self, row: LedgerEntry, head: LedgerEntry) -> None:
        """On the writer thread: append ``row`` only if ``head`` is the last row."""
        if not self._backend.append_after(row, head):
            raise ChainConflict(f"row {head.seq} is not the last row, or not as expected")

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any] | None:
        """``fn(*args)`` (an append) on this process's writer thread (threads do not survive
        fork()), or None once the interpreter is shutting down (``concurrent.futures``
        then refuses new work: the caller appends itself)."""
        if self._closed:
            return None  # closed: the caller appends itself (and finds the ledger closed)
        pool = self._pool
        if pool is None or pool[0] != os.getpid():
            pool = self._pool = (os.getpid(), ThreadPoolExecutor(
                1, thread_name_prefix=_WRITER))
        try:
            return pool[1].submit(fn, *args)
        except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown"
            return None

    def _budget(self, scope: str, row: LedgerEntry | None, analyst: str | None,
                dataset: str) -> _Budget:
        """The budget a state row holds (after that row); :class:`NoBudgetError` if none."""
        if row is not None:
            known = self._budgets_after.get(row.seq)
            if known is not None and (known[0] is row or known[0] == row):
                return known[1] if scope == "grant" else known[2]
        if scope == "grant":
            label = f"analyst {analyst!r} on dataset {dataset!r}"
            if row is None:
                raise NoBudgetError(
                    f"analyst {analyst!r} has no privacy budget on dataset {dataset!r}",
                    remedy=f"the data owner grants one first: `statcurator budget set "
                           f"--dataset {dataset} --analyst {analyst} --epsilon E` (Python: "
                           f"curator.set_budget({analyst!r}, {dataset!r}, epsilon=E))")
            total, spent, count = row.grant_total, row.grant_spent, row.grant_charges
        else:
            label = f"dataset {dataset!r} (its dataset-wide budget, shared by all analysts)"
            if row is None:
                raise NoBudgetError(
                    f"dataset {dataset!r} has no dataset-wide privacy budget in the ledger "
                    f"{self.location}",
                    remedy=f"the data owner sets its lifetime budget first: `statcurator "
                           f"budget set --dataset {dataset} --epsilon E` (Python: "
                           f"curator.set_dataset_budget({dataset!r}, epsilon=E))")
            total, spent, count = row.dataset_total, row.dataset_spent, row.dataset_charges
        kind, limit = unpack(total)
        used = unpack(spent)
        if used[0] != kind or not isinstance(count, int):
            raise self._tampered(row.seq, "its running totals are malformed")
        if any(s > t for s, t in zip(used[1], limit, strict=True)):
            raise self._tampered(row.seq, f"it records more spent by {label} than its total")
        return _Budget(kind, limit, used[1], count, label, str(total), str(spent))


    def _set_total(self, scope: str, analyst: str | None, dataset: str,
                   total: Amount) -> BudgetStatus:
        loss = validate_loss(total, "total")
        kind = kind_of(loss)
        limit = convert(loss, kind)
        label = (f"analyst {analyst!r} on dataset {dataset!r}" if scope == "grant"
                 else f"dataset {dataset!r} (all analysts together)")
        result: list[BudgetStatus] = []

        def build(st: dict[str, LedgerEntry]) -> dict[str, Any] | None:
            prior = st.get(scope)
            if prior is not None and unpack(_field(prior, scope, "total"))[0] == kind:
                spent = unpack(_field(prior, scope, "spent"))[1]
                count = int(str(_field(prior, scope, "charges")))
            else:
                spent, count = self._resum(kind, label, analyst, dataset, st["head"].seq)
            if any(s > t for s, t in zip(spent, limit, strict=True)):
                shown = describe(kind, spent)
                raise InvalidParameterError(
                    f"the new total {describe(kind, limit)} is below what {label} has "
                    f"already spent ({shown})",
                    remedy=f"set a total of at least {shown}: spent budget is never refunded")
            result[:] = [_Budget(kind, limit, spent, count, label, "", "").status()]
            if prior is not None and _field(prior, scope, "total") == pack(kind, limit):
                return None  # unchanged: nothing to record
            return {"type": "grant" if scope == "grant" else "dataset_budget",
                    "analyst": analyst, "dataset": dataset,
                    **dict(zip(("kind", "epsilon", "delta", "rho"), encode(loss), strict=True)),
                    f"{scope}_total": pack(kind, limit), f"{scope}_spent": pack(kind, spent),
                    f"{scope}_charges": count}

        with self._lock.rlock:  # the C lock's own with: no gap for an interrupt
            self._settle()
            self._write(analyst, dataset, None, build)
        return result[0]

    def _resum(self, kind: str, label: str, analyst: str | None, dataset: str,
               upto: int) -> tuple[tuple[Fraction, ...], int]:
        """Everything charged to a budget, re-expressed in the currency ``kind``."""
        spent = [Fraction(0)] * (2 if kind == "approx" else 1)
        count = 0
        for rec in self._backend.entries(upto=upto, analyst=analyst, dataset=dataset,
                                         types=("charge",)):
            cost = _cost(rec)
            try:
                price = convert(cost, kind)
            except InvalidParameterError as e:
                raise InvalidParameterError(
                    f"the budget of {label} cannot become a {kind} budget: charge "
                    f"{rec.request_id!r} ({cost}) cannot be spent from it ({e.problem})",
                    remedy="keep a budget of a kind that every past charge converts to"
                ) from None
            spent = [s + p for s, p in zip(spent, price, strict=True)]
            count += 1
        return tuple(spent), count


@dataclass(frozen=True, slots=True)
class _Budget:
    """One budget as a state row holds it, in its own currency (exact), with the stored
    text of its total and of its spent amount."""

    kind: str
    total: tuple[Fraction, ...]
    spent: tuple[Fraction, ...]
    count: int
    label: str
    total_text: str
    spent_text: str

    def status(self) -> BudgetStatus:
        remaining = tuple(t - s for t, s in zip(self.total, self.spent, strict=True))
        return BudgetStatus(make(self.kind, self.total), make(self.kind, self.spent),
                            make(self.kind, remaining), self.count)

    def _after(self, loss: PrivacyLoss) -> tuple[Fraction, ...]:
        # Same currency (the common case): the loss's own parameters, no conversion.
        price = components(loss) if kind_of(loss) == self.kind else convert(loss, self.kind)
        return tuple([s + p for s, p in zip(self.spent, price, strict=True)])

    def fits(self, loss: PrivacyLoss) -> bool:
        return all(n <= t for n, t in zip(self._after(loss), self.total, strict=True))

    def debit(self, loss: PrivacyLoss) -> _Budget:
        """The budget after spending ``loss`` (already validated), or
        :class:`~statcurator.core.errors.BudgetExceededError` when it does not fit."""
        new = self._after(loss)
        if any(n > t for n, t in zip(new, self.total, strict=True)):
            acc = Accountant._restore(make(self.kind, self.total), self.spent, self.count,
                                      label=self.label)
            acc.spend(loss)  # raises, with the message and remedy of an Accountant
        return _Budget(self.kind, self.total, new, self.count + 1, self.label,
                       self.total_text, pack(self.kind, new))


class _LedgerLock:
    """The ledger's re-entrant lock, entered as ``with lock.rlock: ledger._settle()``
    (which calls :meth:`settle`): holding it, a thread also waits for a row that the writer
    thread is still appending (the backend's connection is in use). The charging thread runs its work with the lock
    :meth:`released`, so other threads wait for the row only, never for the curator's
    engine.

    How deeply a thread holds it is the RLock's own count (``_is_owned``, and
    ``_release_save`` / ``_acquire_restore``, the protocol ``threading.Condition`` uses), not
    a count kept beside it that an interrupt could leave behind."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        #: (pid, the append in flight), set by the charging thread while its work runs
        self.inflight: tuple[int, Future[None]] | None = None
        self.order = next(_ORDER)
        _LOCKS.add(self)

    @property
    def rlock(self) -> Any:
        """The lock itself, for ``with``: the ledger enters it with the C lock's own
        ``with`` (an interrupt cannot fall between taking it and the block that gives it
        back, as it can inside a Python ``__enter__``), then calls :meth:`settle`."""
        return self._lock

    def settle(self) -> None:
        """Wait (holding the lock) for a row the writer thread is still appending. At any
        depth: the writer thread never takes the lock, and a thread's own append is settled
        before it holds the lock again (see :meth:`released`)."""
        flight = self.inflight
        if flight is not None and flight[0] == os.getpid():
            _settled(flight[1])  # its outcome is the charging thread's to handle

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """Run a block without the lock (however deeply this thread holds it), then hold it
        again as deeply. Taking it back cannot be cut short by Ctrl-C (an interrupt that
        arrives meanwhile is raised once the lock is held again), and waits for a row that
        another thread's charge started appending while the lock was free."""
        if not self._lock._is_owned():  # type: ignore[attr-defined]
            yield
            return
        saved = None
        try:
            saved = self._lock._release_save()  # type: ignore[attr-defined]
            yield
        finally:
            if saved is not None:
                self._lock._acquire_restore(saved)  # type: ignore[attr-defined]
            self.settle()

    def forked(self) -> None:
        """In a forked child: only the forking thread lives on, so a lock that another
        thread held at the fork would stay held for ever; it is made free again, in place
        (a ``with`` of the forking thread that entered this same object stays valid). (The
        fork takes every ledger's lock first, see _before_fork, but not one held for longer
        than it waits.)"""
        if not self._lock._is_owned():  # type: ignore[attr-defined]
            self._lock._at_fork_reinit()  # type: ignore[attr-defined]


#: the name of the ledgers' writer threads (their prefix)
_WRITER = "statcurator-ledger"
#: every ledger's lock (see _before_fork), and a counter giving each its place in the order
#: in which a fork takes them
_LOCKS: weakref.WeakSet[_LedgerLock] = weakref.WeakSet()
_ORDER = itertools.count()
#: one fork at a time takes the ledgers' locks; the locks it holds, to give back after it
_FORK_MUTEX = threading.Lock()
_FORK_HELD: list[_LedgerLock] = []
_FORK_BY: list[int] = []  # the thread that holds _FORK_MUTEX for its fork
#: how long a fork waits for one ledger's lock, and for its row in flight (seconds)
FORK_WAIT = 2.0


def _before_fork() -> None:
    """Fork only between a ledger's statements: take every ledger's lock (no other thread is
    then reading or writing through it) and wait for any row its writer thread is appending.
    A child forked in the middle of a SQLite transaction inherits that connection's lock
    state, and the file stays locked in the child for good.

    Bounded, and never waiting on itself: not on a ledger's own writer thread (it would wait
    for the append it is running); one fork at a time, taking the locks in a fixed order (two
    forking threads cannot take them in opposite orders); at most :data:`FORK_WAIT` seconds
    for each lock and each row. A lock held longer (a charge waiting on a busy database) is
    left, and that ledger is forked as it stands, as it was before this hook."""
    if threading.current_thread().name.startswith(_WRITER):
        return
    try:
        # bounded too: an interrupt between taking the mutex and noting it would keep it
        if not _FORK_MUTEX.acquire(timeout=5 * FORK_WAIT):
            return
        _FORK_BY.append(threading.get_ident())
        for lock in sorted(_LOCKS, key=lambda lk: lk.order):
            if not lock._lock.acquire(timeout=FORK_WAIT):
                continue
            _FORK_HELD.append(lock)
            flight = lock.inflight
            if flight is not None and flight[0] == os.getpid():
                with contextlib.suppress(Exception):
                    flight[1].exception(timeout=FORK_WAIT)
    except BaseException:  # noqa: BLE001, S110 - an interrupt: fork with what is held
        pass


def _after_fork_in_parent() -> None:
    if [threading.get_ident()] != _FORK_BY:  # this thread's fork took nothing
        return
    while _FORK_HELD:
        _FORK_HELD.pop()._lock.release()
    _FORK_BY.clear()
    _FORK_MUTEX.release()


def _after_fork_in_child() -> None:
    _after_fork_in_parent()  # the forking thread is the child's: it gives them back too
    for lock in list(_LOCKS):
        lock.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)

#: ledgers with an answer handed to their writer thread and not confirmed yet (kept alive
#: until then, see Ledger._queue_answer and _confirm_at_exit)
_QUEUED: set[Ledger] = set()


@atexit.register
def _confirm_at_exit() -> None:
    """At the interpreter's exit (the writer threads have finished their work by then),
    confirm every answer still unconfirmed: one whose INSERT wrote nothing (another process
    appended first) is written after a read now, instead of being lost with the process."""
    for led in list(_QUEUED):
        q = led._queued
        if q is None or q.pid != os.getpid():
            continue
        with contextlib.suppress(Exception), led._lock.rlock:
            led._settle()  # (a loss is kept for the storing thread: reported here)
        lost = led._lost.pop(q.thread, None)
        if lost is not None:
            warnings.warn(f"statcurator: the ledger {led.location} could not store the "
                          f"answer of request {q.key[1]!r} at exit ({lost}); its budget stays "
                          "spent and a replay says its answer was lost", RuntimeWarning,
                          stacklevel=1)


@dataclass(frozen=True, slots=True)
class _Queued:
    """An answer handed to the writer thread (see ``Ledger._queue_answer``)."""

    pid: int
    key: tuple[str, str]
    payload: str
    row: LedgerEntry
    head: LedgerEntry
    future: Future[bool]
    exact: bool  # the view was exactly as of ``head`` (a charge may be decided after it)
    thread: _ThreadKey  # the thread that stored it (its flush() says if it was lost)


class _ThreadKey:
    """A thread's key for the answers it lost (``Ledger._lost``): one object per thread,
    held by a :class:`threading.local`, so it goes with its thread. Not
    ``threading.current_thread()``: for a thread the threading module did not start (C
    extensions', mod_wsgi's, ``_thread``'s) that is a ``_DummyThread`` kept in
    ``threading._active`` by ident for ever, and handed to the next such thread the OS
    gives the same ident."""

    __slots__ = ("__weakref__",)


_THREAD_KEYS = threading.local()


def _this_thread() -> _ThreadKey:
    key: _ThreadKey | None = getattr(_THREAD_KEYS, "key", None)
    if key is None:
        key = _THREAD_KEYS.key = _ThreadKey()
    return key


def _raise_lost(lost: BaseException, location: str) -> None:
    """Raise the loss of an answer a thread handed over: tampering as itself, anything else
    as an :class:`AnswerLostError` that says not to send the answer."""
    if isinstance(lost, LedgerTamperedError):
        raise lost
    raise AnswerLostError(f"an answer this thread stored could not be written to the ledger "
                          f"{location} ({str(lost) or type(lost).__name__})",
                          remedy="do not send it: it cannot be replayed (its budget stays "
                                 "spent); retry the query under a new request id") from lost


class _NotQueued(Exception):  # noqa: N818 - internal signal, never raised to callers
    """The writer thread took no more work (the interpreter is shutting down)."""


def _settled(future: Future[Any]) -> BaseException | None:
    """The error of ``future`` (None if it succeeded), once it has finished. An interrupt
    (Ctrl-C) while waiting does not cut the wait short — the connection must be free before
    anyone else uses it — and is raised once the future is done."""
    interrupted: BaseException | None = None
    while True:
        try:
            failed = future.exception()
            break
        except BaseException as e:  # noqa: BLE001 - re-raised below, after the wait
            interrupted = interrupted or e
    if interrupted is not None:
        raise interrupted
    return failed


def _digest_of_stored(row: LedgerEntry, key: bytes | None) -> str | None:
    """The hash of a row read back from the store, or None when its values cannot be
    hashed at all (bytes where text belongs, a lone surrogate): a row nobody could have
    sealed, so it does not match its hash."""
    try:
        return digest(row, key)
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        return None


def _seal(row: LedgerEntry, hash_: str) -> LedgerEntry:
    """The row with its hash set (faster than dataclasses.replace, on the hot path)."""
    object.__setattr__(row, "hash", hash_)
    return row


def _parse_anchor(anchor: str | None) -> tuple[int, str]:
    if anchor is None:
        return 0, ""
    rows, _, head = anchor.partition(":") if isinstance(anchor, str) else ("", "", "")
    if not rows.isdigit() or len(head) != 64:
        raise InvalidParameterError(f"an anchor is 'rows:hash', got {anchor!r}",
                                    remedy="pass the .anchor of an earlier verify()")
    return int(rows), head


def _resolve_key(key: str | bytes | None) -> bytes | None:
    if key is None:
        key = os.environ.get(KEY_ENV) or None
        if key is None:
            return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes) or len(key) < _MIN_KEY:
        raise InvalidParameterError(
            f"the ledger key must be text or bytes of at least {_MIN_KEY} bytes",
            remedy=f"generate one with: python -c \"import secrets; "
                   f"print(secrets.token_hex(32))\" and keep it in {KEY_ENV}")
    return key


def _field(row: LedgerEntry, scope: str, name: str) -> Any:
    return getattr(row, f"{scope}_{name}")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameterError(f"{what} must be a non-empty string, got {value!r}",
                                    remedy=f"record the {what} of the charge as text, for audits")
    return value


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _cost(rec: LedgerEntry) -> PrivacyLoss:
    return decode(str(rec.kind), rec.epsilon, rec.delta, rec.rho)


def _to_charge(rec: LedgerEntry, *, replayed: bool = False, answered: bool = False) -> Charge:
    try:
        when = datetime.fromisoformat(rec.at)
    except (TypeError, ValueError):
        raise LedgerError(f"the ledger holds a malformed time {rec.at!r}",
                          remedy="the ledger was altered; restore it from a backup") from None
    return Charge(str(rec.request_id), str(rec.analyst), str(rec.dataset), _cost(rec),
                  str(rec.query), str(rec.mechanism), when, rec.seq, replayed=replayed,
                  answered=answered)


def _check_replay(prior: LedgerEntry, dataset: str,
                  stored: tuple[str, str | None, str | None, str | None], query: str) -> None:
    # Only the analyst's own earlier request is quoted: ids are scoped per analyst.
    if (prior.dataset != dataset or prior.query != query
            or (prior.kind, prior.epsilon, prior.delta, prior.rho) != stored):
        raise LedgerError(f"you already used request id {prior.request_id!r} for another "
                          f"dataset, query or cost ({_cost(prior)} on {prior.dataset!r} for "
                          f"{prior.query!r})",
                          remedy="give every new query a fresh, unique request id (such as "
                                 "uuid.uuid4().hex)")
