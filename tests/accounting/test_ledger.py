"""The ledger on every backend (memory, SQLite file, PostgreSQL): exact storage, dataset-wide
budgets and grants, identities, request ids scoped per analyst, replays, persistence,
append-only storage and invalid input."""

from __future__ import annotations

import threading
from datetime import UTC
from fractions import Fraction

import pytest

from statcurator.accounting import (
    AnswerLostError,
    BudgetStatus,
    Charge,
    Ledger,
    LedgerBackend,
    LedgerEntry,
    NoBudgetError,
    SQLiteBackend,
)
from statcurator.accounting import _ledger as ledger_module
from statcurator.core.errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerError,
)
from statcurator.core.measures import ZCDP, ApproxDP, PureDP

from .conftest import Store

Q = "SELECT COUNT(*) FROM adult"


def _charge(led: Ledger, rid: str, cost, analyst: str = "alice", dataset: str = "adult",
            query: str = Q) -> Charge:
    return led.charge(analyst, dataset, cost, request_id=rid, query=query,
                      mechanism="Laplace(sensitivity=1)")


AMPLE = PureDP(1000)


def _fund(led: Ledger, *datasets: str, total=AMPLE) -> Ledger:
    """Give datasets a generous dataset-wide budget, so that the grants are what binds."""
    for d in datasets or ("adult",):
        led.set_dataset_budget(d, total)
    return led


# -- exact accounting ------------------------------------------------------------------------

def test_exact_accounting_on_a_persistent_ledger(persistent_store: Store):
    led = _fund(persistent_store.open())
    led.set_budget("alice", "adult", PureDP(2))
    for i in range(10):
        _charge(led, f"a{i}", PureDP(0.1))
    for i in range(90):
        _charge(led, f"b{i}", PureDP(Fraction(1, 90)))
    status = led.status("alice", "adult")
    assert status.spent == PureDP(2) and status.remaining == PureDP(0)
    assert status.charges == 100 and status.exhausted
    before = led.counts()
    for tiny in (Fraction(1, 10**75), Fraction(1, 2**255), 1e-75):
        assert not led.can_spend("alice", "adult", PureDP(tiny))
        with pytest.raises(BudgetExceededError, match="exhausted"):
            _charge(led, "tiny", PureDP(tiny))
    assert led.counts() == before
    # The stored costs are exact rational text, never floats.
    kinds = set(persistent_store.sql("SELECT epsilon FROM ledger WHERE type = 'charge' "
                                     "GROUP BY epsilon"))
    assert kinds == {("1/10",), ("1/90",)}
    assert led.dataset_status("adult").spent == PureDP(2)
    led.close()


def test_status_fields_are_exact_losses_of_the_budget_kind(led: Ledger):
    _fund(led)
    led.set_budget("alice", "adult", ApproxDP(1, Fraction(1, 10**6)))
    _charge(led, "r1", PureDP(Fraction(1, 3)))
    s = led.status("alice", "adult")
    assert isinstance(s, BudgetStatus)
    assert s.total == ApproxDP(1, Fraction(1, 10**6))
    assert s.spent == ApproxDP(Fraction(1, 3), 0)
    assert s.remaining == ApproxDP(Fraction(2, 3), Fraction(1, 10**6))
    assert s.kind == "approx" and s.charges == 1


def test_zcdp_budget_for_gaussian_work(led: Ledger):
    _fund(led, total=ZCDP(10))
    led.set_budget("g", "adult", ZCDP(1))
    _charge(led, "g1", ZCDP(Fraction(1, 4)), analyst="g")
    _charge(led, "g2", PureDP(1), analyst="g")                 # ρ = 1/2
    assert led.status("g", "adult").remaining == ZCDP(Fraction(1, 4))
    assert led.dataset_status("adult").spent == ZCDP(Fraction(3, 4))
    assert led.charges("g")[1].cost == PureDP(1)               # stored as charged
    with pytest.raises(InvalidParameterError, match="cannot be spent from a ρ-zCDP budget"):
        _charge(led, "g3", ApproxDP(Fraction(1, 10), 1e-6), analyst="g")
    assert len(led.charges("g")) == 2


# -- grants and dataset-wide budgets -----------------------------------------------------------

def test_no_grant_means_nothing_can_be_spent(led: Ledger):
    _fund(led)
    assert not led.can_spend("alice", "adult", PureDP(0.1))
    with pytest.raises(NoBudgetError, match="has no privacy budget") as info:
        _charge(led, "r1", PureDP(0.1))
    assert isinstance(info.value, BudgetExceededError)
    # The remedy names the CLI command and the Python call.
    assert "statcurator budget set --dataset adult --analyst alice" in str(info.value)
    assert "set_budget('alice', 'adult'" in str(info.value)
    with pytest.raises(NoBudgetError):
        led.status("alice", "adult")
    assert led.counts() == {"dataset_budgets": 1, "budgets": 0, "charges": 0, "answers": 0}


def test_no_dataset_budget_means_nothing_can_be_spent(led: Ledger):
    """A grant alone is not enough: the dataset-wide budget must be set (regression: the
    ledger used to have no dataset-wide budget at all)."""
    led.set_budget("alice", "adult", PureDP(1))
    assert not led.can_spend("alice", "adult", PureDP(0.1))
    with pytest.raises(NoBudgetError, match="no dataset-wide privacy budget") as info:
        _charge(led, "r1", PureDP(0.1))
    assert "statcurator budget set --dataset adult --epsilon" in str(info.value)
    assert "set_dataset_budget('adult'" in str(info.value)
    with pytest.raises(NoBudgetError):
        led.dataset_status("adult")
    assert led.counts()["charges"] == 0


