"""Functions run in separate processes by the concurrency and crash tests.

They live in their own importable module so that ``multiprocessing``'s *spawn* start method
(a fresh interpreter, nothing inherited) can find them. ``target`` is a ledger file path or
``postgresql://...#schema`` (see ``conftest.Store.target``).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from fractions import Fraction
from typing import Any

from statcurator.accounting import Ledger
from statcurator.accounting._backend import ChainConflict, LedgerEntry
from statcurator.accounting._chain import digest
from statcurator.accounting._losses import pack
from statcurator.core.errors import BudgetExceededError, LedgerError
from statcurator.core.measures import PureDP


def open_ledger(target: str, **kw: Any) -> Ledger:
    """Open the ledger a ``Store.target()`` names."""
    if target.startswith("postgresql://"):
        from statcurator.accounting import PostgresBackend

        dsn, _, schema = target.partition("#")
        return Ledger(backend=PostgresBackend(dsn, schema=schema, timeout=60), **kw)
    return Ledger(target, timeout=60, **kw)


def charge_many(target: str, worker: int, n: int, cost: Fraction, barrier, results,
                analysts: tuple[str, ...] = ("alice",)) -> None:
    """Charge ``n`` times as fast as possible once every worker is ready, cycling through
    ``analysts``; report the outcomes."""
    led = open_ledger(target)
    barrier.wait()
    ok = refused = 0
    for i in range(n):
        try:
            led.charge(analysts[i % len(analysts)], "adult", PureDP(cost),
                       request_id=f"w{worker}-{i}",
                       query=f"SELECT COUNT(*) FROM adult -- {worker}/{i}", mechanism="Laplace")
            ok += 1
        except BudgetExceededError:
            refused += 1
        # A pause outside the transaction, as between a curator's requests: without it,
        # one process can take every charge in a row, and the processes never interleave.
        time.sleep(0.002)
    led.close()
    results.put((worker, ok, refused))


def racy_charge_many(target: str, worker: int, n: int, cost: Fraction, barrier, results,
                     analysts: tuple[str, ...] = ("alice",)) -> None:
    """A deliberately broken ledger client: it checks, then appends in a *separate* step
    without re-checking (its row's totals are re-read, the check is not). The concurrency
    test must catch it overspending."""
    led = open_ledger(target)
    barrier.wait()
    ok = refused = 0
    for i in range(n):
        analyst = analysts[i % len(analysts)]
        try:
            affordable = led.can_spend(analyst, "adult", PureDP(cost))
        except LedgerError:  # the real ledger noticed more spent than the total: overspent
            break
        if not affordable:
            refused += 1
            continue
        time.sleep(0.005)  # the window in which the other process also passes the check
        while True:
            st = led._state(analyst, "adult", None)
            g, d, head = st["grant"], st["dataset"], st["head"]
            row = LedgerEntry(
                head.seq + 1, "charge", analyst, "adult", f"w{worker}-{i}", "pure",
                f"{cost.numerator}/{cost.denominator}", query="q", mechanism="m",
                grant_total=g.grant_total, grant_spent=_plus(g.grant_spent, cost),
                grant_charges=g.grant_charges + 1, dataset_total=d.dataset_total,
                dataset_spent=_plus(d.dataset_spent, cost),
                dataset_charges=d.dataset_charges + 1, at="2024-01-01T00:00:00+00:00",
                prev_hash=head.hash)
            try:
                led.backend.append(replace(row, hash=digest(row, None)))
                break
            except ChainConflict:
                continue
        ok += 1
    results.put((worker, ok, refused))


def _plus(spent: str, cost: Fraction) -> str:
    return pack("pure", (Fraction(spent.partition(":")[2]) + cost,))


def charge_then_die(target: str, request_id: str, epsilon: Fraction) -> None:
    """Charge, then die at once: no close, no answer stored, no interpreter shutdown."""
    led = open_ledger(target)
    led.charge("alice", "adult", PureDP(epsilon), request_id=request_id,
               query="SELECT AVG(age) FROM adult", mechanism="Laplace(scale=...)")
    os._exit(0)


def charge_forever(target: str, conn) -> None:
    """Charge in a loop, reporting each request id after its charge has returned (is
    committed), until the parent kills this process."""
    led = open_ledger(target)
    i = 0
    while True:
        rid = f"k{i}"
        led.charge("alice", "adult", PureDP(Fraction(1, 10**6)), request_id=rid,
                   query="q", mechanism="m")
        conn.send(rid)
        i += 1
