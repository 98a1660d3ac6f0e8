"""Benchmark: DP synthetic data on Adult — statcurator's MST and AIM against smartnoise-synth's
MST and AIM at the same (ε, δ) (issue 12, "Checks and benchmarks").

Adult's nine attributes (age cut into 16 public bins of its declared bounds) are encoded as
codes; a fixed random 80% is the private training table, the other 20% the test table. Every
synthesizer is fitted on the training table at ε = 1, δ = 1e-9 and samples as many rows.
Reported, median of ``--repeat`` runs:

* the average total-variation distance between the synthetic and the training table over
  all 84 three-way marginals;
* train-on-synthetic / test-on-real accuracy: a non-private scikit-learn gradient-boosted
  classifier trained on the synthetic rows predicts salary-class on the test rows (and, for
  reference, trained on the real training rows);
* the wall time of fit + sample.

smartnoise-synth needs mbi < 2 and pandas < 3: run this script with an environment that has
it (see BENCHMARKS.md); without it, only statcurator's synthesizers run. smartnoise's MST
gives the graphical model the *true* row count (``known_total=len(data)``); statcurator's
uses only the noisy measurements.

Run: python benchmarks/synth_adult.py [--repeat 5] [--epsilon 1] [--methods ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import numpy as np


def tstr(train: np.ndarray, test: np.ndarray, target: int) -> float:
    from sklearn.ensemble import HistGradientBoostingClassifier

    feats = [j for j in range(train.shape[1]) if j != target]
    if len(np.unique(train[:, target])) < 2:
        return float(np.mean(test[:, target] == train[0, target]))
    clf = HistGradientBoostingClassifier(categorical_features=[True] * len(feats),
                                         random_state=0)
    clf.fit(train[:, feats], train[:, target])
    return float(clf.score(test[:, feats], test[:, target]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--methods", default="statcurator-mst,statcurator-aim,smartnoise-mst,"
                                         "smartnoise-aim")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    from statcurator import datasets
    from statcurator.estimators.learning._domain import domain_from_meta, encode
    from statcurator.synth import AIM, MST, average_tv

    adult = datasets.adult()
    dom = domain_from_meta(adult.meta, bins={"age": 16})
    codes = encode(adult, dom)
    sizes = [a.size for a in dom]
    names = [a.name for a in dom]
    target = names.index("salary-class")
    perm = np.random.default_rng(0).permutation(codes.shape[0])  # the split, not noise
    train, test = codes[perm[: int(0.8 * len(perm))]], codes[perm[int(0.8 * len(perm)):]]

    def ours(cls):  # type: ignore[no-untyped-def]
        def run() -> np.ndarray:
            s = cls(args.epsilon, delta=args.delta, domain=dom)
            s.fit(train)
            return s.model_.sample_codes(train.shape[0])
        return run

    def smartnoise(kind: str):  # type: ignore[no-untyped-def]
        def run() -> np.ndarray:
            import pandas as pd
            from snsynth import Synthesizer

            df = pd.DataFrame(train, columns=names)
            s = Synthesizer.create(kind, epsilon=args.epsilon, delta=args.delta)
            s.fit(df, categorical_columns=names, preprocessor_eps=0.0)
            out = s.sample(train.shape[0])
            return out[names].to_numpy().astype(np.int64)
        return run

    runners = {"statcurator-mst": ours(MST), "statcurator-aim": ours(AIM),
               "smartnoise-mst": smartnoise("mst"), "smartnoise-aim": smartnoise("aim")}
    results = {}
    for name in args.methods.split(","):
        if name.startswith("smartnoise"):
            try:
                import snsynth  # noqa: F401
            except ImportError:
                print(f"{name}: skipped (smartnoise-synth is not installed here)")
                continue
        tvs, accs, secs = [], [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            synth = runners[name]()
            secs.append(time.perf_counter() - t)
            tvs.append(average_tv(train, synth, sizes, 3))
            accs.append(tstr(synth, test, target))
        results[name] = {"tv3": statistics.median(tvs), "tstr": statistics.median(accs),
                         "seconds": statistics.median(secs), "runs": args.repeat}
        if not args.json:
            r = results[name]
            print(f"{name}: 3-way TV {r['tv3']:.4f}  TSTR accuracy {r['tstr']:.4f}  "
                  f"time {r['seconds']:.1f} s", flush=True)
    real = tstr(train, test, target)
    if args.json:
        print(json.dumps({"epsilon": args.epsilon, "delta": args.delta, "train_on_real": real,
                          "results": results}, indent=2))
    else:
        print(f"reference: trained on the real training rows, accuracy {real:.4f}")


if __name__ == "__main__":
    main()
