"""The persistent ledger: exact storage, persistence, replays, append-only, invalid input."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC
from fractions import Fraction
from pathlib import Path

import pytest

from statcurator.accounting import (
    AnswerLostError,
    BudgetStatus,
    Charge,
    Ledger,
    LedgerBackend,
    NoBudgetError,
    SQLiteBackend,
)
from statcurator.core.errors import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerError,
)
from statcurator.core.measures import ZCDP, ApproxDP, PureDP

Q = "SELECT COUNT(*) FROM adult"


def _charge(led: Ledger, rid: str, cost, analyst: str = "alice", dataset: str = "adult",
            query: str = Q) -> Charge:
    return led.charge(analyst, dataset, cost, request_id=rid, query=query,
                      mechanism="Laplace(sensitivity=1)")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "curator.db"


@pytest.fixture(params=["memory", "file"])
def led(request, tmp_path: Path):
    ledger = Ledger() if request.param == "memory" else Ledger(tmp_path / "l.db")
    yield ledger
    ledger.close()


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


# -- exact accounting ------------------------------------------------------------------------

def test_exact_accounting_on_a_persistent_ledger(path: Path):
    led = Ledger(path)
    led.set_budget("alice", "adult", PureDP(2))
    for i in range(10):
        _charge(led, f"a{i}", PureDP(0.1))
    for i in range(1000):
        _charge(led, f"b{i}", PureDP(0.001))
    status = led.status("alice", "adult")
    assert status.spent == PureDP(2) and status.remaining == PureDP(0)
    assert status.charges == 1010 and status.exhausted
    before = led.counts()
    for tiny in (Fraction(1, 10**75), Fraction(1, 2**255), 1e-75):
        assert not led.can_spend("alice", "adult", PureDP(tiny))
        with pytest.raises(BudgetExceededError, match="exhausted"):
            _charge(led, "tiny", PureDP(tiny))
    assert led.counts() == before
    # The stored costs are exact rational text, never floats.
    with _raw(path) as raw:
        kinds = set(raw.execute("SELECT typeof(epsilon), epsilon FROM charges "
                                "GROUP BY epsilon").fetchall())
    assert kinds == {("text", "1/10"), ("text", "1/1000")}
    led.close()


def test_status_fields_are_exact_losses_of_the_budget_kind(led: Ledger):
    led.set_budget("alice", "adult", ApproxDP(1, Fraction(1, 10**6)))
    _charge(led, "r1", PureDP(Fraction(1, 3)))
    s = led.status("alice", "adult")
    assert isinstance(s, BudgetStatus)
    assert s.total == ApproxDP(1, Fraction(1, 10**6))
    assert s.spent == ApproxDP(Fraction(1, 3), 0)
    assert s.remaining == ApproxDP(Fraction(2, 3), Fraction(1, 10**6))
    assert s.kind == "approx" and s.charges == 1


def test_zcdp_budget_for_gaussian_work(led: Ledger):
    led.set_budget("g", "adult", ZCDP(1))
    _charge(led, "g1", ZCDP(Fraction(1, 4)), analyst="g")
    _charge(led, "g2", PureDP(1), analyst="g")                 # ρ = 1/2
    assert led.status("g", "adult").remaining == ZCDP(Fraction(1, 4))
    assert led.charges("g")[1].cost == PureDP(1)               # stored as charged
    with pytest.raises(InvalidParameterError, match="cannot be spent from a ρ-zCDP budget"):
        _charge(led, "g3", ApproxDP(Fraction(1, 10), 1e-6), analyst="g")
    assert len(led.charges("g")) == 2


# -- budgets ---------------------------------------------------------------------------------

def test_no_budget_means_nothing_can_be_spent(led: Ledger):
    assert not led.can_spend("alice", "adult", PureDP(0.1))
    with pytest.raises(NoBudgetError, match="has no privacy budget") as info:
        _charge(led, "r1", PureDP(0.1))
    assert isinstance(info.value, BudgetExceededError)
    assert "set_budget('alice', 'adult'" in str(info.value)
    with pytest.raises(NoBudgetError):
        led.status("alice", "adult")
    assert led.counts() == {"budgets": 0, "charges": 0, "answers": 0}


def test_budgets_are_per_analyst_and_dataset(led: Ledger):
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


def test_changing_a_budget_appends_a_record_and_keeps_what_is_spent(led: Ledger):
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
    _charge(led, "r2", ZCDP(Fraction(1, 4)))
    # ... but zCDP charges never become pure ε.
    with pytest.raises(InvalidParameterError, match="'r2'"):
        led.set_budget("alice", "adult", PureDP(10))
    assert led.status("alice", "adult").spent == ZCDP(Fraction(3, 4))
    assert led.counts()["budgets"] == 4


# -- replays ---------------------------------------------------------------------------------

def test_a_replayed_request_is_not_charged_twice(led: Ledger):
    led.set_budget("alice", "adult", PureDP(1))
    first = _charge(led, "r1", PureDP(0.5))
    led.store_answer("r1", '{"n": 30162}')
    again = _charge(led, "r1", PureDP(0.5))
    assert again.replayed and not first.replayed
    assert again.answered and again.seq == first.seq and again.cost == first.cost
    assert led.replay("r1") == led.answer("r1") == '{"n": 30162}'
    assert led.status("alice", "adult").spent == PureDP(0.5)
    assert led.counts() == {"budgets": 1, "charges": 1, "answers": 1}


def test_a_replay_is_free_even_when_the_budget_is_exhausted(led: Ledger):
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(1))
    led.store_answer("r1", "42")
    assert _charge(led, "r1", PureDP(1)).replayed
    assert led.replay("r1") == "42"


def test_a_request_id_cannot_be_reused_for_something_else(led: Ledger):
    led.set_budget("alice", "adult", PureDP(1))
    led.set_budget("bob", "adult", PureDP(1))
    _charge(led, "r1", PureDP(0.5))
    before = led.counts()
    with pytest.raises(LedgerError, match="already used by analyst 'alice'"):
        _charge(led, "r1", PureDP(0.5), analyst="bob")
    with pytest.raises(LedgerError, match="another query or cost"):
        _charge(led, "r1", PureDP(0.25))
    with pytest.raises(LedgerError, match="another query or cost"):
        _charge(led, "r1", PureDP(0.5), query="SELECT AVG(age) FROM adult")
    assert led.counts() == before
    assert led.status("bob", "adult").spent == PureDP(0)


def test_answers_are_stored_once(led: Ledger):
    led.set_budget("alice", "adult", PureDP(1))
    with pytest.raises(LedgerError, match="debits before anything is released"):
        led.store_answer("r1", "42")
    _charge(led, "r1", PureDP(0.5))
    led.store_answer("r1", "42")
    led.store_answer("r1", "42")                               # idempotent
    with pytest.raises(LedgerError, match="append-only"):
        led.store_answer("r1", "43")
    with pytest.raises(InvalidParameterError, match="as text"):
        led.store_answer("r1", 42)  # type: ignore[arg-type]
    assert led.answer("r1") == "42" and led.counts()["answers"] == 1
    assert led.answer("unknown") is None
    with pytest.raises(LedgerError, match="no charge is recorded"):
        led.replay("unknown")


def test_an_answer_still_being_computed_is_not_replayed(led: Ledger):
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(0.5))
    replayed = _charge(led, "r1", PureDP(0.5))
    assert replayed.replayed and not replayed.answered
    with pytest.raises(AnswerLostError, match="still being computed"):
        led.replay("r1")
    led.store_answer("r1", "42")
    assert led.replay("r1") == "42"


def test_a_lost_answer_is_never_replaced_by_fresh_noise(path: Path):
    """The crash contract: charged, no answer stored, then the curator restarts."""
    crashed = Ledger(path)
    crashed.set_budget("alice", "adult", PureDP(1))
    _charge(crashed, "r1", PureDP(0.5))
    del crashed                                                # dies before store_answer

    led = Ledger(path)
    replayed = _charge(led, "r1", PureDP(0.5))
    assert replayed.replayed and not replayed.answered         # not charged again ...
    with pytest.raises(AnswerLostError, match="stopped between the charge"):
        led.replay("r1")                                       # ... and nothing to replay
    with pytest.raises(AnswerLostError, match="new request id"):
        led.store_answer("r1", "fresh noise")                  # no free fresh answer
    assert led.answer("r1") is None
    assert led.status("alice", "adult").spent == PureDP(0.5)   # the budget stays spent
    # The remedy: a new request id, charged again.
    _charge(led, "r1-retry", PureDP(0.5))
    led.store_answer("r1-retry", "42")
    assert led.status("alice", "adult").exhausted


# -- persistence, append-only, files -----------------------------------------------------------

def test_persistence_across_reopen(path: Path):
    with Ledger(path) as led:
        led.set_budget("alice", "adult", ZCDP(Fraction(1, 2)))
        _charge(led, "r1", ZCDP(Fraction(1, 8)))
        _charge(led, "r2", PureDP(Fraction(1, 2)))
        led.store_answer("r1", "answer one")
        first = led.charges()
    with Ledger(path) as led:
        assert led.persistent and led.path == path
        assert led.status("alice", "adult").spent == ZCDP(Fraction(1, 4))
        assert led.charges() == [
            Charge(c.request_id, c.analyst, c.dataset, c.cost, c.query, c.mechanism,
                   c.timestamp, c.seq, answered=c.request_id == "r1") for c in first]
        assert led.replay("r1") == "answer one"
        assert _charge(led, "r1", ZCDP(Fraction(1, 8))).replayed
        assert led.status("alice", "adult").charges == 2
    with _raw(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_charges_record_who_what_when_and_how_much(led: Ledger):
    led.set_budget("alice", "adult", PureDP(1))
    c1 = _charge(led, "r1", PureDP(0.25))
    c2 = _charge(led, "r2", PureDP(0.25), query="SELECT AVG(age) FROM adult")
    assert (c1.analyst, c1.dataset, c1.query, c1.mechanism) == (
        "alice", "adult", Q, "Laplace(sensitivity=1)")
    assert c1.timestamp.tzinfo == UTC and c1.timestamp <= c2.timestamp
    assert c1.seq < c2.seq
    assert led.charges() == [c1, c2]


def test_the_ledger_is_append_only(path: Path):
    led = Ledger(path)
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r1", PureDP(0.5))
    led.store_answer("r1", "42")
    led.close()
    raw = sqlite3.connect(path, isolation_level=None)
    for sql in ("UPDATE charges SET epsilon = '0/1'", "DELETE FROM charges",
                "UPDATE budgets SET epsilon = '100/1'", "DELETE FROM budgets",
                "UPDATE answers SET payload = 'other'", "DELETE FROM answers"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute(sql)
    # Not even another program can store a float cost.
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        raw.execute("INSERT INTO charges (request_id, analyst, dataset, kind, epsilon, query, "
                    "mechanism, charged_at) VALUES ('x', 'alice', 'adult', 'pure', 0.5, 'q', "
                    "'m', 't')")
    raw.close()
    with Ledger(path) as again:
        assert again.status("alice", "adult").spent == PureDP(0.5)


def test_files_that_are_not_ledgers_are_refused(tmp_path: Path):
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


def test_a_closed_ledger_refuses_work(led: Ledger):
    led.close()
    led.close()
    with pytest.raises(LedgerError, match="closed"):
        led.charges()


def test_backends_are_pluggable(path: Path):
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
def test_invalid_costs_leave_the_ledger_untouched(path: Path, bad):
    led = Ledger(path)
    led.set_budget("alice", "adult", PureDP(1))
    _charge(led, "r0", PureDP(0.5))
    before, status = led.counts(), led.status("alice", "adult")
    with pytest.raises(InvalidParameterError):
        _charge(led, "r1", bad)
    with pytest.raises(InvalidParameterError):
        led.can_spend("alice", "adult", bad)
    with pytest.raises(InvalidParameterError):
        led.set_budget("alice", "adult", bad)
    led.close()
    with Ledger(path) as reopened:
        assert reopened.counts() == before
        assert reopened.status("alice", "adult") == status
    with _raw(path) as raw:  # counted independently of the ledger's own code
        assert raw.execute("SELECT count(*) FROM charges").fetchone()[0] == 1
        assert raw.execute("SELECT count(*) FROM budgets").fetchone()[0] == 1


@pytest.mark.parametrize("make", [
    lambda: ApproxDP(1, 1),            # δ ≥ 1
    lambda: ApproxDP(1, 1.5),
    lambda: ApproxDP(1, float("nan")),
    lambda: PureDP(float("inf")),
    lambda: ZCDP("0.5"),
    lambda: PureDP(1e-310),            # subnormal
], ids=["delta=1", "delta=1.5", "delta=nan", "eps=inf", "rho=string", "subnormal"])
def test_invalid_loss_values_never_reach_the_ledger(led: Ledger, make):
    led.set_budget("alice", "adult", ApproxDP(1, 1e-6))
    before = led.counts()
    with pytest.raises(InvalidParameterError):
        _charge(led, "r1", make())
    assert led.counts() == before


@pytest.mark.parametrize(("field", "value"), [
    ("analyst", ""), ("analyst", None), ("dataset", "  "), ("dataset", 3), ("request_id", ""),
    ("request_id", 17), ("query", ""), ("mechanism", None)])
def test_invalid_charge_fields_leave_the_ledger_untouched(led: Ledger, field, value):
    led.set_budget("alice", "adult", PureDP(1))
    before = led.counts()
    args = {"analyst": "alice", "dataset": "adult", "request_id": "r1", "query": Q,
            "mechanism": "m"}
    args[field] = value
    with pytest.raises(InvalidParameterError, match=field):
        led.charge(args.pop("analyst"), args.pop("dataset"), PureDP(0.5), **args)
    assert led.counts() == before


def test_incompatible_charges_leave_the_ledger_untouched(led: Ledger):
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
def test_threads_never_overspend(path: Path, shared: bool):
    Ledger(path).set_budget("alice", "adult", PureDP(Fraction(3, 4)))
    common = Ledger(path)
    outcomes: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def work(t: int) -> None:
        led = common if shared else Ledger(path)
        start.wait()
        for i in range(15):
            try:
                _charge(led, f"t{t}-{i}", PureDP(Fraction(1, 40)))
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
    assert outcomes.count(True) == 30 and outcomes.count(False) == 30
    assert Ledger(path).status("alice", "adult").remaining == PureDP(0)


def test_a_ledger_inherited_by_a_forked_child_reconnects(path: Path):
    import multiprocessing

    led = Ledger(path)
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

    memory = Ledger()
    memory.set_budget("alice", "adult", PureDP(1))
    child = ctx.Process(target=_charge_or_exit, args=(memory,))
    child.start()
    child.join(30)
    assert child.exitcode == 3


def _charge_or_exit(led: Ledger) -> None:
    try:
        _charge(led, "child", PureDP(0.25))
    except LedgerError as e:
        raise SystemExit(3 if "in-memory ledger cannot be shared" in str(e) else 4) from None
