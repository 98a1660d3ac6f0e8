"""Ledger throughput: what debiting two budgets costs next to the query it gates.

Measures, for a charge that debits an analyst's grant and the dataset-wide budget and
appends a hash-chained row: the SQL statements one durable charge (and one stored answer)
runs, counted by SQLite's own statement trace; charges per second on an in-memory ledger, on a
WAL-mode SQLite file (synchronous=FULL, durable when it returns) and from two processes on
one file; status(), and reopening (which verifies the whole chain); and the same on
PostgreSQL (a throwaway server on 127.0.0.1 from Debian's binaries, or --postgres DSN).
The comparison is against the ~9 ms an exact grouped count takes in DuckDB on 1,000,000 rows
(benchmarks/dp_query.py), the query a charge gates.

    python benchmarks/ledger.py [--charges 5000] [--postgres auto|none|DSN]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
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


def fund(ledger: Ledger) -> Ledger:
    ledger.set_dataset_budget("adult", PureDP(10))
    ledger.set_budget("alice", "adult", PureDP(1))
    return ledger


def statements_per_charge(path: Path) -> tuple[int, int, int, int]:
    """(charge, store_answer, replay, charge right after an answer) statement counts, from
    SQLite's statement trace. The answer is written by the ledger's writer thread (flush()
    waits for it); the last is a charge with engine work decided right after an answer
    still being written, counted without that answer's statements."""
    led = fund(Ledger(path))
    charge_many(led, 1, "warm")
    seen: list[str] = []
    conn = led.backend._connection()  # noqa: SLF001 - the benchmark inspects the backend
    conn.set_trace_callback(lambda s: seen.append(s) if not s.startswith("--") else None)

    def ahead() -> None:
        led.store_answer("alice", "more0", "43")
        led.charge("alice", "adult", COST, request_id="ahead0",
                   query="SELECT COUNT(*) FROM adult", mechanism="Laplace",
                   alongside=lambda: None, new_id=True)
        led.flush()

    counts = []
    for step in (lambda: charge_many(led, 1, "counted"),
                 lambda: (led.store_answer("alice", "counted0", "42"), led.flush()),
                 lambda: charge_many(led, 1, "counted"),
                 lambda: charge_many(led, 1, "more"),  # (its answer: in ahead)
                 ahead):
        seen.clear()
        step()
        counts.append(len(seen))
    conn.set_trace_callback(None)
    led.close()
    return counts[0], counts[1], counts[2], counts[4] - counts[1]


def _worker(opener: Callable[[], Ledger], tag: str, n: int, out: mp.Queue) -> None:
    out.put(charge_many(opener(), n, tag))


class _SQLite:
    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __call__(self) -> Ledger:
        return Ledger(self.path)


class _Postgres:
    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn, self.schema = dsn, schema

    def __call__(self) -> Ledger:
        from statcurator.accounting import PostgresBackend

        return Ledger(backend=PostgresBackend(self.dsn, schema=self.schema))


def two_processes(opener: Callable[[], Ledger], n: int) -> float:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(opener, f"p{k}-", n // 2, out)) for k in range(2)]
    for p in procs:
        p.start()
    times = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return n / max(times)


def report(name: str, opener: Callable[[], Ledger], n: int) -> float:
    led = fund(opener())
    t = charge_many(led, n, "f")
    start = time.perf_counter()
    for _ in range(200):
        led.status("alice", "adult")
    t_status = (time.perf_counter() - start) / 200
    led.close()
    start = time.perf_counter()
    with opener() as again:
        again.status("alice", "adult")
    t_reopen = time.perf_counter() - start
    together = two_processes(opener, n)
    per = t / n * 1e3
    print(f"{name + ', durable':22} : {n / t:9,.0f} charges/s  ({per:.3f} ms each)")
    print(f"{name + ', 2 processes':22} : {together:9,.0f} charges/s together")
    print(f"{name + ', status()':22} : {t_status * 1e3:9.3f} ms")
    print(f"{name + ', reopen':22} : {t_reopen * 1e3:9.1f} ms (verifies {n + 3} chained rows)")
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--charges", type=int, default=5000)
    ap.add_argument("--postgres", default="auto",
                    help="auto: start a throwaway server if Debian's binaries are installed; "
                         "none; or a connection string")
    args = ap.parse_args()
    n = args.charges
    folder = Path(tempfile.mkdtemp())

    charge, answer, replay, ahead = statements_per_charge(folder / "count.db")
    print(f"SQL statements         : charge {charge}, store_answer {answer}, replay {replay}, "
          f"charge right after an answer {ahead}")

    mem = fund(Ledger())
    t_mem = charge_many(mem, n, "m")
    print(f"in-memory ledger       : {n / t_mem:9,.0f} charges/s  ({t_mem / n * 1e3:.3f} ms each)")
    per = report("WAL file", _SQLite(folder / "ledger.db"), n)
    print(f"comparison: one durable charge is {per / 9 * 100:.1f}% of the ~9 ms exact DuckDB "
          f"grouped count (1M rows) it gates")

    with ExitStack() as stack:
        dsn = None
        if args.postgres == "auto":
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from tests.accounting import _postgres

            if _postgres.binaries() is not None:
                dsn = stack.enter_context(_postgres.throwaway_server())
            else:
                print(f"PostgreSQL: skipped ({_postgres.INSTALL_HINT})")
        elif args.postgres != "none":
            dsn = args.postgres
        if dsn is not None:
            report("PostgreSQL", _Postgres(dsn, f"bench{uuid.uuid4().hex[:8]}"), n)


if __name__ == "__main__":
    main()
