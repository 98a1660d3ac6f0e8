"""The mechanisms' contracts: calibration, privacy maps, outputs, accuracy, refusals."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from statcurator.core.errors import DataError, InvalidParameterError
from statcurator.core.measures import ZCDP, ApproxDP, PureDP
from statcurator.mechanisms import (
    MECHANISMS,
    ExponentialMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    PartitionSelection,
    RandomizedResponse,
    ReportNoisyMax,
    SparseVector,
    VectorGaussianMechanism,
    VectorLaplaceMechanism,
    epsilon_for_accuracy,
)
from statcurator.mechanisms._base import (
    array_to_grid_units,
    dgauss_tail,
    dlap_tail,
    grid_sensitivity,
    to_grid_units,
)

ALPHA = 1e-6


# -- Laplace ---------------------------------------------------------------------------------


def test_laplace_calibration_and_cost() -> None:
    m = LaplaceMechanism(sensitivity=1, epsilon=Fraction(1, 2))
    assert m.scale == 2 and m.noise_scale == 2
    assert m.cost == PureDP(Fraction(1, 2)) == m.privacy_map(m.sensitivity)
    assert m.privacy_map(0) == PureDP(0)
    # beyond the declared sensitivity the one map is group privacy, linear in d
    assert m.privacy_map(2) == PureDP(1) == m.measurement().map(2)
    with pytest.raises(InvalidParameterError):
        m.privacy_map(-1)
    real = LaplaceMechanism(sensitivity=Fraction(200000), epsilon=1, grid=Fraction(1, 2**10))
    assert real.scale == 200000 and real.grid_sensitivity == 200000 * 1024
    # a sensitivity off the grid is rounded up: the rounding is paid for
    odd = LaplaceMechanism(sensitivity=Fraction(1, 3), epsilon=1, grid=Fraction(1, 4))
    assert odd.grid_sensitivity == 2 and odd.scale == Fraction(1, 2)
    assert LaplaceMechanism(sensitivity=Fraction(1, 2), epsilon=1).scale == 1


def test_laplace_outputs() -> None:
    m = LaplaceMechanism(1, 1)
    assert isinstance(m.release(3), int)
    assert isinstance(m.release(2.6), int)
    assert isinstance(m.release(Fraction(7, 2)), int)
    g = LaplaceMechanism(1, 1, grid=Fraction(1, 8))
    out = g.release(0.3)
    assert isinstance(out, Fraction) and (out * 8).denominator == 1
    arr = g.release(np.array([0.1, 2.5, -3.0]))
    assert arr.dtype == np.float64 and np.all(arr * 8 == np.round(arr * 8))
    ints = m.release(np.array([1, 2, 3]))
    assert ints.dtype == np.int64 and ints.shape == (3,)
    assert m.release([1, 2]).shape == (2,)
    assert m.release(np.zeros((2, 3))).shape == (2, 3)
    decimal_grid = LaplaceMechanism(1, 1, grid=Fraction(1, 100))
    assert (decimal_grid.release(Fraction(1, 3)) * 100).denominator == 1
    big = LaplaceMechanism(1, 1).release(10**30)  # scalars never overflow
    assert abs(big - 10**30) < 1000


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), "3"])
def test_laplace_refuses_unclamped_data(bad: object) -> None:
    m = LaplaceMechanism(1, 1, grid=Fraction(1, 4))
    with pytest.raises(DataError):
        m.release(bad)
    if not isinstance(bad, str):
        with pytest.raises(DataError, match="clamp"):
            m.release(np.array([1.0, bad]))
    with pytest.raises(DataError, match="too large"):
        m.release(np.array([1e300]))


def test_laplace_rounds_half_up_to_the_grid() -> None:
    g = Fraction(1, 4)
    x = np.array([0.125, -0.125, 0.375, 1e-300, -1e-300, 2.0**55, -(2.0**50) - 0.125])
    units = array_to_grid_units(x, g)
    assert units.tolist() == [to_grid_units(v, g) for v in x.tolist()]
    assert units[:5].tolist() == [1, 0, 2, 0, 0]
    assert array_to_grid_units(np.array([3, -2]), Fraction(1, 2)).tolist() == [6, -4]
    assert array_to_grid_units(np.array([0.5, 1.5]), Fraction(1, 3)).tolist() == [2, 5]


def test_geometric_mechanism() -> None:
    m = GeometricMechanism(sensitivity=2, epsilon=Fraction(1, 2))
    assert m.scale == 4 and m.alpha == pytest.approx(math.exp(-0.25))
    assert isinstance(m.release(5), int)
    with pytest.raises(DataError, match="integer"):
        m.release(np.array([1.5]))
    with pytest.raises(InvalidParameterError):
        GeometricMechanism(sensitivity=Fraction(1, 2), epsilon=1)
    with pytest.raises(InvalidParameterError):
        GeometricMechanism(1, 1, grid=Fraction(1, 2))


def test_vector_laplace() -> None:
    h = VectorLaplaceMechanism(sensitivity=2, epsilon=1)
    assert h.scale == 2 and h.privacy_map(1) == PureDP(Fraction(1, 2))
    assert h.release(np.array([5, 0, 7])).dtype == np.int64
    with pytest.raises(DataError, match="off the grid"):
        h.release(np.array([0.5, 1.0]))
    rounded = VectorLaplaceMechanism(sensitivity=1, epsilon=1, grid=Fraction(1, 2), max_changed=2)
    assert rounded.grid_sensitivity == 2 + 2  # ⌊1/(1/2)⌋ + one unit per changed coordinate
    assert rounded.release(np.array([0.3, 0.6])).shape == (2,)


# -- accuracy: exact for the discrete laws ----------------------------------------------------


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(1), Fraction(10), Fraction(7, 2),
                                   Fraction(5000)])
@pytest.mark.parametrize("alpha", [Fraction(1, 20), Fraction(1, 100), Fraction(1, 10**6)])
def test_laplace_accuracy_is_the_exact_quantile(scale: Fraction, alpha: Fraction) -> None:
    m = LaplaceMechanism(1, 1 / scale)
    h = int(m.accuracy(alpha))
    a = math.exp(-1 / float(scale))
    tail = lambda k: 2 * a ** (k + 1) / (1 + a)  # noqa: E731  P(|X| > k)
    assert tail(h) <= float(alpha) * (1 + 1e-9)
    assert h == 0 or tail(h - 1) > float(alpha) * (1 - 1e-9)
    assert float(dlap_tail(scale, h)) <= float(alpha)


def test_laplace_accuracy_covers_empirically() -> None:
    m = LaplaceMechanism(1, Fraction(1, 5), grid=Fraction(1, 2))
    h = m.accuracy(0.05)
    noise = m.release(np.zeros(200_000))
    outside = int((np.abs(noise) > h).sum())
    assert binomtest(outside, 200_000, 0.05, alternative="greater").pvalue > ALPHA


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(1), Fraction(30), Fraction(10**6),
                                    Fraction(10**10)])
def test_gaussian_accuracy_is_the_exact_quantile(sigma2: Fraction) -> None:
    alpha = Fraction(1, 20)
    m = GaussianMechanism(1, 1 / (2 * sigma2))
    assert m.sigma2 == sigma2
    h = int(m.accuracy(alpha))
    assert dgauss_tail(sigma2, h) <= float(alpha)
    if float(sigma2) < 1e8:  # exact summation: h - 1 is not enough
        assert h == 0 or dgauss_tail(sigma2, h - 1) > float(alpha)
    else:  # the bound is within a hair of the normal quantile
        assert h <= math.ceil(1.96 * math.sqrt(float(sigma2)) * 1.0001)


@pytest.mark.parametrize("halfwidth", [1, 10, Fraction(5, 2), 1000])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_epsilon_for_accuracy_is_smallest_and_kept(halfwidth: object, alpha: float) -> None:
    eps = epsilon_for_accuracy(halfwidth, alpha=alpha)
    assert LaplaceMechanism(1, eps).accuracy(alpha) <= halfwidth
    unit = Fraction(10) ** (math.floor(math.log10(eps)) - 5)
    assert LaplaceMechanism(1, eps - unit).accuracy(alpha) > halfwidth  # one digit less fails
    rho = epsilon_for_accuracy(halfwidth, alpha=alpha, mechanism="gaussian")
    assert GaussianMechanism(1, rho).accuracy(alpha) <= halfwidth
    unit = Fraction(10) ** (math.floor(math.log10(rho)) - 5)
    assert GaussianMechanism(1, rho - unit).accuracy(alpha) > halfwidth


def test_epsilon_for_accuracy_on_a_grid_and_errors() -> None:
    eps = epsilon_for_accuracy(Fraction(1, 2), alpha=0.05, sensitivity=100, grid=Fraction(1, 4))
    assert LaplaceMechanism(100, eps, grid=Fraction(1, 4)).accuracy(0.05) <= 0.5
    with pytest.raises(InvalidParameterError):
        epsilon_for_accuracy(10, mechanism="cauchy")
    for bad in (0, -1, float("nan")):
        with pytest.raises(InvalidParameterError):
            epsilon_for_accuracy(bad)
    with pytest.raises(InvalidParameterError):
        epsilon_for_accuracy(10, alpha=1)


# -- Gaussian --------------------------------------------------------------------------------


def test_gaussian_calibration() -> None:
    g = GaussianMechanism(sensitivity=3, rho=Fraction(1, 2))
    assert g.sigma2 == 9 and g.cost == ZCDP(Fraction(1, 2))
    assert g.privacy_map(1) == ZCDP(Fraction(1, 18))
    assert g.scale >= 3 and g.scale - 3 < Fraction(1, 2**30)
    assert g.privacy_map(6) == ZCDP(2) == g.measurement().map(6)  # quadratic beyond Δ
    with pytest.raises(InvalidParameterError):
        g.privacy_map(float("nan"))
    assert isinstance(g.release(7), int)
    assert isinstance(GaussianMechanism(1, 1, grid=Fraction(1, 2)).release(0.2), Fraction)
    eps = g.to_approx(1e-6).epsilon
    assert ApproxDP(eps, Fraction(1, 10**6)) == g.to_approx(Fraction(1, 10**6))
    assert abs(g.noise_std - 3) < 1e-6


def test_gaussian_from_epsilon_delta_is_largest_fitting_rho() -> None:
    g = GaussianMechanism.from_epsilon_delta(1, 1, 1e-6)
    assert g.cost.to_approx(1e-6).epsilon <= 1
    assert ZCDP(g.rho * Fraction(1001, 1000)).to_approx(1e-6).epsilon > 1
    v = VectorGaussianMechanism(1, Fraction(1, 2))
    assert v.release(np.array([1, 2, 3])).shape == (3,)
    with pytest.raises(DataError):
        v.release(np.array([0.5]))


# -- selection mechanisms --------------------------------------------------------------------


def test_exponential_mechanism_textbook_example() -> None:
    # choosing the attribute most correlated with diabetes: "gender" scores 0.5, "age" 0.3
    eps, delta_u = Fraction(1), Fraction(1)
    em = ExponentialMechanism(epsilon=eps, sensitivity=delta_u)
    w = np.exp(np.array([0.5, 0.3]) * float(eps) / (2 * float(delta_u)))
    assert em.probabilities([0.5, 0.3]) == pytest.approx(w / w.sum())
    draws = em.sample(["0.5", "0.3"] and [0.5, 0.3], 100_000)
    assert binomtest(int((draws == 0).sum()), 100_000, w[0] / w.sum()).pvalue > ALPHA
    assert em.cost == PureDP(1) and em.privacy_map(Fraction(1, 2)) == PureDP(Fraction(1, 2))
    assert em.release([0.5, 0.3]) in (0, 1)
    assert em.accuracy(0.05, candidates=10) == pytest.approx(2 * math.log(200))


def test_report_noisy_max_and_sparse_vector() -> None:
    rnm = ReportNoisyMax(epsilon=1, sensitivity=1)
    assert rnm.noise_scale == 2 and rnm.release([0, 1000, 3]) == 1
    # equal scores: ties (probability Σ p(k)²) go to the smaller index
    a = math.exp(-1 / 2)
    p_tie = ((1 - a) / (1 + a)) ** 2 * (1 + a * a) / (1 - a * a)
    picks = int(rnm.sample([5, 5], 100_000).sum())
    assert binomtest(picks, 100_000, (1 - p_tie) / 2).pvalue > ALPHA
    sv = SparseVector(epsilon=1, sensitivity=1, threshold=50)
    assert sv.release([0, 0, 1000]) == 2 and sv.release([0, 0, 0]) is None
    assert sv.cost == PureDP(1)
    assert sv.accuracy(0.05, queries=10) > sv.accuracy(0.05, queries=1)


def test_randomized_response_probabilities() -> None:
    assert RandomizedResponse(0.1).p_truthful == pytest.approx(0.525, abs=5e-4)
    assert RandomizedResponse(0.01).p_truthful == pytest.approx(0.502, abs=5e-4)
    rr = RandomizedResponse(epsilon=Fraction(1, 10))
    lo, hi = rr.p_truthful_bounds()
    assert lo <= Fraction(math.exp(0.1) / (1 + math.exp(0.1))) * (1 + Fraction(1, 10**12))
    assert hi - lo < Fraction(1, 2**100)
    n = 200_000
    truthful = int((rr.sample_indices(1, n) == 1).sum())
    assert binomtest(truthful, n, rr.p_truthful).pvalue > ALPHA
    k3 = RandomizedResponse(epsilon=1, categories=["a", "b", "c"])
    assert k3.p_truthful == pytest.approx(math.e / (math.e + 2))
    reports = k3.release(["a"] * 50_000)
    assert set(reports) <= {"a", "b", "c"}
    est = k3.estimate_counts(reports)
    assert est[0] == pytest.approx(50_000, rel=0.03) and abs(est[1]) < 2_000
    assert isinstance(RandomizedResponse(1).release(True), bool)
    with pytest.raises(DataError, match="not one of the declared"):
        k3.release("d")
    with pytest.raises(InvalidParameterError):
        RandomizedResponse(1, categories=["a"])
    with pytest.raises(InvalidParameterError):
        RandomizedResponse(1, categories=["a", "a"])


def test_partition_selection_threshold() -> None:
    ps = PartitionSelection(epsilon=1, delta=Fraction(1, 10**6))
    assert ps.threshold == 15
    a = math.exp(-1)
    assert a ** (ps.threshold - 1) / (1 + a) <= 1e-6 < a ** (ps.threshold - 2) / (1 + a)
    assert ps.keep_probability(1) <= 1e-6
    assert ps.cost == ApproxDP(1, Fraction(1, 10**6))
    wide = PartitionSelection(epsilon=1, delta=Fraction(1, 10**6), max_partitions=4)
    assert wide.noise_scale == 4
    assert 4 * wide.keep_probability(1) <= float(wide.delta_per_release) <= 1e-6
    keep, noisy = ps.release(np.array([0, 1, 10_000]))
    assert keep.tolist() == [False, False, True] and noisy.dtype == np.int64
    with pytest.raises(DataError):
        ps.release(np.array([-1]))
    with pytest.raises(DataError):
        ps.release(np.array([0.5]))
    with pytest.raises(InvalidParameterError):
        PartitionSelection(1, 0)
    assert ps.privacy_map(2) == ps.cost.group(2)


# -- every mechanism: a frozen value that refuses invalid parameters -------------------------


def _instances() -> list[object]:
    return [LaplaceMechanism(1, 1), GeometricMechanism(1, 1), VectorLaplaceMechanism(1, 1),
            GaussianMechanism(1, 1), VectorGaussianMechanism(1, 1), ExponentialMechanism(1),
            ReportNoisyMax(1), SparseVector(1, 1, 0), RandomizedResponse(1),
            PartitionSelection(1, Fraction(1, 10**6))]


def test_every_mechanism_is_frozen_and_described() -> None:
    seen = set()
    for m in _instances():
        assert dataclasses.is_dataclass(m)
        field = dataclasses.fields(m)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(m, field, 2)
        d = m.describe()  # type: ignore[attr-defined]
        assert d["mechanism"] == m.name and "cost" in d  # type: ignore[attr-defined]
        seen.add(type(m))
    assert seen == set(MECHANISMS.values())


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "1", 5e-324, True])
def test_invalid_privacy_parameters_are_refused(bad: object) -> None:
    for make in (lambda: LaplaceMechanism(1, bad), lambda: GaussianMechanism(1, bad),
                 lambda: ExponentialMechanism(bad), lambda: RandomizedResponse(bad),
                 lambda: PartitionSelection(bad, 1e-6), lambda: LaplaceMechanism(bad, 1),
                 lambda: SparseVector(bad, 1, 0), lambda: ReportNoisyMax(bad)):
        with pytest.raises(InvalidParameterError):
            make()
    with pytest.raises(InvalidParameterError):
        PartitionSelection(1, 1)


def test_mechanisms_chain_as_measurements() -> None:
    from statcurator.core.measurement import make_clamped_sum, make_count, make_histogram
    from statcurator.core.relations import AddRemove, ChangeOne, PersonLevel

    count = make_count(PersonLevel(0, max_rows=3)) >> LaplaceMechanism(3, 1).measurement()
    assert count.cost == PureDP(1) and count.map(2) == PureDP(2)
    assert isinstance(count([("a", 1), ("a", 2), ("b", 3)]), int)
    total = make_clamped_sum(0, 10, AddRemove()) >> GaussianMechanism(10, Fraction(1, 2)).measurement()
    assert total.cost == ZCDP(Fraction(1, 2)) and total.map(2) == ZCDP(2)
    hist = make_histogram(["Y", "N"], ChangeOne()) >> VectorLaplaceMechanism(2, 1).measurement()
    assert hist.cost == PureDP(1)
    assert hist(["Y", "N", "N"]).shape == (2,)


# -- the grid: rounding is accounted for in the sensitivity ------------------------------------

_finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_subnormal=True)
_grids = st.sampled_from([Fraction(1), Fraction(1, 2**10), Fraction(4), Fraction(1, 3),
                          Fraction(1, 100)])


@settings(max_examples=400, deadline=None)
@given(_finite, _finite, _grids)
def test_grid_rounding_moves_neighbours_at_most_the_grid_sensitivity(x: float, y: float,
                                                                     g: Fraction) -> None:
    d = abs(Fraction(x) - Fraction(y))
    ux, uy = to_grid_units(x, g), to_grid_units(y, g)
    assert abs(ux - uy) <= (grid_sensitivity(d, g) if d else 0)
    # the vectorized rounding agrees with the exact one
    assert array_to_grid_units(np.array([x, y]), g).tolist() == [ux, uy]
    # and the released value is within half a step of the input
    assert abs(ux * g - Fraction(x)) <= g / 2


# -- one privacy map per mechanism, reused by its Measurement view (issue 14) -----------------

@pytest.mark.parametrize("mechanism", [
    LaplaceMechanism(sensitivity=3, epsilon=Fraction(1, 2), grid=Fraction(1, 4)),
    VectorLaplaceMechanism(sensitivity=2, epsilon=1),
    GaussianMechanism(sensitivity=3, rho=Fraction(1, 2)),
    ExponentialMechanism(epsilon=1, sensitivity=2),
    PartitionSelection(epsilon=1, delta=Fraction(1, 10**6)),
], ids=lambda m: m.name)
@pytest.mark.parametrize("d", [0, Fraction(1, 3), 1, 2, 5])
def test_the_measurement_view_uses_the_one_privacy_map(mechanism, d) -> None:
    if isinstance(mechanism, PartitionSelection) and Fraction(d).denominator != 1:
        return  # distances in privacy units are whole
    assert mechanism.measurement().map(d) == mechanism.privacy_map(d)
    assert mechanism.measurement().output_measure is type(mechanism.cost)
