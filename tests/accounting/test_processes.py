"""The ledger shared by real, separate processes (multiprocessing *spawn*), on SQLite and on
PostgreSQL: concurrent charges never overspend a grant or the dataset-wide budget, and a
process killed right after a charge leaves the charge."""

from __future__ import annotations

import multiprocessing
import os
import signal
from fractions import Fraction

import pytest

from statcurator.accounting import AnswerLostError
from statcurator.core.measures import PureDP

from . import _workers
from .conftest import Store

SPAWN = multiprocessing.get_context("spawn")
pytestmark = pytest.mark.slow  # each test starts interpreters (about a second each)


def _run(target, store: Store, processes: int, per_process: int, cost: Fraction,
         analysts: tuple[str, ...] = ("alice",)) -> list[tuple[int, int, int]]:
    barrier, results = SPAWN.Barrier(processes), SPAWN.Queue()
    procs = [SPAWN.Process(target=target, args=(store.target(), w, per_process, cost, barrier,
                                                results, analysts[w::processes] or analysts))
             for w in range(processes)]
    for p in procs:
        p.start()
    out = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return out


def test_fifty_parallel_charges_from_two_processes_never_overspend(persistent_store: Store):
    total, cost = Fraction(3, 4), Fraction(1, 40)    # exactly 30 of the 50 charges fit
    with persistent_store.open() as led:
        led.set_dataset_budget("adult", PureDP(10))
        led.set_budget("alice", "adult", PureDP(total))
    results = _run(_workers.charge_many, persistent_store, 2, 25, cost)
    accepted = sum(ok for _, ok, _ in results)
    refused = sum(no for _, _, no in results)
    assert (accepted, refused) == (30, 20)
    assert persistent_store.spent() == total
    with persistent_store.open() as led:
        status = led.status("alice", "adult")
        assert status.spent == PureDP(total) and status.charges == 30 and status.exhausted
        led.verify()


def test_the_dataset_budget_holds_across_processes_and_analysts(persistent_store: Store):
    """Issue 7 §2: several processes, several analysts, each with an ample grant, and a
    dataset-wide budget that allows 10 charges: never more than 10 succeed."""
    analysts = tuple(f"analyst{i}" for i in range(6))
    with persistent_store.open() as led:
        led.set_dataset_budget("adult", PureDP(1))              # 10 charges of 1/10
        for a in analysts:
            led.set_budget(a, "adult", PureDP(1))                # each alone could take 10
    results = _run(_workers.charge_many, persistent_store, 3, 12, Fraction(1, 10), analysts)
    assert sum(ok for _, ok, _ in results) == 10
    assert persistent_store.spent() == 1
    with persistent_store.open() as led:
        assert led.dataset_status("adult").exhausted
        assert sum(s.charges for s in led.budgets().values()) == 10
        led.verify()


def test_the_concurrency_test_catches_a_check_then_insert_race(persistent_store: Store):
    """A client that checks the budget in one step and appends in another overspends under
    the same load: the tests above would fail for such a ledger."""
    overspent = False
    for attempt in range(3):  # the race is near-certain; retries make a false pass negligible
        persistent_store.schema += f"x{attempt}"
        persistent_store.path = persistent_store.path.with_name(f"racy{attempt}.db")
        with persistent_store.open() as led:
            led.set_dataset_budget("adult", PureDP(Fraction(3, 4)))
            led.set_budget("alice", "adult", PureDP(10))
        results = _run(_workers.racy_charge_many, persistent_store, 2, 25, Fraction(1, 40))
        if persistent_store.spent() > Fraction(3, 4) or sum(ok for _, ok, _ in results) > 30:
            overspent = True
            break
    assert overspent


def test_a_process_killed_right_after_a_charge_leaves_the_charge(persistent_store: Store):
    with persistent_store.open() as led:
        led.set_dataset_budget("adult", PureDP(10))
        led.set_budget("alice", "adult", PureDP(1))
    child = SPAWN.Process(target=_workers.charge_then_die,
                          args=(persistent_store.target(), "r1", Fraction(1, 3)))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    with persistent_store.open() as led:
        [charge] = led.charges()
        assert (charge.request_id, charge.cost, charge.answered) == ("r1", PureDP(Fraction(1, 3)),
                                                                     False)
        assert led.status("alice", "adult").remaining == PureDP(Fraction(2, 3))
        # The replay contract after such a crash: not charged again, no fresh answer.
        again = led.charge("alice", "adult", PureDP(Fraction(1, 3)), request_id="r1",
                           query="SELECT AVG(age) FROM adult", mechanism="Laplace(scale=...)")
        assert again.replayed and not again.answered
        with pytest.raises(AnswerLostError):
            led.replay("alice", "r1")
        with pytest.raises(AnswerLostError):
            led.store_answer("alice", "r1", "fresh noise")
        assert led.status("alice", "adult").remaining == PureDP(Fraction(2, 3))


def test_sigkill_in_the_middle_of_charging_loses_no_committed_charge(persistent_store: Store):
    with persistent_store.open() as led:
        led.set_dataset_budget("adult", PureDP(10))
        led.set_budget("alice", "adult", PureDP(1))
    receiver, sender = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(target=_workers.charge_forever, args=(persistent_store.target(),
                                                                 sender))
    child.start()
    reported = [receiver.recv() for _ in range(200)]   # charges the child saw committed
    os.kill(child.pid, signal.SIGKILL)                  # typically mid-charge
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    while receiver.poll():
        reported.append(receiver.recv())
    if persistent_store.kind == "sqlite":
        assert persistent_store.sql("PRAGMA integrity_check")[0][0] == "ok"
    with persistent_store.open() as led:
        stored = [c.request_id for c in led.charges()]
        # Every reported charge is there, in order; at most the one in flight is extra.
        assert stored[:len(reported)] == reported
        assert len(stored) - len(reported) <= 1
        assert led.status("alice", "adult").spent == PureDP(Fraction(len(stored), 10**6))
        led.verify()
        # And the ledger is still usable.
        led.charge("alice", "adult", PureDP(0.5), request_id="after", query="q", mechanism="m")
