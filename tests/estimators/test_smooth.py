"""Smooth sensitivity: the bound is β-smooth and covers the local sensitivity (property
tests against brute force), and the mechanism's noise law is the one its proof is about."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statcurator.core.relations import AddRemove, ChangeOne
from statcurator.estimators.smooth import median_local_bounds, trimmed_mean_local_bounds
from statcurator.mechanisms.smooth import (
    SLACK,
    SmoothSensitivityMechanism,
    discrete_heavy_tailed,
    heavy_tailed_tail,
    smooth_upper_bound,
)

LO, HI = 0.0, 20.0
BETA = Fraction(1, 5)
VALUES = st.lists(st.integers(0, 20).map(float), min_size=0, max_size=9)


def _median(x: list[float]) -> float:
    s = sorted(x)
    return s[(len(s) + 1) // 2 - 1] if s else LO


def _trimmed(x: list[float], m: int) -> float:
    s = sorted(x)
    kept = s[m:len(s) - m]
    return sum(kept) / len(kept) if kept else (LO + HI) / 2


def _neighbours(x: list[float], change: bool) -> list[list[float]]:
    out = []
    cand = [LO, HI, 3.0, 7.0, 11.0, 19.0]
    for i in range(len(x)):
        rest = x[:i] + x[i + 1:]
        if change:
            out += [rest + [v] for v in cand]
        else:
            out.append(rest)
    if not change:
        out += [x + [v] for v in cand]
    return out


def _median_s(x: list[float]) -> Fraction:
    _, local, kmax = median_local_bounds(np.sort(np.array(x, dtype=float)), LO, HI)
    return smooth_upper_bound(local, BETA, HI - LO, kmax)


def _trimmed_s(x: list[float], m: int, rel: object) -> Fraction:
    local, kmax = trimmed_mean_local_bounds(np.sort(np.array(x, dtype=float)), LO, HI, m, rel)
    return smooth_upper_bound(local, BETA, HI - LO, kmax)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(VALUES, st.booleans())
def test_median_bound_is_smooth_and_covers_local_sensitivity(x: list[float],
                                                             change: bool) -> None:
    s = _median_s(x)
    factor = math.exp(float(BETA + SLACK))
    for y in _neighbours(x, change):
        assert abs(_median(y) - _median(x)) <= float(s) + 1e-9
        assert float(s) <= factor * float(_median_s(y)) + 1e-12


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(VALUES, st.booleans())
def test_trimmed_mean_bound_is_smooth_and_covers_local_sensitivity(x: list[float],
                                                                   change: bool) -> None:
    m = 2 if not change else len(x) // 5
    rel = ChangeOne() if change else AddRemove()
    s = _trimmed_s(x, m, rel)
    factor = math.exp(float(BETA + SLACK))
    for y in _neighbours(x, change):
        assert abs(_trimmed(y, m) - _trimmed(x, m)) <= float(s) + 1e-9
        assert float(s) <= factor * float(_trimmed_s(y, m, rel)) + 1e-12


def test_heavy_tailed_sampler_matches_its_law() -> None:
    # chi-square goodness of fit on |k| <= 12 plus the tail, t = 7/2; false failure 1e-6
    from scipy.stats import chi2

    t = 3.5
    n = 200_000
    x = discrete_heavy_tailed(Fraction(7, 2), n)
    ks = np.arange(-2000, 2001)
    w = 1 / (1 + (ks / t) ** 4)
    p = w / w.sum()
    centre = np.abs(ks) <= 12
    obs = np.array([(x == k).sum() for k in ks[centre]] + [(np.abs(x) > 12).sum()])
    exp = np.concatenate([p[centre], [1 - p[centre].sum()]]) * n
    stat = float(((obs - exp) ** 2 / exp).sum())
    assert stat < chi2.isf(1e-6, obs.size - 1)
    # and its tail bound is an upper bound
    assert float(heavy_tailed_tail(Fraction(7, 2), 12)) >= float((np.abs(x) > 12).mean()) * 0.9


def test_mechanism_parameters_meet_the_loss_exactly() -> None:
    for eps in (Fraction(1, 10), Fraction(1), Fraction(3)):
        m = SmoothSensitivityMechanism(eps)
        # 5β + L·α·e^β + 2u/(1-u) <= ε with the rounded constants (module docs)
        beta = m.beta + SLACK
        u = eps / (64 * Fraction(22214, 10000))
        bound = 5 * beta + Fraction(228, 100) * m.alpha * Fraction(math.exp(float(beta))) \
            + 2 * u / (1 - u)
        assert bound <= eps * (1 + Fraction(1, 10**9))
        lap = SmoothSensitivityMechanism(eps, Fraction(1, 10**6), noise="laplace")
        t = Fraction(math.log(2e6))
        b = lap.beta + SLACK
        eb = Fraction(math.exp(float(b)))
        assert b + lap.alpha * eb + (eb - 1) * t <= eps * (1 + Fraction(1, 10**9))


def _triangles(edges: set[tuple[int, int]]) -> int:
    return sum(1 for a, b in edges for c in range(7)
               if a < b < c and (a, c) in edges and (b, c) in edges)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)).filter(lambda e: e[0] < e[1]),
               max_size=12))
def test_triangle_bound_is_smooth_and_covers_local_sensitivity(edges: set) -> None:
    from statcurator.estimators.graph import triangle_smooth_bound

    def bound(es: set) -> Fraction:
        arr = np.array(sorted(es), dtype=np.int64).reshape(-1, 2)
        used = np.unique(arr) if arr.size else np.zeros(0, np.int64)
        remap = {int(v): i for i, v in enumerate(used)}
        arr = np.array([[remap[int(a)], remap[int(b)]] for a, b in arr], dtype=np.int64
                       ).reshape(-1, 2)
        return triangle_smooth_bound(arr, len(used), BETA, False)[1]

    s = bound(edges)
    factor = math.exp(float(BETA + SLACK))
    for pair in [(a, b) for a in range(7) for b in range(a + 1, 7)]:   # node 6 is new
        other = edges ^ {pair}
        assert abs(_triangles(other) - _triangles(edges)) <= float(s) + 1e-9
        assert float(s) <= factor * float(bound(other)) + 1e-12
