"""Benchmark: the front end of a fresh DP query (issue 10), parsed and compiled against of a
known shape, and what a charge adds to the engine run it gates, per ledger.

Front end: on the bundled Adult table, ``--queries`` distinct texts of four shapes
(benchmarks/dp_fresh_queries.py) go through the phases a release runs before the charge —
text to plan, compile, bind (mechanisms and cost), certificate with its re-check, engine SQL —
once parsed and compiled from scratch (the phases called directly), once through
``Curator.sql`` where each text's shape is already known (statcurator.query.shapes). Medians.

Charge: ``Ledger.charge(..., alongside=work)`` with a DuckDB query of about 0.8 ms as the
work, against the same query alone, on an in-memory ledger, on a SQLite file (the engine
runs while the writer thread appends the fsynced row), and on a SQLite file with the writer
thread switched off (append, then run). Medians of the differences' parts.

Run: python benchmarks/query_front_end.py [--queries 1000] [--charges 1500] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def front_end(n: int) -> dict[str, dict[str, float]]:
    from dp_fresh_queries import queries

    import statcurator as sc
    from statcurator.core.measures import PureDP
    from statcurator.engines.sqlgen import plan_template
    from statcurator.query.binding import BoundQuery
    from statcurator.query.certificate import certify
    from statcurator.query.compiler import compile_query
    from statcurator.query.sql import parse_sql

    cur = sc.Curator(ledger=None, default_budget=None, dataset_budget=None)
    cur.register("adult", sc.datasets.adult(), budget=PureDP(10**9))
    cur.set_budget("bench", "adult", PureDP(10**9))
    meta = cur.catalog.table_info("adult").meta
    eps = Fraction(1, 10)
    pairs = queries(n + 200)
    fresh: dict[str, list[float]] = {}
    for i, (text, _) in enumerate(pairs):
        t0 = time.perf_counter()
        plan = parse_sql(text, cur.catalog)
        t1 = time.perf_counter()
        cq = compile_query(plan, cur.catalog, options=cur.options, text=text)
        t2 = time.perf_counter()
        b = BoundQuery(cq, eps)
        b.check_cost()
        t3 = time.perf_counter()
        certify(b, meta, cur.catalog)
        t4 = time.perf_counter()
        plan_template(cq.engine_plan)
        t5 = time.perf_counter()
        if i >= 200:  # warm
            for k, a, z in (("text to plan", t0, t1), ("compile", t1, t2), ("bind", t2, t3),
                            ("certificate", t3, t4), ("engine SQL", t4, t5)):
                fresh.setdefault(k, []).append(z - a)
    shaped: dict[str, list[float]] = {}
    for text, _ in pairs:
        t0 = time.perf_counter()
        q = cur.sql(text)
        t1 = time.perf_counter()
        cq = q.compile()
        t2 = time.perf_counter()
        b = q.bind(eps)
        b.check_cost()
        t3 = time.perf_counter()
        plan_template(cq.engine_plan)
        t4 = time.perf_counter()
        if q._template is None or b.certificate is None:  # a shape seen once or twice
            q.release(epsilon=eps, analyst="bench")  # (certifies the shape's bound query)
            continue
        for k, a, z in (("text to plan", t0, t1), ("compile", t1, t2), ("bind", t2, t3),
                        ("engine SQL", t3, t4)):
            shaped.setdefault(k, []).append(z - a)
    return {"parsed": {k: 1000 * statistics.median(v) for k, v in fresh.items()},
            "shaped": {k: 1000 * statistics.median(v) for k, v in shaped.items()}}


def charges(n: int) -> dict[str, float]:
    import duckdb

    from statcurator.accounting import Ledger
    from statcurator.core.measures import PureDP

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS x FROM range(300000)")

    def work() -> None:
        con.execute("SELECT SUM(x) FROM t WHERE x % 7 = 3").fetchall()

    out = {}
    for name in ("memory", "sqlite", "sqlite, no writer thread"):
        folder = tempfile.mkdtemp()
        led = Ledger(None if name == "memory" else str(Path(folder) / "ledger.db"))
        if name.endswith("no writer thread"):
            led._backend.__class__ = type("Serial", (type(led._backend),),
                                          {"overlaps_appends": False})
        led.set_dataset_budget("d", PureDP(10**9))
        led.set_budget("a", "d", PureDP(10**9))
        alone, charged = [], []
        for _ in range(n):
            s = time.perf_counter()
            work()
            alone.append(time.perf_counter() - s)
            s = time.perf_counter()
            led.charge("a", "d", PureDP(Fraction(1, 10)), request_id=uuid.uuid4().hex,
                       query="q", mechanism="m", alongside=work)
            charged.append(time.perf_counter() - s)
        warm = n // 5
        out[name] = 1000 * (statistics.median(charged[warm:]) - statistics.median(alone[warm:]))
        led.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--charges", type=int, default=1500)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = {"front_end_ms": front_end(args.queries), "charge_overhead_ms": charges(args.charges)}
    if args.json:
        print(json.dumps(r, indent=2))
        return
    fe = r["front_end_ms"]
    print(f"front end of {args.queries} fresh queries on Adult (medians, ms)")
    print(f"  {'phase':14s} {'parsed':>8s} {'known shape':>12s}")
    for k in ("text to plan", "compile", "bind", "certificate", "engine SQL"):
        print(f"  {k:14s} {fe['parsed'][k]:8.3f} {fe['shaped'].get(k, 0.0):12.3f}")
    print(f"  {'total':14s} {sum(fe['parsed'].values()):8.3f} {sum(fe['shaped'].values()):12.3f}")
    print("what a charge adds to the ~0.8 ms DuckDB query it runs beside (medians, ms)")
    for k, v in r["charge_overhead_ms"].items():
        print(f"  {k:26s} {v:.3f}")


if __name__ == "__main__":
    main()
