"""The ledger shared by real, separate processes (multiprocessing *spawn*): concurrent charges
never overspend, and a process killed right after a charge leaves the charge."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

from statcurator.accounting import AnswerLostError, Ledger
from statcurator.core.measures import PureDP

from . import _workers

SPAWN = multiprocessing.get_context("spawn")


def _run_two(target, path: Path, per_process: int, cost: Fraction) -> list[tuple[int, int, int]]:
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    procs = [SPAWN.Process(target=target, args=(str(path), w, per_process, cost, barrier, results))
             for w in range(2)]
    for p in procs:
        p.start()
    out = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return out


def _spent(path: Path) -> Fraction:
    """What the file says was spent, summed here independently of the ledger's code."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as raw:
        return sum((Fraction(e) for (e,) in raw.execute("SELECT epsilon FROM charges")),
                   Fraction(0))


def test_fifty_parallel_charges_from_two_processes_never_overspend(tmp_path: Path):
    path = tmp_path / "curator.db"
    total, cost = Fraction(3, 4), Fraction(1, 40)    # exactly 30 of the 50 charges fit
    with Ledger(path) as led:
        led.set_budget("alice", "adult", PureDP(total))
    results = _run_two(_workers.charge_many, path, 25, cost)
    accepted = sum(ok for _, ok, _ in results)
    refused = sum(no for _, _, no in results)
    assert (accepted, refused) == (30, 20)
    assert _spent(path) == total
    with Ledger(path) as led:
        status = led.status("alice", "adult")
        assert status.spent == PureDP(total) and status.charges == 30 and status.exhausted


def test_the_concurrency_test_catches_a_check_then_insert_race(tmp_path: Path):
    """A client that checks the budget in one transaction and charges in another overspends
    under the same load: the test above would fail for such a ledger."""
    overspent = False
    for attempt in range(3):  # the race is near-certain; retries make a false pass negligible
        path = tmp_path / f"racy{attempt}.db"
        with Ledger(path) as led:
            led.set_budget("alice", "adult", PureDP(Fraction(3, 4)))
        results = _run_two(_workers.racy_charge_many, path, 25, Fraction(1, 40))
        if _spent(path) > Fraction(3, 4) or sum(ok for _, ok, _ in results) > 30:
            overspent = True
            break
    assert overspent


def test_a_process_killed_right_after_a_charge_leaves_the_charge(tmp_path: Path):
    path = tmp_path / "curator.db"
    with Ledger(path) as led:
        led.set_budget("alice", "adult", PureDP(1))
    child = SPAWN.Process(target=_workers.charge_then_die, args=(str(path), "r1", Fraction(1, 3)))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    with Ledger(path) as led:
        [charge] = led.charges()
        assert (charge.request_id, charge.cost, charge.answered) == ("r1", PureDP(Fraction(1, 3)),
                                                                     False)
        assert led.status("alice", "adult").remaining == PureDP(Fraction(2, 3))
        # The replay contract after such a crash: not charged again, no fresh answer.
        again = led.charge("alice", "adult", PureDP(Fraction(1, 3)), request_id="r1",
                           query="SELECT AVG(age) FROM adult", mechanism="Laplace(scale=...)")
        assert again.replayed and not again.answered
        with pytest.raises(AnswerLostError):
            led.replay("r1")
        with pytest.raises(AnswerLostError):
            led.store_answer("r1", "fresh noise")
        assert led.status("alice", "adult").remaining == PureDP(Fraction(2, 3))


def test_sigkill_in_the_middle_of_charging_loses_no_committed_charge(tmp_path: Path):
    path = tmp_path / "curator.db"
    with Ledger(path) as led:
        led.set_budget("alice", "adult", PureDP(1))
    receiver, sender = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(target=_workers.charge_forever, args=(str(path), sender))
    child.start()
    reported = [receiver.recv() for _ in range(200)]   # charges the child saw committed
    os.kill(child.pid, signal.SIGKILL)                  # typically mid-transaction
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    while receiver.poll():
        reported.append(receiver.recv())
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Ledger(path) as led:
        stored = [c.request_id for c in led.charges()]
        # Every reported charge is there, in order; at most the one in flight is extra.
        assert stored[:len(reported)] == reported
        assert len(stored) - len(reported) <= 1
        assert led.status("alice", "adult").spent == PureDP(Fraction(len(stored), 10**6))
        # And the ledger is still usable.
        led.charge("alice", "adult", PureDP(0.5), request_id="after", query="q", mechanism="m")
