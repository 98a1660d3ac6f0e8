"""Ledger throughput: what debiting a budget costs next to the query it gates.

Measures charges per second on an in-memory ledger, on a WAL-mode SQLite file
(synchronous=FULL, so each charge is durable when it returns), and from two processes
charging one file at once; then compares one durable charge with the ~9 ms an exact grouped
count takes in DuckDB on 1,000,000 rows (benchmarks/dp_query.py), the query it would gate.

    python benchmarks/ledger.py [--charges 5000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from statcurator.accounting import Ledger
from statcurator.core.measures import PureDP

COST = PureDP(Fraction(1, 10**6))


def charge_many(ledger: Ledger, n: int, tag: str) -> float:
    start = time.perf_counter()
    for i in range(n):
        ledger.charge("alice", "adult", COST, request_id=f"{tag}{i}",
                      query="SELECT COUNT(*) FROM adult", mechanism="Laplace")
    return time.perf_counter() - start


def _worker(path: str, tag: str, n: int, out: mp.Queue) -> None:
    out.put(charge_many(Ledger(path), n, tag))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--charges", type=int, default=5000)
    n = ap.parse_args().charges

    mem = Ledger()
    mem.set_budget("alice", "adult", PureDP(1))
    t_mem = charge_many(mem, n, "m")
    start = time.perf_counter()
    for _ in range(1000):
        mem.status("alice", "adult")
    t_status = (time.perf_counter() - start) / 1000

    path = Path(tempfile.mkdtemp()) / "ledger.db"
    led = Ledger(path)
    led.set_budget("alice", "adult", PureDP(1))
    t_file = charge_many(led, n, "f")
    start = time.perf_counter()
    Ledger(path).status("alice", "adult")
    t_reopen = time.perf_counter() - start

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(path), f"p{k}-", n // 2, out)) for k in range(2)]
    for p in procs:
        p.start()
    times = [out.get() for _ in procs]
    for p in procs:
        p.join()

    per_charge = t_file / n * 1e3
    print(f"in-memory ledger       : {n / t_mem:9,.0f} charges/s  ({t_mem / n * 1e3:.3f} ms each)")
    print(f"WAL file, durable      : {n / t_file:9,.0f} charges/s  ({per_charge:.3f} ms each)")
    print(f"2 processes, one file  : {n / max(times):9,.0f} charges/s together")
    print(f"status() ({n} charges) : {t_status * 1e3:9.3f} ms")
    print(f"reopen + first status  : {t_reopen * 1e3:9.1f} ms over {2 * n} charges")
    print(f"comparison: one durable charge is {per_charge / 9 * 100:.1f}% of the ~9 ms exact "
          f"DuckDB grouped count (1M rows) it gates")


if __name__ == "__main__":
    main()
