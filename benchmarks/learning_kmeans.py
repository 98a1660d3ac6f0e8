"""Benchmark: DP k-means against diffprivlib's KMeans and plain k-means (issue 12).

Data: (a) Adult's numeric attributes — age (declared bounds 0-120) and the years of education
implied by its ``education`` level (UCI's education-num, a public mapping, bounds 1-16);
(b) a simulated mixture of 4 Gaussians in [0, 100]² (20,000 points, σ = 6). The metric is the
normalized intra-cluster variance, within-cluster sum of squares / total sum of squares
(lower is better), median of ``--repeat`` runs at each ε, for:

* statcurator ``KMeans`` (DP Lloyd, data-independent Halton start, 5 iterations);
* statcurator ``SampleAggregateKMeans`` (100 blocks);
* diffprivlib ``KMeans`` (bounds given);
* scikit-learn ``KMeans`` (non-private).

Goal: statcurator's DP Lloyd <= diffprivlib's at the same ε.

Run: python benchmarks/learning_kmeans.py [--repeat 11] [--epsilons 0.5,1,2] [--k 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import warnings

import numpy as np

EDUCATION_YEARS = {
    "Preschool": 1, "1st-4th": 2, "5th-6th": 3, "7th-8th": 4, "9th": 5, "10th": 6,
    "11th": 7, "12th": 8, "HS-grad": 9, "Some-college": 10, "Assoc-voc": 11,
    "Assoc-acdm": 12, "Bachelors": 13, "Masters": 14, "Prof-school": 15, "Doctorate": 16}


def datasets_() -> dict[str, tuple[np.ndarray, list[tuple[int, int]]]]:
    from statcurator import datasets

    a = datasets.adult().table
    age = a.column("age").to_numpy().astype(float)
    edu = np.array([EDUCATION_YEARS[v] for v in a.column("education").to_pylist()], float)
    gen = np.random.default_rng(1)  # the simulated data, not noise
    centres = np.array([[20, 20], [30, 75], [70, 40], [80, 85]], float)
    mix = np.clip(centres[gen.integers(0, 4, 20000)] + gen.normal(0, 6, (20000, 2)), 0, 100)
    return {"adult (age, education years)": (np.column_stack([age, edu]), [(0, 120), (1, 16)]),
            "mixture of 4 Gaussians": (mix, [(0, 100), (0, 100)])}


def fitters(x: np.ndarray, bounds: list[tuple[int, int]], k: int) -> dict:
    """The clusterers compared, each a function ε -> centres."""
    import diffprivlib.models as dp

    from statcurator.estimators.learning import KMeans, SampleAggregateKMeans

    box = (np.array([b[0] for b in bounds], float), np.array([b[1] for b in bounds], float))
    return {
        "statcurator DP Lloyd":
            lambda e: KMeans(k, epsilon=e, bounds=bounds).fit(x).cluster_centers_,
        "statcurator sample-aggregate":
            lambda e: SampleAggregateKMeans(k, epsilon=e, bounds=bounds).fit(x).cluster_centers_,
        "diffprivlib": lambda e: dp.KMeans(k, epsilon=e, bounds=box).fit(x).cluster_centers_,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--epsilons", default="0.5,1,2")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    from sklearn.cluster import KMeans as SkKMeans

    from statcurator.estimators.learning.kmeans import intra_cluster_variance

    out = []
    for name, (x, bounds) in datasets_().items():
        plain = intra_cluster_variance(x, SkKMeans(args.k, n_init=10, random_state=0)
                                       .fit(x).cluster_centers_)
        for eps in [float(e) for e in args.epsilons.split(",")]:
            fns = fitters(x, bounds, args.k)
            res = {k: statistics.median(intra_cluster_variance(x, f(eps))
                                        for _ in range(args.repeat)) for k, f in fns.items()}
            out.append({"data": name, "epsilon": eps, "non-private": plain, **res})
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"normalized intra-cluster variance (WCSS/TSS, lower is better), k={args.k}, "
          f"median of {args.repeat} runs")
    for r in out:
        cells = "  ".join(f"{k}: {v:.4f}" for k, v in r.items() if k not in ("data", "epsilon"))
        print(f"{r['data']}, ε={r['epsilon']:g}: {cells}")


if __name__ == "__main__":
    main()