def test_a_charge_debits_the_grant_and_the_dataset_budget_together(led: Ledger):
    led.set_dataset_budget("adult", PureDP(Fraction(3, 2)))
    led.set_budget("alice", "adult", PureDP(1))
    led.set_budget("bob", "adult", PureDP(1))
    _charge(led, "a1", PureDP(1))
    assert led.dataset_status("adult").remaining == PureDP(Fraction(1, 2))
    before = led.counts()
    # bob's grant has room, the dataset does not: refused, and nothing is recorded.
    assert not led.can_spend("bob", "adult", PureDP(Fraction(3, 4)))
    with pytest.raises(BudgetExceededError, match="dataset-wide budget") as info:
        _charge(led, "b1", PureDP(Fraction(3, 4)), analyst="bob")
    assert "alice" not in str(info.value)            # others' spending is not attributed
    assert led.counts() == before
    assert led.status("bob", "adult").spent == PureDP(0)
    # Exactly what is left still fits.
    _charge(led, "b2", PureDP(Fraction(1, 2)), analyst="bob")
    assert led.dataset_status("adult").exhausted
    assert led.dataset_status("adult").charges == 2
    assert not led.status("bob", "adult").exhausted


def test_the_analyst_budget_is_checked_as_well(led: Ledger):
    _fund(led)
    led.set_budget("alice", "adult", PureDP(Fraction(1, 2)))
    with pytest.raises(BudgetExceededError, match="analyst 'alice' on dataset 'adult'"):
        _charge(led, "a1", PureDP(1))
    assert led.dataset_status("adult").spent == PureDP(0)


def test_dataset_budgets_change_like_grants(led: Ledger):
    led.set_dataset_budget("adult", PureDP(2))
    led.set_budget("alice", "adult", PureDP(2))
    _charge(led, "a1", PureDP(1))
    led.set_dataset_budget("adult", PureDP(2))            # unchanged: no new record
    assert led.counts()["dataset_budgets"] == 1
    with pytest.raises(InvalidParameterError, match="never refunded"):
        led.set_dataset_budget("adult", PureDP(Fraction(1, 2)))
    assert led.set_dataset_budget("adult", ZCDP(1)).spent == ZCDP(Fraction(1, 2))
    led.set_budget("alice", "adult", ZCDP(1))
    _charge(led, "a2", ZCDP(Fraction(1, 8)))
    assert led.dataset_status("adult").spent == ZCDP(Fraction(5, 8))
    with pytest.raises(InvalidParameterError, match="'a2'"):  # zCDP never becomes pure ε
        led.set_dataset_budget("adult", PureDP(10))
    assert led.counts()["dataset_budgets"] == 2
    assert sorted(led.dataset_budgets()) == ["adult"]


def test_budgets_are_per_analyst_and_dataset(led: Ledger):
    _fund(led, "adult", "census")
    led.set_budget("alice", "adult", PureDP(1))
    led.set_budget("alice", "census", PureDP(1))
    led.set_budget("bob", "adult", PureDP(Fraction(1, 2)))
    _charge(led, "r1", PureDP(1))
    assert led.status("alice", "census").remaining == PureDP(1)
    assert led.status("bob", "adult").remaining == PureDP(Fraction(1, 2))
    assert sorted(led.budgets()) == [("alice", "adult"), ("alice", "census"), ("bob", "adult")]
    assert led.budgets()[("alice", "adult")].exhausted
    assert [c.request_id for c in led.charges(dataset="adult")] == ["r1"]
    assert led.charges("bob") == []
    assert led.dataset_status("census").spent == PureDP(0)


def test_changing_a_budget_appends_a_record_and_keeps_what_is_spent(led: Ledger):
    _fund(led, total=ApproxDP(1000, Fraction(1, 1000)))
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(1))
    led.set_budget("alice", "adult", PureDP(1))                 # unchanged: no new record
    assert led.counts()["budgets"] == 1
    assert led.set_budget("alice", "adult", PureDP(3)).remaining == PureDP(2)
    assert led.counts()["budgets"] == 2
    with pytest.raises(InvalidParameterError, match="never refunded"):
        led.set_budget("alice", "adult", PureDP(Fraction(1, 2)))
    # Pure charges convert to (ε, δ) and to zCDP ...
    assert led.set_budget("alice", "adult", ApproxDP(2, 1e-6)).spent == ApproxDP(1, 0)
    assert led.set_budget("alice", "adult", ZCDP(1)).spent == ZCDP(Fraction(1, 2))
    _charge(led, "r2", PureDP(Fraction(1, 2)))
    _charge(led, "r2", PureDP(Fraction(1, 2)))                # ρ = 1/8 more
    assert led.status("alice", "adult").spent == ZCDP(Fraction(5, 8))
    # The (ε, δ) dataset budget cannot hold a zCDP charge, although the grant could.
    with pytest.raises(InvalidParameterError, match="cannot be spent from an"):
        _charge(led, "r3", ZCDP(Fraction(1, 4)))
    # Every past charge was pure: the grant may return to pure ε, never below what is spent.
    with pytest.raises(InvalidParameterError, match="never refunded"):
        led.set_budget("alice", "adult", PureDP(1))
    assert led.set_budget("alice", "adult", PureDP(2)).spent == PureDP(Fraction(3, 2))
    assert led.counts()["budgets"] == 5


# -- identities --------------------------------------------------------------------------------

def test_spellings_of_one_name_share_one_grant(led: Ledger):
    """Regression (issue 7 §2): 'Alice', 'alice ', full-width 'ＡＬＩＣＥ' were three analysts."""
    _fund(led)
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(Fraction(1, 2)), analyst="Alice")
    _charge(led, "r2", PureDP(Fraction(1, 2)), analyst="  ALICE ")
    with pytest.raises(BudgetExceededError):
        _charge(led, "r3", PureDP(Fraction(1, 2)), analyst="ＡＬＩＣＥ")
    assert {c.analyst for c in led.charges()} == {"alice"}
    assert led.status("ALICE", "adult").exhausted


