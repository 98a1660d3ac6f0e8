"""Benchmark: Dinur–Nissim reconstruction with the LP decoder (issue 9, "Performance").

Target: the LP reconstruction of a 500-row secret column from 2,000 random subset-sum queries
in <= 30 s. Prints, for exact answers and bounded noise E = 5, 11 (≈ √n / 2) and 22 (≈ √n),
the decoding time (scipy's HiGHS interior-point solver) next to the time to ask the queries,
and the fraction of the column recovered; then the same attack through the DP curator under
a total budget (``--curator``: 2,000 SQL releases, slower).

``--figure PNG`` draws the fraction recovered against the noise bound E for 200 rows and
200, 400 and 800 queries (the plot of docs/attacks.md).

Run: python benchmarks/attacks_reconstruction.py [--rows 500] [--queries 2000] [--curator]
     [--figure docs/img/reconstruction.png]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from statcurator.attacks import NaiveInterface, Reconstruction

TARGET_SECONDS = 30.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--curator", action="store_true")
    ap.add_argument("--figure", default=None)
    args = ap.parse_args()
    n, q = args.rows, args.queries
    secret = np.random.default_rng(0).integers(0, 2, n)
    print(f"n = {n} rows, q = {q} queries, √n = {np.sqrt(n):.1f}; load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print(f"{'interface':34} {'asking':>8} {'decoding':>9} {'total':>8} {'recovered':>10}  verdict")
    for noise, bound in (("exact", 0), ("bounded", 5), ("bounded", 11), ("bounded", 22)):
        iface = NaiveInterface(secret, noise, bound=bound)
        t = time.perf_counter()
        risk = Reconstruction(queries=q, seed=1).run(iface, n, truth=secret)
        total = time.perf_counter() - t
        m = risk.measures
        label = "exact answers" if noise == "exact" else f"bounded noise, E = {bound}"
        print(f"{label:34} {m['seconds asking']:7.2f}s {m['seconds decoding']:8.2f}s "
              f"{total:7.2f}s {risk.rate:9.1%}  "
              f"{'meets' if total <= TARGET_SECONDS else 'MISSES'} {TARGET_SECONDS:.0f} s")
    if args.curator:
        from statcurator.cli.attack import curator_oracle

        for budget in (1, 100):
            oracle, cost, close = curator_oracle(secret, budget, q)
            t = time.perf_counter()
            try:
                risk = Reconstruction(queries=q, seed=1).run(oracle, n, truth=secret, cost=cost)
            finally:
                close()
            m = risk.measures
            print(f"{'DP curator, total ε = ' + str(budget):34} {m['seconds asking']:7.2f}s "
                  f"{m['seconds decoding']:8.2f}s {time.perf_counter() - t:7.2f}s "
                  f"{risk.rate:9.1%}  (baseline {risk.baseline:.1%})")


    if args.figure:
        import base64
        from pathlib import Path

        from statcurator.attacks.queries import reconstruction_curve
        from statcurator.report.attacks import curve_png

        bits = np.random.default_rng(2).integers(0, 2, 200)
        c = reconstruction_curve(bits, bounds=(0, 1, 2, 4, 7, 10, 14, 20, 28),
                                 queries=(800, 400, 200), seed=3)
        c["ylabel"] = "fraction recovered (200 rows)"
        png = curve_png("LP reconstruction against the noise bound E", c)
        Path(args.figure).write_bytes(base64.b64decode(png))


if __name__ == "__main__":
    main()
