"""Accuracy of statcurator's DP statistics against diffprivlib and OpenDP.

Same data, same ε, same declared bounds; the median over R runs (default 200) of each
method's error. Needs the ``bench`` extra (diffprivlib, opendp, scikit-learn).

* mean, variance of Adult's age (n = 30162, bounds [0, 120], n public, ε = 1):
  statcurator's SQL AVG / VARIANCE (bounded neighbours, declared rows) vs diffprivlib.tools.
* quartiles (0.25, 0.5, 0.75) of Adult's age and of a skewed "income" sample (lognormal,
  bounds [0, 10^6]), ε = 1 for all three: statcurator's per-quantile exponential
  mechanism (the default) and its joint exponential mechanism (1024 bins), and (median only) smooth sensitivity, vs
  diffprivlib.tools.quantile and OpenDP's make_private_quantile (ε/3 each); the error is the
  mean absolute error over the three quartiles (the median's own error for the median rows).
* the median of the income sample with the *global* sensitivity (Laplace, Δ = 10^6/2 for
  n public, Δ = the range): what smooth sensitivity avoids.
* linear regression (n = 10^4, 3 features in [-1, 1], y in [-5, 5]): AdaSSP at (ε = 1,
  δ = 1e-6) vs diffprivlib's LinearRegression at ε = 1 (pure); error ‖θ - θ_OLS‖.
* logistic regression (n = 10^4, 3 features in [-1, 1]): objective perturbation vs
  diffprivlib's LogisticRegression, both ε = 1; error ‖θ - θ_non-private‖ (same C = 1).

    python benchmarks/estimators_accuracy.py [--runs 200]
"""

from __future__ import annotations

import argparse
import time
import warnings
from fractions import Fraction

import numpy as np
import pyarrow as pa

import statcurator as sc
from statcurator.core.schema import Column, TableMeta

warnings.filterwarnings("ignore")
QS = (0.25, 0.5, 0.75)


def _median_err(errors: list[float]) -> float:
    return float(np.median(errors))


def mean_var(ages: np.ndarray, runs: int) -> list[tuple[str, str, float]]:
    import diffprivlib.tools as dpl

    n = ages.size
    meta = TableMeta("a", (Column("age", type="integer", bounds=(0, 120)),),
                     neighbours="bounded", rows=n)
    cur = sc.Curator(engine="duckdb")
    cur.register("a", pa.table({"age": ages}), meta)
    cur.set_dataset_budget("a", sc.PureDP(10**6))
    cur.set_budget("bench", "a", sc.PureDP(10**6))
    true_mean, true_var = float(ages.mean()), float(ages.var())
    out = []
    for stat, sql, truth, dfun in (
            ("mean", "SELECT AVG(age) AS v FROM a", true_mean, dpl.mean),
            ("variance", "SELECT VAR_POP(age) AS v FROM a", true_var, dpl.var)):
        q = cur.sql(sql)
        ours = [abs(q.release(1, analyst="bench").rows()[0]["v"] - truth) for _ in range(runs)]
        theirs = [abs(float(dfun(ages, epsilon=1, bounds=(0, 120))) - truth)
                  for _ in range(runs)]
        out += [(stat, "statcurator SQL", _median_err(ours)),
                (stat, "diffprivlib", _median_err(theirs))]
    cur.close()
    return out


def _opendp_quantiles(x: np.ndarray, lo: float, hi: float, eps: float):  # type: ignore[no-untyped-def]
    import opendp.prelude as dp

    dp.enable_features("contrib")
    candidates = list(np.linspace(lo, hi, 2**14 + 1))
    ms = []
    for q in QS:
        def make(scale: float, q: float = q):  # type: ignore[no-untyped-def]
            return dp.m.make_private_quantile(
                dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance(),
                dp.max_divergence(), candidates=candidates, alpha=q, scale=scale)
        scale = dp.binary_search_param(make, d_in=1, d_out=eps / len(QS))
        ms.append(make(scale))
    xs = [float(v) for v in x]
    return lambda: [m(xs) for m in ms]


