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
