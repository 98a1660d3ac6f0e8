"""Benchmark: writing a release as CSV (issue 8, "Dependencies and writers").

Before: the csv module, batch by batch (what ``statcurator.io.write_table`` used). After:
DuckDB's ``COPY ... TO`` (what it uses now). Polars' ``write_csv`` is shown for reference
when polars is installed. The table is the bundled Adult table repeated to ``--rows`` rows
(9 columns: 8 text, 1 integer); each writer's bytes are compared with the csv module's.

Run: python benchmarks/csv_writer.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

import statcurator as sc
from statcurator.io.tables import write_table


def csv_module(table: pa.Table, path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter=",", quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        w.writerow(table.column_names)
        for batch in table.to_batches(max_chunksize=65536):
            w.writerows(zip(*(c.to_pylist() for c in batch.columns), strict=True))


def statcurator_duckdb(table: pa.Table, path: Path) -> None:
    write_table(table, path)


def polars_writer(table: pa.Table, path: Path) -> None:
    import polars as pl

    pl.from_arrow(table).write_csv(path)


def best_of(fn: Callable[[pa.Table, Path], None], table: pa.Table, path: Path,
            repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn(table, path)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    adult = sc.datasets.adult().table
    table = pa.concat_tables([adult] * (args.rows // adult.num_rows + 1)).slice(0, args.rows)
    writers = [("csv module (before)", csv_module), ("DuckDB COPY (now)", statcurator_duckdb)]
    try:
        import polars  # noqa: F401

        writers.append(("Polars write_csv (reference)", polars_writer))
    except ImportError:
        pass
    print(f"CSV of {table.num_rows:,} rows x {table.num_columns} columns, best of "
          f"{args.repeat}\n")
    print(f"{'writer':30} {'seconds':>8} {'MB/s':>7} {'vs csv module':>14}  same bytes")
    with tempfile.TemporaryDirectory() as tmp:
        base = None
        digest = None
        for name, fn in writers:
            path = Path(tmp) / f"{name.split()[0]}.csv"
            secs = best_of(fn, table, path, args.repeat)
            data = path.read_bytes()
            h = hashlib.sha256(data).hexdigest()
            base = base or secs
            digest = digest or h
            print(f"{name:30} {secs:8.2f} {len(data) / secs / 1e6:7.0f} {base / secs:13.1f}x"
                  f"  {'yes' if h == digest else 'NO'}")


if __name__ == "__main__":
    main()