def quartiles(name: str, x: np.ndarray, lo: float, hi: float, runs: int
              ) -> list[tuple[str, str, float]]:
    import diffprivlib.tools as dpl

    truth = np.quantile(x, QS, method="inverted_cdf")
    err = lambda v: float(np.mean(np.abs(np.asarray(v) - truth)))  # noqa: E731
    med = lambda v: float(abs(v - truth[1]))  # noqa: E731
    joint = sc.estimators.Quantiles("x", QS, epsilon=1, bounds=(lo, hi), interval=False,
                                    method="joint", bins=1024)
    indep = sc.estimators.Quantiles("x", QS, epsilon=1, bounds=(lo, hi), interval=False,
                                    selection="exponential")
    pf = sc.estimators.Quantiles("x", QS, epsilon=1, bounds=(lo, hi), interval=False)
    smooth = sc.estimators.Median("x", epsilon=1, bounds=(lo, hi))
    table = {"x": x}
    odp = _opendp_quantiles(x, lo, hi, 1.0)
    rows = [
        (f"quartiles ({name})", "statcurator joint EM",
         _median_err([err(v) for v in joint.sample(table, runs)])),
        (f"quartiles ({name})", "statcurator EM ×3",
         _median_err([err(v) for v in indep.sample(table, runs)])),
        (f"quartiles ({name})", "statcurator permute-and-flip ×3",
         _median_err([err(v) for v in pf.sample(table, runs)])),
        (f"quartiles ({name})", "diffprivlib",
         _median_err([err(dpl.quantile(x, list(QS), epsilon=1, bounds=(lo, hi)))
                      for _ in range(runs)])),
        (f"quartiles ({name})", "OpenDP",
         _median_err([err(odp()) for _ in range(runs)])),
        (f"median ({name})", "statcurator smooth sensitivity",
         _median_err([med(v) for v in smooth.sample(table, runs)])),
        (f"median ({name})", "statcurator EM",
         _median_err([med(v) for v in sc.estimators.Quantiles(
             "x", (0.5,), epsilon=1, bounds=(lo, hi), interval=False).sample(table, runs)[:, 0]])),
        (f"median ({name})", "diffprivlib",
         _median_err([med(dpl.median(x, epsilon=1, bounds=(lo, hi))) for _ in range(runs)])),
    ]
    gs = sc.mechanisms.LaplaceMechanism(Fraction(hi - lo), 1)  # Δ = the range (worst case)
    rows.append((f"median ({name})", "global sensitivity (Laplace)",
                 _median_err([med(float(v)) for v in gs.release(np.full(runs, truth[1]))])))
    return rows


