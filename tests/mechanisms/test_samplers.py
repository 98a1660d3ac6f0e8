"""Distribution tests of every sampler at its claimed scale (χ² at α = 1e-6), each with a
power check: the same test rejects a sampler whose scale is ×0.7 or ×1.3."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binomtest, chisquare

from statcurator.core.errors import InvalidParameterError
from statcurator.mechanisms import samplers
from statcurator.mechanisms.exponential import sample_exponential
from statcurator.testing.stats import chi2_gof

ALPHA = 1e-6


def dlap_pmf(scale: float):  # type: ignore[no-untyped-def]
    a = math.exp(-1 / scale)
    return lambda k: (1 - a) / (1 + a) * a ** np.abs(k)


def dgauss_pmf(sigma2: float):  # type: ignore[no-untyped-def]
    return lambda k: np.exp(-np.asarray(k, dtype=np.float64) ** 2 / (2 * sigma2))


def dlap_support(scale: float) -> tuple[int, int]:
    r = int(60 * scale) + 5
    return -r, r


def dgauss_support(sigma2: float) -> tuple[int, int]:
    r = int(40 * math.sqrt(sigma2)) + 5
    return -r, r


def check_law(draw, pmf, support, n: int) -> None:  # type: ignore[no-untyped-def]
    """The sampler at the claimed scale passes; at ×0.7 and ×1.3 it is rejected."""
    assert chi2_gof(draw(1, n), pmf, support) > ALPHA
    assert chi2_gof(draw(Fraction(7, 10), n), pmf, support) < ALPHA
    assert chi2_gof(draw(Fraction(13, 10), n), pmf, support) < ALPHA


# -- discrete Laplace -------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(10, 3), Fraction(20)])
def test_discrete_laplace_quick(scale: Fraction) -> None:
    check_law(lambda f, n: samplers.discrete_laplace(scale * f, size=n),
              dlap_pmf(float(scale)), dlap_support(float(scale)), 200_000)


@pytest.mark.slow
@pytest.mark.parametrize("scale", [Fraction(1, 10), Fraction(1), Fraction(7, 3),
                                   Fraction(10), Fraction(1000), Fraction(204800000, 3)])
def test_discrete_laplace(scale: Fraction) -> None:
    s = float(scale)
    if s > 1e5:  # check the scale on a coarser binning: (x // w) is still exact
        w = int(s // 50)
        a = math.exp(-1 / s)

        def binned_pmf(k: np.ndarray) -> np.ndarray:
            lo, hi = k * w, k * w + w - 1  # P(lo <= X <= hi) for the discrete Laplace
            def cdf(x: np.ndarray) -> np.ndarray:
                return np.where(x < 0, a ** (-x) / (1 + a), 1 - a ** (x + 1) / (1 + a))
            return cdf(hi) - cdf(lo - 1)

        check_law(lambda f, n: samplers.discrete_laplace(scale * f, size=n) // w,
                  binned_pmf, (-3000, 3000), 1_000_000)
        return
    check_law(lambda f, n: samplers.discrete_laplace(scale * f, size=n),
              dlap_pmf(s), dlap_support(s), 1_000_000)


# -- discrete Gaussian ------------------------------------------------------------------------


@pytest.mark.parametrize("sigma2", [Fraction(1), Fraction(50)])
def test_discrete_gaussian_quick(sigma2: Fraction) -> None:
    # scale ×0.7 / ×1.3 means σ ×0.7 / ×1.3, i.e. σ² ×0.49 / ×1.69
    check_law(lambda f, n: samplers.discrete_gaussian(sigma2 * f * f, size=n),
              dgauss_pmf(float(sigma2)), dgauss_support(float(sigma2)), 200_000)


@pytest.mark.slow
@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(2, 3), Fraction(9), Fraction(10**4)])
def test_discrete_gaussian(sigma2: Fraction) -> None:
    check_law(lambda f, n: samplers.discrete_gaussian(sigma2 * f * f, size=n),
              dgauss_pmf(float(sigma2)), dgauss_support(float(sigma2)), 1_000_000)


# -- Bernoulli ------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2),
                                   Fraction(7)])
def test_bernoulli_exp(gamma: Fraction) -> None:
    n = 200_000
    k = int(samplers.bernoulli_exp(gamma, size=n).sum())
    p = math.exp(-float(gamma))
    if gamma == 0:
        assert k == n
        return
    assert binomtest(k, n, p).pvalue > ALPHA
    for f in (0.7, 1.3):  # power: a wrong γ is rejected
        assert binomtest(int(samplers.bernoulli_exp(gamma * Fraction(f), size=n).sum()),
                         n, p).pvalue < ALPHA


@pytest.mark.parametrize("p", [Fraction(1, 3), Fraction(1, 2), Fraction(999, 1000),
                               Fraction(1, 10**6) * 3])
def test_bernoulli_rational(p: Fraction) -> None:
    n = 300_000
    assert binomtest(int(samplers.bernoulli(p, size=n).sum()), n, float(p)).pvalue > ALPHA
    assert samplers.bernoulli(0) is False and samplers.bernoulli(1) is True
    with pytest.raises(InvalidParameterError):
        samplers.bernoulli(Fraction(3, 2))


@pytest.mark.parametrize("n", [1, 3, 7, 1000, 2**40 + 3])
def test_uniform_int(n: int) -> None:
    draws = samplers.uniform_int(n, size=100_000)
    assert draws.min() >= 0 and draws.max() < n
    if n == 1:
        assert (draws == 0).all()
        return
    cells = min(n, 16)
    counts = np.bincount((draws.astype(object) * cells // n).astype(np.int64), minlength=cells)
    if n % cells == 0 or n > 10**6:
        assert chisquare(counts).pvalue > ALPHA
    big = samplers.uniform_int(2**70, size=3)
    assert all(0 <= int(v) < 2**70 for v in big)


# -- the exponential-mechanism sampler -------------------------------------------------------


@pytest.mark.parametrize("case", ["two", "many", "base", "fractions", "wide"])
def test_exponential_sampler(case: str) -> None:
    rng = np.random.default_rng(1)
    base = None
    coef = Fraction(1)
    if case == "two":
        scores = np.array([0.5, 0.3])
        coef = Fraction(4)
    elif case == "many":
        scores = rng.normal(0, 3, 300)
    elif case == "base":
        scores = -np.abs(np.arange(200) - 100.0)
        base = rng.exponential(1, 200) * np.where(np.arange(200) % 7 == 0, 1e6, 1.0)
        base[5] = 0.0
    elif case == "fractions":
        scores = [Fraction(1, 3), Fraction(2, 3), Fraction(-5, 7), Fraction(0)]
        base = [Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(1, 1000)]
    else:  # scores far apart: most candidates are astronomically unlikely
        scores = np.array([0.0, -1.0, -5.0, -1e6, -1e300])
    n = 200_000
    u = np.array([float(x) for x in scores])
    b = np.ones(len(u)) if base is None else np.array([float(x) for x in base])

    def probs(c: float) -> np.ndarray:
        with np.errstate(divide="ignore"):
            logw = c * (u - u.max()) + np.log(b)
        w = np.exp(logw - logw.max())
        return w / w.sum()

    def draw(f: Fraction) -> np.ndarray:
        return sample_exponential(scores, coef * f, size=n, base_measure=base)

    k = np.arange(len(u))
    assert chi2_gof(draw(Fraction(1)), lambda x: probs(float(coef))[x], (0, len(u) - 1)) > ALPHA
    if case != "wide":
        for f in (Fraction(7, 10), Fraction(13, 10)):
            assert chi2_gof(draw(f), lambda x: probs(float(coef))[x], (0, len(u) - 1)) < ALPHA
    if base is not None:
        assert not (draw(Fraction(1)) == 5).any()  # weight 0: never chosen
    assert k.size == len(u)


def test_exponential_sampler_refuses_bad_input() -> None:
    with pytest.raises(InvalidParameterError):
        sample_exponential([], 1)
    with pytest.raises(Exception, match="NaN"):
        sample_exponential([0.0, float("nan")], 1)
    with pytest.raises(InvalidParameterError):
        sample_exponential([0.0, 1.0], 1, base_measure=[1.0, -1.0])
    with pytest.raises(InvalidParameterError):
        sample_exponential([0.0, 1.0], 1, base_measure=[0.0, 0.0])
    with pytest.raises(InvalidParameterError):
        sample_exponential([0.0, 1.0], 1, base_measure=[1.0])


# -- the exact slow paths --------------------------------------------------------------------


def test_exact_fallback_paths_keep_the_law(exact_paths: None) -> None:
    n = 12_000
    assert chi2_gof(samplers.discrete_laplace(Fraction(5, 2), size=n), dlap_pmf(2.5),
                    dlap_support(2.5)) > ALPHA
    assert chi2_gof(samplers.discrete_gaussian(Fraction(3), size=n), dgauss_pmf(3.0),
                    dgauss_support(3.0)) > ALPHA
    k = int(samplers.bernoulli_exp(Fraction(3, 2), size=n).sum())
    assert binomtest(k, n, math.exp(-1.5)).pvalue > ALPHA
    draws = sample_exponential(np.array([1.0, 0.0, 2.5]), Fraction(1), size=n,
                               base_measure=np.array([0.5, 3.0, 0.25]))
    w = np.array([0.5 * math.e, 3.0, 0.25 * math.exp(2.5)])
    assert chi2_gof(draws, lambda x: (w / w.sum())[x], (0, 2)) > ALPHA


def test_reference_samplers_follow_the_same_laws() -> None:
    n = 8_000
    lap = np.array([samplers.discrete_laplace_reference(Fraction(3, 2)) for _ in range(n)])
    assert chi2_gof(lap, dlap_pmf(1.5), dlap_support(1.5)) > ALPHA
    gau = np.array([samplers.discrete_gaussian_reference(Fraction(2)) for _ in range(n)])
    assert chi2_gof(gau, dgauss_pmf(2.0), dgauss_support(2.0)) > ALPHA
    k = sum(samplers.bernoulli_exp_reference(Fraction(5, 4)) for _ in range(n))
    assert binomtest(k, n, math.exp(-1.25)).pvalue > ALPHA


def test_huge_parameters_use_exact_python_integers() -> None:
    scale = Fraction(2**60 + 1, 3)
    draws = samplers.discrete_laplace(scale, size=50)
    assert len(draws) == 50 and np.abs(draws.astype(float)).max() < 60 * float(scale)
    assert isinstance(samplers.discrete_laplace(scale), int)
    g = samplers.discrete_gaussian(Fraction(2**110), size=5)
    assert len(g) == 5
    assert samplers.bernoulli_exp(Fraction(10**40), size=10).sum() == 0


def test_sampler_arguments_are_validated() -> None:
    for bad in (0, -1, float("nan"), "1"):
        with pytest.raises(InvalidParameterError):
            samplers.discrete_laplace(bad)
        with pytest.raises(InvalidParameterError):
            samplers.discrete_gaussian(bad)
    with pytest.raises(InvalidParameterError):
        samplers.discrete_laplace(1, size=-1)
    with pytest.raises(InvalidParameterError):
        samplers.bernoulli_exp(-1)
    with pytest.raises(InvalidParameterError):
        samplers.uniform_int(0)
    assert samplers.discrete_laplace(1, size=0).shape == (0,)


def test_scalar_draws_follow_the_same_laws() -> None:
    n = 15_000
    lap = np.array([samplers.discrete_laplace(Fraction(7, 3)) for _ in range(n)])
    assert chi2_gof(lap, dlap_pmf(7 / 3), dlap_support(7 / 3)) > ALPHA
    gau = np.array([samplers.discrete_gaussian(Fraction(5, 2)) for _ in range(n)])
    assert chi2_gof(gau, dgauss_pmf(2.5), dgauss_support(2.5)) > ALPHA
    wrong = np.array([samplers.discrete_laplace(Fraction(7, 3) * Fraction(13, 10))
                      for _ in range(n)])
    assert chi2_gof(wrong, dlap_pmf(7 / 3), dlap_support(7 / 3)) < ALPHA


def test_a_scale_is_validated_whatever_was_drawn_before() -> None:
    """The validated parts of a scale are remembered for exact Fractions only: a boolean is
    refused, and a float is read as its shortest decimal, even after an equal Fraction was
    drawn (True == 1 and 0.1 == Fraction(0.1) in Python)."""
    from statcurator.mechanisms.samplers import _scale_parts, discrete_laplace

    discrete_laplace(Fraction(1))
    with pytest.raises(InvalidParameterError):
        discrete_laplace(True)
    _scale_parts(Fraction(0.1))
    assert _scale_parts(0.1) == (1, 10)
    with pytest.raises(InvalidParameterError):
        discrete_laplace(np.array([2.0, 3.0]))  # type: ignore[arg-type]


def test_describe_lists_the_parameters_whatever_was_asked_before() -> None:
    from statcurator.mechanisms import LaplaceMechanism

    m = LaplaceMechanism(sensitivity=1, epsilon=Fraction(1, 2))
    first = m.describe()
    m.sample_noise_units()
    assert m.describe().keys() == first.keys()
    assert "noise_scale" not in first
