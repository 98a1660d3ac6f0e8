"""Benchmark: the utility gain of a Blowfish policy over plain DP at the same ε (issue 13).

Data: (a) Adult's ``age`` (30,162 rows, integers, declared bounds 0-120: 121 unit bins);
(b) simulated: 10,000 integers in [0, 255] from a mixture of 4 Gaussians (σ = 12).

**Range queries** — the mean absolute error over *all* range counts [a, b) between unit bins
(7,260 ranges on age, 32,896 on the simulated data), median over ``--repeat`` runs:

* policy: the ordered mechanism (noisy cumulative counts, consistent) under the line graph
  (θ = 1) and under θ = 5;
* plain bounded DP (the complete graph), the better of: a noisy histogram (sensitivity 2)
  summed over the range, and a hierarchical histogram (binary tree, ε split over the
  levels, each range the difference of two dyadic prefix sums).

**k-means** (k = 4) — ``PolicyKMeans`` under the line graph against the same algorithm under
the complete graph (plain bounded DP): the normalized intra-cluster variance (WCSS/TSS,
lower is better; the non-private optimum is printed) and the mean absolute error of the
sorted centres against scikit-learn's non-private centres.

The ratio printed is plain DP's error over the policy's. ``--figures DIR`` writes
DIR/policies.png (the plot of docs/policies.md).

Run: python benchmarks/policies.py [--repeat 11] [--epsilons 0.01,0.03,0.1,0.3,1]
     [--figures docs/img] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np

from statcurator.core.policy import Policy
from statcurator.estimators.learning.kmeans import intra_cluster_variance
from statcurator.estimators.learning.policy_kmeans import PolicyKMeans
from statcurator.mechanisms import VectorLaplaceMechanism
from statcurator.mechanisms.policy import OrderedMechanism, PolicyHistogram

K = 4


def datasets_() -> dict[str, tuple[np.ndarray, int, int]]:
    """name -> (integer values, lower bound, upper bound)."""
    from statcurator import datasets

    age = datasets.adult().table.column("age").to_numpy().astype(np.int64)
    gen = np.random.default_rng(7)  # the simulated data, not noise
    centres = np.array([40, 90, 150, 210])
    sim = np.clip(np.rint(centres[gen.integers(0, 4, 10_000)] + gen.normal(0, 12, 10_000)),
                  0, 255).astype(np.int64)
    return {"adult age": (age, 0, 120), "simulated mixture": (sim, 0, 255)}


# -- range queries ---------------------------------------------------------------------------------

def _all_ranges_mae(est: np.ndarray, true: np.ndarray) -> float:
    """Mean |error| over all ranges [a, b), a < b, from full cumulative vectors F[0..m]."""
    err = est.astype(np.float64) - true.astype(np.float64)
    diff = np.abs(err[None, :] - err[:, None])
    iu = np.triu_indices(err.size, k=1)
    return float(diff[iu].mean())


def _full(cum: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([[0], np.asarray(cum, dtype=np.float64), [n]])


def _hierarchical_prefix(x: np.ndarray, lo: int, m: int, eps: Fraction) -> np.ndarray:
    """Plain bounded DP by a binary tree of histograms: level ℓ has nodes of 2^ℓ bins; each
    level is a histogram of L1 sensitivity 2 released at ε/levels; prefix [0, j) is the sum
    of at most one node per level (n, public under bounded neighbours, is the root)."""
    h = int(np.ceil(np.log2(m)))
    size = 2**h
    leaves = np.bincount(x - lo, minlength=size)
    levels = []
    for ell in range(h):
        exact_counts = leaves.reshape(-1, 2**ell).sum(axis=1)
        levels.append(VectorLaplaceMechanism(2, eps / h).release(exact_counts).astype(float))
    out = np.zeros(m + 1)
    for j in range(m + 1):
        total, pos = 0.0, 0
        for ell in reversed(range(h)):
            if j & (1 << ell):
                total += levels[ell][pos >> ell]
                pos += 1 << ell
        out[j] = total if j < size else float(x.size)
    return out


def range_errors(x: np.ndarray, lo: int, hi: int, eps: Fraction) -> dict[str, float]:
    cuts = list(range(lo + 1, hi + 1))
    n = x.size
    line = OrderedMechanism(Policy.line(), eps, edges=cuts)
    true = _full(line.cumulative(x), n)
    out = {
        "policy θ=1 (ordered)": _all_ranges_mae(_full(line.release(x).cumulative, n), true),
        "policy θ=5 (ordered)": _all_ranges_mae(_full(OrderedMechanism(
            Policy.threshold(5), eps, edges=cuts).release(x).cumulative, n), true),
    }
    hist = PolicyHistogram(Policy.complete(), eps, edges=cuts).release(x)
    out["plain DP histogram"] = _all_ranges_mae(
        np.concatenate([[0], np.cumsum(hist)[:-1], [n]]), true)
    out["plain DP hierarchical"] = _all_ranges_mae(
        _hierarchical_prefix(x, lo, hi - lo + 1, eps), true)
    return out


# -- k-means ---------------------------------------------------------------------------------------

def kmeans_errors(x: np.ndarray, lo: int, hi: int, eps: Fraction,
                  reference: np.ndarray) -> dict[str, tuple[float, float]]:
    xs = x.astype(np.float64).reshape(-1, 1)
    out = {}
    for name, policy in (("policy θ=1", Policy.line()), ("plain DP", Policy.complete())):
        c = PolicyKMeans(K, epsilon=eps, policy=policy, bounds=(lo, hi)).fit(x).cluster_centers_
        out[name] = (intra_cluster_variance(xs, c),
                     float(np.abs(np.sort(c[:, 0]) - reference).mean()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--epsilons", default="0.01,0.03,0.1,0.3,1")
    ap.add_argument("--figures", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from sklearn.cluster import KMeans as SkKMeans

    epsilons = [Fraction(e) for e in args.epsilons.split(",")]
    results = []
    for name, (x, lo, hi) in datasets_().items():
        xs = x.astype(np.float64).reshape(-1, 1)
        sk = SkKMeans(K, n_init=10, random_state=0).fit(xs).cluster_centers_
        reference = np.sort(sk[:, 0])
        optimum = intra_cluster_variance(xs, sk)
        for eps in epsilons:
            ranges = [range_errors(x, lo, hi, eps) for _ in range(args.repeat)]
            rng_med = {k: statistics.median(r[k] for r in ranges) for k in ranges[0]}
            kms = [kmeans_errors(x, lo, hi, eps, reference) for _ in range(args.repeat)]
            km_med = {k: (statistics.median(r[k][0] for r in kms),
                          statistics.median(r[k][1] for r in kms)) for k in kms[0]}
            plain_best = min(rng_med["plain DP histogram"], rng_med["plain DP hierarchical"])
            results.append({
                "data": name, "epsilon": float(eps), "rows": int(x.size),
                "range_mae": rng_med,
                "range_ratio_plain_over_line": plain_best / rng_med["policy θ=1 (ordered)"],
                "kmeans_variance": {k: v[0] for k, v in km_med.items()},
                "kmeans_centre_error": {k: v[1] for k, v in km_med.items()},
                "kmeans_variance_optimum": optimum,
                "kmeans_centre_error_ratio": km_med["plain DP"][1] / km_med["policy θ=1"][1],
            })
    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
    else:
        _print(results, args.repeat)
    if args.figures is not None:
        args.figures.mkdir(parents=True, exist_ok=True)
        path = args.figures / "policies.png"
        _figure(results, path)
        print(f"\nwrote {path}")


def _print(results: list[dict], repeat: int) -> None:
    print(f"Range queries: mean absolute error over all ranges, median of {repeat} runs")
    print(f"{'data':18} {'ε':>5} {'θ=1':>8} {'θ=5':>8} {'DP hist':>9} {'DP tree':>9} "
          f"{'plain/θ=1':>9}")
    for r in results:
        m = r["range_mae"]
        print(f"{r['data']:18} {r['epsilon']:5g} {m['policy θ=1 (ordered)']:8.2f} "
              f"{m['policy θ=5 (ordered)']:8.2f} {m['plain DP histogram']:9.2f} "
              f"{m['plain DP hierarchical']:9.2f} {r['range_ratio_plain_over_line']:8.1f}×")
    print(f"\nk-means (k={K}): normalized intra-cluster variance (WCSS/TSS) and mean |centre "
          f"error|, median of {repeat} runs")
    print(f"{'data':18} {'ε':>5} {'optimum':>8} {'var θ=1':>8} {'var DP':>8} "
          f"{'err θ=1':>8} {'err DP':>8} {'DP/θ=1':>7}")
    for r in results:
        v, e = r["kmeans_variance"], r["kmeans_centre_error"]
        print(f"{r['data']:18} {r['epsilon']:5g} {r['kmeans_variance_optimum']:8.4f} "
              f"{v['policy θ=1']:8.4f} {v['plain DP']:8.4f} {e['policy θ=1']:8.2f} "
              f"{e['plain DP']:8.2f} {r['kmeans_centre_error_ratio']:6.1f}×")


def _figure(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["data"] for r in results))
    fig, axes = plt.subplots(len(names), 2, figsize=(10, 3.6 * len(names)), squeeze=False)
    for row, name in zip(axes, names, strict=True):
        rs = [r for r in results if r["data"] == name]
        eps = [r["epsilon"] for r in rs]
        for key, style in (("policy θ=1 (ordered)", "o-"), ("policy θ=5 (ordered)", "s-"),
                           ("plain DP histogram", "x--"), ("plain DP hierarchical", "d--")):
            row[0].plot(eps, [r["range_mae"][key] for r in rs], style, label=key)
        row[0].set(xscale="log", yscale="log", xlabel="ε", ylabel="mean |error| of a range count",
                   title=f"{name}: all range queries")
        row[0].legend(fontsize=8)
        for key, style in (("policy θ=1", "o-"), ("plain DP", "x--")):
            row[1].plot(eps, [r["kmeans_variance"][key] for r in rs], style, label=key)
        row[1].axhline(rs[0]["kmeans_variance_optimum"], color="grey", lw=0.8, ls=":",
                       label="non-private optimum")
        row[1].set(xscale="log", yscale="log", xlabel="ε",
                   ylabel="WCSS / TSS (lower is better)",
                   title=f"{name}: k-means (k={K})")
        row[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
