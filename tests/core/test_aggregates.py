"""Clamped aggregates: declared sensitivities bound |f(D) - f(D')| for random neighbours,
including float sums over extreme bounds, NaN and ±∞ in the data; sums never overflow."""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from statcurator.core.aggregates import (
    bound_contributions,
    clamp,
    clamped_count,
    clamped_sum,
    count_sensitivity,
    exact_sum,
    histogram,
    histogram_sensitivity,
    sum_sensitivity,
)
from statcurator.core.errors import DataError, InvalidParameterError
from statcurator.core.relations import AddRemove, ChangeOne, L1Distance, PersonLevel

BIG = sys.float_info.max

# data: any float, including the extremes, NaN, ±∞, subnormals and -0.0
values = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
datasets = st.lists(values, max_size=40)
# public bounds: extreme ones included
bound_values = st.one_of(st.floats(-BIG, BIG), st.sampled_from([-BIG, BIG, 0.0, -1e308, 1e308,
                                                                5e-324, -5e-324]))


@st.composite
def bounds(draw: st.DrawFn) -> tuple[float, float]:
    a, b = draw(bound_values), draw(bound_values)
    return (a, b) if a <= b else (b, a)


@st.composite
def neighbours(draw: st.DrawFn, kind: str) -> tuple[list[float], list[float]]:
    d = draw(datasets)
    if kind == "unbounded":
        x = draw(values)
        if d and draw(st.booleans()):
            i = draw(st.integers(0, len(d) - 1))
            return d, d[:i] + d[i + 1:]
        return d, d + [x]
    assume(d)
    i = draw(st.integers(0, len(d) - 1))
    changed = list(d)
    changed[i] = draw(values)
    return d, changed


NAN_POLICIES = ["lower", "upper", "mid"]


def _policy(p: str, lo: float, hi: float) -> object:
    return (Fraction(lo) + Fraction(hi)) / 2 if p == "mid" else p


@settings(max_examples=300, deadline=None)
@given(neighbours("unbounded"), bounds(), st.sampled_from(NAN_POLICIES))
def test_sum_sensitivity_add_remove(pair: tuple, b: tuple, nan: str) -> None:
    d1, d2 = pair
    lo, hi = b
    pol = _policy(nan, lo, hi)
    diff = abs(clamped_sum(d1, lo, hi, nan=pol) - clamped_sum(d2, lo, hi, nan=pol))
    assert diff <= sum_sensitivity(lo, hi, AddRemove())
    assert diff <= sum_sensitivity(lo, hi, "unbounded")


@settings(max_examples=300, deadline=None)
@given(neighbours("bounded"), bounds(), st.sampled_from(NAN_POLICIES))
def test_sum_sensitivity_change_one(pair: tuple, b: tuple, nan: str) -> None:
    d1, d2 = pair
    lo, hi = b
    pol = _policy(nan, lo, hi)
    diff = abs(clamped_sum(d1, lo, hi, nan=pol) - clamped_sum(d2, lo, hi, nan=pol))
    assert diff <= sum_sensitivity(lo, hi, ChangeOne())
    assert ChangeOne().distance(d1, d2) <= 1 or any(map(math.isnan, d1 + d2))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), values), max_size=30), bounds(),
       st.integers(1, 3), st.integers(0, 4))
def test_sum_sensitivity_per_person(rows: list, b: tuple, m: int, victim: int) -> None:
    lo, hi = b
    keep = bound_contributions([r[0] for r in rows], m)
    kept = [r for r, k in zip(rows, keep, strict=True) if k]
    without = [r for r in kept if r[0] != victim]  # the victim, with all their rows, removed
    s1 = clamped_sum([v for _, v in kept], lo, hi, nan="lower")
    s2 = clamped_sum([v for _, v in without], lo, hi, nan="lower")
    assert abs(s1 - s2) <= sum_sensitivity(lo, hi, PersonLevel(key=0, max_rows=m))


@given(neighbours("unbounded"))
def test_count_and_histogram_sensitivities(pair: tuple) -> None:
    d1, d2 = pair
    assert abs(clamped_count(d1) - clamped_count(d2)) <= count_sensitivity("unbounded")
    cats = [0.0, 1.0, float("inf")]
    h1, h2 = histogram(d1, cats), histogram(d2, cats)
    assert L1Distance().distance(h1, h2) <= histogram_sensitivity("unbounded")


@given(neighbours("bounded"))
def test_histogram_sensitivity_change_one(pair: tuple) -> None:
    d1, d2 = pair
    cats = [0.0, 1.0, -1.0]
    assert clamped_count(d1) == clamped_count(d2)  # the size is public: sensitivity 0
    assert count_sensitivity("bounded") == 0
    assert L1Distance().distance(histogram(d1, cats), histogram(d2, cats)) <= \
        histogram_sensitivity("bounded") == 2


@settings(max_examples=200)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True),
                max_size=60))
def test_exact_sum_is_exact(xs: list[float]) -> None:
    assert exact_sum(np.array(xs, dtype=np.float64)) == sum(map(Fraction, xs), Fraction(0))


def test_sums_never_overflow() -> None:
    data = np.full(100_000, BIG)
    total = clamped_sum(data, -BIG, BIG)
    assert total == 100_000 * Fraction(BIG)
    with np.errstate(over="ignore"):  # the float sum's overflow is the point of the contrast
        assert math.isinf(float(np.sum(data)))  # what a float sum would have said
    ints = np.full(10, 2**62, dtype=np.int64)
    assert clamped_sum(ints, 0, 2**63) == 10 * 2**62
    assert exact_sum(np.array([2**64 - 1, 1], dtype=np.uint64)) == 2**64


def test_clamp_handles_infinities_and_nan_policies() -> None:
    out = clamp([float("-inf"), float("inf"), 3.0], -1, 1)
    assert out.tolist() == [-1.0, 1.0, 1.0]
    with pytest.raises(DataError, match="missing"):
        clamp([float("nan")], 0, 1)
    assert clamp([float("nan")], 0, 1, nan="upper").tolist() == [1.0]
    with pytest.raises(InvalidParameterError, match="outside the bounds"):
        clamp([float("nan")], 0, 1, nan=2)
    with pytest.raises(InvalidParameterError, match="reversed"):
        clamp([1.0], 1, 0)
    with pytest.raises(InvalidParameterError):
        clamp([1.0], float("nan"), 1)


def test_clamp_to_bounds_that_are_not_floats_stays_inside() -> None:
    lo, hi = Fraction(1, 3), Fraction(2, 3)
    out = clamp([0.0, 1.0], lo, hi)
    assert Fraction(out[0]) >= lo and Fraction(out[1]) <= hi
    assert clamped_sum([0.0, 1.0], lo, hi) <= 2 * hi


def test_integer_sums_are_clamped_exactly() -> None:
    assert clamped_sum(np.array([-5, 3, 100]), 0, 10) == 13
    assert clamped_sum(np.array([1, 2], dtype=np.uint64), Fraction(1, 2), Fraction(3, 2)) == \
        Fraction(5, 2)


def test_bound_contributions_is_stable() -> None:
    keys = ["a", "b", "a", "a", "c", "b"]
    assert bound_contributions(keys, 1).tolist() == [True, True, False, False, True, False]
    with pytest.raises(InvalidParameterError):
        bound_contributions(keys, 0)