def quartiles_over_datasets(runs: int, datasets: int = 20) -> list[tuple[str, str, float]]:
    """Quartiles of ``datasets`` fresh lognormal income samples (``runs`` releases spread
    over them): on one sample, where a method's candidate grid falls against the few data
    points around a quartile decides much of its error (OpenDP's 16,385 candidates, 61 apart,
    happen to sit 8, 10 and 14 from the true quartiles of seed 0); over many samples that
    luck averages out and the mechanisms are compared."""
    import diffprivlib.tools as dpl

    per = max(1, runs // datasets)
    errs: dict[str, list[float]] = {"statcurator permute-and-flip": [],
                                    "statcurator exponential": [], "diffprivlib": [],
                                    "OpenDP": []}
    for seed in range(1, datasets + 1):
        x = np.clip(np.random.default_rng(seed).lognormal(10.5, 0.8, 20_000), 0, 10**6)
        truth = np.quantile(x, QS, method="inverted_cdf")
        def err(v: object, truth: np.ndarray = truth) -> float:
            return float(np.mean(np.abs(np.asarray(v) - truth)))

        for sel in ("permute-and-flip", "exponential"):
            est = sc.estimators.Quantiles("x", QS, epsilon=1, bounds=(0, 10**6),
                                          interval=False, selection=sel)
            errs[f"statcurator {sel}"] += [err(v) for v in est.sample({"x": x}, per)]
        errs["diffprivlib"] += [err(dpl.quantile(x, list(QS), epsilon=1, bounds=(0, 10**6)))
                                for _ in range(per)]
        odp = _opendp_quantiles(x, 0, 10**6, 1.0)
        errs["OpenDP"] += [err(odp()) for _ in range(per)]
    name = f"quartiles (income, {datasets} samples)"
    return [(name, k, _median_err(v)) for k, v in errs.items()]


def linear(runs: int) -> list[tuple[str, str, float]]:
    from diffprivlib.models import LinearRegression as DLR

    gen = np.random.default_rng(1)
    n = 10_000
    X = gen.uniform(-1, 1, (n, 3))
    y = np.clip(X @ np.array([1.0, -2.0, 0.5]) + 0.3 + gen.normal(0, 0.5, n), -5, 5)
    A = np.column_stack([X, np.ones(n)])
    ols = np.linalg.lstsq(A, y, rcond=None)[0]
    bounds = {"a": (-1, 1), "b": (-1, 1), "c": (-1, 1), "y": (-5, 5)}
    ours, theirs = [], []
    for _ in range(runs):
        m = sc.estimators.LinearRegression(epsilon=1, delta=1e-6, bounds=bounds).fit(X, y)
        ours.append(np.linalg.norm(np.append(m.coef_, m.intercept_) - ols))
        d = DLR(epsilon=1, bounds_X=(-1, 1), bounds_y=(-5, 5)).fit(X, y)
        theirs.append(np.linalg.norm(np.append(d.coef_, d.intercept_) - ols))
    return [("linear regression ‖θ-θ_OLS‖", "statcurator AdaSSP (ε=1, δ=1e-6)",
             _median_err(ours)),
            ("linear regression ‖θ-θ_OLS‖", "diffprivlib (ε=1)", _median_err(theirs))]


def logistic(runs: int) -> list[tuple[str, str, float]]:
    from diffprivlib.models import LogisticRegression as DLogR
    from sklearn.linear_model import LogisticRegression as SKL

    gen = np.random.default_rng(2)
    n = 10_000
    X = gen.uniform(-1, 1, (n, 3))
    p = 1 / (1 + np.exp(-(X @ np.array([2.0, -1.5, 1.0]) + 0.5)))
    y = (gen.uniform(size=n) < p).astype(int)
    ref = SKL(C=1.0).fit(X, y)
    theta = np.append(ref.coef_.ravel(), ref.intercept_)
    bounds = {"a": (-1, 1), "b": (-1, 1), "c": (-1, 1)}
    ours, theirs, acc_o, acc_t = [], [], [], []
    for _ in range(runs):
        m = sc.estimators.LogisticRegression(epsilon=1, bounds=bounds).fit(X, y)
        ours.append(np.linalg.norm(np.append(m.coef_, m.intercept_) - theta))
        acc_o.append(m.score(X, y))
        d = DLogR(epsilon=1, data_norm=float(np.sqrt(3)), C=1.0).fit(X, y)
        theirs.append(np.linalg.norm(np.append(d.coef_.ravel(), d.intercept_) - theta))
        acc_t.append(d.score(X, y))
    print(f"  logistic accuracy: statcurator {np.median(acc_o):.3f}, diffprivlib "
          f"{np.median(acc_t):.3f}, non-private {ref.score(X, y):.3f}")
    return [("logistic regression ‖θ-θ_np‖", "statcurator objective perturbation",
             _median_err(ours)),
            ("logistic regression ‖θ-θ_np‖", "diffprivlib", _median_err(theirs))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    runs = ap.parse_args().runs
    t0 = time.time()
    ages = sc.datasets.adult().table.column("age").to_numpy().astype(float)
    income = np.clip(np.random.default_rng(0).lognormal(10.5, 0.8, 20_000), 0, 10**6)
    rows = []
    for part in (lambda: mean_var(ages, runs),
                 lambda: quartiles("age", ages, 0, 120, runs),
                 lambda: quartiles("income", income, 0, 10**6, runs),
                 lambda: quartiles_over_datasets(runs),
                 lambda: linear(runs), lambda: logistic(runs)):
        got = part()
        for r in got:
            print(f"{r[0]:<34} {r[1]:<36} median error {r[2]:.5g}", flush=True)
        rows += got
    print(f"{runs} runs per method, ε = 1; {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