@pytest.mark.parametrize("name", ["alice\u200b", "\u0430lice", "al\u202eice", "alice\x00",
                                  "ali\u00adce", "   ", "", "alice\u2028", 17, None])
def test_disguised_names_are_refused(led: Ledger, name):
    _fund(led)
    led.set_budget("alice", "adult", PureDP(1))
    before = led.counts()
    with pytest.raises(InvalidParameterError, match="analyst"):
        _charge(led, "r1", PureDP(0.1), analyst=name)
    with pytest.raises(InvalidParameterError, match="analyst"):
        led.set_budget(name, "adult", PureDP(1))
    assert led.counts() == before


# -- request ids are scoped per analyst --------------------------------------------------------

def test_another_analysts_request_id_neither_blocks_nor_reveals(led: Ledger):
    """Regression (issue 7 §5): reusing alice's request id named alice, the dataset and
    quoted her query in bob's error."""
    secret = "SELECT COUNT(*) FROM adult WHERE name = 'Carol' AND hiv"
    _fund(led, "adult", "clinic")
    led.set_budget("alice", "clinic", PureDP(1))
    led.set_budget("bob", "adult", PureDP(1))
    _charge(led, "r1", PureDP(0.5), dataset="clinic", query=secret)
    led.store_answer("alice", "r1", "41")
    # bob cannot read alice's answer under the id, and no error shows her data.
    for call in (lambda: led.replay("bob", "r1"), lambda: led.store_answer("bob", "r1", "x")):
        with pytest.raises(LedgerError, match="analyst 'bob' has no charge") as info:
            call()
        assert not any(s in str(info.value) for s in ("alice", "clinic", "Carol", "hiv"))
    assert led.answer("bob", "r1") is None and led.answer("alice", "r1") == "41"
    # bob's r1 is his own request: charged normally, not a replay of alice's.
    mine = _charge(led, "r1", PureDP(0.25), analyst="bob")
    assert not mine.replayed and mine.analyst == "bob"
    assert led.status("bob", "adult").spent == PureDP(Fraction(1, 4))
    # bob reusing *his* id for something else is told about *his* request only.
    with pytest.raises(LedgerError, match="you already used request id 'r1'") as info:
        _charge(led, "r1", PureDP(0.5), analyst="bob")
    assert not any(s in str(info.value) for s in ("alice", "clinic", "Carol"))
    assert led.replay("alice", "r1") == "41"


def test_a_request_id_cannot_be_reused_for_something_else(led: Ledger):
    _fund(led, "adult", "census")
    led.set_budget("alice", "adult", PureDP(1))
    led.set_budget("alice", "census", PureDP(1))
    _charge(led, "r1", PureDP(0.5))
    before = led.counts()
    with pytest.raises(LedgerError, match="another dataset, query or cost"):
        _charge(led, "r1", PureDP(0.5), dataset="census")
    with pytest.raises(LedgerError, match="another dataset, query or cost"):
        _charge(led, "r1", PureDP(0.25))
    with pytest.raises(LedgerError, match="another dataset, query or cost"):
        _charge(led, "r1", PureDP(0.5), query="SELECT AVG(age) FROM adult")
    assert led.counts() == before


# -- replays ---------------------------------------------------------------------------------

def test_a_replayed_request_is_not_charged_twice(led: Ledger):
    _fund(led)
    led.set_budget("alice", "adult", PureDP(1))
    first = _charge(led, "r1", PureDP(0.5))
    led.store_answer("alice", "r1", '{"n": 30162}')
    again = _charge(led, "r1", PureDP(0.5))
    assert again.replayed and not first.replayed
    assert again.answered and again.seq == first.seq and again.cost == first.cost
    assert led.replay("alice", "r1") == led.answer("Alice", "r1") == '{"n": 30162}'
    assert led.status("alice", "adult").spent == PureDP(0.5)
    assert led.dataset_status("adult").spent == PureDP(0.5)
    assert led.counts() == {"dataset_budgets": 1, "budgets": 1, "charges": 1, "answers": 1}


def test_a_replay_is_free_even_when_the_budget_is_exhausted(led: Ledger):
    led.set_dataset_budget("adult", PureDP(1))
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(1))
    led.store_answer("alice", "r1", "42")
    assert _charge(led, "r1", PureDP(1)).replayed
    assert led.replay("alice", "r1") == "42"


def test_answers_are_stored_once(led: Ledger):
    _fund(led)
    led.set_budget("alice", "adult", PureDP(1))
    with pytest.raises(LedgerError, match="debits before anything is released"):
        led.store_answer("alice", "r1", "42")
    _charge(led, "r1", PureDP(0.5))
    led.store_answer("alice", "r1", "42")
    led.store_answer("alice", "r1", "42")                      # idempotent
    with pytest.raises(LedgerError, match="append-only"):
        led.store_answer("alice", "r1", "43")
    with pytest.raises(InvalidParameterError, match="as text"):
        led.store_answer("alice", "r1", 42)  # type: ignore[arg-type]
    assert led.answer("alice", "r1") == "42" and led.counts()["answers"] == 1
    assert led.answer("alice", "unknown") is None
    with pytest.raises(LedgerError, match="no charge under request id"):
        led.replay("alice", "unknown")


