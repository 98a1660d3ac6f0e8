"""Benchmark: fresh, distinct DP queries through the whole curator path against the same
exact queries in DuckDB alone (issue 10, "The query path at engine speed").

On the bundled Adult table (30,162 rows), ``--queries`` distinct small queries — each text
new to the curator, so nothing is cached but the registered table — are released one after
the other (parse with sqlglot, compile, bind, prepare in DuckDB, charge a durable SQLite
ledger, execute, noise, release table, store the answer); DuckDB alone runs the exact
equivalents on the same connection, interleaved in blocks. Target: a fresh DP query at most
2× the bare DuckDB query (the same-run ratio of the medians).

``--cached`` also measures the bound a plan cache keyed on the query's shape could reach at
best: the DP side releases one of the four shapes' first texts again and again (compiled,
bound, certified and prepared once), against the same fresh exact queries.

``--ledger sqlite-nosync`` is an analysis, not a configuration statcurator offers: the same
SQLite file ledger with every sync off (``synchronous=OFF``, no PRAGMA switching around the
answer), to measure what the disk costs apart from SQLite's own work.

``--phases`` also prints where a release's time goes (medians of timers around the
release, the ledger's charge and the engine run; the timers add a few microseconds to the
DP side): the front end (parse and compile), the release up to the charge (bind,
certificate), the charge up to the engine (the ledger's decision, and with a file ledger the
hand-off of its row to the writer thread), the engine run (beside the row's INSERT and fsync
with a file ledger), the rest of the charge, and what follows it (noise, the release table,
its JSON, the stored answer).

Run: python benchmarks/dp_fresh_queries.py [--queries 1000]
     [--ledger memory|sqlite|sqlite-nosync] [--cached] [--phases] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path


def queries(n: int) -> list[tuple[str, str]]:
    """``n`` distinct (DP SQL, exact SQL) pairs of a few shapes."""
    out = []
    shapes = [
        ("SELECT COUNT(*) AS n FROM adult WHERE age > {a} AND sex = 'Male'",
         "SELECT COUNT(*) FROM adult WHERE age > {a} AND sex = 'Male'"),
        ("SELECT sex, COUNT(*) AS n FROM adult WHERE age BETWEEN {a} AND {b} GROUP BY sex",
         "SELECT sex, COUNT(*) FROM adult WHERE age BETWEEN {a} AND {b} GROUP BY sex"),
        ("SELECT AVG(age) AS m FROM adult WHERE age >= {a} AND education = 'Bachelors'",
         "SELECT AVG(CASE WHEN age < 0 THEN 0 WHEN age > 100 THEN 100 ELSE age END) FROM adult "
         "WHERE age >= {a} AND education = 'Bachelors'"),
        ("SELECT race, SUM(age) AS s FROM adult WHERE age < {b} GROUP BY race",
         "SELECT race, SUM(age) FROM adult WHERE age < {b} GROUP BY race"),
    ]
    seen: set[str] = set()
    i = 0
    while len(out) < n:
        dp, ex = shapes[i % len(shapes)]
        j = i // len(shapes)
        a, b = 17 + j % 50, 40 + j // 50  # distinct (a, b) pairs for each shape
        text = dp.format(a=a, b=b)
        if text not in seen:
            seen.add(text)
            out.append((text, ex.format(a=a, b=b)))
        i += 1
    assert len({d for d, _ in out}) == n, "queries must be distinct"
    return out


#: the phases of a release that --phases reports, in order
PHASES = ("front end (parse, compile)", "release up to the charge", "charge up to the engine",
          "engine run", "rest of the charge", "after the charge (noise, table, JSON, answer)")


def _timed(marks: dict[str, float]) -> None:
    """Record in ``marks`` when a release, its charge and its engine run start and end."""
    import functools

    import statcurator.accounting._ledger as ledger_module
    import statcurator.curator as curator_module
    import statcurator.engines.duckdb as duckdb_module

    def timer(f, label):  # type: ignore[no-untyped-def]
        @functools.wraps(f)
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            marks[label + "0"] = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                marks[label + "1"] = time.perf_counter()
        return wrapped

    for owner, name, label in ((curator_module.Query, "release", "release"),
                               (ledger_module.Ledger, "charge", "charge"),
                               (duckdb_module.DuckDBEngine, "execute", "engine")):
        setattr(owner, name, timer(getattr(owner, name), label))


def _phases(start: float, end: float, m: dict[str, float]) -> tuple[float, ...]:
    return (m["release0"] - start, m["charge0"] - m["release0"], m["engine0"] - m["charge0"],
            m["engine1"] - m["engine0"], m["charge1"] - m["engine1"], end - m["charge1"])


def run(n: int, ledger: str, cached: bool = False, phases: bool = False) -> dict:
    import statcurator as sc
    from statcurator.core.measures import PureDP

    marks: dict[str, float] = {}
    if phases:
        _timed(marks)
    split: list[tuple[float, ...]] = []

    folder = tempfile.mkdtemp()
    path = None if ledger == "memory" else str(Path(folder) / "ledger.db")
    cur = sc.Curator(ledger=path, default_budget=None, dataset_budget=None)
    if ledger == "sqlite-nosync":
        _without_sync(cur.ledger.backend)
    cur.register("adult", sc.datasets.adult(), budget=PureDP(10**9))
    cur.set_budget("bench", "adult", PureDP(10**9))
    con = cur.engine.con
    pairs = queries(n)
    cur.sql("SELECT COUNT(*) FROM adult").release(epsilon=1, analyst="bench")  # warm
    con.execute("SELECT COUNT(*) FROM adult").fetchall()
    fixed = [dp for dp, _ in pairs[:4]]
    if cached:  # compiled, certified and prepared once (a statement is prepared on its 2nd run)
        for dp in fixed * 3:
            cur.sql(dp).release(epsilon=Fraction(1, 10), analyst="bench")
    t_dp, t_ex = [], []
    block = 20
    for start in range(0, n, block):
        chunk = pairs[start:start + block]
        for _, ex in chunk:
            s = time.perf_counter()
            con.execute(ex).fetchall()
            t_ex.append(time.perf_counter() - s)
        for i, (dp, _) in enumerate(chunk, start):
            if cached:
                dp = fixed[i % 4]
            s = time.perf_counter()
            cur.sql(dp).release(epsilon=Fraction(1, 10), analyst="bench")
            e = time.perf_counter()
            t_dp.append(e - s)
            if phases:
                split.append(_phases(s, e, marks))
    dp_ms, ex_ms = 1000 * statistics.median(t_dp), 1000 * statistics.median(t_ex)
    out = {"queries": n, "ledger": ledger, "cached": cached, "dp_ms": dp_ms, "duckdb_ms": ex_ms,
           "ratio": dp_ms / ex_ms, "dp_per_s": 1000 / dp_ms, "duckdb_per_s": 1000 / ex_ms}
    if phases:
        out["phases_ms"] = {name: 1000 * statistics.median(p[i] for p in split)
                            for i, name in enumerate(PHASES)}
    return out


def _without_sync(backend: object) -> None:
    """The analysis behind ``--ledger sqlite-nosync``: this backend's connection never syncs,
    and its appends run their INSERT alone (no PRAGMA around an answer)."""
    backend._connection().execute("PRAGMA synchronous = OFF")  # type: ignore[attr-defined]

    def insert(entry: object, sql: str, params: tuple[object, ...]) -> int:
        return int(backend._connection().execute(sql, params).rowcount)  # type: ignore[attr-defined]

    backend._insert = insert  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--ledger", choices=["memory", "sqlite", "sqlite-nosync"],
                    default="sqlite")
    ap.add_argument("--cached", action="store_true",
                    help="DP side: the same four texts again (a plan cache's best case)")
    ap.add_argument("--phases", action="store_true",
                    help="also print where a release's time goes (medians per phase)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = run(args.queries, args.ledger, args.cached, args.phases)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    what = ("the same 4 DP texts again (a plan cache's best case)" if r["cached"] else
            "fresh distinct DP queries")
    print(f"{r['queries']} {what} on Adult (ledger: {r['ledger']}), "
          "medians, interleaved with fresh queries in DuckDB alone")
    print(f"  DP release     {r['dp_ms']:7.2f} ms  ({r['dp_per_s']:6.0f} queries/s)")
    print(f"  DuckDB alone   {r['duckdb_ms']:7.2f} ms  ({r['duckdb_per_s']:6.0f} queries/s)")
    print(f"  ratio          {r['ratio']:7.2f}x   target <= 2x: "
          f"{'ok' if r['ratio'] <= 2 else 'MISSED'}")
    if "phases_ms" in r:
        print("  phases of a DP release (medians, ms; they need not add up to the median "
              "release):")
        for name, ms in r["phases_ms"].items():
            print(f"    {name:48s} {ms:6.3f}")


if __name__ == "__main__":
    main()
