"""Integer arrays at the edges of int64, in every vector release.

Two kinds of wrap-around, both silent in numpy's int64 arithmetic:

* **before the noise** (a privacy hole): an unsigned input of 2^63 cast to int64 became
  -2^63, so two neighbouring inputs, 2^63 - 1 and 2^63, gave outputs 2^64 apart, whatever the
  noise. Integer inputs of 2^62 or more are now refused, as the other grids already refused
  them (the curator clamps its aggregates to 2^61 before any release).
* **after the noise** (an accuracy bug only, the wrap being a function of the noisy value): an
  input near 2^61 plus noise near 2^63 at a tiny ε left int64. Sums are now exact
  (``add_units``: Python integers when int64 could overflow).
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

from statcurator.core.errors import DataError
from statcurator.mechanisms import _base, partition, rng, samplers
from statcurator.mechanisms.exponential import ReportNoisyMax
from statcurator.mechanisms.gaussian import GaussianMechanism, VectorGaussianMechanism
from statcurator.mechanisms.laplace import LaplaceMechanism, VectorLaplaceMechanism
from statcurator.mechanisms.partition import PartitionSelection
from statcurator.mechanisms.smooth import SmoothSensitivityMechanism
from statcurator.mechanisms.sparse_vector import AboveThreshold

TINY = Fraction(1, 2**61)  # ε for a noise scale of 2^61 grid units

VECTOR_RELEASES = {
    "laplace": lambda: LaplaceMechanism(1, 1).release,
    "vector laplace": lambda: VectorLaplaceMechanism(1, 1).release,
    "gaussian": lambda: GaussianMechanism(1, Fraction(1, 2)).release,
    "vector gaussian": lambda: VectorGaussianMechanism(1, Fraction(1, 2)).release,
    "partition selection": lambda: (lambda c: PartitionSelection(1, Fraction(1, 10**6))
                                    .release(c)[1]),
}


@pytest.mark.parametrize("name", sorted(VECTOR_RELEASES))
def test_neighbouring_inputs_at_the_int64_boundary_are_refused(name, monkeypatch):
    """The attack: two neighbouring unsigned inputs, 2^63 - 1 and 2^63. Refused (both);
    control: without the range check the two outputs, under the same noise, are 2^64 - 1
    apart — the input read straight off the output."""
    release = VECTOR_RELEASES[name]()
    pair = [np.array([2**63 - 1], dtype=np.uint64), np.array([2**63], dtype=np.uint64)]
    for x in pair:
        with pytest.raises(DataError, match="too large"):
            release(x)
    assert release(np.array([2**62 - 1], dtype=np.uint64)).shape == (1,)  # below: fine
    monkeypatch.setattr(_base, "MAX_GRID_UNITS", 2**70)
    monkeypatch.setattr(partition, "MAX_GRID_UNITS", 2**70)
    outs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x in pair:
            with rng.seeded(7):
                outs.append(int(np.asarray(release(x)).ravel()[0]))
    assert abs(outs[0] - outs[1]) == 2**64 - 1


def _exact_sums(release, noise, x, seeds=300):
    """``release(x)`` against x + the same noise in Python integers, seed by seed; how many
    outputs left int64."""
    beyond = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(seeds):
            with rng.seeded(seed):
                out = np.asarray(release(x)).ravel().tolist()
            with rng.seeded(seed):
                z = np.asarray(noise(len(x))).ravel().tolist()
            assert out == [int(a) + int(b) for a, b in zip(x.tolist(), z, strict=True)]
            beyond += any(abs(v) >= 2**63 for v in out)
    return beyond


NEAR = np.array([2**62 - 1, -(2**62) + 1, 2**62 - 1], dtype=np.int64)


@pytest.mark.parametrize("name", ["laplace", "vector laplace", "gaussian", "vector gaussian"])
def test_noise_near_the_int64_limit_is_added_exactly(name):
    if name == "laplace":
        m = LaplaceMechanism(1, TINY)
        noise = m.sample_noise_units
    elif name == "vector laplace":
        m = VectorLaplaceMechanism(1, TINY)
        noise = lambda n: samplers.discrete_laplace(m.noise_scale, n)  # noqa: E731
    elif name == "gaussian":
        m = GaussianMechanism(1, Fraction(1, 2**123))
        noise = m.sample_noise_units
    else:
        m = VectorGaussianMechanism(1, Fraction(1, 2**123))
        noise = lambda n: samplers.discrete_gaussian(m.sigma2, n)  # noqa: E731
    assert _exact_sums(m.release, noise, NEAR) > 0  # the case did occur


def test_partition_counts_near_the_limit_are_noised_exactly():
    ps = PartitionSelection(TINY, Fraction(1, 10**6))
    counts = np.array([2**62 - 1, 2**62 - 2, 2**62 - 3], dtype=np.int64)
    assert _exact_sums(lambda c: ps.release(c)[1],
                       lambda n: samplers.discrete_laplace(ps.noise_scale, n), counts) > 0


def test_report_noisy_max_compares_exact_sums():
    m = ReportNoisyMax(TINY)
    scores = NEAR
    wrong = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(300):
            with rng.seeded(seed):
                got = m.sample(scores, 1)[0]
            with rng.seeded(seed):
                z = samplers.discrete_laplace(m.noise_scale, len(scores)).tolist()
            sums = [int(a) + int(b) for a, b in zip(scores.tolist(), z, strict=True)]
            assert got == max(range(len(sums)), key=sums.__getitem__)
            wrong += max(sums) >= 2**63
    assert wrong > 0


def test_smooth_sensitivity_noise_is_added_exactly():
    """Smooth sensitivity refuses an ε small enough for its noise to near 2^63; its sums
    near the input limit are exact all the same."""
    m = SmoothSensitivityMechanism(Fraction(1, 2**20), delta=Fraction(1, 10**6),
                                   noise="laplace")
    t = m.noise_scale(Fraction(1))
    value = 2**62 - 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(50):
            with rng.seeded(seed):
                out = m.release(value, 1, size=3).tolist()
            with rng.seeded(seed):
                z = samplers.discrete_laplace(t, 3).tolist()
            assert out == [value + v for v in z]


def test_empty_batches_stay_empty():
    assert ReportNoisyMax(1).sample([1, 2, 3], 0).tolist() == []
    assert SmoothSensitivityMechanism(1).release(10, 1, size=0).tolist() == []


def test_fine_grids_accept_what_fits_in_grid_units():
    """The limit is on grid units: on a grid of 2^-63 a zero (and an empty array) fits,
    a one does not; on a grid of 1/4 the largest value is 2^60 - 1."""
    fine, quarter = Fraction(1, 2**63), Fraction(1, 4)
    assert _base.array_to_grid_units(np.array([0]), fine).tolist() == [0]
    assert _base.array_to_grid_units(np.array([], dtype=np.int64), fine).tolist() == []
    with pytest.raises(DataError, match="too large"):
        _base.array_to_grid_units(np.array([1]), fine)
    assert _base.array_to_grid_units(np.array([2**60 - 1]), quarter).tolist() == [2**62 - 4]
    with pytest.raises(DataError, match="too large"):
        _base.array_to_grid_units(np.array([-(2**60)]), quarter)


def test_selections_flip_on_neighbouring_scores_only_without_the_limit(monkeypatch):
    """The same attack on a selection: scores (2^63 - 1, 0) and (2^63, 0) are neighbours;
    both are refused. Control: without the limit the second wraps to -2^63 and the noisy
    max picks the other index, every time — the input read off the choice."""
    pair = [np.array([2**63 - 1, 0], dtype=np.uint64), np.array([2**63, 0], dtype=np.uint64)]
    for release in (ReportNoisyMax(1).release, AboveThreshold(1, 1, 2**61).release):
        for x in pair:
            with pytest.raises(DataError, match="too large"):
                release(x)
    monkeypatch.setattr(_base, "MAX_GRID_UNITS", 2**70)
    picks = {0: set(), 1: set()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(20):
            for i, x in enumerate(pair):
                with rng.seeded(seed):
                    picks[i].add(ReportNoisyMax(1).release(x))
    assert picks == {0: {0}, 1: {1}}


def test_a_threshold_beyond_int64_is_compared_exactly():
    """AboveThreshold's noisy threshold and noisy queries are exact integers, whatever their
    size (int64 arithmetic wrapped, or raised OverflowError for a threshold of 2^63)."""
    m = AboveThreshold(1, 1, 2**63)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rng.seeded(3):
            assert m.release(np.array([2**62 - 1, 0])) is None   # far below 2^63
    assert AboveThreshold(1, 1, -(2**63)).release(np.array([0])) == 0


def test_above_threshold_over_no_query_finds_none():
    assert AboveThreshold(1, 1, 5).release([]) is None
    assert AboveThreshold(1, 1, 5).sample(np.array([], dtype=np.int64), 3).tolist() == [-1] * 3