def test_an_answer_still_being_computed_is_not_replayed(led: Ledger):
    _fund(led)
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(0.5))
    replayed = _charge(led, "r1", PureDP(0.5))
    assert replayed.replayed and not replayed.answered
    with pytest.raises(AnswerLostError, match="still being computed"):
        led.replay("alice", "r1")
    led.store_answer("alice", "r1", "42")
    assert led.replay("alice", "r1") == "42"


def test_a_lost_answer_is_never_replaced_by_fresh_noise(persistent_store: Store):
    """The crash contract: charged, no answer stored, then the curator restarts."""
    crashed = _fund(persistent_store.open())
    crashed.set_budget("alice", "adult", PureDP(1))
    _charge(crashed, "r1", PureDP(0.5))
    crashed.close()                                            # dies before store_answer

    led = persistent_store.open()
    replayed = _charge(led, "r1", PureDP(0.5))
    assert replayed.replayed and not replayed.answered         # not charged again ...
    with pytest.raises(AnswerLostError, match="stopped between the charge"):
        led.replay("alice", "r1")                              # ... and nothing to replay
    with pytest.raises(AnswerLostError, match="new request id"):
        led.store_answer("alice", "r1", "fresh noise")         # no free fresh answer
    assert led.answer("alice", "r1") is None
    assert led.status("alice", "adult").spent == PureDP(0.5)   # the budget stays spent
    # The remedy: a new request id, charged again.
    _charge(led, "r1-retry", PureDP(0.5))
    led.store_answer("alice", "r1-retry", "42")
    assert led.status("alice", "adult").exhausted
    led.close()


# -- persistence, append-only ------------------------------------------------------------------

def test_persistence_across_reopen(persistent_store: Store):
    with _fund(persistent_store.open(), total=ZCDP(5)) as led:
        led.set_budget("alice", "adult", ZCDP(Fraction(1, 2)))
        _charge(led, "r1", ZCDP(Fraction(1, 8)))
        _charge(led, "r2", PureDP(Fraction(1, 2)))
        led.store_answer("alice", "r1", "answer one")
        first = led.charges()
    with persistent_store.open() as led:
        assert led.persistent
        assert led.status("alice", "adult").spent == ZCDP(Fraction(1, 4))
        assert led.dataset_status("adult").spent == ZCDP(Fraction(1, 4))
        assert led.charges() == [
            Charge(c.request_id, c.analyst, c.dataset, c.cost, c.query, c.mechanism,
                   c.timestamp, c.seq, answered=c.request_id == "r1") for c in first]
        assert led.replay("alice", "r1") == "answer one"
        assert _charge(led, "r1", ZCDP(Fraction(1, 8))).replayed
        assert led.status("alice", "adult").charges == 2
        assert led.verify().rows == 6


def test_sqlite_file_is_wal_and_intact(tmp_path):
    path = tmp_path / "l.db"
    with Ledger(path) as led:
        assert led.path == path and led.location == str(path)
        _fund(led)
    with sqlite3_ro(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def sqlite3_ro(path):
    import sqlite3

    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def test_charges_record_who_what_when_and_how_much(led: Ledger):
    _fund(led)
    led.set_budget("alice", "adult", PureDP(1))
    c1 = _charge(led, "r1", PureDP(0.25))
    c2 = _charge(led, "r2", PureDP(0.25), query="SELECT AVG(age) FROM adult")
    assert (c1.analyst, c1.dataset, c1.query, c1.mechanism) == (
        "alice", "adult", Q, "Laplace(sensitivity=1)")
    assert c1.timestamp.tzinfo == UTC and c1.timestamp <= c2.timestamp
    assert c1.seq < c2.seq
    assert led.charges() == [c1, c2]


def test_the_ledger_is_append_only(persistent_store: Store):
    led = _fund(persistent_store.open())
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(0.5))
    led.store_answer("alice", "r1", "42")
    led.close()
    for sql in ("UPDATE ledger SET epsilon = '0/1' WHERE type = 'charge'",
                "DELETE FROM ledger WHERE type = 'charge'",
                "UPDATE ledger SET grant_total = 'pure:100/1'", "DELETE FROM ledger",
                "UPDATE ledger SET payload = 'other' WHERE type = 'answer'"):
        with pytest.raises(Exception, match="append-only"):
            persistent_store.sql(sql)
    if persistent_store.kind == "postgres":
        with pytest.raises(Exception, match="append-only"):
            persistent_store.sql("TRUNCATE ledger")
    # Not even another program can store a float cost.
    with pytest.raises(Exception, match="(?i)check"):
        persistent_store.sql("INSERT INTO ledger (seq, type, analyst, dataset, request_id, "
                             "kind, epsilon, query, mechanism, at, prev_hash, hash) VALUES "
                             "(99, 'charge', 'alice', 'adult', 'x', 'pure', 0.5, 'q', 'm', "
                             "'t', 'p', 'h')")
    with persistent_store.open() as again:
        assert again.status("alice", "adult").spent == PureDP(0.5)


def test_files_that_are_not_ledgers_are_refused(tmp_path):
    import sqlite3

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as raw:
        raw.execute("CREATE TABLE t (x)")
    with pytest.raises(LedgerError, match="not a statcurator ledger"):
        Ledger(other)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError, match="cannot be read as a ledger"):
        Ledger(garbage)
    with pytest.raises(LedgerError, match="does not exist"):
        Ledger(tmp_path / "missing" / "l.db")
    newer = tmp_path / "newer.db"
    Ledger(newer).close()
    with sqlite3.connect(newer) as raw:
        raw.execute("PRAGMA user_version = 99")
    with pytest.raises(LedgerError, match="newer statcurator"):
        Ledger(newer)
    older = tmp_path / "older.db"
    Ledger(older).close()
    with sqlite3.connect(older) as raw:
        raw.execute("PRAGMA user_version = 1")
    with pytest.raises(LedgerError, match="older statcurator"):
        Ledger(older)


