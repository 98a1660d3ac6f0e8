"""check_dp on *policy neighbours*: the policy mechanisms are ε-private for one value moved
along one edge of the secret graph, and each test has a mutant that the same test catches.

Every check runs at α = 1e-6 (check_dp's level): a correct mechanism fails with probability
at most 1e-6 per test. The mutants — sensitivity computed for θ/2, plain per-cluster sums
calibrated to θ, the partition histogram on a pair that leaves its block — violate the
claimed ε by a wide margin (p far below α). Two tests document what a policy does *not*
hide: a pair of values 2θ apart (two edges) is protected only at 2ε, and a value moved
between partition blocks is revealed; check_dp flags both at the policy's ε.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from statcurator.core.policy import Policy, PolicyNeighbours
from statcurator.estimators.learning.policy_kmeans import PolicyLloydStep
from statcurator.mechanisms import VectorLaplaceMechanism
from statcurator.mechanisms.policy import OrderedMechanism, PolicyHistogram
from statcurator.testing.dp import Event, check_dp

pytestmark = pytest.mark.slow

ALPHA = 1e-6  # the false-failure rate of every check below
TRIALS = 200_000


def _tiled(release, stat: np.ndarray):  # type: ignore[no-untyped-def]
    """n independent releases of a statistic vector (one row per trial)."""
    flat = np.asarray(stat).ravel()
    return lambda n: np.asarray(release(np.tile(flat, n))).reshape(n, flat.size)


def _corner(changed: list[int], at: np.ndarray, direction: np.ndarray) -> list[Event]:
    """Joint events on the coordinates a neighbour changes: every changed coordinate at or
    beyond D2's exact value (offset by 0, ±1 or ±2 noise units) in the direction it moved —
    where the privacy loss of an L1 change spread over several coordinates is attained."""
    events = []
    for off in (-2, -1, 0, 1, 2):
        cut = at[changed] + off * direction[changed]

        def pred(x, cut=cut):  # type: ignore[no-untyped-def]
            return np.all(direction[changed] * np.asarray(x)[:, changed]
                          >= direction[changed] * cut, axis=1)

        events.append(Event(f"coordinates {changed} beyond {cut.tolist()}", pred))
    return events


# -- the policy histogram ------------------------------------------------------------------------

# θ = 5; 28 -> 32 is one edge and crosses the bin edge at 30: counts (-1, +1, 0)
HIST_D1 = [12, 28, 35, 41, 57, 63]
HIST_D2 = [12, 32, 35, 41, 57, 63]


def test_policy_histogram_on_policy_neighbours() -> None:
    # α = 1e-6
    h = PolicyHistogram(Policy.threshold(5), 1, edges=[30, 50])
    assert PolicyNeighbours(h.policy).are_neighbours(HIST_D1, HIST_D2)
    res = check_dp(_tiled(h.noise.release, h.counts(HIST_D1)),
                   _tiled(h.noise.release, h.counts(HIST_D2)), 1, trials=TRIALS, alpha=ALPHA)
    assert res.passed, str(res)


def test_policy_histogram_mutant_half_sensitivity_is_caught() -> None:
    # α = 1e-6; the mutant calibrates the histogram to sensitivity 1 (the add/remove value)
    h = PolicyHistogram(Policy.threshold(5), 1, edges=[30, 50])
    mutant = VectorLaplaceMechanism(1, 1)
    res = check_dp(_tiled(mutant.release, h.counts(HIST_D1)),
                   _tiled(mutant.release, h.counts(HIST_D2)), 1, trials=TRIALS, alpha=ALPHA)
    assert not res.passed, str(res)


PART = Policy.partition([["flu", "cold"], ["cancer", "ulcer"]])
BLOCK_BINS = [["flu", "cold"], ["cancer", "ulcer"]]


def test_partition_histogram_over_blocks_is_free_inside_a_block() -> None:
    # α = 1e-6; flu -> cold is an edge: the histogram over blocks does not move (ε = 0)
    h = PolicyHistogram(PART, 1, bins=BLOCK_BINS)
    assert h.sensitivity == 0 and h.cost.epsilon == 0
    d1, d2 = ["flu", "cancer", "cold"], ["cold", "cancer", "cold"]
    assert PolicyNeighbours(PART).are_neighbours(d1, d2)
    res = check_dp(lambda n: np.tile(h.release(d1), (n, 1)),
                   lambda n: np.tile(h.release(d2), (n, 1)), 0, trials=TRIALS, alpha=ALPHA)
    assert res.passed, str(res)


def test_partition_does_not_hide_the_block() -> None:
    # α = 1e-6; flu -> cancer is no edge of the partition graph: the exact block counts
    # reveal it, and check_dp flags the pair at any ε (here 5) — the partition policy's
    # documented limit, not a bug
    h = PolicyHistogram(PART, 1, bins=BLOCK_BINS)
    d1, d2 = ["flu", "cancer", "cold"], ["cancer", "cancer", "cold"]
    assert PolicyNeighbours(PART).distance(d1, d2) == float("inf")
    res = check_dp(lambda n: np.tile(h.release(d1), (n, 1)),
                   lambda n: np.tile(h.release(d2), (n, 1)), 5, trials=TRIALS, alpha=ALPHA)
    assert not res.passed, str(res)


# -- the ordered mechanism -----------------------------------------------------------------------

THETA = 4
CUTS = list(range(1, 9))  # unit bins of the values 0..8
ORD_D1 = [0, 2, 5, 7, 8]
ORD_D2 = [0, 6, 5, 7, 8]  # 2 -> 6: one edge of the θ = 4 graph, moves C at cuts 3..6
ORD_FAR = [0, 2, 5, 7, 8], [0, 2, 5, 7, 0]  # 8 -> 0: two edges (2θ), moves all 8 counts


def _ordered_check(mech: OrderedMechanism, d1: list[int], d2: list[int], eps: float):  # type: ignore[no-untyped-def]
    c1, c2 = mech.cumulative(d1), mech.cumulative(d2)
    changed = [int(j) for j in np.flatnonzero(c1 != c2)]
    direction = np.sign(c2 - c1)
    direction[direction == 0] = 1
    return check_dp(_tiled(mech.noise.release, c1), _tiled(mech.noise.release, c2), eps,
                    trials=TRIALS, alpha=ALPHA, events=_corner(changed, c2, direction))


def test_ordered_mechanism_on_policy_neighbours() -> None:
    # α = 1e-6; the move changes 4 cumulative counts by 1 each: L1 = θ = the sensitivity
    om = OrderedMechanism(Policy.threshold(THETA), 1, edges=CUTS)
    assert om.sensitivity == THETA
    assert PolicyNeighbours(om.policy).are_neighbours(ORD_D1, ORD_D2)
    res = _ordered_check(om, ORD_D1, ORD_D2, 1)
    assert res.passed, str(res)


def test_ordered_mechanism_mutant_theta_half_is_caught() -> None:
    # α = 1e-6; the mutant computes the sensitivity for θ/2 (2 instead of 4): really 2ε
    mutant = OrderedMechanism(Policy.threshold(THETA // 2), 1, edges=CUTS)
    assert mutant.sensitivity == THETA // 2
    res = _ordered_check(mutant, ORD_D1, ORD_D2, 1)
    assert not res.passed, str(res)


def test_ordered_mechanism_does_not_protect_far_values_at_epsilon() -> None:
    # α = 1e-6; values 2θ apart are two edges apart: the policy protects them at 2ε only
    # (privacy_map(2)), and check_dp flags the pair at ε — what the policy gives up
    om = OrderedMechanism(Policy.threshold(THETA), 1, edges=CUTS)
    d1, d2 = ORD_FAR
    assert PolicyNeighbours(om.policy).distance(d1, d2) == 2
    assert om.privacy_map(2).epsilon == 2
    assert not _ordered_check(om, d1, d2, 1).passed
    # plain DP (the complete graph: sensitivity 8) protects the same pair at ε
    plain = OrderedMechanism(Policy.complete(), 1, edges=CUTS)
    res = _ordered_check(plain, d1, d2, 1)
    assert res.passed, str(res)


# -- policy k-means: one Lloyd step's release ------------------------------------------------------

# θ = 2; cells [0, 30), [30, 60), [60, 120]; 29 -> 31 crosses a cluster boundary: the
# cumulative count at 30 moves by 1 and the cell sums of cells 0 and 1 by 1 each (L1 2 = θ)
KM_D1 = np.array([5, 12, 29, 44, 58, 75, 90, 118])
KM_D2 = np.array([5, 12, 31, 44, 58, 75, 90, 118])
KM_EPS = Fraction(1, 2), Fraction(1, 2)


def _exact_vector(sums: list[Fraction]) -> np.ndarray:
    assert all(s.denominator == 1 for s in sums)
    return np.array([int(s) for s in sums], dtype=np.int64)


def _step_samples(step: PolicyLloydStep, x: np.ndarray, sum_release=None):  # type: ignore[no-untyped-def]
    """n releases of the step on x: counts then cell sums, one row per trial."""
    counts, sums = step.statistics(x)
    count_m, sum_m = step.mechanisms()
    release_sums = sum_release or sum_m.release
    svec = _exact_vector(sums)

    def sample(n: int) -> np.ndarray:
        c = _tiled(count_m.release, counts)(n)
        s = _tiled(release_sums, svec)(n)
        return np.hstack([c, s]).astype(np.float64)

    return sample, np.concatenate([counts, svec]).astype(np.float64)


def _kmeans_check(step: PolicyLloydStep, sum_release=None):  # type: ignore[no-untyped-def]
    s1, v1 = _step_samples(step, KM_D1, sum_release)
    s2, v2 = _step_samples(step, KM_D2, sum_release)
    changed = [int(j) for j in np.flatnonzero(v1 != v2)]
    direction = np.sign(v2 - v1)
    direction[direction == 0] = 1
    eps = float(step.cost.epsilon)
    return check_dp(s1, s2, eps, trials=TRIALS, alpha=ALPHA,
                    events=_corner(changed, v2, direction))


def test_policy_kmeans_step_on_policy_neighbours_crossing_a_boundary() -> None:
    # α = 1e-6
    step = PolicyLloydStep(Policy.threshold(2), (0, 30, 60, 120), *KM_EPS)
    assert step.cumulative and step.count_sensitivity == 1 and step.sum_sensitivity == 2
    assert PolicyNeighbours(step.policy).are_neighbours(KM_D1.tolist(), KM_D2.tolist())
    res = _kmeans_check(step)
    assert res.passed, str(res)


def test_policy_kmeans_mutant_sums_for_half_theta_is_caught() -> None:
    # α = 1e-6; the mutant calibrates the cell sums to θ/2 = 1
    step = PolicyLloydStep(Policy.threshold(2), (0, 30, 60, 120), *KM_EPS)
    mutant = VectorLaplaceMechanism(1, KM_EPS[1], grid=Fraction(1, 2**9), max_changed=3)
    res = _kmeans_check(step, mutant.release)
    assert not res.passed, str(res)


def test_policy_kmeans_mutant_plain_cluster_sums_at_theta_is_caught() -> None:
    # α = 1e-6; the mutant releases plain per-cluster sums Σ_{x in cell i} x calibrated to
    # θ: the value crossing the boundary moves them by 29 and 31
    step = PolicyLloydStep(Policy.threshold(2), (0, 30, 60, 120), *KM_EPS)
    noise = VectorLaplaceMechanism(2, KM_EPS[1])

    def plain_sums(x: np.ndarray) -> np.ndarray:
        cell = np.searchsorted([30, 60], x, side="right")
        return np.bincount(cell, weights=x, minlength=3).astype(np.int64)

    res = check_dp(_tiled(noise.release, plain_sums(KM_D1)),
                   _tiled(noise.release, plain_sums(KM_D2)), float(step.cost.epsilon),
                   trials=TRIALS, alpha=ALPHA)
    assert not res.passed, str(res)
