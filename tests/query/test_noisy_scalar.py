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
           "SELECT education, COUNT(*) AS n FROM adult GROUP BY education",
           "SELECT race, SUM(age) AS s FROM adult GROUP BY race",
           "SELECT sex, AVG(age) AS a, COUNT(*) AS n FROM adult GROUP BY sex"]
#: grouped aggregates whose mechanisms must not take the small-vector path: a release grid
#: (a sum of non-integers), Gaussian noise (zCDP)
NOT_SMALL = ["SELECT race, SUM(age / 3) AS s FROM adult GROUP BY race",
             "SELECT race, AVG(age) AS a FROM adult GROUP BY race"]


def _vectors(queries, **bind):
    cur = sc.Curator()
    cur.register("adult", sc.datasets.adult())
    out = []
    for q in queries:
        for b in [cur.sql(q).bind(**{k: v for k, v in bind.items()})] if bind else [
                cur.sql(q).bind(eps) for eps in (Fraction(1, 3), Fraction(10**6),
                                                 Fraction(1, 10**9), Fraction(1, 2**60))]:
            out += [(obj, m) for obj, m in zip(b.mechanisms, b.measures, strict=True)]
    return out


@pytest.fixture(scope="module")
def grouped_counts():
    """Mechanisms that take the small-vector path: counts and integer sums (also a mean's
    count), at every scale down to ε = 2^-60, where the noise itself nears 2^63."""
    out = _vectors(GROUPED)
    assert all(binding._small_vector(obj, m) for obj, m in out if m.value_scale == 1
               and obj.grid is None)
    return [(obj, m) for obj, m in out if binding._small_vector(obj, m)]


def test_mechanisms_with_a_grid_or_gaussian_noise_take_the_general_path():
    others = _vectors(NOT_SMALL[:1]) + _vectors(NOT_SMALL, rho=Fraction(1, 8))
    assert others and not any(binding._small_vector(obj, m) for obj, m in others)


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
    assert fast == slow  # exact on both paths, also where int64 sums would wrap
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


def test_noise_near_the_int64_limit_is_added_exactly(grouped_counts):
    """At ε = 2^-60 a count's noise nears 2^63, and an aggregate clamped to 2^61 plus that
    noise leaves int64: both paths add exactly (int64 arithmetic wrapped silently once)."""
    obj, m = next((o, m) for o, m in grouped_counts if o.noise_scale == 2**60)
    raw = [2**61, -(2**61), 2**61]
    beyond = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(300):
            with rng.seeded(seed):
                fast = binding._noisy(obj, raw, m, True, 1)
            slow = _general(obj, raw, m, seed)
            assert fast == slow
            beyond += any(abs(v) >= 2**63 for v in fast[0])
    assert beyond  # the case the test is about did occur