def test_a_closed_ledger_refuses_work(store: Store):
    led = store.open()
    led.close()
    led.close()
    with pytest.raises(LedgerError, match="closed"):
        led.charges()


def test_backends_are_pluggable(tmp_path):
    path = tmp_path / "curator.db"
    backend = SQLiteBackend(path, timeout=5)
    assert isinstance(backend, LedgerBackend)
    led = Ledger(backend=backend)
    assert led.backend is backend and led.location == str(path)
    with pytest.raises(InvalidParameterError):
        Ledger(path, backend=backend)
    with pytest.raises(InvalidParameterError):
        Ledger(backend="sqlite")  # type: ignore[arg-type]
    for bad in (0, -1, float("nan"), "30"):
        with pytest.raises(InvalidParameterError, match="timeout"):
            Ledger(path, timeout=bad)  # type: ignore[arg-type]


def test_entries_are_the_audit_trail(led: Ledger):
    _fund(led)
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(0.5))
    led.store_answer("alice", "r1", "42")
    rows = led.entries()
    assert [e.type for e in rows] == ["genesis", "dataset_budget", "grant", "charge", "answer"]
    assert all(isinstance(e, LedgerEntry) for e in rows)
    assert [e.seq for e in rows] == [1, 2, 3, 4, 5]
    assert all(b.prev_hash == a.hash for a, b in zip(rows, rows[1:], strict=False))
    charge = rows[3]
    assert (charge.grant_spent, charge.dataset_spent, charge.dataset_total) == (
        "pure:1/2", "pure:1/2", "pure:1000/1")
    assert [e.type for e in led.entries(analyst="ALICE")] == ["grant", "charge", "answer"]
    assert led.verify().rows == 5


# -- statements per charge -------------------------------------------------------------------

def test_a_durable_charge_is_at_most_three_statements(tmp_path):
    """Issue 10: a charge took ~15 SQL statements with a file ledger; the target is ≤ 3. The
    count is SQLite's own trace of the statements it ran for one charge."""
    led = _fund(Ledger(tmp_path / "l.db"))
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "warm", PureDP(Fraction(1, 100)))
    seen: list[str] = []
    conn = led.backend._connection()
    conn.set_trace_callback(seen.append)
    _charge(led, "r1", PureDP(Fraction(1, 100)))
    charge_statements = [s for s in seen if not s.startswith("--")]  # "--": trigger bodies
    seen.clear()
    led.store_answer("alice", "r1", "42")
    led.flush()  # (written by the writer thread)
    answer_statements = list(seen)
    seen.clear()
    assert _charge(led, "r1", PureDP(Fraction(1, 100))).replayed
    replay_statements = list(seen)
    # a charge with engine work right after an answer still being appended: decided from
    # the rows the object remembers, and appended only after that answer, without a read
    _charge(led, "r2", PureDP(Fraction(1, 100)))
    seen.clear()
    led.store_answer("alice", "r2", "43")
    led.charge("alice", "adult", PureDP(Fraction(1, 100)), request_id="r3", query=Q,
               mechanism="m", alongside=lambda: None, new_id=True)
    led.flush()
    ahead_statements = [s for s in seen if not s.startswith(("--", "PRAGMA synchronous"))]
    conn.set_trace_callback(None)
    assert len(charge_statements) <= 3, charge_statements
    assert [s.split()[0] for s in charge_statements] == ["SELECT", "INSERT"]
    # the answer is written without an fsync: two PRAGMAs switch that (no I/O) around it;
    # and without a read: it goes right after its charge, the head this object wrote
    answer_io = [s for s in answer_statements if not s.startswith("PRAGMA synchronous")]
    assert [s.split()[0] for s in answer_io] == ["INSERT"]
    # a replay: the head's read finds the request id charged, then its rows are read
    assert [s.split()[0] for s in replay_statements] == ["SELECT", "SELECT"]
    assert [s.split()[0] for s in ahead_statements] == ["INSERT", "INSERT"], ahead_statements
    assert [e.type for e in led.entries()][-3:] == ["charge", "answer", "charge"]
    led.close()


def test_an_answer_is_written_without_a_read_on_every_backend(store: Store, monkeypatch):
    """The head row the ledger object wrote compares equal, column for column, to the row
    the backend stores (text, integers, NULL), so the answer's conditional INSERT succeeds
    on each backend and the read-decide-append path is not taken (it would still be
    correct, only slower: a type that stored differently would never show otherwise)."""
    led = _fund(store.open())
    led.set_budget("alice", "adult", PureDP(1))
    slow: list[str] = []
    write = ledger_module.Ledger._write
    for rid in ("r1", "r2", "r3"):
        _charge(led, rid, PureDP(Fraction(1, 8)))
        monkeypatch.setattr(ledger_module.Ledger, "_write",
                            lambda self, *a, **k: slow.append(a[2]) or write(self, *a, **k))
        led.store_answer("alice", rid, f'{{"answer": "{rid}"}}')
        led.flush()  # confirmed (or, had its INSERT found nothing, written after a read)
        monkeypatch.setattr(ledger_module.Ledger, "_write", write)
    assert slow == []
    assert [e.type for e in led.entries()][-2:] == ["charge", "answer"]
    led.close()


def _state_reads(led: Ledger) -> list[object]:
    """The arguments of every full state read ``led``'s backend makes from now on."""
    reads: list[object] = []
    real = led.backend.state

    def counted(*a):
        reads.append(a)
        return real(*a)

    led.backend.state = counted  # type: ignore[method-assign]
    return reads


