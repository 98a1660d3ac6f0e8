"""Benchmark: DP decision trees and forests on Adult against diffprivlib and a plain tree
(issue 12, "Checks and benchmarks").

Adult's eight attributes other than salary-class (age cut into 10 public bins of its declared
bounds, the rest categorical) predict salary-class; a fixed random 80% trains, the other 20%
tests. At each ε, every learner is fitted ``--repeat`` times (fresh noise each time) and the
median test accuracy is reported, with:

* statcurator's ``DecisionTreeClassifier`` (DiffPID3, depth from the budget, gini split);
* statcurator's ``RandomForestClassifier`` (3 trees on disjoint parts of the rows);
* diffprivlib's ``RandomForestClassifier`` (10 trees, the same integer codes, bounds given so
  that it reads nothing from the data);
* scikit-learn's non-private ``DecisionTreeClassifier`` (max_depth 8) and the majority class.

Goal: statcurator's accuracy >= diffprivlib's at the same ε.

Run: python benchmarks/learning_trees.py [--repeat 11] [--epsilons 0.5,1,2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--epsilons", default="0.5,1,2")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    from statcurator import datasets
    from statcurator.estimators.learning import DecisionTreeClassifier, RandomForestClassifier
    from statcurator.estimators.learning._domain import domain_from_meta, encode

    adult = datasets.adult()
    target = "salary-class"
    names = [c for c in adult.meta.names if c != target]
    feats = domain_from_meta(adult.meta, names, bins=10)
    (cls,) = domain_from_meta(adult.meta, [target])
    X = encode(adult, feats)
    y = cls.encode(adult.table.column(target).to_numpy(zero_copy_only=False))
    perm = np.random.default_rng(0).permutation(len(y))  # the split, not noise
    tr, te = perm[: int(0.8 * len(y))], perm[int(0.8 * len(y)):]
    doms = {a.name: list(range(a.size)) for a in feats}  # X holds codes already
    classes = list(range(cls.size))

    def ours(kind: str, eps: float) -> float:
        if kind == "tree":
            m = DecisionTreeClassifier(eps, domains=doms, classes=classes, criterion="gini")
        else:
            m = RandomForestClassifier(eps, n_estimators=3, domains=doms, classes=classes,
                                       criterion="gini")
        return m.fit(X[tr], y[tr]).score(X[te], y[te])

    def diffprivlib_rf(eps: float) -> float:
        import diffprivlib.models as dp

        bounds = (np.zeros(X.shape[1]), np.array([a.size - 1 for a in feats], dtype=float))
        m = dp.RandomForestClassifier(n_estimators=10, epsilon=eps, bounds=bounds,
                                      classes=classes)
        return float(m.fit(X[tr], y[tr]).score(X[te], y[te]))

    from sklearn.tree import DecisionTreeClassifier as SkTree

    plain = float(SkTree(max_depth=8, random_state=0).fit(X[tr], y[tr]).score(X[te], y[te]))
    majority = float(max(np.mean(y[te] == c) for c in classes))
    rows = []
    for eps in [float(e) for e in args.epsilons.split(",")]:
        res = {}
        for name, fn in (("statcurator tree", lambda e: ours("tree", e)),
                         ("statcurator forest", lambda e: ours("forest", e)),
                         ("diffprivlib forest", diffprivlib_rf)):
            accs, secs = [], []
            for _ in range(args.repeat):
                t = time.perf_counter()
                accs.append(fn(eps))
                secs.append(time.perf_counter() - t)
            res[name] = (statistics.median(accs), statistics.median(secs))
        rows.append((eps, res))
    if args.json:
        print(json.dumps({"plain_tree": plain, "majority": majority, "results": [
            {"epsilon": e, **{k: {"accuracy": a, "seconds": s} for k, (a, s) in r.items()}}
            for e, r in rows]}, indent=2))
        return
    print(f"Adult, train 80% / test 20%; median of {args.repeat} runs")
    print(f"non-private scikit-learn tree (depth 8): {plain:.4f}; majority class: {majority:.4f}")
    for eps, res in rows:
        line = "  ".join(f"{k}: {a:.4f} ({s:.2f} s)" for k, (a, s) in res.items())
        ratio = res["statcurator tree"][0] - res["diffprivlib forest"][0]
        print(f"ε={eps:g}: {line}  | tree - diffprivlib = {ratio:+.4f}")


if __name__ == "__main__":
    main()
