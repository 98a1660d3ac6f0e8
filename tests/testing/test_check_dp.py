"""The empirical DP tester itself: a valid test (level <= α), with power, and a usable API."""

from __future__ import annotations

import math

import numpy as np
import pytest

from statcurator.testing.dp import (
    DPTestResult,
    Event,
    assert_dp,
    binomial_dp_pvalue,
    check_dp,
)

rng = np.random.default_rng(12345)  # test randomness only (the mechanisms' noise is elsewhere)


@pytest.mark.parametrize("eps,delta,p2", [(0.0, 0.0, 0.3), (1.0, 0.0, 0.05), (0.5, 0.01, 0.2),
                                          (2.0, 1e-3, 0.01)])
def test_binomial_test_has_level_alpha_at_the_boundary(eps: float, delta: float, p2: float) -> None:
    # simulate counts exactly on the null boundary p1 = e^ε·p2 + δ: p-values are super-uniform
    n, reps = 5_000, 3_000
    p1 = min(1.0, math.exp(eps) * p2 + delta)
    c1 = rng.binomial(n, p1, size=reps)
    c2 = rng.binomial(n, p2, size=reps)
    p = binomial_dp_pvalue(c1, c2, n, n, eps, delta)
    for level in (0.01, 0.05, 0.2):
        assert (p <= level).mean() <= level  # conservative (Bonferroni over two exact bounds)


def test_binomial_test_has_power() -> None:
    n = 100_000
    assert binomial_dp_pvalue(30_000, 10_000, n, n, 0.5)[0] < 1e-20
    assert binomial_dp_pvalue(30_000, 10_000, n, n, 1.2)[0] == 1.0
    assert binomial_dp_pvalue(200, 0, n, n, 1.0, 1e-6)[0] < 1e-6
    assert binomial_dp_pvalue(0, 0, n, n, 1.0)[0] == 1.0


def test_identical_mechanisms_pass_with_every_output_kind() -> None:
    def lap(n: int) -> np.ndarray:
        return np.round(rng.laplace(0, 3, size=n)).astype(np.int64)

    def vec(n: int) -> np.ndarray:
        return rng.normal(size=(n, 3))

    cats = np.array(["a", "b", "c"], dtype=object)

    def cat(n: int) -> np.ndarray:
        return cats[rng.integers(0, 3, size=n)]

    for sampler in (lap, vec, cat, lambda n: rng.normal(size=n)):
        res = check_dp(sampler, sampler, epsilon=0.0, trials=40_000)
        assert res.passed, str(res)
        assert 0 <= res.p_value <= 1 and isinstance(res.event, Event)


def test_a_violation_is_found_and_reported() -> None:
    res = check_dp(lambda n: rng.binomial(1, 0.6, size=n), lambda n: rng.binomial(1, 0.1, size=n),
                   epsilon=1.0, trials=20_000)
    assert not res.passed
    assert res.p_value < 1e-6
    assert res.observed_ratio > math.e
    assert str(res).startswith("VIOLATES")
    assert res.direction in ("D1 vs D2", "D2 vs D1")
    with pytest.raises(AssertionError, match="VIOLATES"):
        assert_dp(lambda n: rng.binomial(1, 0.6, size=n), lambda n: rng.binomial(1, 0.1, size=n),
                  epsilon=1.0, trials=20_000)


def test_violation_in_the_reverse_direction_is_found() -> None:
    res = check_dp(lambda n: rng.binomial(1, 0.1, size=n), lambda n: rng.binomial(1, 0.6, size=n),
                   epsilon=1.0, trials=20_000)
    assert not res.passed and res.direction == "D2 vs D1"


def test_delta_slack_is_honoured() -> None:
    # a rare event (probability 1e-3) only on D1: fine at δ = 1e-2, a violation at δ = 0
    def d1(n: int) -> np.ndarray:
        return (rng.random(n) < 1e-3).astype(np.int64)

    def d2(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.int64)

    assert check_dp(d1, d2, epsilon=1.0, delta=1e-2, trials=100_000).passed
    assert not check_dp(d1, d2, epsilon=1.0, delta=0.0, trials=100_000).passed


def test_custom_events() -> None:
    d1 = lambda n: rng.normal(0, 1, size=n)  # noqa: E731
    d2 = lambda n: rng.normal(3, 1, size=n)  # noqa: E731
    res = check_dp(d1, d2, epsilon=1.0, trials=20_000,
                   events=[Event("x < 0", lambda x: x < 0), ("x > 1", lambda x: x > 1),
                           lambda x: x > 2])
    assert not res.passed
    assert str(res.event) in ("x < 0", "x > 1", "<lambda>")
    with pytest.raises(TypeError):
        check_dp(d1, d2, epsilon=1.0, trials=1000, events=[3])


def test_arguments_are_checked() -> None:
    ok = lambda n: np.zeros(n)  # noqa: E731
    with pytest.raises(ValueError, match="one output per run"):
        check_dp(ok, lambda n: np.zeros(n + 1), epsilon=1, trials=1000)
    with pytest.raises(ValueError):
        check_dp(ok, ok, epsilon=float("nan"), trials=1000)
    with pytest.raises(ValueError):
        check_dp(ok, ok, epsilon=1, delta=1, trials=1000)
    assert isinstance(check_dp(ok, ok, epsilon=0.1, trials=1000), DPTestResult)
