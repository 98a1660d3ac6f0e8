"""Functions run in separate processes by the concurrency and crash tests.

They live in their own importable module so that ``multiprocessing``'s *spawn* start method
(a fresh interpreter, nothing inherited) can find them.
"""

from __future__ import annotations

import os
import time
from fractions import Fraction

from statcurator.accounting import Ledger
from statcurator.core.errors import BudgetExceededError, LedgerError
from statcurator.core.measures import PureDP


def charge_many(path: str, worker: int, n: int, cost: Fraction, barrier, results) -> None:
    """Charge ``n`` times as fast as possible once every worker is ready; report outcomes."""
    led = Ledger(path, timeout=60)
    barrier.wait()
    ok = refused = 0
    for i in range(n):
        try:
            led.charge("alice", "adult", PureDP(cost), request_id=f"w{worker}-{i}",
                       query=f"SELECT COUNT(*) FROM adult -- {worker}/{i}", mechanism="Laplace")
            ok += 1
        except BudgetExceededError:
            refused += 1
        # A pause outside the transaction, as between a curator's requests: without it,
        # SQLite's back-off lets one process take every charge in a row, and the two
        # processes would never really interleave.
        time.sleep(0.002)
    led.close()
    results.put((worker, ok, refused))


def racy_charge_many(path: str, worker: int, n: int, cost: Fraction, barrier, results) -> None:
    """A deliberately broken ledger client: it checks, then charges in a *separate*
    transaction without re-checking. The concurrency test must catch it overspending."""
    led = Ledger(path, timeout=60)
    backend = led.backend
    barrier.wait()
    ok = refused = 0
    for i in range(n):
        try:
            affordable = led.can_spend("alice", "adult", PureDP(cost))
        except LedgerError:  # the real ledger noticed more spent than the total: overspent
            break
        if affordable:
            time.sleep(0.005)  # the window in which the other process also passes the check
            with backend.write():
                backend.insert_charge(f"w{worker}-{i}", "alice", "adult", "pure",
                                      f"{cost.numerator}/{cost.denominator}", None, None,
                                      query="q", mechanism="m",
                                      charged_at="2024-01-01T00:00:00+00:00")
            ok += 1
        else:
            refused += 1
    results.put((worker, ok, refused))


def charge_then_die(path: str, request_id: str, epsilon: Fraction) -> None:
    """Charge, then die at once: no close, no answer stored, no interpreter shutdown."""
    led = Ledger(path)
    led.charge("alice", "adult", PureDP(epsilon), request_id=request_id,
               query="SELECT AVG(age) FROM adult", mechanism="Laplace(scale=...)")
    os._exit(0)


def charge_forever(path: str, conn) -> None:
    """Charge in a loop, reporting each request id after its charge has returned (is
    committed), until the parent kills this process."""
    led = Ledger(path)
    i = 0
    while True:
        rid = f"k{i}"
        led.charge("alice", "adult", PureDP(Fraction(1, 10**6)), request_id=rid,
                   query="q", mechanism="m")
        conn.send(rid)
        i += 1
