"""Membership inference from published aggregates (Homer et al., PLoS Genetics 2008).

A study publishes, for M attributes (SNPs in a genome-wide association study), the
frequency of each attribute in its group (the cases); a reference population's frequencies
are public too. Given a person's own vector y (genotype: 0, ½, 1 per SNP), the adversary
computes, per attribute, how much closer y is to the group than to the reference,

    D_j = |y_j − ref_j| − |y_j − group_j|,

and the statistic T = mean(D) / (sd(D)/√M) (a one-sample t statistic over attributes). A
member pulled the group's frequencies towards itself, so its T is larger. The adversary
calibrates a threshold on people it knows are *not* in the group (a held-out reference
sample): it calls "member" when T exceeds the (1 − fpr) quantile of their statistics. The
advantage — the largest TPR − FPR over thresholds — grows with the number of published
statistics.

>>> data = simulate_gwas(pool=200, reference=200, targets=100, snps=2000, seed=1)
>>> risk = MembershipInference(statistics=(100, 2000)).run(data)
>>> risk.measures["advantage"] > 0.5
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.numbers import exact
from ..mechanisms import VectorLaplaceMechanism
from ._checks import share, whole
from .risk import Risk, curve

__all__ = ["MembershipInference", "Aggregates", "simulate_gwas", "one_hot_aggregates",
           "dp_aggregates", "dp_advantage_bound"]


@dataclass(frozen=True, eq=False)
class Aggregates:
    """What is published and what the adversary holds.

    ``group`` (M,) the published group frequencies and ``reference`` (M,) the public
    reference frequencies; ``targets`` (t × M) the people attacked (their own vectors) and
    ``calibration`` (c × M) people known *not* to be in the group. ``truth`` (t,) says who is
    a member — for scoring only. ``group_size`` is public (the study's size); a person adds at
    most ``per_person`` to each count (frequencies are counts / (per_person × group_size)), and
    ``sensitivity`` is the L1 change of the whole count vector when one person is added or
    removed.
    """

    group: np.ndarray
    reference: np.ndarray
    targets: np.ndarray
    calibration: np.ndarray
    truth: np.ndarray = field(repr=False)
    group_size: int = 0
    sensitivity: int = 1
    per_person: int = 1
    description: str = "published group frequencies"
    counts: np.ndarray | None = field(default=None, repr=False)  # publisher only: exact counts
    cost: Any = None


def simulate_gwas(pool: int = 1000, reference: int = 1000, targets: int = 200,
                  snps: int = 20000, seed: int = 0, calibration: int | None = None
                  ) -> Aggregates:
    """Genotypes from a seeded binomial SNP model, GWAS-like sizes.

    Each SNP j has a population allele frequency f_j ~ Uniform(0.05, 0.95); a person's
    genotype is Binomial(2, f_j)/2. The group (the "pool") has ``pool`` people; the public
    reference frequencies come from ``reference`` others; ``targets`` people are attacked, half
    of them drawn from the pool; ``calibration`` further non-members (default: as many as
    the targets) calibrate the threshold.
    """
    for name, v in (("pool", pool), ("reference", reference), ("targets", targets),
                    ("snps", snps)):
        whole(v, name, 2, example=1000)
    cal = targets if calibration is None else calibration
    rng = np.random.default_rng(seed)  # a simulated population, not privacy noise
    f = rng.uniform(0.05, 0.95, size=snps)
    members = targets // 2
    outsiders = targets - members

    f32 = f.astype(np.float32)

    def people(n: int) -> np.ndarray:
        # Binomial(2, f) as two Bernoulli(f) draws (same law, a fraction of the time)
        out = np.empty((n, snps), dtype=np.int8)
        for start in range(0, n, 256):
            k = min(256, n - start)
            out[start:start + k] = (rng.random((k, snps), dtype=np.float32) < f32)
            out[start:start + k] += (rng.random((k, snps), dtype=np.float32) < f32)
        return out

    group = people(pool)
    counts = group.sum(axis=0, dtype=np.int64)
    ref = people(reference).mean(axis=0, dtype=np.float64) / 2
    tg = np.concatenate([group[:members], people(outsiders)]).astype(np.float64) / 2
    truth = np.concatenate([np.ones(members, bool), np.zeros(outsiders, bool)])
    calib = people(cal).astype(np.float64) / 2
    return Aggregates(counts / (2 * pool), ref, tg, calib, truth, pool, 2 * snps, 2,
                      f"allele frequencies of {pool:,} cases at {snps:,} SNPs "
                      f"(simulated, seed {seed})", counts)


def one_hot_aggregates(data: Any, group_size: int = 100, targets: int = 200, seed: int = 0,
                       columns: Sequence[str] | None = None) -> Aggregates:
    """Adult-style data: the published statistics are the group's means of every one-hot
    indicator (one per category of each column); the reference is the rest of the table.

    A random group of ``group_size`` records is "the study"; half of ``targets`` (at most the
    whole group) are its members, as many are other records; as many other records calibrate
    the threshold.
    """
    from ..anonymize.hierarchy import text_values
    from ..anonymize.search import as_table

    table = as_table(data)
    cols = list(columns or table.column_names)
    n = table.num_rows
    if not 2 <= group_size < n - 2 * targets:
        raise InvalidParameterError(f"a group of {group_size} with {targets} targets does not fit "
                                    f"in {n} records", remedy="choose a smaller group or fewer "
                                                              "targets")
    rng = np.random.default_rng(seed)  # which records form the group: part of the simulation
    members = min(targets // 2, group_size)
    blocks = []
    for c in cols:
        texts = np.array(["" if v is None else v for v in text_values(table.column(c))])
        cats, codes = np.unique(texts, return_inverse=True)
        onehot = np.zeros((n, len(cats)), dtype=np.int8)
        onehot[np.arange(n), codes] = 1
        blocks.append(onehot)
    X = np.concatenate(blocks, axis=1)
    X = X[:, rng.permutation(X.shape[1])]  # statistics in random order (prefixes = "first M")
    perm = rng.permutation(n)
    group = perm[:group_size]
    outsiders = perm[group_size:group_size + members]
    calib = perm[group_size + members:group_size + 2 * members]
    rest = perm[group_size:]
    counts = X[group].sum(axis=0, dtype=np.int64)
    tg = np.concatenate([X[group[:members]], X[outsiders]]).astype(np.float64)
    truth = np.concatenate([np.ones(members, bool), np.zeros(len(outsiders), bool)])
    return Aggregates(counts / group_size, X[rest].mean(axis=0, dtype=np.float64), tg,
                      X[calib].astype(np.float64), truth, group_size, len(cols), 1,
                      f"means of {X.shape[1]} one-hot indicators of a group of {group_size}",
                      counts)


def dp_aggregates(agg: Aggregates, epsilon: Any) -> Aggregates:
    """The ε-DP counterpart: the group's count vector released with the vector Laplace
    mechanism (L1 sensitivity = ``agg.sensitivity``), divided by the public group size."""
    if agg.counts is None:
        raise InvalidParameterError("these aggregates carry no exact counts to release with DP",
                                    remedy="build them with simulate_gwas or one_hot_aggregates")
    mech = VectorLaplaceMechanism(sensitivity=agg.sensitivity, epsilon=exact(epsilon, "epsilon"))
    noisy = mech.release(agg.counts) / (agg.per_person * agg.group_size)
    return replace(agg, group=np.clip(noisy, 0.0, 1.0), counts=None, cost=mech.cost,
                   description=f"ε={float(mech.epsilon):g} DP {agg.description}")


def dp_advantage_bound(epsilon: Any) -> float:
    """The largest membership advantage (TPR − FPR) any test reaches against an ε-DP release:
    (e^ε − 1)/(e^ε + 1) (from TPR ≤ e^ε·FPR and 1 − FPR ≤ e^ε·(1 − TPR)).

    >>> round(dp_advantage_bound(1), 4)
    0.4621
    """
    e = float(np.exp(float(exact(epsilon, "epsilon"))))
    return (e - 1) / (e + 1)


def _statistics(agg: Aggregates, people: np.ndarray, m: int) -> np.ndarray:
    d = np.abs(people[:, :m] - agg.reference[:m]) - np.abs(people[:, :m] - agg.group[:m])
    mean = d.mean(axis=1)
    sd = d.std(axis=1, ddof=1) if m > 1 else np.ones(len(d))
    return mean / np.where(sd > 0, sd, 1.0) * np.sqrt(m)


def roc(scores: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """ROC curve (FPR, TPR over all thresholds) and its area, computed from scores by the
    evaluator."""
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    t = truth[order].astype(np.float64)
    pos = max(t.sum(), 1.0)
    neg = max(len(t) - t.sum(), 1.0)
    # one point per distinct threshold: tied scores enter together
    last = np.flatnonzero(np.append(s[1:] != s[:-1], True))
    tpr = np.concatenate([[0.0], np.cumsum(t)[last] / pos])
    fpr = np.concatenate([[0.0], np.cumsum(1 - t)[last] / neg])
    auc = float(np.trapezoid(tpr, fpr)) if hasattr(np, "trapezoid") else float(np.trapz(tpr, fpr))
    return fpr, tpr, auc


@dataclass(frozen=True)
class MembershipInference:
    """Homer et al.'s membership test on published frequencies (see the module docstring).

    Adversary model: sees the published group frequencies and the public reference
    frequencies, holds each target's own attribute vector (its DNA sample) and vectors of
    people known not to be in the group; it does not know who the group's members are.
    Breach: the target's membership is called correctly at the calibrated threshold (false
    positive rate ``fpr`` on the calibration set). The baseline guesses the more common answer.
    ``statistics`` is the grid of M (numbers of published statistics, prefixes) for the
    advantage curve; the reported rate uses all of them.
    """

    statistics: tuple[int, ...] = (10, 100, 1000, 10000)
    fpr: float = 0.05
    name: ClassVar[str] = "membership inference"
    adversary: ClassVar[str] = (
        "sees the published group frequencies and public reference frequencies, holds the "
        "target's own vector and vectors of known non-members; calls members by Homer's test")
    baseline_method: ClassVar[str] = "always guessing the more common answer"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fpr", share(self.fpr, "fpr", closed=False, example=0.05))
        object.__setattr__(self, "statistics", tuple(int(m) for m in self.statistics))

    def run(self, data: Aggregates, *, alpha: float = 0.05, detail: bool = False,
            epsilon: Any = None) -> Risk:
        M = len(data.group)
        grid = sorted({min(m, M) for m in self.statistics if m >= 1} | {M})
        truth = np.asarray(data.truth, dtype=bool)
        adv, aucs, acc = [], [], []
        final: dict[str, Any] = {}
        for m in grid:
            scores = _statistics(data, data.targets, m)
            null = _statistics(data, data.calibration, m)
            threshold = float(np.quantile(null, 1 - self.fpr))
            called = scores > threshold
            fpr_c, tpr_c, auc = roc(scores, truth)
            adv.append(float(np.max(tpr_c - fpr_c)))
            aucs.append(auc)
            acc.append(float(np.mean(called == truth)))
            final = {"scores": scores, "called": called, "fpr": fpr_c, "tpr": tpr_c,
                     "threshold": threshold}
        called = final["called"]
        success = called == truth
        p = float(truth.mean()) if len(truth) else 0.0
        tp = float(np.mean(called[truth])) if truth.any() else 0.0
        fp = float(np.mean(called[~truth])) if (~truth).any() else 0.0
        measures = {"statistics published": M, "advantage": adv[-1], "AUC": aucs[-1],
                    "true positive rate": tp, "false positive rate": fp,
                    "threshold": final["threshold"], "members among targets": int(truth.sum())}
        step = max(1, len(final["fpr"]) // 200)
        curves = {
            "advantage vs statistics": curve(grid, adv, xlabel="published statistics M",
                                             ylabel="advantage (max TPR − FPR)", auc=aucs,
                                             accuracy=acc),
            "ROC": curve(final["fpr"][::step], final["tpr"][::step],
                         xlabel="false positive rate", ylabel="true positive rate"),
        }
        rows = tuple({"target": i, "member": bool(truth[i]), "statistic": float(s),
                      "called member": bool(c), "breached": bool(ok)}
                     for i, (s, c, ok) in enumerate(zip(final["scores"], called, success,
                                                        strict=True))) if detail else None
        risk = Risk(self.name, self.adversary, int(success.sum()), len(truth), max(p, 1 - p),
                    self.baseline_method, alpha, data.description, measures, curves, rows,
                    data.cost)
        if epsilon is not None:
            dp = dp_aggregates(data, epsilon)
            contrast = self.run(dp, alpha=alpha, detail=detail)
            contrast = replace(contrast, measures={
                **contrast.measures, "DP bound on the advantage": dp_advantage_bound(epsilon)})
            risk = risk.with_contrast(contrast)
        return risk
