"""Empirical DP tests of every mechanism on neighbouring inputs, and of broken mutants.

Each real mechanism must pass :func:`check_dp` (a false failure has probability <= 1e-6) and
each deliberately broken one — ε claimed half of the real one, sensitivity halved, clamp
removed, a threshold without δ — must fail.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from statcurator.core.aggregates import clamped_sum, histogram
from statcurator.mechanisms import (
    ExponentialMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    PartitionSelection,
    RandomizedResponse,
    ReportNoisyMax,
    SparseVector,
    VectorLaplaceMechanism,
)
from statcurator.testing.dp import check_dp

pytestmark = pytest.mark.slow

TRIALS = 200_000


def expect(passes: bool, s1, s2, eps, delta=0, trials=TRIALS):  # type: ignore[no-untyped-def]
    res = check_dp(s1, s2, eps, delta, trials=trials)
    assert res.passed is passes, str(res)
    return res


def _diabetes(textbook: Path) -> tuple[int, int]:
    def count(name: str) -> int:
        with (textbook / name).open() as f:
            return sum(r["Diabetes"] == "Y" for r in csv.DictReader(f, delimiter=";"))

    return count("diabetes.csv"), count("diabetes_neighbour.csv")


# -- Laplace / geometric ----------------------------------------------------------------------


def test_laplace_count_on_the_diabetes_neighbours(textbook: Path) -> None:
    c1, c2 = _diabetes(textbook)
    assert (c1, c2) == (2, 3)
    m = LaplaceMechanism(sensitivity=1, epsilon=1)
    expect(True, lambda n: m.release(np.full(n, c1)), lambda n: m.release(np.full(n, c2)), 1)
    # mutant: the mechanism really spends ε = 2 while claiming 1
    bad = LaplaceMechanism(sensitivity=1, epsilon=2)
    expect(False, lambda n: bad.release(np.full(n, c1)), lambda n: bad.release(np.full(n, c2)), 1)


def test_exact_count_fails_for_every_epsilon(textbook: Path) -> None:
    c1, c2 = _diabetes(textbook)
    exact1, exact2 = (lambda n: np.full(n, c1)), (lambda n: np.full(n, c2))
    for eps in (1, 2, 5):
        res = expect(False, exact1, exact2, eps)
        assert res.observed_ratio == float("inf")
    # whatever ε, the ratio is infinite; the sample size only limits which ε a finite test
    # can reject (about ln(n/15) here)
    assert check_dp(exact1, exact2, 50, trials=20_000).observed_ratio == float("inf")


def test_geometric_mechanism() -> None:
    m = GeometricMechanism(sensitivity=2, epsilon=Fraction(1, 2))
    expect(True, lambda n: m.release(np.full(n, 10)), lambda n: m.release(np.full(n, 12)),
           Fraction(1, 2))
    # mutant: sensitivity halved (declares 1, the query moves by 2)
    bad = GeometricMechanism(sensitivity=1, epsilon=Fraction(1, 2))
    expect(False, lambda n: bad.release(np.full(n, 10)), lambda n: bad.release(np.full(n, 12)),
           Fraction(1, 2))


def test_clamped_sum_on_a_grid() -> None:
    incomes = np.array([30000.5, 42000.25, 51000.0, 0.1])
    outlier = np.append(incomes, 1e6)
    lo, hi = 0, 100_000
    m = LaplaceMechanism(sensitivity=hi, epsilon=1, grid=Fraction(1, 16))

    def on(data: np.ndarray, clamp: bool = True):  # type: ignore[no-untyped-def]
        value = float(clamped_sum(data, lo, hi)) if clamp else float(data.sum())
        return lambda n: m.release(np.full(n, value))

    expect(True, on(incomes), on(outlier), 1)
    expect(False, on(incomes, clamp=False), on(outlier, clamp=False), 1)  # clamp removed
    half = LaplaceMechanism(sensitivity=hi // 2, epsilon=1, grid=Fraction(1, 16))
    expect(False, lambda n: half.release(np.full(n, float(clamped_sum(incomes, lo, hi)))),
           lambda n: half.release(np.full(n, float(clamped_sum(outlier, lo, hi)))), 1)


def test_histogram_with_bounded_neighbours(textbook: Path) -> None:
    def hist(name: str) -> np.ndarray:
        with (textbook / name).open() as f:
            return histogram([r["Diabetes"] for r in csv.DictReader(f, delimiter=";")], ["Y", "N"])

    h1, h2 = hist("diabetes.csv"), hist("diabetes_neighbour.csv")
    assert h1.tolist() == [2, 2] and h2.tolist() == [3, 1]
    m = VectorLaplaceMechanism(sensitivity=2, epsilon=1)  # change-one: L1 sensitivity 2
    expect(True, lambda n: m.release(np.tile(h1, (n, 1))), lambda n: m.release(np.tile(h2, (n, 1))), 1)
    bad = VectorLaplaceMechanism(sensitivity=1, epsilon=1)  # the add/remove value, misused
    expect(False, lambda n: bad.release(np.tile(h1, (n, 1))),
           lambda n: bad.release(np.tile(h2, (n, 1))), 1)


# -- Gaussian (ρ-zCDP, tested as the (ε, δ) it converts to) ----------------------------------


def test_gaussian_mechanism() -> None:
    g = GaussianMechanism(sensitivity=2, rho=Fraction(1, 8))
    eps = g.to_approx(Fraction(1, 10**6)).epsilon
    zeros = lambda n: np.zeros(n, dtype=np.int64)  # noqa: E731
    twos = lambda n: np.full(n, 2, dtype=np.int64)  # noqa: E731  a query of sensitivity 2
    expect(True, lambda n: g.release(zeros(n)), lambda n: g.release(twos(n)), eps, 1e-6)
    # mutant: sensitivity halved (declares 1: σ is halved, ρ is really 4× larger)
    bad = GaussianMechanism(sensitivity=1, rho=Fraction(1, 8))
    expect(False, lambda n: bad.release(zeros(n)), lambda n: bad.release(twos(n)), eps, 1e-6,
           trials=1_000_000)


# -- selection mechanisms --------------------------------------------------------------------


def test_exponential_mechanism_worst_case_neighbours() -> None:
    k = 30  # one score up by Δ, all the others down by Δ: the ratio approaches e^ε
    u1, u2 = [1.0] + [0.0] * (k - 1), [0.0] + [1.0] * (k - 1)
    em = ExponentialMechanism(epsilon=1, sensitivity=1)
    expect(True, lambda n: em.sample(u1, n), lambda n: em.sample(u2, n), 1)
    bad = ExponentialMechanism(epsilon=1, sensitivity=1, monotonic=True)  # ε/Δ on non-monotone
    expect(False, lambda n: bad.sample(u1, n), lambda n: bad.sample(u2, n), 1)


def test_exponential_mechanism_with_a_base_measure() -> None:
    # a DP median over intervals: the scores are minus the rank distance, widths the base
    widths = np.array([5.0, 1.0, 0.5, 2.0, 40.0])
    ranks1 = -np.abs(np.arange(5) - 2.0)
    ranks2 = -np.abs(np.arange(5) - 3.0)  # one row added above: every score moves by <= 1
    em = ExponentialMechanism(epsilon=1, sensitivity=1)
    expect(True, lambda n: em.sample(ranks1, n, widths), lambda n: em.sample(ranks2, n, widths), 1)
    bad = ExponentialMechanism(epsilon=2, sensitivity=1)
    expect(False, lambda n: bad.sample(ranks1, n, widths),
           lambda n: bad.sample(ranks2, n, widths), 1)


def test_report_noisy_max() -> None:
    v1, v2 = [2] + [0] * 5, [1] * 6
    m = ReportNoisyMax(epsilon=1, sensitivity=1)
    expect(True, lambda n: m.sample(v1, n), lambda n: m.sample(v2, n), 1)
    bad = ReportNoisyMax(epsilon=1, sensitivity=1, monotonic=True)
    expect(False, lambda n: bad.sample(v1, n), lambda n: bad.sample(v2, n), 1)


def test_sparse_vector() -> None:
    q1, q2 = [0, 0, 0, 0, 1], [1, 1, 1, 1, 0]
    sv = SparseVector(epsilon=1, sensitivity=1, threshold=2)
    expect(True, lambda n: sv.sample(q1, n), lambda n: sv.sample(q2, n), 1)
    bad = SparseVector(epsilon=1, sensitivity=1, threshold=2, monotonic=True)
    expect(False, lambda n: bad.sample(q1, n), lambda n: bad.sample(q2, n), 1)


# -- randomized response ---------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 5])
def test_randomized_response(k: int) -> None:
    rr = RandomizedResponse(epsilon=1, categories=k)
    expect(True, lambda n: rr.sample_indices(1, n), lambda n: rr.sample_indices(0, n), 1)
    bad = RandomizedResponse(epsilon=2, categories=k)
    expect(False, lambda n: bad.sample_indices(1, n), lambda n: bad.sample_indices(0, n), 1)


# -- partition selection ---------------------------------------------------------------------


@dataclass(frozen=True)
class _NoDeltaPartitions(PartitionSelection):
    """Mutant: keeps any key whose noisy count is positive (δ never charged)."""

    @property
    def threshold(self) -> int:
        return 1


def test_partition_selection() -> None:
    ps = PartitionSelection(epsilon=1, delta=Fraction(1, 10**6))
    ones = lambda n: np.ones(n, dtype=np.int64)  # noqa: E731
    absent = lambda n: np.zeros(n, dtype=bool)  # noqa: E731  the key does not exist in D2
    expect(True, lambda n: ps.release(ones(n))[0], absent, 1, 1e-6)
    bad = _NoDeltaPartitions(epsilon=1, delta=Fraction(1, 10**6))
    expect(False, lambda n: bad.release(ones(n))[0], absent, 1, 1e-6)
    # the released noisy count of a key present in both is ε-DP
    expect(True, lambda n: ps.release(np.full(n, 40))[1], lambda n: ps.release(np.full(n, 41))[1], 1)
