"""The scalar release's integer path (binding._noisy_scalar) against the general path
(the mechanism's own release of the clamped value): equal, draw for draw."""

from __future__ import annotations

import warnings
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import statcurator as sc
from statcurator.mechanisms import rng
from statcurator.query import binding

QUERIES = ["SELECT COUNT(*) AS n FROM adult", "SELECT SUM(age) AS s FROM adult",
           "SELECT AVG(age) AS a FROM adult", "SELECT VARIANCE(age) AS v FROM adult",
           "SELECT SUM(age / 3) AS s FROM adult",
           "SELECT SUM(age * 100000000000) AS s FROM adult"]


@pytest.fixture(scope="module")
def bound_queries():
    cur = sc.Curator()
    cur.register("adult", sc.datasets.adult())
    out = []
    for q in QUERIES:
        out.append(cur.sql(q).bind(Fraction(1, 3)))
        out.append(cur.sql(q).bind(rho=Fraction(1, 8)))  # zCDP: the Gaussian mechanism
    return out


@settings(max_examples=300, deadline=None)
@given(st.data(), st.integers(-(2**70), 2**70), st.integers(0, 2**32))
def test_the_integer_path_is_the_mechanisms_release(bound_queries, data, raw, seed):
    b = data.draw(st.sampled_from(bound_queries))
    i = data.draw(st.integers(0, len(b.measures) - 1))
    obj, m = b.mechanisms[i], b.measures[i]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rng.seeded(seed):
            fast = binding._noisy_scalar(obj, raw, m)
        with rng.seeded(seed):
            slow = binding._noisy_scalar_generic(obj, raw, m)
    assert fast == slow and type(fast) is type(slow)


def test_the_integer_path_is_taken_for_counts_and_centred_sums(bound_queries, monkeypatch):
    """Control: the test above compares two paths only if the fast one runs."""
    taken = []
    monkeypatch.setattr(binding, "_noisy_scalar_generic",
                        lambda *a: taken.append(a) or Fraction(0))
    for b in bound_queries[:6]:
        for obj, m in zip(b.mechanisms, b.measures, strict=True):
            binding._noisy_scalar(obj, 10, m)
    assert taken == []


# -- a few grouped counts: binding._noisy's integer path for small vectors ---------------------

GROUPED = ["SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex",
           "SELECT race, COUNT(*) AS n FROM adult GROUP BY race",
           "SELECT education, COUNT(*) AS n FROM adult GROUP BY education"]


@pytest.fixture(scope="module")
def grouped_counts():
    cur = sc.Curator()
    cur.register("adult", sc.datasets.adult())
    out = []
    for q in GROUPED:
        for eps in (Fraction(1, 3), Fraction(10**6), Fraction(1, 10**9)):
            b = cur.sql(q).bind(eps)
            out += [(obj, m) for obj, m in zip(b.mechanisms, b.measures, strict=True)]
    return out


def _general(obj, raw, m, seed):
    """binding._noisy with the small-vector path switched off."""
    small = binding._SMALL_VECTOR
    binding._SMALL_VECTOR = -1
    try:
        with rng.seeded(seed):
            return binding._noisy(obj, raw, m, True, 1)
    finally:
        binding._SMALL_VECTOR = small


@settings(max_examples=300, deadline=None)
@given(st.data(), st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=70),
       st.integers(0, 2**32))
def test_small_grouped_counts_are_the_mechanisms_release(grouped_counts, data, raw, seed):
    obj, m = data.draw(st.sampled_from(grouped_counts))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rng.seeded(seed):
            fast = binding._noisy(obj, raw, m, True, 1)
        slow = _general(obj, raw, m, seed)
    assert fast == slow
    assert all(type(v) is int for v in fast[0]) and all(type(v) is int for v in slow[0])


def test_the_small_vector_path_is_taken_for_grouped_counts(grouped_counts, monkeypatch):
    """Control: the test above compares two paths only if the fast one runs (the general
    path goes through the mechanism's own release, here made to fail)."""
    from statcurator.mechanisms.laplace import VectorLaplaceMechanism

    def refuse(self, x):
        raise AssertionError("the general path ran")

    monkeypatch.setattr(VectorLaplaceMechanism, "release", refuse)
    for obj, m in grouped_counts:
        assert len(binding._noisy(obj, [5, 7, 2**65], m, True, 1)[0]) == 3
    with pytest.raises(AssertionError, match="general path"):  # 65 groups: numpy's path
        binding._noisy(grouped_counts[0][0], [1] * 65, grouped_counts[0][1], True, 1)