def test_an_answer_goes_after_rows_another_writer_appended(persistent_store: Store):
    """An answer is appended at the position after the last row its ledger object knows,
    without reading first; when another process has appended since, that position is taken,
    and the answer is written after a read instead (when the object next settles): the
    chain stays whole."""
    mine, other = persistent_store.open(), persistent_store.open()
    _fund(mine).set_budget("alice", "adult", PureDP(1))
    _charge(mine, "r1", PureDP(Fraction(1, 10)))
    reads = _state_reads(mine)
    mine.store_answer("alice", "r1", "first")
    assert reads == []                                         # no other writer: no read
    _charge(mine, "r2", PureDP(Fraction(1, 10)))
    reads.clear()
    other.set_budget("bob", "adult", PureDP(1))                # another process writes
    _charge(other, "x", PureDP(Fraction(1, 10)), analyst="bob")  # two rows after r2
    mine.store_answer("alice", "r2", "second")
    mine.flush()                                               # (the writer thread's INSERT)
    assert len(reads) == 1                                     # the position was taken
    assert [e.type for e in mine.entries()][-4:] == ["charge", "grant", "charge", "answer"]
    assert mine.replay("alice", "r2") == other.replay("alice", "r2") == "second"
    assert mine.verify().rows == other.verify().rows == 9
    mine.close()
    other.close()



def _held(led: Ledger) -> threading.Event:
    """Hold ``led``'s writer thread (what it is handed meanwhile waits) until the event is
    set: the window between an answer handed to it and its INSERT, made as long as needed."""
    gate = threading.Event()
    led._submit(gate.wait)
    return gate


def _ahead_after_another_writer(store: Store, dataset: str, *, weak: bool,
                                monkeypatch) -> list[int]:
    """Alice's answer is handed to the writer thread; before its INSERT runs, another
    process spends the dataset's last ε=1/2 (bob); then alice's next charge is decided
    right after her answer, from the rows her object remembers (where ε=1/2 is left).
    ``weak``: the charge appended at its position without the condition that her answer
    is the row before it. Returns the times the engine work ran (or raises the charge's
    refusal)."""
    mine, other = store.open(), store.open()
    mine.set_dataset_budget(dataset, PureDP(1))
    for who in ("alice", "bob"):
        mine.set_budget(who, dataset, PureDP(1))
    _charge(mine, f"{dataset}1", PureDP(Fraction(1, 2)), dataset=dataset)
    gate = _held(mine)
    mine.store_answer("alice", f"{dataset}1", "a1")             # waits behind the gate
    _charge(other, f"{dataset}b", PureDP(Fraction(1, 2)), analyst="bob",
            dataset=dataset)                                    # the dataset's last ε
    other.close()
    if weak:
        monkeypatch.setattr(ledger_module.Ledger, "_append_after",
                            lambda self, row, head: self._backend.append(row))
    ran: list[int] = []
    try:
        mine.charge("alice", dataset, PureDP(Fraction(1, 2)), request_id=f"{dataset}2", query=Q,
                    mechanism="m", alongside=lambda: ran.append(1) or gate.set(), new_id=True)
    finally:
        gate.set()
        mine.close()
    return ran


def test_a_charge_after_an_answer_in_flight_sees_another_writer(persistent_store: Store,
                                                                 monkeypatch):
    """The attack on charges decided without a read right after an answer the writer
    thread is still appending: another process spends the dataset's budget in between. The
    charge is appended only if the answer is the last row; it is not (the other process
    took its place), so nothing is appended, the ledger is read, the answer written after
    the other row, and the charge decided again and refused. The engine work ran once and
    its result was never charged. Control: appended at its position without that
    condition, the same charge goes in and the dataset's budget is overspent."""
    with pytest.raises(BudgetExceededError, match="dataset 'adult'"):
        _ahead_after_another_writer(persistent_store, "adult", weak=False,
                                    monkeypatch=monkeypatch)
    led = persistent_store.open()
    assert led.dataset_status("adult").spent == PureDP(1)
    assert led.replay("alice", "adult1") == "a1"               # written after bob's row
    assert [e.type for e in led.entries()][-3:] == ["charge", "charge", "answer"]
    assert led.verify().rows == 7
    led.close()
    # control: the weak append overspends
    ran = _ahead_after_another_writer(persistent_store, "census", weak=True,
                                      monkeypatch=monkeypatch)
    assert ran == [1]
    spent = sum(Fraction(str(r[0])) for r in persistent_store.sql(
        "SELECT epsilon FROM ledger WHERE type = 'charge' AND dataset = 'census'"))
    assert spent == Fraction(3, 2)                             # ε=3/2 of a dataset's ε=1


_EXITING = """
import atexit, sys, threading
from fractions import Fraction
from statcurator.accounting import Ledger, _ledger
from statcurator.core.measures import PureDP
if sys.argv[2] == "control":
    atexit.unregister(_ledger._confirm_at_exit)
mine, other = Ledger(sys.argv[1]), Ledger(sys.argv[1])
mine.set_dataset_budget("adult", PureDP(10))
mine.set_budget("alice", "adult", PureDP(1))
mine.charge("alice", "adult", PureDP(Fraction(1, 4)), request_id="r1", query="q",
            mechanism="m")
gate = threading.Event()
mine._submit(gate.wait)
mine.store_answer("alice", "r1", "a1")
other.set_budget("bob", "adult", PureDP(1))  # takes the place the answer's INSERT expects
gate.set()
"""  # and the process exits without closing either ledger


