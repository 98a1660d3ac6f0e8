"""Benchmark: what a DP count leaks about a household whose members share a value (issue 13).

Simulated households of 1..K members (K = 6 by default) who all share ``disease``. The
attacker knows every household but one, H of size k, and wants H's value: the worlds D_Y (H's
members all 'Y') and D_N (all 'N'). The release is ``SELECT COUNT(*) FROM t WHERE disease =
'Y'`` at ε through the Curator (bounded neighbours, the project's discrete Laplace noise,
drawn with ``BoundQuery.noise_many``), under three privacy units:

* ``row``        — ``privacy_unit = "row"``: per-record ε-DP;
* ``household``  — ``privacy_unit = { column = "household", max_rows = K }``;
* ``group_size`` — ``privacy_unit = { group_size = K }`` (no key column: group privacy).

For each unit and k it prints, as the median over ``--repeats`` runs of ``--trials`` draws
per world:

* the empirical privacy loss ε̂ = ln(P̂[out >= c_Y | D_Y] / P̂[out >= c_Y | D_N]), c_Y the
  exact count in D_Y (for discrete Laplace every upper tail attains the largest ratio), and
  its 95% lower confidence bound (Clopper–Pearson, Bonferroni over the two proportions);
* the success rate of the attacker's best guess (equal priors; 'Y' when the noisy count is
  above the midpoint of the two exact counts); ε-DP caps it at e^ε/(1 + e^ε).

Run: python benchmarks/correlated_records.py [--epsilon 1] [--max-size 6] [--trials 50000]
     [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pyarrow as pa
from scipy.stats import beta

from statcurator.core.schema import Column, PrivacyUnit, TableMeta
from statcurator.curator import Curator

SQL = "SELECT COUNT(*) AS n FROM t WHERE disease = 'Y'"


def households(n: int, max_size: int, seed: int = 13) -> list[tuple[int, str]]:
    """The known households: seeded public data (not noise)."""
    gen = np.random.default_rng(seed)
    rows: list[tuple[int, str]] = []
    for h in range(1, n + 1):
        value = "Y" if gen.random() < 0.3 else "N"
        rows += [(h, value)] * int(gen.integers(1, max_size + 1))
    return rows


def units(max_size: int) -> dict[str, PrivacyUnit]:
    return {"row": PrivacyUnit(),
            "household": PrivacyUnit("household", max_rows=max_size),
            "group_size": PrivacyUnit(group_size=max_size)}


def draws(rows: list[tuple[int, str]], unit: PrivacyUnit, epsilon: float,
          n: int) -> tuple[np.ndarray, int]:
    """``n`` released counts of ``rows`` and the exact count (known to the benchmark only)."""
    meta = TableMeta("t", (Column("household", type="integer"),
                           Column("disease", categories=("Y", "N"))),
                     privacy_unit=unit, neighbours="bounded")
    cur = Curator(engine="duckdb")
    cur.register("t", pa.table({"household": [r[0] for r in rows],
                                "disease": [r[1] for r in rows]}), meta)
    q = cur.sql(SQL)
    exact = cur.engine.execute(q.compile().engine_plan, salt="5eed")
    expr = q.plan.outputs[0].expr
    out = np.array([float(a.point(expr, 0)) for a in q.bind(epsilon).noise_many(exact, n)])
    return out, sum(1 for r in rows if r[1] == "Y")


def measure(others: list[tuple[int, str]], k: int, unit: PrivacyUnit, epsilon: float,
            trials: int) -> tuple[float, float, float]:
    """(ε̂, its 95% lower bound, attack success rate) for a target household of size k."""
    target_y, target_n = [(0, "Y")] * k, [(0, "N")] * k
    y, c_y = draws(others + target_y, unit, epsilon, trials)
    n, c_n = draws(others + target_n, unit, epsilon, trials)
    a, b = int((y >= c_y).sum()), int((n >= c_y).sum())
    est = math.log(a / b) if a and b else math.inf
    lower1 = beta.ppf(0.025, a, trials - a + 1) if a else 0.0
    upper2 = beta.isf(0.025, b + 1, trials - b) if b < trials else 1.0
    low = math.log(lower1 / upper2) if lower1 > 0 else -math.inf
    mid = (c_y + c_n) / 2  # guess 'Y' above the midpoint; ties split evenly
    success = ((y > mid).mean() + 0.5 * (y == mid).mean()
               + (n < mid).mean() + 0.5 * (n == mid).mean()) / 2
    return est, low, float(success)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--max-size", type=int, default=6)
    ap.add_argument("--households", type=int, default=40)
    ap.add_argument("--trials", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    eps, kmax = args.epsilon, args.max_size
    others = households(args.households, kmax)
    cap = math.exp(eps) / (1 + math.exp(eps))
    print(f"COUNT of the sick at ε = {eps:g}: {len(others)} known rows in {args.households} "
          f"households of 1..{kmax}; target household of size k; median of {args.repeats} "
          f"repeats of {args.trials:,} draws per world\n")
    print(f"{'unit':11} {'k':>2} {'ε̂':>6} {'ε̂ 95% low':>10} {'attack success':>15}  "
          f"(ε-DP caps ε̂ at {eps:g} and the success at {cap:.3f})")
    t0 = time.perf_counter()
    for name, unit in units(kmax).items():
        for k in range(1, kmax + 1):
            runs = np.array([measure(others, k, unit, eps, args.trials)
                             for _ in range(args.repeats)])
            est, low, success = np.median(runs, axis=0)
            verdict = "" if low <= eps else f"  leaks > ε ({low / eps:.1f}ε at least)"
            print(f"{name:11} {k:2} {est:6.2f} {low:10.2f} {success:15.3f}{verdict}")
        print()
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
