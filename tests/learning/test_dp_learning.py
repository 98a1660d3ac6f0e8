"""Empirical DP tests of every noisy step of the learners, each with a mutant that is caught.

Every test runs :func:`check_dp` on two neighbouring datasets (D2 = D1 plus one row) with
the statistics computed by the learners' own functions and the mechanisms they build. A
correct step fails with probability at most α = 1e-6 (check_dp's level, stated at each
test); each mutant (sensitivity halved, a monotone shortcut where the score is not monotone)
violates its claimed ε by a wide margin and is rejected with p far below α.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from statcurator.estimators.learning.kmeans import (
    GRID,
    lloyd_mechanisms,
    lloyd_statistics,
)
from statcurator.estimators.learning.tree import node_mechanisms, split_scores
from statcurator.mechanisms import ExponentialMechanism, VectorLaplaceMechanism
from statcurator.testing.dp import check_dp

pytestmark = pytest.mark.slow

ALPHA = 1e-6  # the false-failure rate of every check below


def _select(mech, s1, s2, eps):  # type: ignore[no-untyped-def]
    """check_dp of a selection mechanism on the scores of two neighbouring datasets."""
    return check_dp(lambda n: mech.sample(s1, n), lambda n: mech.sample(s2, n), eps,
                    trials=100_000, alpha=ALPHA)


def _tile(mech, stat: np.ndarray):  # type: ignore[no-untyped-def]
    """n independent releases of the statistic (one row per trial)."""
    flat = np.asarray(stat).ravel()
    return lambda n: mech.release(np.tile(flat, n)).reshape(n, flat.size)


# -- ID3: the split choice --------------------------------------------------------------------

# D2 adds the row (0, 0 | class 1) to D1: attribute 0's bucket 0 is tied (one row of each
# class), so its max score rises by 1; attribute 1's bucket 0 holds two rows of class 0, so
# its score stays — the largest relative move a row can make.
X1 = np.array([[0, 0], [0, 1], [1, 0]])
Y1 = np.array([0, 1, 0])
X2 = np.vstack([X1, [[0, 0]]])
Y2 = np.append(Y1, 1)


def test_split_choice_by_max_score_is_epsilon_dp() -> None:
    # α = 1e-6
    s1 = split_scores("max", X1, Y1, [0, 1], [2, 2], 2)
    s2 = split_scores("max", X2, Y2, [0, 1], [2, 2], 2)
    assert (s2 - s1).tolist() == [1, 0]
    _, _, split = node_mechanisms("max", Fraction(1))
    res = _select(split, s1, s2, 1)
    assert res.passed, str(res)


def test_split_choice_mutant_with_halved_sensitivity_is_caught() -> None:
    # α = 1e-6: the mutant's real ε is 2, claimed 1
    s1 = split_scores("max", X1, Y1, [0, 1], [2, 2], 2)
    s2 = split_scores("max", X2, Y2, [0, 1], [2, 2], 2)
    bad = ExponentialMechanism(1, Fraction(1, 2), monotonic=True)
    res = _select(bad, s1, s2, 1)
    assert not res.passed and res.p_value < 1e-12


def test_gini_split_is_epsilon_dp_and_halved_sensitivity_is_caught() -> None:
    # α = 1e-6 for both checks. A row of class 1 in attribute 0's pure class-0 bucket of 30
    # rows lowers its Gini score by 60/31 (close to the sensitivity 2); attribute 1's bucket
    # is pure class 1, its score stays. The mutant declares sensitivity 1.
    X = np.array([[0, 0]] * 30 + [[1, 1]] * 30)
    y = np.array([0] * 30 + [1] * 30)
    Xb, yb = np.vstack([X, [[0, 1]]]), np.append(y, 1)
    s1 = split_scores("gini", X, y, [0, 1], [2, 2], 2)
    s2 = split_scores("gini", Xb, yb, [0, 1], [2, 2], 2)
    assert np.allclose(s2 - s1, [-60 / 31, 0])
    _, _, split = node_mechanisms("gini", Fraction(2))
    ok = _select(split, s1, s2, 2)
    assert ok.passed, str(ok)
    bad = ExponentialMechanism(2, 1, monotonic=True)
    res = _select(bad, s1, s2, 2)
    assert not res.passed


# -- ID3: node and leaf counts ---------------------------------------------------------------

def test_node_count_and_leaf_class_counts_are_epsilon_dp() -> None:
    # α = 1e-6. The node's count and its leaf class counts, released together at step ε'
    # each: 2ε' in all (the tree's 2ε' per level).
    step = Fraction(1, 2)
    count_m, leaf_m, _ = node_mechanisms("max", step)
    c1, c2 = np.bincount(Y1, minlength=2), np.bincount(Y2, minlength=2)

    def run(counts: np.ndarray):  # type: ignore[no-untyped-def]
        return lambda n: np.column_stack([count_m.release(np.full(n, counts.sum())),
                                          _tile(leaf_m, counts)(n)])

    res = check_dp(run(c1), run(c2), 2 * step, trials=100_000, alpha=ALPHA)
    assert res.passed, str(res)


def test_leaf_counts_mutant_with_halved_sensitivity_is_caught() -> None:
    # α = 1e-6: noise of half the scale (ε 2 spent, 1 claimed)
    bad = VectorLaplaceMechanism(1, 2)
    c1, c2 = np.bincount(Y1, minlength=2), np.bincount(Y2, minlength=2)
    res = check_dp(_tile(bad, c1), _tile(bad, c2), 1, trials=100_000, alpha=ALPHA)
    assert not res.passed


# -- k-means: one DP Lloyd step --------------------------------------------------------------

CENTRES = np.array([[0.5, 0.5], [-0.5, -0.5]])
PTS = np.array([[0.4, 0.6], [0.6, 0.2], [-0.3, -0.7], [-0.9, -0.1]])
PTS2 = np.vstack([PTS, [[1.0, 1.0]]])  # a row at the corner of the box: the largest move


def _lloyd(mechs, pts):  # type: ignore[no-untyped-def]
    counts, sums = lloyd_statistics(pts, CENTRES)
    cm, sm = mechs
    return lambda n: np.column_stack([_tile(cm, counts)(n), _tile(sm, sums)(n)])


def test_lloyd_step_counts_and_sums_are_epsilon_dp() -> None:
    # α = 1e-6
    mechs = lloyd_mechanisms([Fraction(1)] * 2, Fraction(1, 4), Fraction(3, 4))
    res = check_dp(_lloyd(mechs, PTS), _lloyd(mechs, PTS2), 1, trials=100_000, alpha=ALPHA)
    assert res.passed, str(res)


def test_lloyd_step_mutant_with_sum_sensitivity_one_is_caught() -> None:
    # α = 1e-6: the sums' L1 sensitivity is d = 2, the mutant declares 1 (real ε 7/4)
    cm, _ = lloyd_mechanisms([Fraction(1)] * 2, Fraction(1, 4), Fraction(3, 4))
    bad = VectorLaplaceMechanism(1, Fraction(3, 4), grid=GRID, max_changed=1)
    res = check_dp(_lloyd((cm, bad), PTS), _lloyd((cm, bad), PTS2), 1, trials=200_000,
                   alpha=ALPHA)
    assert not res.passed
