"""The policy mechanisms and PolicyKMeans: privacy maps, accuracy, consistency, metadata."""

from __future__ import annotations

import dataclasses
import warnings
from fractions import Fraction

import numpy as np
import pytest

from statcurator import datasets
from statcurator.core.errors import InvalidParameterError, MetadataError
from statcurator.core.measures import PureDP
from statcurator.core.policy import Policy, PolicyNeighbours
from statcurator.estimators.learning import PolicyKMeans
from statcurator.mechanisms import rng
from statcurator.mechanisms.policy import (
    CumulativeRelease,
    OrderedMechanism,
    PolicyHistogram,
    isotonic_increasing,
)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.simplefilter("ignore")  # the seeded generator warns: tests only


def test_privacy_maps_are_read_in_policy_edges() -> None:
    om = OrderedMechanism(Policy.threshold(5), 1, edges=range(1, 121))
    assert om.cost == PureDP(1) and om.privacy_map(3) == PureDP(3)
    m = om.measurement()
    assert isinstance(m.input_space, PolicyNeighbours)
    # a dataset pair 15 years apart is 3 edges apart: the measurement charges 3ε
    d = m.input_space.distance([40, 50], [55, 50])
    assert d == 3 and m.map(d) == PureDP(3)
    ph = PolicyHistogram(Policy.complete(), Fraction(1, 2), edges=[30, 60])
    assert ph.scale == 4 and ph.cost == PureDP(Fraction(1, 2))


def test_ordered_release_is_consistent_and_accurate() -> None:
    x = np.random.default_rng(0).integers(17, 91, 5000)  # data, not noise
    om = OrderedMechanism(Policy.line(), 1, edges=range(18, 91))
    true = om.cumulative(x)
    with rng.seeded(11):
        r = om.release(x)
    cum = np.array(r.cumulative)
    assert (np.diff(cum) >= 0).all() and cum.min() >= 0 and cum.max() <= r.n == 5000
    assert min(r.histogram()) >= 0 and sum(r.histogram()) == 5000
    # every cumulative count within the simultaneous 99% half-width
    assert np.abs(cum - true).max() <= om.simultaneous_accuracy(0.01) / 2
    assert r.range_count(30, 40) == cum[40 - 18] - cum[30 - 18]


def test_isotonic_never_increases_the_largest_error() -> None:
    gen = np.random.default_rng(1)  # data, not noise
    for _ in range(200):
        truth = np.sort(gen.integers(0, 50, 20))
        noisy = truth + gen.normal(0, 5, 20)
        fit = isotonic_increasing(noisy)
        assert (np.diff(fit) >= -1e-12).all()
        assert np.abs(fit - truth).max() <= np.abs(noisy - truth).max() + 1e-9


def test_cumulative_release_range_arguments() -> None:
    r = CumulativeRelease((Fraction(10),), (3,), 5)
    assert r.range_count(None, None) == 5
    with pytest.raises(InvalidParameterError):
        r.range_count(11, None)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(InvalidParameterError):
        OrderedMechanism(Policy.line(), 1, edges=[3, 2])
    with pytest.raises(InvalidParameterError):
        OrderedMechanism(Policy.line(), 1, edges=[Fraction(1, 3)])
    # private values never raise (an error would say that some row holds such a value):
    # NaN counts in the top bin, like +inf; a value in no declared bin is not counted
    assert OrderedMechanism(Policy.line(), 1, edges=[3]).cumulative(
        [1.0, float("nan")]).tolist() == [1]
    assert PolicyHistogram(Policy.complete(), 1, bins=[["a"], ["b"]]).counts(
        ["c"]).tolist() == [0, 0]
    with pytest.raises(InvalidParameterError):
        PolicyHistogram(Policy.complete(), 0, bins=[["a"], ["b"]])


def test_policy_kmeans_reads_the_declared_policy() -> None:
    adult = datasets.adult()
    cols = tuple(dataclasses.replace(c, policy=Policy.line()) if c.name == "age" else c
                 for c in adult.meta.columns)
    data = adult.with_meta(adult.meta.replace(columns=cols))
    km = PolicyKMeans(3, epsilon=Fraction(1, 2), feature="age")
    with rng.seeded(3):
        km.fit(data)
    centres = km.cluster_centers_[:, 0]
    assert km.cost_ == PureDP(Fraction(1, 2))
    assert (np.diff(centres) > 0).all() and centres[0] >= 17 and centres[-1] <= 90
    assert set(np.unique(km.predict(data))) == {0, 1, 2}
    # without a declared policy the learner asks for one
    with pytest.raises(MetadataError, match="policy"):
        PolicyKMeans(3, epsilon=1, feature="age").fit(adult)


def test_policy_kmeans_complete_graph_is_the_plain_dp_baseline() -> None:
    km = PolicyKMeans(2, epsilon=1, policy=Policy.complete(), bounds=(0, 100))
    assert km.measurement().cost == PureDP(1)
    from statcurator.estimators.learning.policy_kmeans import PolicyLloydStep

    step = PolicyLloydStep(Policy.complete(), (0, 40, 100), Fraction(1), Fraction(1))
    assert step.sum_sensitivity == 100 and step.count_sensitivity == 1
    step4 = PolicyLloydStep(Policy.complete(), (0, 20, 40, 60, 100), Fraction(1), Fraction(1))
    assert not step4.cumulative and step4.count_sensitivity == 2  # the histogram is cheaper