@pytest.mark.parametrize("variant", ["confirmed", "control"])
def test_an_answer_that_lost_its_place_is_stored_at_exit(tmp_path, variant: str):
    """A script ends right after its release, without closing the ledger, and the answer's
    INSERT (on the writer thread) finds that another writer took its place: the exit hook
    writes it after a read. Control: without the hook the answer is lost (its budget stays
    spent, and the replay says so)."""
    import subprocess
    import sys

    path = tmp_path / "l.db"
    done = subprocess.run([sys.executable, "-c", _EXITING, str(path), variant],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    with Ledger(path) as led:
        if variant == "confirmed":
            assert led.replay("alice", "r1") == "a1"
        else:
            with pytest.raises(AnswerLostError):
                led.replay("alice", "r1")
        assert led.status("alice", "adult").spent == PureDP(Fraction(1, 4))


def test_a_charge_from_remembered_rows_sees_another_writer(persistent_store: Store,
                                                           monkeypatch):
    """While the ledger's head is the row a ledger object last wrote, it decides a charge
    from the rows it remembers (one read of the head instead of the rows). The attack: two
    processes spend one grant in turn, so each one's remembered rows go stale. The head
    moved, so the rows are read again and the third charge is refused. Control: an object
    that trusted its remembered rows without looking at the head would decide on a stale
    budget again and again, every append losing its place, and never refuse the charge."""
    mine, other = persistent_store.open(timeout=0.5), persistent_store.open()
    _fund(mine).set_budget("alice", "adult", PureDP(1))
    reads = _state_reads(mine)
    _charge(mine, "r1", PureDP(Fraction(1, 2)))
    _charge(mine, "r2", PureDP(Fraction(1, 4)))
    assert reads == []                            # decided from the rows it remembers
    _charge(other, "r3", PureDP(Fraction(1, 4)))  # another process spends the rest
    with pytest.raises(BudgetExceededError):
        _charge(mine, "r4", PureDP(Fraction(1, 4)))
    assert len(reads) == 1                        # the head moved: the rows were read
    assert mine.status("alice", "adult").remaining == PureDP(0)
    assert persistent_store.spent() == 1
    # the control: the head as this object last saw it, whatever is stored
    monkeypatch.setattr(type(mine.backend), "head",
                        lambda self, a, r: (mine._view.seq, mine._view.hash, False))
    mine.set_budget("alice", "adult", PureDP(2))  # ε=1 left, as this object remembers
    _charge(other, "r5", PureDP(Fraction(1, 2)))  # ε=1/2 left in fact
    with pytest.raises(LedgerError, match="contended"):
        _charge(mine, "r6", PureDP(Fraction(3, 4)))
    assert persistent_store.spent() == Fraction(3, 2)  # (the chain itself refused the row)
    mine.close()
    other.close()



def test_an_interrupt_after_a_charge_never_leaves_its_ledger_remembering_the_budget_before(
        tmp_path):
    """Review helper-42, finding 2: Ctrl-C (a KeyboardInterrupt, raised between any two
    bytecodes of the main thread) landing on each line that runs after a charge's row is
    durable — the rest of ``_write`` and the whole of ``_advance``, which records the row in
    what the object remembers. The grant is ε=1 and the charge spends it all, so whatever the
    interrupt cut short, the object's next charge must be refused: it must never decide from
    the rows of before the charge (it did when the head was recorded before the rows)."""
    import inspect
    import sys

    def lines(fn, after: str) -> list[tuple[object, int]]:
        """The code lines of ``fn`` after the first that contains ``after``."""
        src, first = inspect.getsourcelines(fn)
        start = next(i for i, t in enumerate(src) if after in t)
        return [(fn.__code__, first + i) for i in range(start + 1, len(src))
                if src[i].strip() and not src[i].strip().startswith(("#", "except", "raise"))]

    targets = lines(ledger_module.Ledger._write, after="self._append(row, work, after)")
    targets += lines(ledger_module.Ledger._advance, after='"""Record in the view')
    assert len(targets) >= 10
    hit = 0
    for n, (code, lineno) in enumerate(targets):
        led = _fund(Ledger(tmp_path / f"l{n}.db"))
        led.set_budget("alice", "adult", PureDP(1))
        armed = [True]

        def local(frame, event, arg, lineno=lineno, armed=armed):
            if event == "line" and frame.f_lineno == lineno and armed[0]:
                armed[0] = False
                raise KeyboardInterrupt
            return local

        sys.settrace(lambda frame, event, arg, code=code, local=local:
                     local if frame.f_code is code else None)
        try:
            _charge(led, "r1", PureDP(1))
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        hit += not armed[0]
        with pytest.raises(BudgetExceededError):
            _charge(led, "r2", PureDP(1))
        led.close()
    assert hit >= 8  # the interrupt did land on (nearly) every line


# -- invalid parameters leave the ledger untouched -------------------------------------------

def _tampered():
    loss = PureDP(0.5)
    object.__setattr__(loss, "epsilon", float("inf"))
    return loss


BAD_COSTS = {
    "zero": 0, "zero loss": PureDP(0), "zero rho": ZCDP(0), "zero epsilon with delta":
    ApproxDP(0, 1e-6), "negative": -0.5, "nan": float("nan"), "inf": float("inf"),
    "-inf": float("-inf"), "string": "0.5", "subnormal": 5e-324, "bool": True, "none": None,
    "absurd precision": Fraction(1, 10**100), "tampered": _tampered(), "list": [0.5],
}


@pytest.mark.parametrize("bad", list(BAD_COSTS.values()), ids=list(BAD_COSTS))
def test_invalid_costs_leave_the_ledger_untouched(tmp_path, bad):
    path = tmp_path / "l.db"
    led = _fund(Ledger(path))
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r0", PureDP(0.5))
    before, status = led.counts(), led.status("alice", "adult")
    with pytest.raises(InvalidParameterError):
        _charge(led, "r1", bad)
    with pytest.raises(InvalidParameterError):
        led.can_spend("alice", "adult", bad)
    with pytest.raises(InvalidParameterError):
        led.set_budget("alice", "adult", bad)
    with pytest.raises(InvalidParameterError):
        led.set_dataset_budget("adult", bad)
    led.close()
    with Ledger(path) as reopened:
        assert reopened.counts() == before
        assert reopened.status("alice", "adult") == status
    with sqlite3_ro(path) as raw:  # counted independently of the ledger's own code
        assert raw.execute("SELECT count(*) FROM ledger").fetchone()[0] == 4


@pytest.mark.parametrize("make", [
    lambda: ApproxDP(1, 1),            # δ ≥ 1
    lambda: ApproxDP(1, 1.5),
    lambda: ApproxDP(1, float("nan")),
    lambda: PureDP(float("inf")),
    lambda: ZCDP("0.5"),
    lambda: PureDP(1e-310),            # subnormal
], ids=["delta=1", "delta=1.5", "delta=nan", "eps=inf", "rho=string", "subnormal"])
def test_invalid_loss_values_never_reach_the_ledger(led: Ledger, make):
    _fund(led, total=ApproxDP(10, 1e-3))
    led.set_budget("alice", "adult", ApproxDP(1, 1e-6))
    before = led.counts()
    with pytest.raises(InvalidParameterError):
        _charge(led, "r1", make())
    assert led.counts() == before


@pytest.mark.parametrize(("field", "value"), [
    ("analyst", ""), ("analyst", None), ("dataset", "  "), ("dataset", 3), ("request_id", ""),
    ("request_id", 17), ("request_id", "r\u200b1"), ("dataset", "adult\x00"), ("query", ""),
    ("mechanism", None)])
def test_invalid_charge_fields_leave_the_ledger_untouched(led: Ledger, field, value):
    _fund(led)
    led.set_budget("alice", "adult", PureDP(1))
    before = led.counts()
    args = {"analyst": "alice", "dataset": "adult", "request_id": "r1", "query": Q,
            "mechanism": "m"}
    args[field] = value
    with pytest.raises(InvalidParameterError, match=field):
        led.charge(args.pop("analyst"), args.pop("dataset"), PureDP(0.5), **args)
    assert led.counts() == before


def test_incompatible_charges_leave_the_ledger_untouched(led: Ledger):
    _fund(led)
    led.set_budget("alice", "adult", PureDP(1))
    before = led.counts()
    with pytest.raises(InvalidParameterError, match="ZCDP budget"):
        _charge(led, "r1", ZCDP(Fraction(1, 8)))
    with pytest.raises(BudgetExceededError):
        _charge(led, "r2", PureDP(2))
    assert led.counts() == before
    assert led.status("alice", "adult").spent == PureDP(0)


# -- threads and forks ---------------------------------------------------------------------------

@pytest.mark.parametrize("shared", [True, False], ids=["one ledger", "one ledger per thread"])
def test_threads_never_overspend(persistent_store: Store, shared: bool):
    with persistent_store.open() as setup:
        setup.set_dataset_budget("adult", PureDP(Fraction(3, 4)))
        for t in range(4):
            setup.set_budget(f"t{t}", "adult", PureDP(1))
    common = persistent_store.open()
    outcomes: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def work(t: int) -> None:
        led = common if shared else persistent_store.open()
        start.wait()
        for i in range(15):
            try:
                _charge(led, f"t{t}-{i}", PureDP(Fraction(1, 40)), analyst=f"t{t}")
                ok = True
            except BudgetExceededError:
                ok = False
            with lock:
                outcomes.append(ok)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Only the dataset-wide budget binds: 30 of the 60 charges fit in it.
    assert outcomes.count(True) == 30 and outcomes.count(False) == 30
    assert persistent_store.spent() == Fraction(3, 4)
    assert common.dataset_status("adult").remaining == PureDP(0)
    common.verify()


def test_a_ledger_inherited_by_a_forked_child_reconnects(persistent_store: Store):
    import multiprocessing

    led = _fund(persistent_store.open())
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "parent", PureDP(0.25))
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_charge, args=(led, "child", PureDP(0.25)))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    # The parent's connection still works and sees the child's charge.
    assert led.status("alice", "adult").spent == PureDP(0.5)
    _charge(led, "parent-2", PureDP(0.5))
    assert [c.request_id for c in led.charges()] == ["parent", "child", "parent-2"]


