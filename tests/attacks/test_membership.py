"""Membership inference from published frequencies (Homer et al. 2008)."""

from __future__ import annotations

import numpy as np
import pytest

import statcurator as sc
from statcurator.attacks import (
    MembershipInference,
    dp_advantage_bound,
    one_hot_aggregates,
    simulate_gwas,
)
from statcurator.attacks.membership import roc


def test_homer_statistic_by_hand() -> None:
    # two SNPs: group frequencies (0.5, 1), reference (0.5, 0); the target is (1, 1).
    # D = (|1-0.5| - |1-0.5|, |1-0| - |1-1|) = (0, 1): mean 1/2, sd √(1/2), T = 1/2 / (√(1/2)/√2) = 1
    from statcurator.attacks.membership import Aggregates, _statistics

    agg = Aggregates(np.array([0.5, 1.0]), np.array([0.5, 0.0]), np.zeros((1, 2)),
                     np.zeros((1, 2)), np.array([True]))
    assert _statistics(agg, np.array([[1.0, 1.0]]), 2)[0] == pytest.approx(1.0)
    # the control: a person who is the reference itself scores negative
    assert _statistics(agg, np.array([[0.5, 0.0]]), 2)[0] < 0


def test_roc_handles_ties() -> None:
    # all scores equal: the only points are (0, 0) and (1, 1), whatever the order
    fpr, tpr, auc = roc(np.zeros(4), np.array([True, True, False, False]))
    assert fpr.tolist() == [0.0, 1.0] and tpr.tolist() == [0.0, 1.0] and auc == 0.5


def test_dp_bound() -> None:
    assert dp_advantage_bound(np.log(3)) == pytest.approx(0.5)


def test_the_advantage_grows_with_the_number_of_statistics() -> None:
    # seeded simulation (the design, not noise): deterministic
    data = simulate_gwas(pool=200, reference=200, targets=200, snps=5000, seed=1)
    risk = MembershipInference(statistics=(10, 100, 1000, 5000)).run(data)
    adv = risk.curves["advantage vs statistics"]["y"]
    assert adv[-1] > 0.8 and adv[0] < 0.3 and adv[-1] > adv[1]
    assert risk.rate > 0.85 and risk.baseline == 0.5
    assert risk.measures["false positive rate"] <= 0.15


@pytest.mark.slow
def test_dp_frequencies_hide_membership() -> None:
    # ε = 0.1: any test's advantage is at most (e^0.1 - 1)/(e^0.1 + 1) = 0.05 in expectation.
    # The empirical max over thresholds of TPR - FPR with 100 members and 100 others exceeds
    # its expectation by d with probability <= 2·exp(-2·d²·50) (two-sample DKW/KS bound);
    # d = 0.45 gives 3e-9, so "< 0.5" fails wrongly less than once in 10^8 runs. The release
    # without noise (the control) has an advantage above 0.8: a broken DP path would show it.
    data = simulate_gwas(pool=200, reference=200, targets=200, snps=5000, seed=2)
    risk = MembershipInference(statistics=(5000,)).run(data, epsilon=0.1)
    assert risk.measures["advantage"] > 0.8
    assert risk.contrast is not None and risk.contrast.measures["advantage"] < 0.5
    assert str(risk.contrast.cost) == "ε=0.1"


def test_adult_one_hot_means() -> None:
    agg = one_hot_aggregates(sc.datasets.adult(), group_size=20, targets=40, seed=0)
    assert agg.group.shape == agg.reference.shape and agg.sensitivity == 9
    risk = MembershipInference(statistics=(10, 50, 100, 166)).run(agg)
    # 20 people: the means carry a lot about each of them
    assert risk.measures["advantage"] >= 0.3
    assert len(risk.curves["advantage vs statistics"]["x"]) == 4
