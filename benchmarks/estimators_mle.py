"""The private MLE (Smith 2011): sample-and-aggregate's error approaches the MLE's as n grows.

Model: X ~ Exponential(rate λ = 2). Non-private: the MLE n/ΣX. Private: sample-and-aggregate
(statcurator.estimators.sample_and_aggregate) with k = ⌈n^0.6⌉ blocks, the bias-corrected
(unbiased) block estimator (t - 1)/ΣX_block, output bounds [0, 10], the widened winsorized
mean, ε = 1. The RMSE of each over R simulated datasets, per n; the ratio at n = 10^6 must be
<= 1.1 (the issue's target). The plot goes to docs/img/estimators-mle.png.

    python benchmarks/estimators_mle.py [--runs 200] [--quick]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

import statcurator as sc
from statcurator.report.estimators import plot_efficiency

RATE = 2.0


def block_rate(block: np.ndarray) -> float:
    """The unbiased (bias-corrected) estimate of the rate on one block: (t - 1)/Σx."""
    return (len(block) - 1) / float(block.sum())


def run(n: int, runs: int, seed: int) -> tuple[float, float]:
    gen = np.random.default_rng(seed)
    k = math.ceil(n ** 0.6)
    private, mle = [], []
    for _ in range(runs):
        x = gen.exponential(1 / RATE, n)
        mle.append(n / float(x.sum()))
        est = sc.estimators.sample_and_aggregate(block_rate, x, epsilon=1,
                                                 output_bounds=(0, 10), blocks=k,
                                                 bounds=(0, 1000))
        private.append(est.value)
    rmse = lambda v: float(np.sqrt(np.mean((np.asarray(v) - RATE) ** 2)))  # noqa: E731
    return rmse(private), rmse(mle)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="n up to 10^5, 50 runs")
    args = ap.parse_args()
    ns = [10**3, 10**4, 10**5] + ([] if args.quick else [10**6])
    runs = 50 if args.quick else args.runs
    rows = []
    t0 = time.time()
    for i, n in enumerate(ns):
        p, m = run(n, runs, seed=i)
        rows.append((n, p, m))
        print(f"n={n:>8}  blocks={math.ceil(n ** 0.6):>5}  RMSE private={p:.5f}  "
              f"MLE={m:.5f}  ratio={p / m:.3f}", flush=True)
    if not args.quick:  # the figure of the docs comes from the full run only
        out = Path(__file__).resolve().parents[1] / "docs" / "img"
        out.mkdir(parents=True, exist_ok=True)
        plot_efficiency([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                        out / "estimators-mle.png",
                        title="exponential rate, ε = 1: private MLE vs MLE")
    last = rows[-1]
    print(f"ratio at n={last[0]}: {last[1] / last[2]:.3f} (target <= 1.1); {runs} runs per n; "
          f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