def test_an_in_memory_ledger_is_not_shared_with_a_child():
    import multiprocessing

    memory = _fund(Ledger())
    memory.set_budget("alice", "adult", PureDP(1))
    child = multiprocessing.get_context("fork").Process(target=_charge_or_exit, args=(memory,))
    child.start()
    child.join(30)
    assert child.exitcode == 3


def _charge_or_exit(led: Ledger) -> None:
    try:
        _charge(led, "child", PureDP(0.25))
    except LedgerError as e:
        raise SystemExit(3 if "in-memory ledger cannot be shared" in str(e) else 4) from None


def test_a_new_ledger_file_is_readable_by_its_owner_only(tmp_path) -> None:
    """It holds every analyst's queries and answers (review helper-30: it was 0644, and its
    -wal and -shm files with it). An existing file keeps the permissions its owner gave it."""
    import os
    import stat

    led = _fund(Ledger(tmp_path / "l.db"))
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(Fraction(1, 2)))
    modes = {p.name: stat.S_IMODE(os.stat(p).st_mode) for p in tmp_path.iterdir()}
    led.close()
    assert set(modes) >= {"l.db", "l.db-wal", "l.db-shm"}
    assert all(m == 0o600 for m in modes.values()), modes
    shared = tmp_path / "shared.db"
    shared.touch(mode=0o640)
    os.chmod(shared, 0o640)
    Ledger(shared).close()
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o640     # control: left as it was
