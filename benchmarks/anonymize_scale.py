"""Benchmark: Mondrian on Adult resampled to 1,000,000 records (issue 2, "Performance").

Target: k=10 on 1M records in <= 60 s and <= 4 GB peak memory; and how the time grows from
30k to 1M records. Each size runs in a fresh process so that its peak memory (max RSS) is its
own. Records are drawn with replacement from Adult with a fixed seed (a benchmark, not a
release).

Run: python benchmarks/anonymize_scale.py [--sizes 30162,100000,300000,1000000] [--k 10]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(n: int, k: int) -> dict:
    import numpy as np
    import pyarrow as pa

    import statcurator as sc
    from statcurator.anonymize import KAnonymity, anonymize
    from statcurator.anonymize.mondrian import partition
    from statcurator.anonymize.search import prepare

    ds = sc.datasets.adult()
    rng = np.random.default_rng(20240601)
    table = ds.table.take(pa.array(rng.integers(0, ds.num_rows, n)))
    data = sc.Dataset(f"adult-{n}", table, ds.meta)
    qi = [c for c in ds.meta.names if c != "occupation"]
    t = time.perf_counter()
    problem = prepare(data, None, [KAnonymity(k)], qi=qi, need_hierarchies=False)
    t_prep = time.perf_counter() - t
    t = time.perf_counter()
    parts, _, _ = partition(problem)
    t_part = time.perf_counter() - t
    t = time.perf_counter()
    res = anonymize(data, KAnonymity(k), algorithm="mondrian", qi=qi)
    t_all = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {"n": n, "prepare": t_prep, "partition": t_part, "anonymize": t_all,
            "classes": res.classes, "dm": res.metrics["dm"], "min_class": res.min_class_size,
            "verified": all(res.verified.values()), "peak_bytes": peak}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="30162,100000,300000,1000000")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.k)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"Mondrian k={args.k} on Adult resampled (8 QIs); targets at 1M: <= 60 s, <= 4 GB\n")
    print(f"{'records':>10} {'prepare':>9} {'partition':>10} {'anonymize()':>12} {'classes':>9} "
          f"{'min |E|':>8} {'peak RSS':>10}  verified")
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--k", str(args.k)],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(r)
        print(f"{r['n']:10,} {r['prepare']:8.2f}s {r['partition']:9.2f}s {r['anonymize']:11.2f}s "
              f"{r['classes']:9,} {r['min_class']:8} {r['peak_bytes'] / 2**30:8.2f} GB  "
              f"{r['verified']}")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        growth = b["anonymize"] / a["anonymize"]
        print(f"\ntime grows {growth:.1f}x for {b['n'] / a['n']:.0f}x the records "
              f"(exponent {__import__('math').log(growth) / __import__('math').log(b['n'] / a['n']):.2f})")
    last = rows[-1]
    if last["n"] >= 1_000_000:
        print(f"1M records: {last['anonymize']:.1f} s ({'meets' if last['anonymize'] <= 60 else 'misses'}"
              f" 60 s), peak {last['peak_bytes'] / 2**30:.2f} GB "
              f"({'meets' if last['peak_bytes'] <= 4 * 2**30 else 'misses'} 4 GB)")


if __name__ == "__main__":
    main()
